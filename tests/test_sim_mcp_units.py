"""The simulated MCP servers without Ray: ``McpFront`` on the official SDK, served by
uvicorn on loopback with the real ``Guard`` in front, over a plain ``SessionStore`` and
a scripted predictor in place of the model (the Serve application with the model is
tests/test_sim_mcp.py). Spoken to by the official ``mcp`` client, directly and through
the stdio bridge, and by hand-made HTTP requests; plus the observation -> MCP result
rules, the store's environments and forks."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
import threading
import time

import httpx
import pytest
import uvicorn
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Route

from agentworld.sim.config import AuthConfig, LimitsConfig
from agentworld.sim.errors import SimError
from agentworld.sim.guard import Guard, route_label
from agentworld.sim.mcp_results import tool_result
from agentworld.sim.mcp_server import McpFront
from agentworld.sim.prompt import action_text, injected_error
from agentworld.sim.protocol import ToolCallAction
from agentworld.sim.sessions import Sessions
from agentworld.sim.store import SessionStore
from tests.conftest import ROOT

KEYS = {"alpha": "sk-alpha-0001", "beta": "sk-beta-0002"}
TIME_RESULT = {"timezone": "Asia/Tokyo", "datetime": "2026-01-01T09:00:00+09:00"}
TIME_SCHEMA = {
    "type": "object",
    "properties": {"timezone": {"type": "string"}, "datetime": {"type": "string"}},
    "required": ["timezone", "datetime"],
}
TOOLS = [
    {
        "name": "get_time",
        "description": "The time in a zone",
        "inputSchema": {"type": "object", "properties": {"timezone": {"type": "string"}}},
        "outputSchema": TIME_SCHEMA,
        "annotations": {"readOnlyHint": True},
    },
    {"name": "echo", "inputSchema": {"type": "object"}},
]
MAX_BYTES = 8 * 1024


async def scripted(system, turns, action, control, sampling, domain, *, affinity=None) -> dict:
    """The model's stand-in: get_time answers a conforming result for a known zone and
    the real server's error text otherwise; echo answers its call's text."""
    text = action_text(action)
    injected = injected_error(control, action, len(turns) + 1)
    if injected is not None:
        observation = injected
    elif action.name == "get_time":
        zone = action.arguments.get("timezone")
        good = zone == "Asia/Tokyo"
        observation = json.dumps(TIME_RESULT) if good else f"Invalid timezone: {zone!r}"
    else:
        observation = f"echo {len(turns) + 1}: {text}"
    return {
        "action": text,
        "observation": observation,
        "reasoning": None,
        "injected": injected is not None,
        "finish_reason": "stop",
    }


class LocalSim:
    """A store, the front and a URL."""

    def __init__(self, store: SessionStore, url: str, seen: list) -> None:
        self.store, self.url = store, url
        self.seen = seen
        """(HTTP method, Mcp-Session-Id, MCP-Protocol-Version) of every request."""

    def mcp(self, name: str = "clock") -> str:
        return f"{self.url}/v1/mcp/{name}"

    def sessions(self, team: str = "alpha") -> list[dict]:
        return [self.store.get(team, s["id"]) for s in self.store.list(team)]


@pytest.fixture(scope="module")
def local_sim(tmp_path_factory):
    store = SessionStore(LimitsConfig(max_request_bytes=MAX_BYTES))

    async def call(method, *args, **kwargs):
        return getattr(store, method)(*args, **kwargs)

    front = McpFront(Sessions(call, scripted, max_turns=64), max_request_bytes=MAX_BYTES)

    async def route(request: Request):
        body = await request.body()
        team, name = request.scope["state"]["team"], request.path_params["name"]

        async def answer(scope, receive, send):
            await front.handle(scope, receive, send, team=team, name=name, body=body)

        return answer

    app = Starlette(routes=[Route("/v1/mcp/{name}", route, methods=["GET", "POST", "DELETE"])])
    auth = AuthConfig(api_keys=KEYS, api_keys_env=None)
    guarded = Guard(app, auth=auth, max_request_bytes=MAX_BYTES)
    seen: list[tuple] = []

    async def recording(scope, receive, send):
        if scope["type"] == "http":
            h = dict(scope["headers"])
            seen.append((scope["method"], h.get(b"mcp-session-id"), h.get(b"mcp-protocol-version")))
        await guarded(scope, receive, send)

    store.put_environment("alpha", "clock", {"domain": "mcp", "mcp_tools": TOOLS})
    store.put_environment("alpha", "other", {"domain": "mcp", "tools": TOOLS[1:]})
    store.put_environment("beta", "clock", {"domain": "mcp", "mcp_tools": TOOLS[1:]})
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(recording, host="127.0.0.1", port=port, log_level="error")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    yield LocalSim(store, f"http://127.0.0.1:{port}", seen)
    server.should_exit = True
    thread.join(timeout=10)


def http_client(team: str = "alpha"):
    import httpx2

    return httpx2.AsyncClient(headers={"Authorization": f"Bearer {KEYS[team]}"}, timeout=30)


async def agent(client: Client, sim: LocalSim | None = None) -> dict:
    """What an agent does: list the tools, call them (one unknown), read the session."""
    async with client:
        listed = await client.list_tools()
        results = [
            await client.call_tool("get_time", {"timezone": "Asia/Tokyo"}),
            await client.call_tool("get_time", {"timezone": "Mars/Olympus"}),
            await client.call_tool("echo", {"text": "hi"}),
        ]
        with pytest.raises(MCPError) as unknown:
            await client.call_tool("no_such_tool", {})
        live = sim.sessions() if sim else None
        return {
            "version": client.protocol_version,
            "server": client.server_info.name,
            "tools": [
                t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listed.tools
            ],
            "results": results,
            "unknown": unknown.value.error,
            "sessions": live,
        }


def test_the_sdk_client_opens_a_session_lists_the_tools_and_steps_it(local_sim):
    client = Client(streamable_http_client(local_sim.mcp(), http_client=http_client()))
    seen = asyncio.run(agent(client, local_sim))
    assert seen["version"] in HANDSHAKE_PROTOCOL_VERSIONS  # the 2026 probe fell back
    assert seen["tools"] == TOOLS  # verbatim: output schemas and annotations included
    [session] = seen["sessions"]
    assert session["environment"] == "clock" and session["metadata"] == {"via": "mcp"}
    observations = [t["observation"] for t in session["turns"]]
    ok, bad, echo = seen["results"]
    assert [r.content[0].text for r in seen["results"]] == observations  # the simulator's text
    assert (ok.is_error, ok.structured_content) == (False, TIME_RESULT)
    assert (bad.is_error, bad.structured_content) == (True, None)
    assert echo.is_error is False and echo.meta["agentworld/turn"] == 3
    assert echo.meta["agentworld/session"] == session["id"]
    assert seen["unknown"].code == -32602 and "no_such_tool" in seen["unknown"].message
    assert len(session["turns"]) == 3  # the unknown tool stepped nothing
    assert local_sim.sessions() == []  # the client's DELETE on close ended the session


def test_the_stdio_bridge_relays_a_client_that_launches_its_server(local_sim):
    """The same agent through ``python -m agentworld.sim.mcp_stdio``: the same tools and
    answers, every request after the handshake carries the negotiated version in its
    header (as the HTTP transport requires; stdio has no headers to pass on), and the
    session ends when the client closes the bridge's stdin."""
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT / "platform"),
        "AGENTWORLD_SIM_API_KEY": KEYS["alpha"],
    }
    argv = ["-m", "agentworld.sim.mcp_stdio", "--url", local_sim.url, "--environment", "clock"]
    client = Client(StdioServerParameters(command=sys.executable, args=argv, env=env))
    local_sim.seen.clear()
    seen = asyncio.run(agent(client, local_sim))
    versions = {v for _, sid, v in local_sim.seen if sid is not None}
    assert versions == {seen["version"].encode()}
    assert seen["tools"] == TOOLS
    [session] = seen["sessions"]
    assert [r.content[0].text for r in seen["results"]] == [
        t["observation"] for t in session["turns"]
    ]
    assert [r.is_error for r in seen["results"]] == [False, True, False]
    assert seen["unknown"].code == -32602
    deadline = time.monotonic() + 10
    while local_sim.sessions() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert local_sim.sessions() == []


