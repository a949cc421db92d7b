"""The simulator on a real Ray Serve deployment: serve/sim_cpu.yaml's application with
the tiny checkpoint on the vLLM CPU build (the session's ``sim_url`` fixture, shared
with the MCP and playground tests), called over HTTP by the real openai client and by
SimEnv."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.error
import urllib.request

import pytest
import yaml
from hypothesis import HealthCheck, settings

from agentworld.sim import SimAPIError, SimClient, SimEnv
from tests.conftest import ROOT, SIM_KEYS, SIM_TIMEOUT_S

pytestmark = pytest.mark.slow

KEYS = SIM_KEYS
TIMEOUT_S = SIM_TIMEOUT_S
MODEL = "agentworld"


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


def _stepped_session(url: str) -> tuple[SimEnv, dict]:
    """A team-a session one step in, and how it reads."""
    env = _env(url)
    env.reset()
    env.step("ls")
    return env, env.client.get_session(env.session_id)


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
    # AgentWorldBench's eval script asks for 32768 new tokens whatever the model holds:
    # answered within the context, not refused (a refusal scores as an empty answer).
    long = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "ls"}], max_tokens=32768
    )
    assert long.choices[0].finish_reason in ("stop", "length")
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


def test_a_session_longer_than_the_context_goes_on_from_its_latest_turns(sim_url):
    """Four steps whose actions together exceed the engine's 1024-token context: every
    step is answered, the prompt leaves the oldest turns out once the history no longer
    fits (``engine.history_dropped``), and the session keeps all four turns."""
    env = _env(sim_url)
    env.reset()
    action = "cat " + " ".join(f"/srv/data/part-{i:03d}/table.parquet" for i in range(12))
    dropped = []
    for _ in range(4):
        *_, info = env.step(action)
        dropped.append(info["engine"]["history_dropped"])
    session = env.client.get_session(env.session_id)
    assert [t["turn"] for t in session["turns"]] == [1, 2, 3, 4]
    assert dropped[0] == 0 and dropped[-1] > 0, dropped
    assert session["turns"][-1]["engine"]["history_dropped"] == dropped[-1]
    env.close()


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


def _engine_core_pids() -> list[int]:
    """The vLLM engine-core processes of this session's cluster (descendants of this
    test process, so never another run's engine on the same machine)."""
    import os

    import psutil

    found = []
    for proc in psutil.Process(os.getpid()).children(recursive=True):
        try:
            if "EngineCore" in proc.name() or "EngineCore" in " ".join(proc.cmdline()):
                found.append(proc.pid)
        except psutil.Error:
            pass
    return found


def test_model_timeout_is_a_504_and_stores_nothing(sim_url):
    """The engine stops answering (its process is stopped, SIGSTOP): the step gets a 504
    JSON error after limits.request_timeout_s, the session keeps its turns, and once the
    engine runs again the session steps on."""
    import os
    import signal

    env, before = _stepped_session(sim_url)
    pids = _engine_core_pids()
    assert pids, "no vLLM engine-core process found under this test session"
    step = f"/v1/sessions/{env.session_id}/step"
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        status, body, _ = _http(sim_url, "POST", step, b'{"action": "pwd"}', key=KEYS["team-a"])
        waited = time.monotonic() - t0
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)
    assert status == 504 and body["error"]["code"] == "timeout", body
    assert waited >= TIMEOUT_S
    assert env.client.get_session(env.session_id) == before
    assert env.step("pwd")[4]["turn"] == 2
    env.close()


