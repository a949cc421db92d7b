"""What every job's command line shares: paths made absolute where a job receives them,
the same exit code and message for a bad configuration, and SIGTERM as a resumable
stop (Kubernetes, docker and systemd stop processes with SIGTERM).

A job file is ``parse_args(argv)`` (its module-level parser, made by
:func:`job_parser`, which the KubeRay entrypoint check and the README test consult)
plus ``main(argv) -> int``, ending in::

    if __name__ == "__main__":
        sys.exit(run_job("collect", main))

Every job that takes a configuration takes it the same way: ``--recipe NAME`` (a
function in ``agentworld.recipes``) plus dotted overrides of its typed fields,
``--set train.learning_rate=3e-4 --set collect.domains=terminal,search``; options of
their own are only the job's inputs and outputs (paths, URLs, endpoints).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Callable

from agentworld.cluster import ENV_DEFAULTS
from agentworld.config import ConfigError
from agentworld.io.storage import absolute_url

EXIT_CONFIG = 2
"""A bad configuration or argument: nothing was started."""
EXIT_STOPPED = 130
"""Stopped by SIGINT or SIGTERM; rerunning the same command resumes."""


class Stopped(KeyboardInterrupt):
    """Raised in the main thread when SIGTERM arrives: the job unwinds like Ctrl-C
    (``finally`` blocks run, Ray shuts down) and its outputs stay resumable."""


def url(value: str) -> str:
    """argparse ``type=`` for a path or URL option: relative local paths become absolute."""
    return absolute_url(value)


def urls(value: str) -> tuple[str, ...]:
    """argparse ``type=`` for a comma-separated list of paths or URLs."""
    return tuple(absolute_url(v.strip()) for v in value.split(",") if v.strip())


def recipe_options() -> argparse.ArgumentParser:
    """``--recipe`` and ``--set``, as a parent parser (``parents=[recipe_options()]``)
    for jobs with subcommands."""
    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group("configuration")
    g.add_argument(
        "--recipe", default="debug_cpu", help="named run configuration (agentworld.recipes)"
    )
    g.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a recipe field, dotted (repeatable): train.learning_rate=3e-4, "
        "collect.domains=terminal,search, rl.rollout.engine.replicas=2",
    )
    return p


def job_parser(doc: str | None, *, recipe: bool = True) -> argparse.ArgumentParser:
    """A job's parser: its docstring as help, and ``--recipe`` / ``--set`` unless the
    job takes no configuration."""
    return argparse.ArgumentParser(
        description=doc,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[recipe_options()] if recipe else [],
    )


def stop_on_sigterm() -> None:
    """Make SIGTERM raise :class:`Stopped` in the main thread."""

    def handler(signum, frame):  # noqa: ARG001
        raise Stopped(f"signal {signum}")

    signal.signal(signal.SIGTERM, handler)


def run_job(name: str, main: Callable[[list[str] | None], int | None]) -> int:
    """Run a job's ``main`` with the shared exit codes: 0 done, 2 a bad configuration
    (``<name>: invalid configuration: <field>: <why>``), 130 stopped (resumable)."""

    for key, value in ENV_DEFAULTS.items():  # the driver's own defaults, as its workers'
        os.environ.setdefault(key, value)
    stop_on_sigterm()
    try:
        return main(None) or 0
    except ConfigError as e:
        print(f"{name}: invalid configuration: {e}", file=sys.stderr)
        return EXIT_CONFIG
    except KeyboardInterrupt as e:
        why = "SIGTERM" if isinstance(e, Stopped) else "interrupt"
        print(f"[{name}] stopped ({why}); rerun the same command to resume", file=sys.stderr)
        return EXIT_STOPPED