def _post(url: str, body, *, key: str | None = KEYS["alpha"], **headers) -> httpx.Response:
    h = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    if key:
        h["Authorization"] = f"Bearer {key}"
    h.update({k.replace("_", "-"): v for k, v in headers.items()})
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(url, content=data, headers=h, timeout=30)


def _initialize(url: str, key: str = KEYS["alpha"]) -> str:
    params = {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    }
    r = _post(url, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}, key=key)
    assert r.status_code == 200 and "result" in r.json(), r.text
    return r.headers["mcp-session-id"]


def test_bad_requests_get_jsonrpc_or_http_errors_and_change_no_session(local_sim):
    url = local_sim.mcp()
    sid = _initialize(url)
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
    echo = {**call, "params": {"name": "echo", "arguments": {}}}
    assert _post(url, echo, mcp_session_id=sid).status_code == 200
    before = local_sim.store.get("alpha", sid)
    s = {"mcp_session_id": sid, "mcp_protocol_version": "2025-11-25"}
    raw = {"Authorization": f"Bearer {KEYS['alpha']}", "Mcp-Session-Id": sid}
    answers = {
        "no key": _post(url, echo, key=None, **s),
        "wrong key": _post(url, echo, key="sk-wrong-000", **s),
        "other team's session": _post(url, echo, key=KEYS["beta"], **s),
        "other team's environment": _post(f"{local_sim.url}/v1/mcp/other", echo, key=KEYS["beta"]),
        "other environment's session": _post(local_sim.mcp("other"), echo, **s),
        "no such environment": _post(local_sim.mcp("nowhere"), echo, **s),
        "malformed JSON": _post(url, b'{"jsonrpc": "2.0", "id": 2, "method": "tools/ca', **s),
        "not JSON-RPC": _post(url, {"hello": "world"}, **s),
        "unknown method": _post(url, {**call, "method": "tools/fly"}, **s),
        "bad params": _post(url, {**call, "params": {"arguments": 3}}, **s),
        "unknown tool": _post(url, {**call, "params": {"name": "nope"}}, **s),
        "oversize": _post(url, {**echo, "params": {"name": "echo", "pad": "x" * MAX_BYTES}}, **s),
        "no session": _post(url, echo),
        "2026 revision": _post(url, echo, mcp_protocol_version="2026-07-28"),
        "GET stream": httpx.get(url, headers=raw),
    }
    status = {name: r.status_code for name, r in answers.items()}
    assert status == {
        "no key": 401,
        "wrong key": 401,
        "other team's session": 404,
        "other team's environment": 404,
        "other environment's session": 404,
        "no such environment": 404,
        "malformed JSON": 400,
        "not JSON-RPC": 400,
        "unknown method": 200,
        "bad params": 200,
        "unknown tool": 200,
        "oversize": 413,
        "no session": 400,
        "2026 revision": 400,
        "GET stream": 405,
    }
    code = {n: r.json()["error"]["code"] for n, r in answers.items() if "jsonrpc" in r.text}
    assert code["malformed JSON"] == -32700 and code["unknown method"] == -32601
    assert code["unknown tool"] == -32602 and code["bad params"] == -32602
    assert code["other team's session"] == -32600 and code["2026 revision"] == -32022
    supported = answers["2026 revision"].json()["error"]["data"]["supported"]
    assert supported == list(HANDSHAKE_PROTOCOL_VERSIONS)  # so clients fall back
    assert local_sim.store.get("alpha", sid) == before
    assert local_sim.store.list("beta") == []
    r = httpx.delete(url, headers=raw)
    assert r.status_code == 200
    with pytest.raises(SimError):
        local_sim.store.get("alpha", sid)


