"""A RayJob's entrypoint must be the command a user passes to ``ray job submit``:
``python jobs/<stage>.py ... --recipe NAME ...``, naming a job file that exists and a
recipe in ``agentworld.recipes.RECIPES``; when the job defines ``parse_args(argv)``, its
own parser must accept the arguments, and its ``--set`` overrides must make a valid
recipe."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib.util
import io
import shlex
from pathlib import Path
from types import ModuleType

from agentworld.deploy.problems import Problem

FIELD = "spec.entrypoint"


@dataclasses.dataclass(frozen=True)
class Entrypoint:
    """What an entrypoint runs: the stage (job file stem), its recipe and arguments."""

    stage: str
    recipe: str | None
    args: tuple[str, ...]
    parsed: object | None = None
    """The job's own ``parse_args`` result (None when it has none or refused)."""
    config: object | None = None
    """The recipe with the entrypoint's ``--set`` overrides, when it gives any and they
    make a valid one."""


def parse_entrypoint(command: str) -> tuple[Entrypoint | None, list[Problem]]:
    try:
        argv = shlex.split(command)
    except ValueError as e:
        return None, [Problem(FIELD, f"cannot be split like a shell command: {e}")]
    if (
        len(argv) < 2
        or argv[0] not in ("python", "python3")
        or not argv[1].startswith("jobs/")
        or not argv[1].endswith(".py")
    ):
        return None, [Problem(FIELD, f"must be `python jobs/<stage>.py ...`, got {command!r}")]
    stage = argv[1].removeprefix("jobs/").removesuffix(".py")
    return Entrypoint(stage, _flag(argv[2:], "--recipe"), tuple(argv[2:])), []


def _flag(args: list[str], name: str) -> str | None:
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def check_entrypoint(command: str, repo_root: Path) -> tuple[Entrypoint | None, list[Problem]]:
    """The parsed entrypoint (None when unusable) and its problems. A job whose parser
    has a ``--recipe`` option (or that has no ``parse_args``) must be given one that
    exists in ``agentworld.recipes.RECIPES``."""
    from agentworld.recipes import RECIPES

    entry, problems = parse_entrypoint(command)
    if entry is None:
        return None, problems
    job = repo_root / "jobs" / f"{entry.stage}.py"
    if not job.is_file():
        return None, [Problem(FIELD, f"jobs/{entry.stage}.py does not exist")]
    parsed, rejected = _parse_with_job(job, entry.args)
    if rejected:
        problems.append(Problem(FIELD, f"jobs/{entry.stage}.py rejects its arguments: {rejected}"))
    takes_recipe = parsed is None or hasattr(parsed, "recipe")
    if takes_recipe and entry.recipe is None:
        problems.append(Problem(FIELD, "names no recipe (--recipe NAME)"))
    elif entry.recipe is not None and entry.recipe not in RECIPES:
        problems.append(
            Problem(
                FIELD,
                f"recipe {entry.recipe!r} does not exist (known: {', '.join(sorted(RECIPES))})",
            )
        )
    config = None
    if not problems and (overrides := getattr(parsed, "set", None)):
        config, problems = _load_overrides(entry, overrides)
    return dataclasses.replace(entry, parsed=parsed, config=config), problems


def _load_overrides(entry: Entrypoint, overrides: list[str]) -> tuple[object | None, list[Problem]]:
    from agentworld.config import ConfigError
    from agentworld.recipes import load

    try:
        return load(entry.recipe or "debug_cpu", overrides), []
    except ConfigError as e:
        return None, [Problem(FIELD, f"jobs/{entry.stage}.py rejects its configuration: {e}")]


def _parse_with_job(job: Path, args: tuple[str, ...]) -> tuple[object | None, str | None]:
    """(the job's parsed arguments, None) or (None, why its parser refused them);
    (None, None) when the job has no ``parse_args``."""
    parse_args = getattr(_load_job(job), "parse_args", None)
    if parse_args is None:
        return None, None
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            return parse_args(list(args)), None
    except SystemExit as e:
        if e.code in (0, None):
            return None, "it printed help and exited"
        lines = err.getvalue().strip().splitlines()
        return None, lines[-1] if lines else f"exit {e.code}"
    except Exception as e:  # a config error raised while parsing is a rejection too
        return None, f"{type(e).__name__}: {e}"


@functools.cache
def _load_job(job: Path) -> ModuleType:
    """Import a job file as a module (its top level only: jobs import heavy things in main)."""
    spec = importlib.util.spec_from_file_location(f"_agentworld_job_{job.stem}", job)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
