"""`ray job submit` the way the README writes it, against a cluster started the way a
user starts one: a head (`ray start --head`) and a second node joined to it (`ray start
--address`), each with its own resources. collect -> prepare -> cpt at tiny sizes; each
job's status, logs and outputs are checked, and tasks must have run on both nodes.

The nodes run as `ray start --block` children of this test and are stopped by signalling
them (never `ray stop`, which would end every Ray process on the machine, the test
session's own cluster included)."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentworld.io import is_complete, read_manifest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
pytestmark = pytest.mark.slow


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def wait_for(check, what: str, timeout_s: float = 180.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(1.0)
    raise TimeoutError(f"{what} did not happen within {timeout_s:.0f} s")


@pytest.fixture(scope="module")
def two_node_cluster(tmp_path_factory):
    """(environment for the ray CLI, dashboard URL) of a head and a second node."""
    gcs, dash, client, agent1, agent2 = free_ports(5)
    temp = tmp_path_factory.mktemp("ray")
    env = {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",  # an activated venv
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": secrets.token_hex(16),
        "RAY_USAGE_STATS_ENABLED": "0",
    }
    for var in ("RAY_ADDRESS", "PYTHONPATH"):  # the user's shell has neither
        env.pop(var, None)
    common = ["--node-ip-address", "127.0.0.1", "--block", "--disable-usage-stats"]
    head = subprocess.Popen(
        [BIN / "ray", "start", "--head", "--port", str(gcs), "--num-cpus", "2",
         "--include-dashboard=true", "--dashboard-host", "127.0.0.1", "--dashboard-port",
         str(dash), "--ray-client-server-port", str(client), "--dashboard-agent-listen-port",
         str(agent1), "--temp-dir", str(temp), *common],
        env=env, stdout=open(temp / "head.log", "w"), stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip
    nodes = [head]
    url = f"http://127.0.0.1:{dash}"
    try:
        wait_for(lambda: _ok(env, ["ray", "status", "--address", f"127.0.0.1:{gcs}"]), "head")
        nodes.append(
            subprocess.Popen(
                [BIN / "ray", "start", "--address", f"127.0.0.1:{gcs}", "--num-cpus", "2",
                 "--resources", json.dumps({"second_node": 2}),
                 "--dashboard-agent-listen-port", str(agent2), *common],
                env=env, stdout=open(temp / "node2.log", "w"), stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )  # fmt: skip
        wait_for(lambda: len(_alive_nodes(env, url)) == 2, "the second node joining")
        yield env, url
    finally:
        for p in reversed(nodes):  # `ray start --block` stops its node's processes on SIGTERM
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in nodes:
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)


def _ok(env: dict, argv: list[str]) -> bool:
    return subprocess.run(argv, env=env, capture_output=True, timeout=60).returncode == 0


def _ray_list(env: dict, url: str, what: str) -> list[dict]:
    out = subprocess.run(
        ["ray", "list", what, "--address", url, "--format", "json", "--detail", "--limit", "10000"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    # The CLI may print warnings before the JSON: parse from the first bracket.
    start = out.stdout.find("[")
    if out.returncode != 0 or start < 0:
        return []
    try:
        return json.loads(out.stdout[start:])
    except json.JSONDecodeError:
        return []


def _alive_nodes(env: dict, url: str) -> list[dict]:
    return [n for n in _ray_list(env, url, "nodes") if n.get("state") == "ALIVE"]


def submit(env: dict, url: str, cwd: Path, job: list[str]) -> str:
    """`ray job submit --working-dir . -- python jobs/...` from ``cwd``; returns its
    streamed logs; the job must succeed."""
    argv = ["ray", "job", "submit", "--address", url, "--working-dir", ".", "--", "python", *job]
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    logs = done.stdout + done.stderr
    assert done.returncode == 0, f"{' '.join(job)} failed:\n{logs[-4000:]}"
    assert "succeeded" in logs, logs[-2000:]
    return logs


def test_readme_job_lines_on_a_two_node_cluster(two_node_cluster, tmp_path):
    env, url = two_node_cluster
    # The submitter's checkout: what `--working-dir .` uploads (the job files, configs).
    checkout = tmp_path / "checkout"
    for name in ("jobs", "serve"):
        shutil.copytree(ROOT / name, checkout / name, ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path / "runs"
    logs = submit(env, url, checkout, ["jobs/collect.py", "--out", f"{out}/raw", "--set",
                  "collect.domains=terminal,search,mcp,swe", "--set", "collect.episodes=16",
                  "--set", "collect.episodes_per_task=1", "--set", "collect.max_parallel=4",
                  "--recipe", "debug_cpu"])  # fmt: skip
    assert "[collect] 16 trajectories" in logs, logs[-2000:]
    collect_logs = logs
    chunks = [t for t in _ray_list(env, url, "tasks") if t["name"] == "run_chunk"]
    assert {t["state"] for t in chunks} == {"FINISHED"}, chunks
    nodes = {t["node_id"] for t in chunks}
    assert len(nodes) == 2, f"collect's tasks ran on {len(nodes)} node(s), not both"
    logs = submit(env, url, checkout, ["jobs/prepare.py", "--input", f"{out}/raw", "--out",
                  f"{out}/prepared", "--recipe", "debug_cpu"])  # fmt: skip
    assert "[prepare] done: kept" in logs
    logs = submit(env, url, checkout, ["jobs/cpt.py", "--data", f"{out}/prepared", "--out",
                  f"{out}/cpt", "--recipe", "debug_cpu", "--set", "train.max_steps=6"])  # fmt: skip
    assert "[cpt] 6 steps" in logs, logs[-2000:]
    for stage in ("raw", "prepared", "cpt"):
        assert is_complete(str(out / stage)), stage
    assert read_manifest(str(out / "raw"))["counts"]["trajectories"] == 16
    assert (out / "cpt" / "hf" / "config.json").is_file()
    jobs = subprocess.run(["ray", "job", "list", "--address", url], env=env, capture_output=True,
                          text=True, timeout=120).stdout  # fmt: skip
    assert jobs.count("SUCCEEDED") >= 3, jobs
    # The package the workers ran came through the runtime env (py_modules), not a path
    # of the submitter's machine: the first job uploads it (later ones find it stored).
    assert "Creating a file package for local module" in collect_logs
    assert "agentworld'" in collect_logs and "Pushing file package" in collect_logs
