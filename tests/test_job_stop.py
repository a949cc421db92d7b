"""A long job treats SIGTERM as a resumable stop: it unwinds, says so, exits 130, and the
same command resumes where it stopped (collect: finished chunks are not recorded again)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentworld.io import read_manifest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def finished_chunks(out: Path) -> int:
    """Chunks whose status file (written after their shard) exists."""
    return len(list((out / "status").glob("*.json"))) if (out / "status").is_dir() else 0


def test_sigterm_stops_collect_resumably(tmp_path):
    out = tmp_path / "raw"
    argv = [sys.executable, "jobs/collect.py", "--out", str(out), "--set", "collect.domains=terminal,search",
            "--set", "collect.episodes=24", "--set", "collect.episodes_per_task=2",
            "--set", "collect.max_parallel=1"]  # fmt: skip
    log = tmp_path / "first.log"
    with open(log, "w") as f:
        proc = subprocess.Popen(argv, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 600
        while not finished_chunks(out):
            assert proc.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "no chunk finished"
            time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=120)
    text = log.read_text()
    assert rc == 130, text[-3000:]
    assert "[collect] stopped (SIGTERM); rerun the same command to resume" in text
    assert read_manifest(str(out)) is None  # not complete
    done_before = finished_chunks(out)
    assert 1 <= done_before < 12
    again = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert f"resuming: {2 * done_before} episodes already recorded" in again.stdout
    assert read_manifest(str(out))["counts"]["trajectories"] == 24
