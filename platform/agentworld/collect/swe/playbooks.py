"""SWE playbooks: a generated package with one planted bug. The scripted developer
looks around, runs the failing tests, finds the function, sometimes tries a wrong fix
first, applies the right patch and reruns the tests."""

from __future__ import annotations

import difflib
import random
from collections.abc import Callable
from typing import Any

from agentworld.collect.env import Action, Script, Task
from agentworld.collect.playbook import WORDS

# name -> (correct body, buggy body, a wrong "fix", argument generator)
FUNCTIONS: dict[str, tuple[str, str, str, Callable[[random.Random], tuple]]] = {
    "clamp": (
        "def clamp(x, lo, hi):\n    return max(lo, min(x, hi))\n",
        "def clamp(x, lo, hi):\n    return min(lo, max(x, hi))\n",
        "def clamp(x, lo, hi):\n    return max(lo, x)\n",
        lambda r: (r.randint(-20, 40), r.randint(-5, 5), r.randint(10, 30)),
    ),
    "mean": (
        "def mean(xs):\n    return sum(xs) / len(xs)\n",
        "def mean(xs):\n    return sum(xs) / (len(xs) + 1)\n",
        "def mean(xs):\n    return sum(xs) // len(xs)\n",
        lambda r: ([r.randint(1, 9) for _ in range(r.randint(2, 6))],),
    ),
    "slugify": (
        'def slugify(text):\n    return "-".join(text.lower().split())\n',
        'def slugify(text):\n    return "_".join(text.lower().split())\n',
        'def slugify(text):\n    return "-".join(text.split())\n',
        lambda r: (" ".join(r.choice(WORDS).title() for _ in range(r.randint(2, 4))),),
    ),
    "is_palindrome": (
        "def is_palindrome(text):\n    chars = [c.lower() for c in text if c.isalnum()]\n    return chars == chars[::-1]\n",
        "def is_palindrome(text):\n    chars = [c for c in text if c.isalnum()]\n    return chars == chars[::-1]\n",
        "def is_palindrome(text):\n    return text == text[::-1]\n",
        lambda r: (
            r.choice(["Level", "Noon", "Racecar", "Step on no pets", "Was it a cat I saw"]),
        ),
    ),
    "chunk": (
        "def chunk(xs, n):\n    return [xs[i : i + n] for i in range(0, len(xs), n)]\n",
        "def chunk(xs, n):\n    return [xs[i : i + n] for i in range(0, len(xs) - 1, n)]\n",
        "def chunk(xs, n):\n    return [xs[i : i + n] for i in range(1, len(xs), n)]\n",
        lambda r: (list(range(r.choice([3, 5, 7, 9]))), 2),
    ),
    "word_count": (
        "def word_count(text):\n    return len(text.split())\n",
        'def word_count(text):\n    return len(text.split(" "))\n',
        'def word_count(text):\n    return text.count(" ")\n',
        lambda r: ("  ".join(r.choice(WORDS) for _ in range(r.randint(2, 5))),),
    ),
}


def _expected(source: str, name: str, args: tuple) -> Any:
    ns: dict[str, Any] = {}
    exec(source, ns)  # our own generated source, to compute the tests' expected values
    return ns[name](*args)


def _test_args(rng: random.Random, name: str, *, catch_bug: bool) -> tuple:
    """Arguments for one test; for the bugged function's first test, ones on which the
    bug shows (so the suite really fails before the fix)."""
    good, bad, _, make = FUNCTIONS[name]
    for _ in range(100):
        args = make(rng)
        if not catch_bug or _expected(good, name, args) != _expected(bad, name, args):
            return args
    raise RuntimeError(f"no failing input found for {name}")


def generate_repo(rng: random.Random) -> dict[str, Any]:
    pkg = f"{rng.choice(WORDS)}kit"
    module = rng.choice(["utils", "text", "helpers", "core"])
    names = sorted(rng.sample(sorted(FUNCTIONS), rng.randint(3, 4)))
    bug = rng.choice(names)
    good = "\n\n".join(FUNCTIONS[n][0] for n in names)
    bad = "\n\n".join(FUNCTIONS[n][1 if n == bug else 0] for n in names)
    tests = [f"import unittest\n\nfrom {pkg}.{module} import {', '.join(names)}\n\n"]
    tests.append(f"\nclass Test{module.title()}(unittest.TestCase):\n")
    for n in names:
        for k in range(rng.randint(1, 2)):
            args = _test_args(rng, n, catch_bug=n == bug and k == 0)
            want = _expected(FUNCTIONS[n][0], n, args)
            call = f"{n}({', '.join(repr(a) for a in args)})"
            tests.append(
                f"    def test_{n}_{k}(self):\n        self.assertEqual({call}, {want!r})\n\n"
            )
    path = f"{pkg}/{module}.py"
    files = {
        "README.md": f"# {pkg}\n\nSmall helpers: {', '.join(names)}.\n",
        f"{pkg}/__init__.py": "",
        path: bad,
        "tests/__init__.py": "",
        f"tests/test_{module}.py": "".join(tests).rstrip() + "\n",
    }
    fix = _diff(path, bad, good)
    wrong = _diff(path, bad, bad.replace(FUNCTIONS[bug][1], FUNCTIONS[bug][2]))
    return {
        "package": pkg,
        "module_path": path,
        "bug": bug,
        "files": files,
        "fix": fix,
        "wrong": wrong,
    }


def _diff(path: str, old: str, new: str) -> str:
    lines = difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), f"a/{path}", f"b/{path}"
    )
    return "".join(lines)


def fix_bug(rng: random.Random) -> Task:
    repo = generate_repo(rng)

    def gen() -> Script:
        if rng.random() < 0.7:
            yield Action.tool("list_files")
        yield Action.tool("run_tests")
        if rng.random() < 0.5:
            yield Action.tool("view_file", path=f"tests/test_{repo['module_path'].split('/')[1]}")
        yield Action.tool("search", pattern=f"def {repo['bug']}")
        if rng.random() < 0.2:
            yield Action.tool("view_file", path=f"{repo['package']}/missing.py")
        yield Action.tool("view_file", path=repo["module_path"])
        if rng.random() < 0.3:
            yield Action.tool("apply_patch", patch=repo["wrong"])
            yield Action.tool("run_tests")
            yield Action.tool("apply_patch", patch=_diff_between(repo))
        else:
            yield Action.tool("apply_patch", patch=repo["fix"])
        yield Action.tool("run_tests")
        yield Action.tool("git_diff")

    return Task(
        playbook="swe/fix-bug",
        text=f"The test suite of {repo['package']} fails. Find the bug and fix it.",
        script=gen,
        state={"files": repo["files"], "package": repo["package"]},
    )


def _diff_between(repo: dict[str, Any]) -> str:
    """The patch from the wrong fix to the right one (the wrong one was applied)."""
    bad = repo["files"][repo["module_path"]]
    bug = repo["bug"]
    wrong = bad.replace(FUNCTIONS[bug][1], FUNCTIONS[bug][2])
    good = bad.replace(FUNCTIONS[bug][1], FUNCTIONS[bug][0])
    return _diff(repo["module_path"], wrong, good)


PLAYBOOKS: dict[str, Callable[[random.Random], Task]] = {"fix-bug": fix_bug}