def test_observations_become_mcp_results():
    tool = TOOLS[0]
    good = tool_result(json.dumps(TIME_RESULT), tool=tool, injected=False)
    assert (good.is_error, good.structured_content) == (False, TIME_RESULT)
    wrong_shape = tool_result('{"timezone": 3}', tool=tool, injected=False)
    assert wrong_shape.is_error and wrong_shape.structured_content is None
    prescribed = tool_result(json.dumps(TIME_RESULT), tool=tool, injected=True)
    assert prescribed.is_error and prescribed.content[0].text == json.dumps(TIME_RESULT)
    plain = TOOLS[1]
    assert tool_result("3 files", tool=plain, injected=False).is_error is False
    assert tool_result('{"error": "quota"}', tool=plain, injected=False).is_error is True
    text = "Error executing tool echo: boom"
    assert tool_result(text, tool=plain, injected=False).is_error is True
    assert tool_result("fatal: no repo", tool=plain, injected=False).is_error is False
    own = tool_result("fatal: no repo", tool=plain, injected=False, error_patterns=["^fatal:"])
    assert own.is_error is True
    with pytest.raises(MCPError) as rpc:
        tool_result("MCP error -32602: Unknown tool: x", tool=plain, injected=False)
    assert (rpc.value.error.code, rpc.value.error.message) == (-32602, "Unknown tool: x")


