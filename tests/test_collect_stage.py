"""The collect stage on the session's real Ray cluster: the shared corpus validates,
episodes are deterministic per seed, failures are reported, reruns and resumes write
no duplicates, an agent endpoint can drive the episodes."""

from __future__ import annotations

import json
import re
import socket

import pytest

from agentworld.collect import CollectConfig, collect
from agentworld.collect.chunk import run_chunk
from agentworld.collect.episode import episode_digest, plan_episodes
from agentworld.config import ConfigError
from agentworld.io import get_fs, list_shards, read_manifest, read_records
from agentworld.schema import Trajectory


def test_collected_corpus_validates_and_counts_add_up(collected_corpus):
    manifest = read_manifest(collected_corpus)
    assert manifest["status"] == "complete" and manifest["stage"] == "collect"
    counts = manifest["counts"]
    assert counts["trajectories"] + counts["failed"] == counts["episodes"] == 40
    assert counts["failed"] == len(manifest["outputs"]["failed_episodes"]) == 0
    assert counts["by_domain"] == {"mcp": 10, "search": 10, "swe": 10, "terminal": 10}
    shards = list_shards(collected_corpus)
    assert [s.rsplit("/", 1)[-1] for s in shards] == [f"part-{k:05d}.jsonl" for k in range(4)]
    trajs = []
    for shard in shards:
        with open(shard, encoding="utf-8") as f:
            trajs += [Trajectory.from_json(line) for line in f]  # raises on any bad record
    assert len({t.id for t in trajs}) == 40
    assert sum(len(t.turns) for t in trajs) == counts["turns"]
    swe = [t for t in trajs if t.domain == "swe"]
    assert all(t.outcome is not None and t.outcome.success for t in swe)


def test_episodes_are_deterministic_per_seed(collected_corpus):
    recorded = {t.id: t for t in read_records(collected_corpus).records}
    config = CollectConfig(episodes=40, seed=0, episodes_per_task=10)
    # Re-record a few episodes of each domain in this process: same actions, and the
    # same observations wherever the environment itself is deterministic.
    specs = [s for s in plan_episodes(config) if s.index in (0, 2, 3, 4, 6, 7)]
    again = [Trajectory.from_json(r) for r in run_chunk(specs, config).records]
    assert len(again) == len(specs)
    for t in again:
        assert episode_digest(t) == episode_digest(recorded[t.id])
        if t.domain in ("search", "swe"):
            assert _stable(t) == _stable(recorded[t.id])
    other = run_chunk([s for s in plan_episodes(CollectConfig(episodes=3, seed=1))][:1], config)
    assert episode_digest(Trajectory.from_json(other.records[0])) != episode_digest(
        recorded["terminal-s0-000000"]
    )


def _stable(traj: Trajectory) -> list[str]:
    """Observations without the one varying part of these domains: test-run timings."""
    return [re.sub(r"in \d+\.\d+s", "in Xs", t.observation) for t in traj.turns]


def test_rerun_of_a_complete_run_does_nothing(collected_corpus):
    before = read_manifest(collected_corpus)
    config = CollectConfig(episodes=40, seed=0, episodes_per_task=10, max_parallel=2)
    assert collect(config, collected_corpus) == before
    with pytest.raises(ValueError, match="different config.*episodes"):
        collect(CollectConfig(episodes=41, seed=0, episodes_per_task=10), collected_corpus)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_failed_episodes_are_reported_not_dropped(ray_cluster, tmp_path):
    dead = f"http://127.0.0.1:{_closed_port()}/v1"
    config = CollectConfig(
        domains=("terminal", "search"), episodes=3, agent_endpoint=dead, agent_model="m"
    )
    manifest = collect(config, str(tmp_path / "raw"))
    assert manifest["counts"]["failed"] == 3 and manifest["counts"]["trajectories"] == 0
    failed = manifest["outputs"]["failed_episodes"]
    assert [f["id"] for f in failed] == [
        "terminal-s0-000000",
        "search-s0-000001",
        "terminal-s0-000002",
    ]
    assert all("Connection" in f["error"] for f in failed)
    status = json.loads((tmp_path / "raw" / "status" / "part-00000.json").read_text())
    assert status["failed"] == failed