def test_two_racing_steps_one_lands_the_others_get_409(sim_url):
    """Steps of one session sent at once: each is computed from the session as read, so
    all but those that find it unmoved are refused with a 409 JSON error, and the
    session holds exactly the steps that were answered 200."""
    env = _env(sim_url)
    env.reset()
    step = f"/v1/sessions/{env.session_id}/step"
    start = threading.Barrier(4)
    results: dict[int, tuple] = {}

    def fire(i: int) -> None:
        start.wait()
        body = json.dumps({"action": f"echo racer-{i}", "sampling": {"max_tokens": 12}}).encode()
        results[i] = _http(sim_url, "POST", step, body, key=KEYS["team-a"])

    threads = [threading.Thread(target=fire, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    codes = sorted(r[0] for r in results.values())
    assert set(codes) <= {200, 409} and 409 in codes and 200 in codes, codes
    assert all(r[1]["error"]["code"] == "concurrent_step" for r in results.values() if r[0] == 409)
    won = {f"echo racer-{i}" for i, r in results.items() if r[0] == 200}
    turns = env.history()
    assert {t["action"] for t in turns} == won and len(turns) == len(won)
    env.close()


def _metric(text: str, name: str, **labels: str) -> float:
    """Sum of a metric's samples whose labels include ``labels``, from Prometheus text."""
    import re

    total = 0.0
    # Greedy up to the last "} ": label values such as "/v1/sessions/{id}" hold braces.
    for m in re.finditer(rf"^(?:ray_)?{name}\{{(.*)\}} ([0-9.e+-]+)$", text, re.M):
        found = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        if all(found.get(k) == v for k, v in labels.items()):
            total += float(m.group(2))
    return total


def test_requests_are_counted_in_metrics(sim_url, ray_cluster):
    """agentworld_sim_requests counts each request by route template, team and status;
    the latency histogram counts them by route: read from the node's Prometheus export."""
    port = ray_cluster._private.worker.global_worker.node.metrics_export_port
    url = f"http://127.0.0.1:{port}/metrics"
    client = SimClient(sim_url, KEYS["team-d"])
    sid = client.create_session("terminal", environment="bash")["id"]

    def read() -> tuple[float, float, float]:
        text = urllib.request.urlopen(url, timeout=30).read().decode()
        route = {"route": "/v1/sessions/{id}", "team": "team-d"}
        return (
            _metric(text, "agentworld_sim_requests_total", **route, status="200"),
            _metric(text, "agentworld_sim_requests_total", **route, status="404"),
            _metric(text, "agentworld_sim_request_latency_s_count", route="/v1/sessions/{id}"),
        )

    before = _wait_for_metrics(read, lambda v: True)
    for _ in range(3):
        client.get_session(sid)
    _http(sim_url, "GET", "/v1/sessions/sess-nope", key=KEYS["team-d"])
    after = _wait_for_metrics(read, lambda v: v[0] >= before[0] + 3 and v[1] >= before[1] + 1)
    assert after[0] - before[0] == 3 and after[1] - before[1] == 1
    assert after[2] - before[2] >= 4  # by route only: other teams' calls count there too
    client.delete_session(sid)


def _wait_for_metrics(read, ready, timeout_s: float = 90):
    """Metrics reach the export every few seconds: poll until ``ready``."""
    deadline = time.monotonic() + timeout_s
    while True:
        values = read()
        if ready(values) or time.monotonic() > deadline:
            return values
        time.sleep(1)


def test_sessions_come_back_from_storage_after_the_store_dies(sim_url, ray_cluster):
    """The session-store actor is killed (Ray restarts it): it reloads the sessions from
    storage_url, and both ingress replicas serve them on, turns intact."""
    env = _env(sim_url)
    env.reset()
    first = env.step("ls")[0]
    before = env.client.get_session(env.session_id)
    args = yaml.safe_load((ROOT / "serve" / "sim_cpu.yaml").read_text())
    namespace = args["applications"][0]["args"]["store_namespace"]
    store = next(
        a
        for a in ray_cluster.util.list_named_actors(all_namespaces=True)
        if a["name"].startswith("sim-test-") and a["namespace"] == namespace
    )
    ray_cluster.kill(ray_cluster.get_actor(store["name"], namespace=namespace), no_restart=False)
    deadline, seen, views = time.monotonic() + 120, set(), []
    while len(seen) < 2 and time.monotonic() < deadline:
        try:
            seen.add(SimClient(sim_url, KEYS["team-a"], timeout_s=15).health()["replica"])
            views.append(env.client.get_session(env.session_id))
        except SimAPIError as e:
            assert e.status == 503, e  # only while the store restarts
            time.sleep(0.5)
    assert len(seen) == 2, "both ingress replicas should have answered"
    assert views and all(v == before for v in views)
    observation, _, _, _, info = env.step("pwd")
    assert info["turn"] == 2
    assert [t["action"] for t in env.history()] == ["ls", "pwd"]
    assert env.history()[0]["observation"] == first
    env.close()


def _raw(url: str, request: bytes, *, pause_s: float = 0.0, chunks: int = 1) -> tuple[int, bytes]:
    """Send a hand-made HTTP/1.1 request (in ``chunks`` pieces, ``pause_s`` apart);
    returns (status, body). Status 0: the server closed the connection unanswered."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=120) as sock:
        size = -(-len(request) // chunks)
        for i in range(0, len(request), size):
            sock.sendall(request[i : i + size])
            time.sleep(pause_s)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    if not data:
        return 0, b""
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def _request(method: str, path: str, body: bytes = b"", *, key: str | None, **headers) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Connection: close"]
    if key is not None:
        lines.append(f"Authorization: Bearer {key}")
    lines += [f"{k.replace('_', '-')}: {v}" for k, v in headers.items()]
    if "Content_Length" not in headers:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def test_hostile_requests_get_4xx_json_and_change_no_session(sim_url):
    """Wrong, missing and other teams' keys, malformed JSON, wrong content types,
    oversize and lying bodies, huge headers and a slow body: never a 5xx, a JSON error
    wherever the simulator answers, and the session exactly as it was."""
    env, before = _stepped_session(sim_url)
    sid, key = env.session_id, KEYS["team-a"]
    step = f"/v1/sessions/{sid}/step"
    hostile = {
        "no key": _request("POST", step, b'{"action": "id"}', key=None),
        "empty key": _request("POST", step, b'{"action": "id"}', key=""),
        "other team": _request("POST", step, b'{"action": "id"}', key=KEYS["team-b"]),
        "other team deletes": _request("DELETE", f"/v1/sessions/{sid}", key=KEYS["team-b"]),
        "id traversal": _request("GET", f"/v1/sessions/..%2F{sid}", key=KEYS["team-b"]),
        "truncated JSON": _request("POST", step, b'{"action": "id', key=key),
        "invalid UTF-8": _request("POST", step, b'{"action": "\xff\xfe"}', key=key),
        "NUL in JSON": _request("POST", step, b'{"action": "\x00"}', key=key),
        "JSON array": _request("POST", step, b'["id"]', key=key),
        "deep JSON": _request(
            "POST", step, b'{"action": ' + b"[" * 5000 + b"]" * 5000 + b"}", key=key
        ),
        "form body": _request(
            "POST", step, b"action=id", key=key, Content_Type="application/x-www-form-urlencoded"
        ),
        "xml body": _request(
            "POST", step, b"<action>id</action>", key=key, Content_Type="application/xml"
        ),
        "multipart": _request(
            "POST",
            step,
            b"--b\r\n\r\nid\r\n--b--",
            key=key,
            Content_Type="multipart/form-data; boundary=b",
        ),
        "oversize": _request("POST", step, b'{"action": "' + b"x" * 40_000 + b'"}', key=key),
        "declared oversize": _request("POST", step, b"{}", key=key, Content_Length="10000000"),
        "huge header": _request("POST", step, b'{"action": "id"}', key=key, X_Junk="j" * 200_000),
        "many headers": _request(
            "GET", f"/v1/sessions/{sid}", key=KEYS["team-b"], **{f"X_H{i}": "v" for i in range(500)}
        ),
    }
    answers = {name: _raw(sim_url, req) for name, req in hostile.items()}
    # A slow body (a byte every 50 ms), malformed: the server waits it out, then refuses.
    answers["slow body"] = _raw(
        sim_url, _request("POST", step, b'{"action": "id",,}', key=key), pause_s=0.05, chunks=60
    )
    wrong = {
        name: (status, body[:300])
        for name, (status, body) in answers.items()
        if not (status == 0 or 400 <= status < 500) or (status and not _error_code(body))
    }
    assert wrong == {}
    assert env.client.get_session(sid) == before
    assert SimClient(sim_url, KEYS["team-b"]).list_sessions() == []
    env.close()


def _error_code(body: bytes) -> str | None:
    try:
        return json.loads(body)["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return None


@pytest.fixture(scope="module")
def sim_schema(sim_url):
    import schemathesis

    return schemathesis.openapi.from_url(f"{sim_url}/openapi.json")


@pytest.fixture(scope="module")
def sentinel(sim_url):
    """A session of team-a that the fuzzer (team-d) must never change."""
    env, before = _stepped_session(sim_url)
    yield env, before
    env.close()


def test_session_api_fuzzed_from_its_openapi_schema(sim_url, sim_schema, sentinel):
    """schemathesis generates requests for every session route from the published
    schema, valid and invalid (bodies, odd ids and parameters), sent as team-d: never
    a 5xx, every error a JSON error, another team's session untouched."""
    from hypothesis import given
    from hypothesis import strategies as st
    from schemathesis import GenerationMode

    ops = [r.ok() for r in sim_schema.include(path_regex="^/v1/sessions").get_all_operations()]
    assert {(o.method, o.path) for o in ops} >= {
        ("post", "/v1/sessions"),
        ("post", "/v1/sessions/{session_id}/step"),
    }
    modes = (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
    cases = st.one_of([o.as_strategy(generation_mode=m) for o in ops for m in modes])
    statuses: dict[int, int] = {}
    wrong: list = []

    @settings(
        max_examples=150, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )
    @given(case=cases)
    def send(case) -> None:
        headers = {"Authorization": f"Bearer {KEYS['team-d']}"}
        response = case.call(base_url=sim_url, headers=headers, timeout=120)
        code = response.status_code
        statuses[code] = statuses.get(code, 0) + 1
        if code >= 500 or (code >= 400 and not _error_code(response.content)):
            wrong.append((case.method, case.formatted_path, str(case.body)[:200], code))

    send()
    print(f"\nschemathesis: {sum(statuses.values())} requests, statuses {sorted(statuses.items())}")
    assert wrong == []
    env, before = sentinel
    assert env.client.get_session(env.session_id) == before
