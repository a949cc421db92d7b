"""The soak with faults at its smallest (bench/bench_soak.py in a fresh process, on its own
local Ray cluster): sessions keep stepping while a simulator replica and then the
session-store actor are killed, and every session ends holding exactly the steps its
client saw acknowledged."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT


@pytest.mark.slow
def test_short_soak_loses_and_duplicates_nothing_across_two_kills(tmp_path):
    env = {**os.environ, "AGENTWORLD_BENCH_RESULTS": str(tmp_path)}
    env.pop("RAY_ADDRESS", None)
    sizes = {"sessions": 4, "duration-s": 45, "window-s": 15}
    sizes |= {"turns-per-session": 8}
    cmd = [sys.executable, "bench_soak.py", *(f"--{k}={v}" for k, v in sizes.items())]
    done = subprocess.run(
        cmd, cwd=ROOT / "bench", env=env, capture_output=True, text=True, timeout=900
    )
    story = done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads((tmp_path / "soak.json").read_text())
    assert done.returncode == 0, story
    replica, store = result["kills"]
    assert replica["killed"].startswith("SERVE_REPLICA::") and "sessions" in store["killed"]
    assert result["last_ack_s"] > store["at_s"]  # clients were still stepping at the kill
    assert result["sessions_listed"] == result["sessions"] > 4  # clients moved on to new ones
    figures = ("lost", "duplicated_turns", "sessions_listed_twice", "sessions_unknown_to_clients")
    for figure in (*figures, "failed_steps"):
        assert result[figure] == 0, (figure, story)
    assert result["sessions_not_matching_client"] == 0 == result["errors_outside_windows"]
    assert result["p99_s"] >= result["p50_s"] > 0
