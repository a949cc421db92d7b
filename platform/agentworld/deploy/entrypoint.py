"""A RayJob's entrypoint must be the command a user passes to ``ray job submit``:
``python jobs/<stage>.py ... --recipe NAME ...``, naming a job file that exists and a
recipe in ``agentworld.recipes.RECIPES``; when the job defines ``parse_args(argv)``, its
own parser must accept the arguments, and its ``--set`` overrides must make a valid
recipe.

With ``submissionMode: HTTPMode`` the operator hands the entrypoint to Ray, whose job
supervisor runs it with ``/bin/sh -c`` on the head: it may then be several jobs joined
by ``&&``, with variables set on the line (``agentworld.deploy.shell``), each job checked
as above. In the other modes KubeRay pastes the entrypoint into the submitter's own
``bash -c "ray job submit ... -- <entrypoint>"``: an ``&&`` there would run the rest of
the line in the submitter pod, and ``$...`` would expand there, so one plain command only.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib.util
import io
import shlex
from pathlib import Path
from types import ModuleType

from agentworld.config import ConfigError
from agentworld.deploy.problems import Problem
from agentworld.deploy.shell import ShellError, expand, split_line
from agentworld.recipes import RECIPES, load

FIELD = "spec.entrypoint"
SHELL_MODES = ("HTTPMode",)
"""Submission modes in which Ray's job supervisor is the first shell to read the line."""


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


def parse_entrypoint(command: str, field: str = FIELD) -> tuple[Entrypoint | None, list[Problem]]:
    try:
        argv = shlex.split(command)
    except ValueError as e:
        return None, [Problem(field, f"cannot be split like a shell command: {e}")]
    return parse_argv(argv, field)


def parse_argv(argv: list[str], field: str = FIELD) -> tuple[Entrypoint | None, list[Problem]]:
    if (
        len(argv) < 2
        or argv[0] not in ("python", "python3")
        or not argv[1].startswith("jobs/")
        or not argv[1].endswith(".py")
    ):
        return None, [
            Problem(field, f"must be `python jobs/<stage>.py ...`, got {shlex.join(argv)!r}")
        ]
    stage = argv[1].removeprefix("jobs/").removesuffix(".py")
    return Entrypoint(stage, _flag(argv[2:], "--recipe"), tuple(argv[2:])), []


def _flag(args: list[str], name: str) -> str | None:
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def check_entrypoint(
    command: str, repo_root: Path, field: str = FIELD
) -> tuple[Entrypoint | None, list[Problem]]:
    """The parsed entrypoint (one command; None when unusable) and its problems."""
    entry, problems = parse_entrypoint(command, field)
    if entry is None:
        return None, problems
    return check_job(entry, repo_root, field)


def check_entrypoint_line(
    command: str, repo_root: Path, *, mode: str, field: str = FIELD
) -> tuple[list[Entrypoint], list[Problem]]:
    """The jobs an entrypoint runs, in order, and their problems, for a RayJob whose
    ``submissionMode`` is ``mode``."""
    try:
        commands = split_line(command)
        argvs = expand(commands)
    except ShellError as e:
        return [], [Problem(field, f"cannot be read as the shell will: {e}")]
    if mode not in SHELL_MODES and (
        len(commands) > 1 or any(w.expands for words in commands for w in words)
    ):
        return [], [
            Problem(
                field,
                f"with submissionMode {mode} the submitter's bash reads the line first, so "
                "'&&' would run the rest in the submitter pod and '$' would expand there; "
                "set submissionMode: HTTPMode to run a line of jobs",
            )
        ]
    entries, problems = [], []
    for argv in argvs:
        entry, found = parse_argv(argv, field)
        if entry is not None:
            entry, more = check_job(entry, repo_root, field)
            found += more
        if entry is not None:
            entries.append(entry)
        problems += found
    return entries, problems


def check_job(
    entry: Entrypoint, repo_root: Path, field: str
) -> tuple[Entrypoint | None, list[Problem]]:
    """Check one job command with the job's own parser and the recipes. A job whose
    parser has a ``--recipe`` option (or that has no ``parse_args``) must be given one
    that exists in ``agentworld.recipes.RECIPES``."""
    job = repo_root / "jobs" / f"{entry.stage}.py"
    if not job.is_file():
        return None, [Problem(field, f"jobs/{entry.stage}.py does not exist")]
    problems = []
    parsed, rejected = _parse_with_job(job, entry.args)
    if rejected:
        problems.append(Problem(field, f"jobs/{entry.stage}.py rejects its arguments: {rejected}"))
    takes_recipe = parsed is None or hasattr(parsed, "recipe")
    if takes_recipe and entry.recipe is None:
        problems.append(Problem(field, "names no recipe (--recipe NAME)"))
    elif entry.recipe is not None and entry.recipe not in RECIPES:
        problems.append(
            Problem(
                field,
                f"recipe {entry.recipe!r} does not exist (known: {', '.join(sorted(RECIPES))})",
            )
        )
    config = None
    if not problems and (overrides := getattr(parsed, "set", None)):
        config, problems = _load_overrides(entry, overrides, field)
    return dataclasses.replace(entry, parsed=parsed, config=config), problems


def _load_overrides(
    entry: Entrypoint, overrides: list[str], field: str
) -> tuple[object | None, list[Problem]]:
    try:
        return load(entry.recipe or "debug_cpu", overrides), []
    except ConfigError as e:
        return None, [Problem(field, f"jobs/{entry.stage}.py rejects its configuration: {e}")]


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
