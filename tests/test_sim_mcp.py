"""Simulated MCP servers on the real Serve application (the session's ``sim_url``: the
tiny checkpoint on the vLLM CPU build, two simulator replicas), spoken to by the
official ``mcp`` client SDK: a twin of the real ``mcp-server-time`` registered by
``jobs/twin.py`` and the real server side by side, the protocol's refusals through the
Guard, and an MCP session outliving its replicas."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time

import httpx
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult

from agentworld.sim import SimAPIError, SimClient
from tests.conftest import ROOT, SIM_KEYS

pytestmark = pytest.mark.slow

TEAM, OTHER = "team-e", "team-f"
BIN = os.path.dirname(sys.executable)
BAD_TIME = "Error executing tool convert_time: Invalid time format. Expected HH:MM [24-hour format]"
"""What the real server answers convert_time at 25:99; the twin is told to answer it."""


ECHO = {
    "domain": "mcp",
    "environment": "An echo server.",
    "tools": [{"name": "echo", "inputSchema": {"type": "object"}}],
    "sampling": {"max_tokens": 8},
}


ECHO_TOOLS = {
    **ECHO,
    "mcp_tools": [
        {
            "name": "echo",
            "title": "Echo",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
            "annotations": {"readOnlyHint": True},
        }
    ],
    "server": {"name": "echo-server", "version": "1.0"},
}


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT / "platform"), **extra}


def _twin(sim_url: str, name: str, server: str, *extra: str) -> str:
    """Run jobs/twin.py for ``server``; returns the URL it printed."""
    argv = [sys.executable, "jobs/twin.py", "--server-command", server, "--name", name]
    out = subprocess.run(
        [*argv, "--sim-url", sim_url, *extra],
        cwd=ROOT,
        env=_env(AGENTWORLD_SIM_API_KEY=SIM_KEYS[TEAM]),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    url = next(w for w in out.stdout.split() if w.startswith("http") and "/v1/mcp/" in w)
    assert url == f"{sim_url}/v1/mcp/{name}"
    return url


async def agent(client: Client, reader=None) -> dict:
    """An agent's tool calls: the tool list, one ordinary call, one with a bad time, one
    to a tool that does not exist. ``reader`` reads the simulator's session (a twin's)."""
    async with client:
        tools = (await client.list_tools()).tools
        now = await client.call_tool("get_current_time", {"timezone": "Europe/Warsaw"})
        bad = await client.call_tool(
            "convert_time", {"source_timezone": "UTC", "time": "25:99", "target_timezone": "UTC"}
        )
        with pytest.raises(MCPError) as unknown:
            await client.call_tool("get_weather", {"city": "Lima"})
        session = reader((now.meta or {}).get("agentworld/session")) if reader else None
        return {
            "server": client.server_info.name,
            "tools": [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools],
            "results": [now, bad],
            "unknown": unknown.value.error.code,
            "session": session,
        }


def test_an_agent_makes_the_same_calls_on_the_real_time_server_and_its_twin(sim_url):
    time_server = f"{BIN}/mcp-server-time --local-timezone UTC"
    control = {"tool_errors": [{"tool": "convert_time", "message": BAD_TIME}]}
    record = {"name": "get_current_time", "arguments": {"timezone": "UTC"}}
    extra = ["--control", json.dumps(control), "--record", json.dumps(record)]
    url = _twin(sim_url, "time", time_server, *extra)
    key = SIM_KEYS[TEAM]
    [recorded] = SimClient(sim_url, key).request("GET", "/v1/environments/time")["initial_state"][
        "recorded_calls"
    ]
    assert recorded["call"] == record and recorded["is_error"] is False
    assert json.loads(recorded["result"])["timezone"] == "UTC"  # the real server's answer
    reader = SimClient(sim_url, key).get_session
    real = asyncio.run(
        agent(
            Client(
                StdioServerParameters(
                    command=f"{BIN}/mcp-server-time", args=["--local-timezone", "UTC"]
                )
            )
        )
    )
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=120)
    over_http = asyncio.run(agent(Client(streamable_http_client(url, http_client=http)), reader))
    bridge = ["-m", "agentworld.sim.mcp_stdio", "--url", sim_url, "--environment", "time"]
    params = StdioServerParameters(
        command=sys.executable, args=bridge, env=_env(AGENTWORLD_SIM_API_KEY=key)
    )
    over_stdio = asyncio.run(agent(Client(params), reader))

    assert real["results"][0].is_error is False and real["results"][1].is_error is True
    for twin in (over_http, over_stdio):
        assert twin["tools"] == real["tools"]  # verbatim, output schemas included
        assert twin["server"] == real["server"] == "mcp-time"
        assert twin["unknown"] == real["unknown"] == -32602
        assert all(isinstance(r, CallToolResult) for r in twin["results"])
        session = twin["session"]
        assert session["environment"] == "time" and len(session["turns"]) == 2
        # The recorded call is part of the twin's state: its real answer is in the prompt.
        assert json.loads(recorded["result"])["datetime"] in session["system"]
        assert [r.content[0].text for r in twin["results"]] == [
            t["observation"] for t in session["turns"]
        ]
        assert twin["results"][1].is_error is True
        assert twin["results"][1].content[0].text == BAD_TIME == real["results"][1].content[0].text
    # Each client ended its session on close: nothing of team-e is left behind.
    assert SimClient(sim_url, key).list_sessions() == []


def test_the_git_server_twin_lists_the_real_servers_tools(sim_url):
    url = _twin(sim_url, "git", f"{BIN}/mcp-server-git")

    async def tools(client: Client) -> list[dict]:
        async with client:
            listed = (await client.list_tools()).tools
            return [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listed]

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {SIM_KEYS[TEAM]}"}, timeout=120)
    twin = asyncio.run(tools(Client(streamable_http_client(url, http_client=http))))
    real = asyncio.run(tools(Client(StdioServerParameters(command=f"{BIN}/mcp-server-git"))))
    assert twin == real and len(real) >= 5


def test_a_twin_of_a_server_reached_by_url(sim_url):
    """jobs/twin.py --server-url: the real server is any streamable HTTP server with a
    bearer token, here the simulator's own MCP server of a registered environment."""
    SimClient(sim_url, SIM_KEYS[TEAM]).request("PUT", "/v1/environments/source", ECHO_TOOLS)
    argv = [sys.executable, "jobs/twin.py", "--server-url", f"{sim_url}/v1/mcp/source"]
    out = subprocess.run(
        [*argv, "--server-token-env", "TOKEN", "--name", "copy", "--sim-url", sim_url],
        cwd=ROOT,
        env=_env(AGENTWORLD_SIM_API_KEY=SIM_KEYS[TEAM], TOKEN=SIM_KEYS[TEAM]),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    copy = SimClient(sim_url, SIM_KEYS[TEAM]).request("GET", "/v1/environments/copy")
    assert copy["mcp_tools"] == ECHO_TOOLS["mcp_tools"]
    assert copy["server"] == {"name": "echo-server", "version": "1.0"}
    assert "over streamable HTTP" in copy["environment"]
    for name in ("source", "copy"):
        SimClient(sim_url, SIM_KEYS[TEAM]).request("DELETE", f"/v1/environments/{name}")


def _post(url: str, body, *, key: str | None, sid: str | None = None) -> httpx.Response:
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    if sid:
        headers.update({"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"})
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(url, content=data, headers=headers, timeout=120)


def _open(url: str, key: str) -> str:
    params = {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    }
    r = _post(url, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}, key=key)
    assert r.status_code == 200 and "result" in r.json(), r.text
    return r.headers["mcp-session-id"]


