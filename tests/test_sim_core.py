"""The simulator's plain-Python parts, without Ray: the session store (ownership, caps,
TTL, concurrency, persistence), rate limits, prompt rendering (the same messages as
training), request parsing, API keys and the Serve configs."""

from __future__ import annotations

import json

import pytest
from fastapi import FastAPI, Request

from agentworld.config import ConfigError
from agentworld.recipes import get_recipe
from agentworld.schema import predict_turn_messages
from agentworld.schema.examples import sample_trajectories
from agentworld.sim.config import AuthConfig, LimitsConfig, ServeConfig
from agentworld.sim.errors import SimError
from agentworld.sim.keys import KeyRing, load_keys
from agentworld.sim.prompt import (
    hide_fields,
    injected_error,
    read_prediction,
    resolve_domain,
    step_messages,
    system_text,
)
from agentworld.sim.protocol import CreateSession, SimulateRequest, StepRequest, parse_body
from agentworld.sim.store import RateLimiter, SessionStore
from tests.conftest import ROOT


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _store(clock: Clock | None = None, **limits) -> SessionStore:
    return SessionStore(LimitsConfig(**limits), clock=clock or Clock())


def _turn(action: str, observation: str = "ok") -> dict:
    return {"action": action, "observation": observation, "reasoning": None, "injected": False}


def _session(system: str = "bash in /home/user") -> dict:
    return {
        "domain": "terminal",
        "system": system,
        "control": None,
        "sampling": None,
        "metadata": {},
    }


def _refused(call, status: int) -> SimError:
    with pytest.raises(SimError) as info:
        call()
    assert info.value.status == status, info.value.body()
    return info.value


def test_store_lifecycle_and_ownership():
    store = _store()
    sid = store.create("team-a", _session())["id"]
    store.append_turn("team-a", sid, expected_turns=0, turn=_turn("ls"))
    record = store.append_turn("team-a", sid, expected_turns=1, turn=_turn("pwd"))
    assert [t["action"] for t in record["turns"]] == ["ls", "pwd"]
    assert [t["turn"] for t in record["turns"]] == [1, 2]
    before = store.get("team-a", sid)
    # Another team: every route answers "no such session" and changes nothing.
    for call in (
        lambda: store.get("team-b", sid),
        lambda: store.append_turn("team-b", sid, expected_turns=2, turn=_turn("rm -rf /")),
        lambda: store.check_step("team-b", sid, "x"),
        lambda: store.delete("team-b", sid),
    ):
        assert _refused(call, 404).code == "session_not_found"
    assert store.get("team-a", sid) == before
    assert store.list("team-b") == []
    assert [s["id"] for s in store.list("team-a")] == [sid]
    store.delete("team-a", sid)
    _refused(lambda: store.get("team-a", sid), 404)


def test_store_caps_and_optimistic_steps():
    store = _store(max_turns=2, max_session_chars=100)
    sid = store.create("t", _session("env"))["id"]
    store.append_turn("t", sid, expected_turns=0, turn=_turn("a"))
    # A step computed from a stale read (another step landed meanwhile) is refused.
    assert (
        _refused(lambda: store.append_turn("t", sid, expected_turns=0, turn=_turn("b")), 409).code
        == "concurrent_step"
    )
    assert _refused(lambda: store.check_step("t", sid, "x" * 200), 409).code == "session_full"
    store.append_turn("t", sid, expected_turns=1, turn=_turn("b"))
    assert _refused(lambda: store.check_step("t", sid, "c"), 409).code == "turn_limit"
    assert len(store.get("t", sid)["turns"]) == 2
    assert _refused(lambda: store.create("t", _session("x" * 101)), 413).field == "environment"


