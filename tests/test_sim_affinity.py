"""Session affinity on a real simulator with two vLLM engine replicas (CPU build, the
tiny checkpoint): serve/sim_cpu.yaml's application with ``engine.replicas: 2`` under
its own route prefix. Which engine replica served a turn is read from the turn the
simulator stores (``engine.replica``, named by the replica itself), and whether the
turn's prompt came from that replica's prefix cache from ``engine.cached_tokens``."""

from __future__ import annotations

import socket
import time
import uuid

import pytest
import yaml

from agentworld.sim import SimEnv
from tests.conftest import _SIM_APP, ROOT, SIM_KEYS

pytestmark = pytest.mark.slow

APP = "agentworld-sim-affinity"
PREFIX = "/affinity"
KEY = SIM_KEYS["team-a"]
# Long enough that a session's history fills whole KV-cache blocks: only whole blocks
# are cached and reused.
FILLER = " ".join(f"/srv/data/file{i:03d}.log" for i in range(16))


@pytest.fixture(scope="module")
def affinity_app(ray_cluster, tiny_checkpoint, tmp_path_factory):
    """(base URL, app args) of the two-engine app; deleted at the module's end."""
    from ray import serve

    from agentworld.sim.placement.app import build_app

    args = yaml.safe_load((ROOT / "serve" / "sim_cpu.yaml").read_text())["applications"][0]["args"]
    args["model"] = tiny_checkpoint
    args["engine"].update(replicas=2, max_model_len=1024)
    args["auth"] = {"api_keys": {"team-a": KEY}, "api_keys_env": None}
    args["limits"].update(burst=1000, rate_per_minute=100_000, request_timeout_s=60)
    args["store_name"] = f"sim-affinity-{uuid.uuid4().hex[:8]}"
    base = _SIM_APP.get("url")
    if base is None:  # no shared app holds Serve's HTTP proxy: start it here
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        base = f"http://127.0.0.1:{port}"
    serve.run(build_app(args), name=APP, route_prefix=PREFIX)
    yield base + PREFIX, args
    serve.delete(APP)
    if not _SIM_APP:
        serve.shutdown()
    ray_cluster.kill(ray_cluster.get_actor(args["store_name"], namespace=args["store_namespace"]))


def _env(url: str, name: str) -> SimEnv:
    environment = f"bash 5.2 on host {name}; the disk holds {FILLER}"
    return SimEnv(url, KEY, "terminal", environment=environment, sampling={"max_tokens": 8})


def _engine_replicas(ray_cluster) -> dict[str, str]:
    """{replica unique id: actor name} of the live engine replicas of the app."""
    return {
        a["name"].rsplit("#", 1)[1]: a["name"]
        for a in ray_cluster.util.list_named_actors(all_namespaces=True)
        if a["name"].startswith(f"SERVE_REPLICA::{APP}#LLMServer")
    }


def test_a_sessions_turns_reach_the_engine_replica_holding_its_history(affinity_app):
    url, _ = affinity_app
    envs = [_env(url, f"node-{i}") for i in range(6)]
    for env in envs:
        env.reset()
    for step in range(3):  # interleaved: every session's turn k, then every turn k + 1
        for env in envs:
            env.step(f"cat /srv/data/file{step:03d}.log")
    for env in envs:
        served = [t["engine"] for t in env.history()]
        assert len({s["replica"] for s in served}) == 1, served
        assert served[0]["replica"]
        # Turns after the first find the history's earlier blocks cached on that replica.
        assert all(s["cached_tokens"] > 0 for s in served[1:]), served
        env.close()


def test_a_session_moves_with_its_history_when_its_replica_dies(affinity_app, ray_cluster):
    url, _ = affinity_app
    env = _env(url, "doomed")
    env.reset()
    # A long first action: a prompt without it would be shorter than turn 2's.
    actions = ("ls -l " + FILLER, "wc -l /srv/data/file001.log")
    before = [env.step(a)[0] for a in actions]
    first = env.history()[-1]["engine"]
    replicas = _engine_replicas(ray_cluster)
    assert first["replica"] in replicas and len(replicas) == 2
    holder = ray_cluster.get_actor(replicas[first["replica"]], namespace="serve")
    ray_cluster.kill(holder, no_restart=True)
    deadline = time.monotonic() + 60
    while first["replica"] in _engine_replicas(ray_cluster) and time.monotonic() < deadline:
        time.sleep(0.5)

    observation, _, _, _, info = env.step("df -h")

    moved = info["engine"]
    assert moved["replica"] and moved["replica"] != first["replica"]
    turns = env.history()
    assert [(t["action"], t["observation"]) for t in turns] == [
        *zip(actions, before, strict=True),
        ("df -h", observation),
    ]
    # The new replica got the whole history again, and had not cached it.
    assert moved["prompt_tokens"] > first["prompt_tokens"]
    assert moved["cached_tokens"] < first["cached_tokens"]
    env.close()
