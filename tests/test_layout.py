"""The package's shape (STYLE.md 13): the pipeline's packages in order, none importing a
later one; no import cycle between modules or packages; every stage package with the
same skeleton (config.py, run.py, placement.py) and its Ray code only in placement.

Imports are read from the source (ast), lazy ones inside functions included: a cycle
that only runs later is still a cycle for the reader. Imports under ``if
TYPE_CHECKING:`` are left out: they exist for annotations and never run (stages annotate
with ``Recipe``, which composes every stage's config)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import ROOT

PACKAGE = ROOT / "platform" / "agentworld"

ORDER = [
    "schema",  # the record and its adapters
    "io",  # storage, shards, manifests
    "config",  # ConfigError, checks, dotted overrides
    "console",
    "cluster",
    "cli",
    "model",  # the model, its tokenizer and its engine config
    "collect",
    "data",
    "train",
    "scoring",  # metrics, judge client, rubrics: shared by rl and evaluate
    "rl",
    "evaluate",
    "sim",
    "agent",
    "recipes",  # composes every stage's config
    "pipeline",
    "report",
    "deploy",
]
"""The pipeline's packages (and top-level modules) in order: each may import only
itself and those before it."""

STAGES = ["collect", "data", "train", "rl", "evaluate", "sim", "agent"]
SKELETON = ["config", "run", "placement"]
"""``placement`` is a module, or a package when the Ray code is several files (sim's
Serve deployments)."""


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _type_checking_only(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")
    )


def imports(tree: ast.AST) -> list[tuple[str, list[str]]]:
    """(module, names) of every import that can run: lazy ones included, those under
    ``if TYPE_CHECKING:`` left out."""
    found: list[tuple[str, list[str]]] = []

    def visit(node: ast.AST) -> None:
        if _type_checking_only(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.extend((a.name, []) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.append((node.module, [a.name for a in node.names]))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def module_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the modules of the same package tree it imports (``from pkg import
    sub`` counts as importing ``pkg.sub`` when that is a module)."""
    top = root.name
    modules = {module_name(p, root): p for p in root.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        edges = set()
        for target, names in imports(ast.parse(path.read_text(), str(path))):
            if target != top and not target.startswith(top + "."):
                continue
            subs = {f"{target}.{n}" for n in names} & modules.keys()
            edges |= subs or {target}
        graph[name] = edges - {name}
    return graph


def unit(module: str) -> str:
    """The ORDER entry a module belongs to: ``agentworld.data.steps.pack`` -> ``data``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def later_imports(graph: dict[str, set[str]], order: list[str]) -> list[str]:
    rank = {name: i for i, name in enumerate(order)}
    problems = []
    for module, targets in sorted(graph.items()):
        if "." not in module:  # the top package: its __init__ stands above nothing
            continue
        if unit(module) not in rank:
            problems.append(f"{module}: its package is not in the pipeline order")
            continue
        for target in sorted(targets):
            if unit(target) in rank and rank[unit(target)] > rank[unit(module)]:
                problems.append(f"{module} imports the later {target}")
    return problems


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return found


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for module, targets in graph.items():
        out.setdefault(unit(module), set()).update(unit(t) for t in targets)
    return {k: v - {k} for k, v in out.items()}


def has_module(package: Path, name: str) -> bool:
    return (package / f"{name}.py").is_file() or (package / name / "__init__.py").is_file()


def ray_importers(root: Path, package: str) -> list[str]:
    """Modules of ``package`` outside its placement (module or package) that import Ray."""
    found = []
    for path in sorted((root / package).rglob("*.py")):
        inside = path.relative_to(root / package).parts
        if inside[0] in ("placement.py", "placement"):
            continue
        if any(m == "ray" or m.startswith("ray.") for m, _ in imports(ast.parse(path.read_text()))):
            found.append(str(path.relative_to(root)))
    return found


# The package as it is.


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return module_graph(PACKAGE)


def test_no_package_imports_a_later_one(graph):
    assert later_imports(graph, ORDER) == []


def test_no_import_cycle_between_modules_or_packages(graph):
    assert cycles(graph) == []
    assert cycles(package_graph(graph)) == []


@pytest.mark.parametrize("stage", STAGES)
def test_every_stage_has_the_skeleton_and_its_ray_code_in_placement(stage):
    assert [m for m in SKELETON if not has_module(PACKAGE / stage, m)] == []
    assert ray_importers(PACKAGE, stage) == []


# The checks themselves, on a made-up package: they find what they are for.


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_the_checks_find_a_later_import_a_cycle_and_stray_ray(tmp_path):
    pkg = _write(
        tmp_path / "toy",
        {
            "__init__.py": "",
            "early/__init__.py": "",
            "early/a.py": "def f():\n    from toy.late import b\n",  # lazy, still counted
            "late/__init__.py": "",
            "late/b.py": "from toy.early import a\nimport ray\n",
            "late/placement.py": "import ray\n",
            "late/deep/placement.py": "import ray\n",  # placement of another package: found
            "late/c.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from toy.x import y\n"
            ),
        },
    )
    g = module_graph(pkg)
    assert later_imports(g, ["early", "late"]) == ["toy.early.a imports the later toy.late.b"]
    assert cycles(g) == [["toy.early.a", "toy.late.b"]]
    assert cycles(package_graph(g)) == [["early", "late"]]
    assert ray_importers(pkg, "late") == ["late/b.py", "late/deep/placement.py"]
    assert g["toy.late.c"] == set()  # annotation-only imports are not edges
