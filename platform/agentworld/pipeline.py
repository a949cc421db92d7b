"""Run stage jobs one after another on one Ray cluster, the way ``make demo`` does:
one console line when a stage starts and ends, its progress lines, and everything
else (Ray's, Ray Data's, vLLM's output) in ``<logs>/<stage>.log``.

A stage whose output is complete is skipped without starting anything. A failed stage
prints its name, a one-line reason and the log path; earlier outputs stay, and a rerun
resumes. Timings go to ``<run>/pipeline.json`` (the report reads them).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agentworld.console import captured, duration, say
from agentworld.io import exists, is_complete, join, read_bytes, write_bytes


@dataclass(frozen=True, kw_only=True)
class Stage:
    """One job of the pipeline."""

    name: str
    """The job's name: ``jobs/<name>.py``."""
    argv: tuple[str, ...]
    """Its command line."""
    done_url: str
    """The run directory whose complete manifest means the stage has nothing to do."""

    def command(self) -> str:
        return f"python jobs/{self.name}.py {' '.join(self.argv)}"


JobMain = Callable[[list[str]], int | None]


def run_pipeline(
    stages: list[Stage],
    *,
    run_url: str,
    logs_dir: str,
    load_main: Callable[[str], JobMain],
    cluster: Callable[[], contextlib.AbstractContextManager],
) -> int:
    """Run every stage that is not done; 0 when all are done, else the failing exit code.
    ``cluster`` is entered before the first stage that runs (none when all are done) and
    left at the end. Output between stages (Ray's shutdown, log lines that arrive late)
    goes to ``<logs>/pipeline.log``."""
    with captured(os.path.join(logs_dir, "pipeline.log")), contextlib.ExitStack() as stack:
        t0, started = time.time(), False
        for stage in stages:
            if is_complete(stage.done_url):
                say(f"[pipeline] {stage.name}: complete in {stage.done_url}, skipped")
                continue
            if not started:
                stack.enter_context(cluster())
                started = True
            rc = _run_stage(stage, run_url, logs_dir, load_main)
            if rc:
                return rc
        say(f"[pipeline] all stages complete in {duration(time.time() - t0)} -> {run_url}")
        return 0


def _run_stage(stage: Stage, run_url: str, logs_dir: str, load_main) -> int:
    timings = _read_timings(run_url)
    log = os.path.join(logs_dir, f"{stage.name}.log")
    say(f"[pipeline] {stage.name} started: {stage.command()}  (log: {log})")
    t = time.time()
    rc, reason = 1, ""
    with captured(log):
        print(f"== {stage.command()}", flush=True)
        try:
            rc = load_main(stage.name)(list(stage.argv)) or 0
            reason = f"exit code {rc}"
        except KeyboardInterrupt:
            traceback.print_exc()
            _record(timings, run_url, stage.name, time.time() - t, "stopped")
            say(f"[pipeline] stopped during {stage.name}; rerun the same command to resume")
            return 130
        except (Exception, SystemExit) as e:  # the stage failed: say why in one line
            traceback.print_exc()
            rc, reason = (e.code if isinstance(e, SystemExit) else 1) or 1, one_line(e)
        time.sleep(LATE_LOGS_S)
    seconds = time.time() - t
    if rc:
        _record(timings, run_url, stage.name, seconds, "failed")
        say(f"[pipeline] {stage.name} FAILED after {duration(seconds)}: {reason}")
        say(f"[pipeline] see {log}; earlier outputs are kept and a rerun resumes")
        return int(rc) if isinstance(rc, int) else 1
    _record(timings, run_url, stage.name, seconds, "done")
    say(f"[pipeline] {stage.name} done in {duration(seconds)}")
    return 0


LATE_LOGS_S = 2.0
"""Ray forwards workers' output to the driver a moment late: wait this long before a
stage's log is closed, so that its last lines land in it."""


def one_line(e: BaseException) -> str:
    """``ValueError: first line of the message`` (at most 300 characters)."""
    if isinstance(e, SystemExit):
        text = str(e.code) if not isinstance(e.code, int) else f"exit code {e.code}"
        return text.splitlines()[0][:300] if text else "exit"
    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {first}"[:300]


def _timings_url(run_url: str) -> str:
    return join(run_url, "pipeline.json")


def _read_timings(run_url: str) -> dict[str, Any]:
    url = _timings_url(run_url)
    return json.loads(read_bytes(url)) if exists(url) else {"stages": {}}


def _record(timings: dict[str, Any], run_url: str, name: str, seconds: float, status: str) -> None:
    timings["stages"][name] = {"seconds": round(seconds, 1), "status": status}
    write_bytes(_timings_url(run_url), json.dumps(timings, indent=2).encode())


def job_mains(jobs_dir: str) -> Callable[[str], JobMain]:
    """``load_main`` for :func:`run_pipeline`: ``main`` of ``<jobs_dir>/<name>.py``,
    imported from its file (the jobs are scripts, not a package)."""

    def load(name: str) -> JobMain:
        path = os.path.join(jobs_dir, f"{name}.py")
        spec = importlib.util.spec_from_file_location(f"agentworld_job_{name}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.main

    return load
