"""bench/bench_agents.py without a world model stops before any work with one line that
names the missing path and what makes it, and exit code 2 (a fresh process, no Ray)."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import ROOT


def test_a_missing_world_model_is_named_with_the_command_that_makes_it(tmp_path):
    missing = tmp_path / "no-model"
    env = {**os.environ, "AGENTWORLD_BENCH_RESULTS": str(tmp_path / "results")}
    done = subprocess.run(
        [sys.executable, "bench_agents.py", "--world-model", str(missing), "--out", str(tmp_path)],
        cwd=ROOT / "bench",
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert str(missing) in lines[0] and "`make demo`" in lines[0] and "--world-model" in lines[0]
    assert not (tmp_path / "results").exists() and not (tmp_path / "tasks.jsonl").exists()