def test_environments_stay_with_their_team_and_come_back_from_storage(tmp_path):
    limits = LimitsConfig(max_environments_per_team=2)
    store = SessionStore(limits, storage_url=str(tmp_path))
    store.put_environment("alpha", "one", {"domain": "mcp"})
    store.put_environment("alpha", "two", {"domain": "mcp"})
    store.put_environment("alpha", "two", {"domain": "mcp", "description": "replaced"})
    with pytest.raises(SimError) as full:
        store.put_environment("alpha", "three", {"domain": "mcp"})
    assert full.value.status == 429
    with pytest.raises(SimError) as hidden:
        store.get_environment("beta", "one")
    assert hidden.value.status == 404
    store.put_environment("beta", "one", {"domain": "terminal"})  # the same name, its own
    reloaded = SessionStore(limits, storage_url=str(tmp_path))
    assert [e["name"] for e in reloaded.list_environments("alpha")] == ["one", "two"]
    assert reloaded.get_environment("alpha", "two")["description"] == "replaced"
    assert reloaded.get_environment("beta", "one")["domain"] == "terminal"
    reloaded.delete_environment("alpha", "one")
    assert [
        e["name"]
        for e in SessionStore(limits, storage_url=str(tmp_path)).list_environments("alpha")
    ] == ["two"]


def test_a_fork_keeps_the_turns_up_to_its_turn(tmp_path):
    store = SessionStore(LimitsConfig(), storage_url=str(tmp_path))
    sid = store.create("alpha", {"system": "bash", "domain": "terminal", "metadata": {}})["id"]
    for n in range(3):
        turn = {"action": f"a{n}", "observation": f"o{n}", "injected": False}
        store.append_turn("alpha", sid, expected_turns=n, turn=turn)
    fork = store.fork("alpha", sid, 1)
    assert [t["action"] for t in fork["turns"]] == ["a0"]
    assert fork["metadata"] == {"forked_from": sid, "forked_at_turn": "1"}
    assert fork["chars"] == len("bash") + len("a0") + len("o0")
    assert len(store.get("alpha", sid)["turns"]) == 3  # the source is untouched
    with pytest.raises(SimError) as past:
        store.fork("alpha", sid, 4)
    assert past.value.field == "turn"
    with pytest.raises(SimError):
        store.fork("beta", sid, 1)  # another team's session does not exist
    reloaded = SessionStore(LimitsConfig(), storage_url=str(tmp_path))
    assert reloaded.get("alpha", fork["id"])["turns"] == fork["turns"]


def test_a_fork_is_routed_with_its_source_whose_history_it_shares():
    """Model calls carry the key the engine router hashes: a session's own id, and for
    a fork its source's (the engine replica that has that history cached)."""
    store, keys = SessionStore(LimitsConfig()), []

    async def call(method, *args, **kwargs):
        return getattr(store, method)(*args, **kwargs)

    async def recording(*args, affinity):
        keys.append(affinity)
        return await scripted(*args)

    sessions = Sessions(call, recording, max_turns=8)
    new = {"system": "bash", "domain": "terminal", "control": None, "sampling": None}
    source = store.create("alpha", {**new, "metadata": {}})["id"]
    other = store.create("alpha", {**new, "metadata": {}})["id"]
    step = {"name": "echo", "arguments": {"text": "hi"}}
    asyncio.run(sessions.step("alpha", source, ToolCallAction.model_validate(step)))
    fork = store.fork("alpha", source, 1)["id"]
    grandchild = store.fork("alpha", fork, 1)["id"]
    for sid in (fork, grandchild, other):
        asyncio.run(sessions.step("alpha", sid, ToolCallAction.model_validate(step)))
    assert keys == [source, source, source, other]


def test_the_new_routes_are_counted_by_template():
    """Metrics label routes by template: session and environment names would make
    unbounded label values."""
    assert route_label("/v1/mcp/time") == "/v1/mcp/{environment}"
    assert route_label("/v1/environments/time") == "/v1/environments/{name}"
    assert route_label("/v1/sessions/sess-1/fork") == "/v1/sessions/{id}/fork"