def test_store_ttl_and_team_quota():
    clock = Clock()
    store = _store(clock, session_ttl_s=10, max_sessions_per_team=2)
    first = store.create("t", _session())["id"]
    second = store.create("t", _session())["id"]
    assert _refused(lambda: store.create("t", _session()), 429).code == "too_many_sessions"
    store.create("other", _session())  # the quota is per team
    clock.now += 6
    store.append_turn("t", first, expected_turns=0, turn=_turn("ls"))  # activity renews the TTL
    clock.now += 5
    assert store.get("t", first)["turns"][0]["action"] == "ls"
    _refused(lambda: store.get("t", second), 404)  # idle for 11 s > 10 s
    store.create("t", _session())  # the expired one no longer counts
    assert store.stats() == {"sessions": 2, "teams": 1}  # "other" expired as well


def test_store_persists_and_reloads(tmp_path):
    clock = Clock()
    limits = LimitsConfig(session_ttl_s=100)
    store = SessionStore(limits, storage_url=str(tmp_path), clock=clock)
    kept = store.create("t", _session())["id"]
    store.append_turn("t", kept, expected_turns=0, turn=_turn("ls", "a.txt"))
    gone = store.create("t", _session())["id"]
    store.delete("t", gone)
    # A restarted store (new process, same URL) has the sessions back.
    again = SessionStore(limits, storage_url=str(tmp_path), clock=clock)
    assert again.get("t", kept) == store.get("t", kept)
    _refused(lambda: again.get("t", gone), 404)
    clock.now += 200
    assert SessionStore(limits, storage_url=str(tmp_path), clock=clock).stats()["sessions"] == 0
    assert not list(tmp_path.glob("sess-*.json"))


def test_rate_limiter_per_team():
    limiter = RateLimiter()
    admitted = [limiter.admit("a", rate_per_minute=60, burst=3, now=0.0) for _ in range(4)]
    assert admitted[:3] == [0.0, 0.0, 0.0] and admitted[3] == pytest.approx(1.0)
    assert limiter.admit("b", rate_per_minute=60, burst=3, now=0.0) == 0.0
    assert limiter.admit("a", rate_per_minute=60, burst=3, now=1.0) == 0.0
    store = _store(burst=1, rate_per_minute=1, team_rate_per_minute={"fast": 6000})
    store.admit("slow")
    error = _refused(lambda: store.admit("slow"), 429)
    assert error.retry_after_s > 0
    store.admit("fast")


def test_prompt_is_the_training_prompt():
    traj = sample_trajectories(1)[0]
    spec = CreateSession(domain="terminal", environment=traj.environment)
    system = system_text(spec)
    assert system == traj.environment
    turns = [_turn(t.action, t.observation) for t in traj.turns]
    for k in range(1, len(turns) + 1):
        assert step_messages(
            system, turns[: k - 1], turns[k - 1]["action"]
        ) == predict_turn_messages(traj, k)


def test_system_text_with_tools_state_and_control():
    spec = CreateSession.model_validate(
        {
            "domain": "mcp",
            "tools": [{"name": "get_weather", "inputSchema": {"city": "string"}}],
            "initial_state": {"city": "Zorvath"},
            "control": {
                "world_facts": ["Zorvath is the capital of Quelmar"],
                "paginate": {"page_size": 3},
                "hide_fields": ["secret"],
                "instructions": "Answer in JSON.",
            },
        }
    )
    text = system_text(spec)
    assert text.startswith('[{"name": "get_weather"')
    for part in (
        '"city": "Zorvath"',
        "Zorvath is the capital of Quelmar",
        "at most 3 items",
        "secret",
        "Answer in JSON.",
    ):
        assert part in text
    # Without any environment text the domain's own description stands in.
    assert "A shell session" in system_text(CreateSession(domain="terminal"))
    assert resolve_domain("bench/Terminal") == "terminal"
    assert _refused(lambda: resolve_domain("fax"), 422).field == "domain"


