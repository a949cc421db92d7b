"""What every job's command line shares: paths made absolute where a job receives them,
the same exit code and message for a bad configuration, and SIGTERM as a resumable
stop (Kubernetes, docker and systemd stop processes with SIGTERM).

A job file is ``parse_args(argv)`` (its module-level parser, which the KubeRay
entrypoint check and the README test consult) plus ``main(argv) -> int``, ending in::

    if __name__ == "__main__":
        sys.exit(run_job("collect", main))
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable

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


def stop_on_sigterm() -> None:
    """Make SIGTERM raise :class:`Stopped` in the main thread."""

    def handler(signum, frame):  # noqa: ARG001
        raise Stopped(f"signal {signum}")

    signal.signal(signal.SIGTERM, handler)


def run_job(name: str, main: Callable[[list[str] | None], int | None]) -> int:
    """Run a job's ``main`` with the shared exit codes: 0 done, 2 a bad configuration
    (``<name>: invalid configuration: <field>: <why>``), 130 stopped (resumable)."""
    from agentworld.cluster import ENV_DEFAULTS
    from agentworld.config import ConfigError

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
