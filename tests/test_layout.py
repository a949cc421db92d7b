"""The package's shape (STYLE.md 13): the pipeline's packages in order, none importing a
later one; no import cycle between modules or packages; every stage package with the
same skeleton (config.py, run.py, placement.py) and its Ray code only in placement.

Imports are read from the source (ast), lazy ones inside functions and type-only ones
under ``if TYPE_CHECKING:`` included: a cycle that only runs later, or only for the type
checker, is still a cycle for the reader. A stage takes its own config sections, never
the ``Recipe`` that composes them all. An import inside a function stays only where it
must, and says why in a comment."""

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


def imports(tree: ast.AST) -> list[tuple[str, list[str]]]:
    """(module, names) of every import: lazy and type-only ones included."""
    found: list[tuple[str, list[str]]] = []

    def visit(node: ast.AST) -> None:
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


def unexplained_function_imports(root: Path) -> list[str]:
    """Imports of the package's own modules inside a function without a comment on the
    line before or on the import itself saying why it is not at the top."""
    found = []
    for path in sorted(root.rglob("*.py")):
        lines = path.read_text().splitlines()
        for node in ast.walk(ast.parse("\n".join(lines))):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for sub in ast.walk(node):
                module = getattr(sub, "module", None) or ""
                if isinstance(sub, ast.Import):
                    module = sub.names[0].name
                if not isinstance(sub, (ast.Import, ast.ImportFrom)):
                    continue
                if module != root.name and not module.startswith(root.name + "."):
                    continue
                said = "#" in lines[sub.lineno - 1] or lines[sub.lineno - 2].strip().startswith("#")
                if not said:
                    found.append(f"{path.relative_to(root)}:{sub.lineno} imports {module}")
    return sorted(set(found))


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


def test_imports_inside_functions_are_few_and_say_why():
    assert unexplained_function_imports(PACKAGE) == []


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
            "late/c.py": "def g():\n    # not at the top: a reason\n    from toy.early import a\n",
        },
    )
    g = module_graph(pkg)
    assert later_imports(g, ["early", "late"]) == ["toy.early.a imports the later toy.late.b"]
    assert cycles(g) == [["toy.early.a", "toy.late.b"]]
    assert cycles(package_graph(g)) == [["early", "late"]]
    assert ray_importers(pkg, "late") == ["late/b.py", "late/deep/placement.py"]
    assert unexplained_function_imports(pkg) == ["early/a.py:2 imports toy.late"]


def test_the_checks_find_a_type_only_later_import_and_a_type_only_circle(tmp_path):
    only_for_types = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
    pkg = _write(
        tmp_path / "toy",
        {
            "__init__.py": "",
            "early/__init__.py": "",
            "early/job.py": only_for_types + "    from toy.late.recipe import Recipe\n",
            "early/config.py": "from toy.early import table\n",
            "early/table.py": only_for_types + "    from toy.early.config import Config\n",
            "late/__init__.py": "",
            "late/recipe.py": "from toy.early import config\n",
        },
    )
    g = module_graph(pkg)
    assert later_imports(g, ["early", "late"]) == [
        "toy.early.job imports the later toy.late.recipe"
    ]
    assert cycles(g) == [["toy.early.config", "toy.early.table"]]
