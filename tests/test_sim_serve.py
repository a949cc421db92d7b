"""The simulator on a real Ray Serve deployment: serve/sim_cpu.yaml's application with
the tiny checkpoint on the vLLM CPU build, started once for the module (about 80 s on
an idle 2-core machine), called over HTTP by the real openai client and by SimEnv."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.error
import urllib.request
import uuid

import pytest
import yaml

from agentworld.sim import SimAPIError, SimClient, SimEnv
from tests.conftest import ROOT

pytestmark = pytest.mark.slow

KEYS = {"team-a": "sk-team-a-0001", "team-b": "sk-team-b-0002", "team-c": "sk-team-c-0003"}
MODEL = "agentworld"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def sim_url(ray_cluster, tiny_checkpoint, tmp_path_factory):
    """serve/sim_cpu.yaml deployed with the tiny checkpoint and three test teams
    (team-c is rate limited hard); yields the base URL."""
    from ray import serve

    from agentworld.sim.app import build_app

    config = yaml.safe_load((ROOT / "serve" / "sim_cpu.yaml").read_text())
    app_config = config["applications"][0]
    args = app_config["args"]
    args["engine"].update(model=tiny_checkpoint, max_model_len=1024)
    args["auth"] = {"api_keys": KEYS, "api_keys_env": None}
    # team-c is limited hard for the rate-limit test; the others must never be, however
    # fast an idle machine runs the module (burst 20 alone runs out within one test).
    args["limits"].update(
        burst=20,
        rate_per_minute=100_000,
        max_request_bytes=16 * 1024,
        team_rate_per_minute={"team-c": 1},
    )
    args["store_name"] = f"sim-test-{uuid.uuid4().hex[:8]}"
    args["storage_url"] = str(tmp_path_factory.mktemp("sim-sessions"))
    port = _free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    serve.run(build_app(args), name=app_config["name"], route_prefix=app_config["route_prefix"])
    yield f"http://127.0.0.1:{port}"
    serve.delete(app_config["name"])
    serve.shutdown()
    ray_cluster.kill(ray_cluster.get_actor(args["store_name"], namespace=args["store_namespace"]))


def _http(
    url: str, method: str, path: str, body: bytes | None = None, key: str | None = None, **headers
):
    """(status, decoded JSON body, headers) of a raw request."""
    req = urllib.request.Request(url + path, data=body, method=method)
    if key is not None:
        req.add_header("Authorization", f"Bearer {key}")
    for name, value in headers.items():
        req.add_header(name.replace("_", "-"), value)
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            return resp.status, json.loads(resp.read()), resp.headers
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read()), e.headers


def _env(url: str, team: str = "team-a", **kwargs) -> SimEnv:
    kwargs.setdefault("environment", "bash 5.2 in /home/user")
    return SimEnv(url, KEYS[team], "terminal", sampling={"max_tokens": 12}, **kwargs)


def test_openai_client_gets_a_completion(sim_url):
    import openai

    client = openai.OpenAI(base_url=f"{sim_url}/v1", api_key=KEYS["team-a"], max_retries=0)
    assert [m.id for m in client.models.list().data] == [MODEL]
    resp = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "system", "content": "bash"}, {"role": "user", "content": "ls"}],
        max_tokens=8,
        temperature=0.0,
    )
    assert isinstance(resp.choices[0].message.content, str)
    assert resp.usage.completion_tokens > 0
    stranger = openai.OpenAI(base_url=f"{sim_url}/v1", api_key="sk-not-a-key", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        stranger.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "ls"}], max_tokens=4
        )


def test_session_life_cycle(sim_url):
    env = _env(sim_url, control={"world_facts": ["The host is called zorblax-7"]})
    system, info = env.reset()
    assert system.startswith("bash 5.2 in /home/user") and "zorblax-7" in system
    assert info["turn"] == 0
    observations = []
    for n, action in enumerate(["ls -la", "cat notes.txt"], 1):
        observation, reward, terminated, truncated, info = env.step(action)
        assert (info["turn"], reward, terminated, truncated) == (n, 0.0, False, False)
        assert info["turns_left"] == 64 - n
        observations.append(observation)
    client, sid = env.client, env.session_id
    session = client.get_session(sid)
    assert [(t["turn"], t["action"], t["observation"]) for t in session["turns"]] == [
        (1, "ls -la", observations[0]),
        (2, "cat notes.txt", observations[1]),
    ]
    assert sid in [s["id"] for s in client.list_sessions()]
    env.close()
    with pytest.raises(SimAPIError) as info:
        client.get_session(sid)
    assert info.value.status == 404


def test_concurrent_sessions_never_mix(sim_url):
    envs = {name: _env(sim_url, environment=f"bash for {name}") for name in ("left", "right")}
    for env in envs.values():
        env.reset()
    start = threading.Barrier(len(envs))
    returned: dict[str, list[str]] = {}

    def run(name: str) -> None:
        start.wait()
        returned[name] = [envs[name].step(f"echo {name}-{i}")[0] for i in range(3)]

    threads = [threading.Thread(target=run, args=(name,)) for name in envs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    for name, env in envs.items():
        turns = env.history()
        assert [t["action"] for t in turns] == [f"echo {name}-{i}" for i in range(3)]
        assert [t["observation"] for t in turns] == returned[name]
        assert [t["turn"] for t in turns] == [1, 2, 3]
        assert env.client.get_session(env.session_id)["system"] == f"bash for {name}"
        env.close()


def test_bad_requests_change_no_session(sim_url):
    env = _env(sim_url)
    env.reset()
    env.step("ls")
    sid, key = env.session_id, KEYS["team-a"]
    before = env.client.get_session(sid)
    step = f"/v1/sessions/{sid}/step"
    refused = [
        (401, _http(sim_url, "POST", step, b'{"action": "rm -rf /"}')),
        (401, _http(sim_url, "POST", step, b'{"action": "rm -rf /"}', key="sk-wrong-key")),
        (401, _http(sim_url, "GET", f"/v1/sessions/{sid}", key="sk-wrong-key")),
        (401, _http(sim_url, "POST", "/v1/chat/completions", b"{}")),
        (404, _http(sim_url, "GET", f"/v1/sessions/{sid}", key=KEYS["team-b"])),
        (404, _http(sim_url, "POST", step, b'{"action": "rm -rf /"}', key=KEYS["team-b"])),
        (404, _http(sim_url, "DELETE", f"/v1/sessions/{sid}", key=KEYS["team-b"])),
        (400, _http(sim_url, "POST", step, b'{"action": "rm -rf', key=key)),
        (422, _http(sim_url, "POST", step, b'{"action": "ls", "acton": "ls"}', key=key)),
        (422, _http(sim_url, "POST", step, b'{"action": 42}', key=key)),
        (422, _http(sim_url, "POST", "/v1/sessions", b'{"domain": "fax-machine"}', key=key)),
        (413, _http(sim_url, "POST", step, json.dumps({"action": "x" * 20_000}).encode(), key=key)),
    ]
    for status, (got, body, _) in refused:
        assert got == status, body
        assert set(body["error"]) >= {"code", "message"}, body
    assert refused[8][1][1]["error"]["field"] == "acton"
    assert refused[10][1][1]["error"]["field"] == "domain"
    assert env.client.get_session(sid) == before
    assert SimClient(sim_url, KEYS["team-b"]).list_sessions() == []
    env.close()


def test_simulate_is_stateless_and_obeys_tool_errors(sim_url):
    client = SimClient(sim_url, KEYS["team-a"])
    sessions = len(client.list_sessions())
    out = client.simulate(
        "mcp",
        {"name": "get_weather", "arguments": {"city": "Quelmar"}},
        tools=[{"name": "get_weather"}],
        history=[
            {
                "action": '{"name": "get_weather", "arguments": {}}',
                "observation": '{"error": "city required"}',
            }
        ],
        control={
            "tool_errors": [
                {"tool": "get_weather", "turns": [2], "message": '{"error": "rate limited"}'}
            ]
        },
    )
    assert (out["turn"], out["observation"], out["injected"]) == (
        2,
        '{"error": "rate limited"}',
        True,
    )
    free = client.simulate("terminal", "pwd", environment="bash", sampling={"max_tokens": 8})
    assert free["turn"] == 1 and free["injected"] is False and isinstance(free["observation"], str)
    assert len(client.list_sessions()) == sessions


def test_rate_limit_per_team(sim_url):
    statuses = [_http(sim_url, "GET", "/v1/sessions", key=KEYS["team-c"]) for _ in range(25)]
    codes = [s for s, _, _ in statuses]
    assert codes[:20] == [200] * 20 and 429 in codes[20:]
    status, body, headers = next(s for s in statuses if s[0] == 429)
    assert body["error"]["code"] == "rate_limited" and int(headers["Retry-After"]) >= 1
    assert _http(sim_url, "GET", "/v1/sessions", key=KEYS["team-a"])[0] == 200


def test_sessions_survive_a_replica_restart(sim_url, ray_cluster):
    env = _env(sim_url)
    env.reset()
    first = env.step("ls")[0]
    health = SimClient(sim_url, KEYS["team-a"]).health()
    replica = next(
        a["name"]
        for a in ray_cluster.util.list_named_actors(all_namespaces=True)
        if a["name"].startswith("SERVE_REPLICA::")
        and f"#SimIngress#{health['replica']}" in a["name"]
    )
    ray_cluster.kill(ray_cluster.get_actor(replica, namespace="serve"), no_restart=True)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            if (
                SimClient(sim_url, KEYS["team-a"], timeout_s=10).health()["replica"]
                != health["replica"]
            ):
                break
        except SimAPIError:
            pass
        time.sleep(1)
    else:
        pytest.fail("the simulator replica did not come back within 180 s")
    observation, _, _, _, info = env.step("pwd")
    assert info["turn"] == 2
    assert [(t["action"], t["observation"]) for t in env.history()] == [
        ("ls", first),
        ("pwd", observation),
    ]
    env.close()