def test_tool_errors_hidden_fields_and_output_parsing():
    control = CreateSession.model_validate(
        {
            "domain": "mcp",
            "control": {
                "tool_errors": [{"tool": "search", "turns": [2], "message": '{"error": "quota"}'}],
                "hide_fields": ["token"],
            },
        }
    ).control
    call = StepRequest.model_validate(
        {"action": {"name": "search", "arguments": {"q": "x"}}}
    ).action
    assert injected_error(control, call, 1) is None
    assert injected_error(control, call, 2) == '{"error": "quota"}'
    assert injected_error(control, '{"name": "search", "arguments": {}}', 2) == '{"error": "quota"}'
    assert injected_error(control, "ls", 2) is None
    assert (
        hide_fields('{"a": 1, "b": [{"token": "s3cr3t", "c": 2}]}', {"token"})
        == '{"a": 1, "b": [{"c": 2}]}'
    )
    assert hide_fields("token=abc", {"token"}) == "token=abc"
    pred = read_prediction(
        '<think>the file exists</think><predicted_observation>{"token": 1, "ok": true}</predicted_observation><|im_end|>',
        control,
    )
    assert (pred.observation, pred.reasoning, pred.complete) == (
        '{"ok": true}',
        "the file exists",
        True,
    )


@pytest.mark.parametrize(
    ("raw", "status", "code", "field"),
    [
        (b"", 400, "empty_body", None),
        (b'{"domain": ', 400, "malformed_json", None),
        (b"[1, 2]", 400, "malformed_json", None),
        (b'{"domain": "terminal", "colour": "red"}', 422, "unknown_field", "colour"),
        (
            b'{"domain": "terminal", "control": {"world_fact": []}}',
            422,
            "unknown_field",
            "control.world_fact",
        ),
        (b'{"environment": "bash"}', 422, "missing_field", "domain"),
        (
            b'{"domain": "terminal", "sampling": {"temperature": -1}}',
            422,
            "invalid_field",
            "sampling.temperature",
        ),
    ],
)
def test_bad_bodies_name_the_problem(raw, status, code, field):
    error = _refused(lambda: parse_body(CreateSession, raw), status)
    assert (error.code, error.field) == (code, field)
    assert error.body()["error"]["code"] == code


def test_simulate_body_parses_history_and_tool_calls():
    req = parse_body(
        SimulateRequest,
        json.dumps(
            {
                "domain": "terminal",
                "history": [{"action": "ls", "observation": "a"}],
                "action": {"name": "t"},
            }
        ).encode(),
    )
    assert req.history[0].observation == "a" and req.action.name == "t"


def test_api_keys_from_env_and_file(tmp_path):
    keys_file = tmp_path / "keys"
    keys_file.write_text("# rotated keys\nteam-b=bbbbbbbb-1\nteam-b=bbbbbbbb-2\n")
    cfg = AuthConfig(
        api_keys={"team-a": "aaaaaaaa"}, api_keys_env="SIM_KEYS", api_keys_file=str(keys_file)
    )
    ring = load_keys(cfg, environ={"SIM_KEYS": '{"team-c": "cccccccc"}'})
    assert [ring.team_for(k) for k in ("aaaaaaaa", "bbbbbbbb-1", "bbbbbbbb-2", "cccccccc")] == [
        "team-a",
        "team-b",
        "team-b",
        "team-c",
    ]
    assert ring.team_for("nope-nope") is None and ring.team_for(None) is None
    assert load_keys(
        AuthConfig(api_keys_env="K"), environ={"K": "x=xxxxxxxx, y=yyyyyyyy"}
    ).teams == {"x", "y"}
    with pytest.raises(ValueError, match="no API keys"):
        load_keys(AuthConfig(api_keys_env="K"), environ={})
    with pytest.raises(ValueError, match="entry 1 is not team=key"):
        load_keys(AuthConfig(api_keys_env="K"), environ={"K": "just-a-key"})
    with pytest.raises(ValueError, match="share an API key"):
        KeyRing([("a", "samekey1"), ("b", "samekey1")])