def test_mcp_refusals_through_the_guard_change_no_session(sim_url):
    """Missing and wrong keys, another team's environment and session, malformed and
    unknown JSON-RPC, an oversize body and an unknown tool: each refused in HTTP or
    JSON-RPC terms, never a 5xx, and the session exactly as it was."""
    mine, theirs = SimClient(sim_url, SIM_KEYS[TEAM]), SimClient(sim_url, SIM_KEYS[OTHER])
    mine.request("PUT", "/v1/environments/probe", ECHO)
    mine.request("PUT", "/v1/environments/mine-only", ECHO)
    theirs.request("PUT", "/v1/environments/probe", ECHO)  # the same name, their own
    url, key = f"{sim_url}/v1/mcp/probe", SIM_KEYS[TEAM]
    sid = _open(url, key)
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
    echo = {**call, "params": {"name": "echo", "arguments": {"text": "hi"}}}
    assert _post(url, echo, key=key, sid=sid).status_code == 200
    before = mine.get_session(sid)
    answers = {
        "no key": _post(url, echo, key=None, sid=sid),
        "wrong key": _post(url, echo, key="sk-wrong-key-0", sid=sid),
        "their session id on their probe": _post(url, echo, key=SIM_KEYS[OTHER], sid=sid),
        "another team's environment": _post(
            f"{sim_url}/v1/mcp/mine-only", echo, key=SIM_KEYS[OTHER]
        ),
        "malformed JSON": _post(url, b'{"jsonrpc": "2.0", "id": 2, "meth', key=key, sid=sid),
        "not JSON-RPC": _post(url, [1, 2], key=key, sid=sid),
        "unknown method": _post(url, {**call, "method": "tools/juggle"}, key=key, sid=sid),
        "oversize": _post(url, {**echo, "pad": "x" * 20_000}, key=key, sid=sid),
        "unknown tool": _post(url, {**call, "params": {"name": "rm_rf"}}, key=key, sid=sid),
    }
    got = {name: r.status_code for name, r in answers.items()}
    assert got == {
        "no key": 401,
        "wrong key": 401,
        "their session id on their probe": 404,
        "another team's environment": 404,
        "malformed JSON": 400,
        "not JSON-RPC": 400,
        "unknown method": 200,
        "oversize": 413,
        "unknown tool": 200,
    }
    rpc = {n: r.json()["error"]["code"] for n, r in answers.items() if '"jsonrpc"' in r.text}
    assert rpc["malformed JSON"] == -32700
    assert rpc["unknown method"] == -32601
    assert rpc["unknown tool"] == -32602
    assert mine.get_session(sid) == before
    assert theirs.list_sessions() == []
    for client in (mine, theirs):
        client.request("DELETE", "/v1/environments/probe")
    mine.request("DELETE", "/v1/environments/mine-only")
    assert _post(url, echo, key=key, sid=sid).status_code == 404  # its environment is gone
    mine.delete_session(sid)