def test_resume_on_s3_writes_no_duplicates(ray_cluster, s3_bucket):
    out = f"{s3_bucket}/raw"
    config = CollectConfig(domains=("terminal", "search"), episodes=4, episodes_per_task=2)
    first = collect(config, out)
    assert first["counts"]["trajectories"] == 4
    fs, _ = get_fs(out)
    # As if killed after chunk 0: the manifest and chunk 1 never made it.
    fs.rm([f"{out}/manifest.json", f"{out}/status/part-00001.json", f"{out}/part-00001.jsonl"])
    kept = {p: fs.cat(p) for p in _chunk_files(out, 0)}
    again = collect(config, out)
    assert again["counts"] == first["counts"]
    # Chunk 0 was skipped, not recorded again: its shard and status (which carries the
    # chunk's run time in ms, never the same twice) are those of the first run.
    assert {p: fs.cat(p) for p in _chunk_files(out, 0)} == kept
    assert fs.exists(_chunk_files(out, 1)[0])
    ids = [t.id for t in read_records(out).records]
    assert sorted(ids) == sorted(set(ids)) and len(ids) == 4


def _chunk_files(out: str, k: int) -> list[str]:
    return [f"{out}/part-{k:05d}.jsonl", f"{out}/status/part-{k:05d}.json"]


def test_agent_endpoint_chooses_the_actions(ray_cluster, tmp_path):
    from tests.test_evaluate_helpers import Reply, ScriptedChatServer

    def agent(body: dict, n: int) -> Reply:
        system, step = (
            body["messages"][0]["content"],
            sum(m["role"] == "assistant" for m in body["messages"]),
        )
        if "Linux terminal" in system:
            return Reply(
                text=["I will look.\n```bash\necho agent-was-here > f.txt\n```", "ls", "DONE"][
                    min(step, 2)
                ]
            )
        return Reply(
            text=[
                '{"name": "get_current_time", "arguments": {"timezone": "Mars/Olympus"}}',
                "DONE",
            ][min(step, 1)]
        )

    with ScriptedChatServer(agent) as server:
        config = CollectConfig(
            domains=("terminal", "mcp"),
            episodes=2,
            mcp_servers=("time",),
            agent_endpoint=server.base_url,
        )
        manifest = collect(config, str(tmp_path / "raw"))
        requests = list(server.requests)
    assert manifest["counts"]["failed"] == 0
    trajs = {t.domain: t for t in read_records(str(tmp_path / "raw")).records}
    term, mcp = trajs["terminal"], trajs["mcp"]
    assert [t.action for t in term.turns] == ["echo agent-was-here > f.txt", "ls"]
    assert term.turns[1].observation.startswith("f.txt") and term.source.endswith("+agent")
    assert mcp.turns[0].metadata["is_error"] and "Invalid timezone" in mcp.turns[0].observation
    # The agent saw the real observation of its previous action.
    seen = [m["content"] for r in requests for m in r["messages"] if m["role"] == "user"]
    assert any(s.startswith("f.txt") for s in seen)


def test_bad_config_fails_before_any_work(tmp_path):
    with pytest.raises(ConfigError, match="collect.domains.*android"):
        CollectConfig(domains=("terminal", "android"))
    with pytest.raises(ConfigError, match="collect.episodes"):
        CollectConfig(episodes=0)
    with pytest.raises(ConfigError, match="collect.agent_endpoint"):
        CollectConfig(agent_endpoint="localhost:8000")
    with pytest.raises(ConfigError, match="collect.mcp_servers"):
        CollectConfig(mcp_servers=("sqlite",))
    import subprocess
    import sys

    cmd = [
        sys.executable,
        "jobs/collect.py",
        "--out",
        str(tmp_path / "x"),
        "--set",
        "collect.domains=android",
    ]
    res = subprocess.run(
        cmd, capture_output=True, text=True, cwd=str(__import__("tests.conftest").conftest.ROOT)
    )
    assert res.returncode != 0 and "collect.domains" in res.stderr
    assert not (tmp_path / "x").exists()