def test_serve_config_errors_name_the_field():
    with pytest.raises(ConfigError) as info:
        ServeConfig.from_dict({"limits": {"max_turn": 3}})
    assert info.value.field == "serve.limits.max_turn"
    with pytest.raises(ConfigError) as info:
        ServeConfig.from_dict({"engine": {"max_model_len": "long"}})
    assert info.value.field == "serve.engine.max_model_len"
    with pytest.raises(ConfigError) as info:
        ServeConfig.from_dict({"limits": {"default_max_tokens": 900, "max_tokens": 100}})
    assert info.value.field == "limits.default_max_tokens"
    with pytest.raises(ConfigError) as info:
        ServeConfig.from_dict({"auth": {"api_keys": {"team a": "aaaaaaaa"}}})
    assert info.value.field == "auth.api_keys"
    assert get_recipe("debug_cpu").serve == ServeConfig()


@pytest.mark.parametrize("name", sorted(p.name for p in (ROOT / "serve").glob("*.yaml")))
def test_serve_configs_are_valid(name):
    """Each Serve config passes Serve's own schema, its import path resolves to the
    builder, and its args are a valid ServeConfig (building the app itself is covered
    by the Serve test, which deploys sim_cpu.yaml)."""
    import importlib

    import yaml
    from ray.serve.schema import ServeDeploySchema

    data = yaml.safe_load((ROOT / "serve" / name).read_text())
    schema = ServeDeploySchema.model_validate(data)
    for app in schema.applications:
        module, attr = app.import_path.split(":")
        assert callable(getattr(importlib.import_module(module), attr))
        assert isinstance(ServeConfig.from_dict(app.args), ServeConfig)


def test_guard_checks_keys_and_sizes_before_the_app():
    from fastapi.testclient import TestClient

    from agentworld.sim.guard import Guard, route_label

    app = FastAPI()

    @app.post("/v1/echo")
    async def echo(request: Request):
        body = await request.body()
        return {
            "team": request.state.team,
            "bytes": len(body),
            "type": request.headers["content-type"],
        }

    @app.get("/healthz")
    async def health():
        return {"status": "ok"}

    app.add_middleware(
        Guard, auth=AuthConfig(api_keys={"team-a": "aaaaaaaa"}), max_request_bytes=100
    )
    client = TestClient(app)
    assert client.get("/healthz").json() == {"status": "ok"}  # no key needed
    for headers in ({}, {"Authorization": "Bearer wrong-key"}, {"X-API-Key": "bbbbbbbb"}):
        resp = client.post("/v1/echo", content=b"{}", headers=headers)
        assert resp.status_code == 401 and resp.json()["error"]["code"] == "invalid_api_key"
        assert resp.headers["www-authenticate"] == "Bearer"
    ok = client.post(
        "/v1/echo", content=b"a=1", headers={"X-API-Key": "aaaaaaaa", "Content-Type": "text/plain"}
    )
    assert ok.json() == {"team": "team-a", "bytes": 3, "type": "application/json"}
    big = client.post("/v1/echo", content=b"x" * 101, headers={"Authorization": "Bearer aaaaaaaa"})
    assert big.status_code == 413 and big.json()["error"]["code"] == "request_too_large"
    # Without a Content-Length (chunked upload) the limit holds while reading.
    chunked = client.post(
        "/v1/echo",
        content=iter([b"x" * 60, b"y" * 60]),
        headers={"Authorization": "Bearer aaaaaaaa"},
    )
    assert chunked.status_code == 413
    assert route_label("/v1/sessions/sess-1/step") == "/v1/sessions/{id}/step"


def test_a_token_limit_above_the_context_is_cut_to_it():
    from ray.serve.llm.openai_api_models import ChatCompletionRequest

    from agentworld.sim.placement.ingress import within_context

    messages = [{"role": "user", "content": "ls"}]
    asked = ChatCompletionRequest(model="m", messages=messages, max_tokens=32768)
    assert within_context(asked, 2048).max_tokens == 2048
    assert asked.max_tokens == 32768  # the caller's request is not changed in place
    small = ChatCompletionRequest(model="m", messages=messages, max_tokens=16)
    assert within_context(small, 2048).max_tokens == 16
    newer = ChatCompletionRequest(model="m", messages=messages, max_completion_tokens=9000)
    assert within_context(newer, 2048).max_completion_tokens == 2048
    assert (
        within_context(ChatCompletionRequest(model="m", messages=messages), 2048).max_tokens is None
    )
