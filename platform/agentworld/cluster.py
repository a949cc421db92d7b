"""The Ray cluster a job runs on: the one ``RAY_ADDRESS`` names (``ray job submit``,
a KubeRay RayJob, ``ray start --head`` on this machine), else a local one started here.

Either way the ``agentworld`` package the driver imported travels to every worker
through the job's runtime env (``py_modules``), so workers on other nodes, in other
working directories, run the same code as the driver without a shared checkout.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from typing import Any

import agentworld

# Passed on to every worker: tracking stays offline unless the user says otherwise, and
# tokenizers does not fork a thread pool per Ray worker.
ENV_DEFAULTS = {"WANDB_MODE": "offline", "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}


def package_dir() -> str:
    """The directory of the imported ``agentworld`` package."""

    return os.path.dirname(os.path.abspath(agentworld.__file__))


def runtime_env(env_vars: dict[str, str] | None = None) -> dict[str, Any]:
    """The job-level runtime env: the package as a py_module, and the variables above
    (the driver's own values win)."""
    env = {k: os.environ.get(k, v) for k, v in ENV_DEFAULTS.items()}
    env.update(env_vars or {})
    return {"py_modules": [package_dir()], "env_vars": env}


def init_with_retry(*, attempts: int = 3, **kwargs: Any) -> None:
    """``ray.init``, tried again when a new local node misses Ray's fixed 30 s start-up
    window (the raylet registers late on a loaded machine; nothing else is wrong)."""
    import ray

    for attempt in range(1, attempts + 1):
        try:
            ray.init(**kwargs)
            return
        except Exception as e:
            if "timed out during startup" not in str(e) or attempt == attempts:
                raise
            ray.shutdown()


@contextlib.contextmanager
def local_ray(
    *, num_cpus: int | None = None, env_vars: dict[str, str] | None = None, **init: Any
) -> Iterator[bool]:
    """Make sure Ray is initialized for the block; yields True when it started (or
    joined) the cluster here, and then shuts it down at the end. ``num_cpus`` applies to
    a local cluster only: a joined one has the resources its nodes were started with."""
    import ray

    if ray.is_initialized():
        yield False
        return
    kwargs: dict[str, Any] = {"runtime_env": runtime_env(env_vars), **init}
    if not os.environ.get("RAY_ADDRESS"):
        kwargs.setdefault("include_dashboard", False)
        if num_cpus is not None:
            kwargs["num_cpus"] = num_cpus
    previous = signal.getsignal(signal.SIGTERM)
    init_with_retry(**kwargs)
    # ray.init installs its own SIGTERM handler (it prints a stack and dies): give the
    # job's back, so that SIGTERM stays a resumable stop (agentworld.cli.run_job).
    if callable(previous) and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, previous)
    try:
        yield True
    finally:
        ray.shutdown()
