"""The stage runner behind `make demo`: console lines apart from the stages' output
(file descriptors 1 and 2 go to the stage's log), a failure named in one line with its
log, finished stages skipped on rerun, timings recorded."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent(
    """
    import contextlib, os, sys
    from agentworld.io import write_manifest
    from agentworld.pipeline import Stage, run_pipeline

    run = sys.argv[1]
    fail = sys.argv[2] == "fail"

    def noisy(argv):
        print("noise on stdout"); print("noise on stderr", file=sys.stderr)
        os.write(1, b"noise on fd 1\\n")
        write_manifest(argv[0], stage="noisy", inputs=[], config={}, counts={})

    def broken(argv):
        if fail:
            raise ValueError("the input is bad\\nsecond line of the message")
        write_manifest(argv[0], stage="broken", inputs=[], config={}, counts={})

    jobs = {"noisy": noisy, "broken": broken}
    stages = [Stage(name=n, argv=(f"{run}/{n}",), done_url=f"{run}/{n}") for n in jobs]
    entered = []
    def cluster():
        entered.append(1)
        return contextlib.nullcontext()
    rc = run_pipeline(stages, run_url=run, logs_dir=f"{run}/logs", load_main=jobs.get,
                      cluster=cluster)
    print(f"rc={rc} cluster={len(entered)}")
    """
)


def run(tmp_path: Path, mode: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "run"), mode],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_console_failure_line_logs_and_rerun(tmp_path):
    first = run(tmp_path, "fail")
    console = first.stdout
    assert "[pipeline] noisy done" in console
    assert "noise" not in console + first.stderr  # the stage's output went to its log
    log = (tmp_path / "run" / "logs" / "noisy.log").read_text()
    for line in ("noise on stdout", "noise on stderr", "noise on fd 1"):
        assert line in log
    failed = r"\[pipeline\] broken FAILED after \S+: ValueError: the input is bad\n"
    assert re.search(failed, console), console
    assert f"see {tmp_path / 'run' / 'logs' / 'broken.log'}" in console
    assert "second line of the message" in (tmp_path / "run" / "logs" / "broken.log").read_text()
    assert "rc=1 cluster=1" in console
    timings = json.loads((tmp_path / "run" / "pipeline.json").read_text())["stages"]
    assert {k: v["status"] for k, v in timings.items()} == {"noisy": "done", "broken": "failed"}

    second = run(tmp_path, "ok")
    assert "[pipeline] noisy: complete in" in second.stdout and "skipped" in second.stdout
    assert "[pipeline] broken done" in second.stdout
    assert "rc=0 cluster=1" in second.stdout
    third = run(tmp_path, "ok")  # everything done: nothing starts, not even the cluster
    assert "rc=0 cluster=0" in third.stdout
    assert "started" not in third.stdout