def _ingress_replicas(ray_cluster) -> list[str]:
    return [
        a["name"]
        for a in ray_cluster.util.list_named_actors(all_namespaces=True)
        if a["name"].startswith("SERVE_REPLICA::") and "#SimIngress#" in a["name"]
    ]


def test_an_mcp_session_outlives_the_replicas_that_served_it(sim_url, ray_cluster):
    """Every simulator replica is killed between two calls of one MCP client session:
    the next call, served by a new replica, continues the session (it is in the store)."""
    SimClient(sim_url, SIM_KEYS[TEAM]).request("PUT", "/v1/environments/echo", ECHO)
    killed = _ingress_replicas(ray_cluster)

    def kill_and_wait() -> None:
        for name in killed:
            ray_cluster.kill(ray_cluster.get_actor(name, namespace="serve"), no_restart=True)
        old = {name.rsplit("#", 1)[-1] for name in killed}
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            try:
                if SimClient(sim_url, SIM_KEYS[TEAM], timeout_s=10).health()["replica"] not in old:
                    return
            except SimAPIError:
                pass
            time.sleep(1)
        pytest.fail("no new simulator replica answered within 240 s")

    async def session() -> tuple[list[CallToolResult], dict]:
        http = httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {SIM_KEYS[TEAM]}"}, timeout=120
        )
        async with Client(streamable_http_client(f"{sim_url}/v1/mcp/echo", http_client=http)) as c:
            first = await c.call_tool("echo", {"text": "before"})
            await asyncio.to_thread(kill_and_wait)
            second = await c.call_tool("echo", {"text": "after"})
            sid = first.meta["agentworld/session"]
            return [first, second], SimClient(sim_url, SIM_KEYS[TEAM]).get_session(sid)

    results, stored = asyncio.run(session())
    assert set(_ingress_replicas(ray_cluster)).isdisjoint(killed)
    assert [r.meta["agentworld/turn"] for r in results] == [1, 2]
    assert results[1].meta["agentworld/session"] == stored["id"]
    assert [t["observation"] for t in stored["turns"]] == [r.content[0].text for r in results]
    SimClient(sim_url, SIM_KEYS[TEAM]).request("DELETE", "/v1/environments/echo")
