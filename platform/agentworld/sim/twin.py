"""A twin of a real MCP server: what the server says about itself (its ``serverInfo``,
instructions and tools, read with the official ``mcp`` client over stdio or streamable
HTTP), optionally a few real calls and their results, turned into an environment the
simulator serves as an MCP server (``PUT /v1/environments/<name>``).

The environment text is laid out as the collectors' MCP recorder lays out the text of
the episodes the model was trained on (``agentworld.collect.mcp.env``): the server's name
and version, how actions and observations look, one JSON tool definition per line. The
tool definitions ``tools/list`` answers are the server's own, verbatim.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from typing import Any

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from agentworld.sim.client import SimClient

_TEXT_KEYS = ("name", "description", "inputSchema")
"""The keys of a tool definition the recorder writes into the environment text."""


@dataclass(frozen=True, kw_only=True)
class RealServer:
    """What was read from the real server."""

    name: str
    version: str
    instructions: str | None
    tools: list[dict[str, Any]]
    transport: str
    """``stdio`` or ``streamable HTTP``: how the server was spoken to."""
    calls: list[dict[str, Any]] = field(default_factory=list)
    """Recorded calls: ``{"call": {"name", "arguments"}, "result": text, "is_error": bool}``."""


def server_client(command: str | None = None, url: str | None = None, **http: Any) -> Client:
    """An ``mcp`` client of a server started by ``command`` (stdio) or found at ``url``
    (``http``: headers and timeout of its HTTP client)."""
    if (command is None) == (url is None):
        raise ValueError("give a server command or a URL, not both")
    if command is not None:
        argv = shlex.split(command)
        return Client(StdioServerParameters(command=argv[0], args=argv[1:]))
    return Client(streamable_http_client(url, http_client=httpx2.AsyncClient(**http)))


async def read_server(client: Client, calls: list[dict[str, Any]], *, transport: str) -> RealServer:
    """List ``client``'s server's tools (every page) and make ``calls`` on it."""
    async with client:
        info = client.server_info
        tools, cursor = [], None
        while True:
            page = await client.list_tools(cursor=cursor)
            tools += [
                t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in page.tools
            ]
            cursor = page.next_cursor
            if not cursor:
                break
        recorded = [await _record(client, c) for c in calls]
        return RealServer(
            name=info.name if info else "mcp-server",
            version=info.version if info else "",
            instructions=client.instructions,
            tools=tools,
            transport=transport,
            calls=recorded,
        )


async def _record(client: Client, call: dict[str, Any]) -> dict[str, Any]:
    try:
        result = await client.call_tool(call["name"], call.get("arguments") or {})
    except MCPError as e:  # written as the recorder writes a JSON-RPC error
        return {
            "call": call,
            "result": f"MCP error {e.error.code}: {e.error.message}",
            "is_error": True,
        }
    text = "\n".join(getattr(b, "text", f"[{b.type} content]") for b in result.content)
    return {"call": call, "result": text, "is_error": bool(result.is_error)}


def environment_text(server: RealServer) -> str:
    tools = "\n".join(
        json.dumps({k: t[k] for k in _TEXT_KEYS if k in t}, ensure_ascii=False)
        for t in server.tools
    )
    return (
        f"An MCP server, {server.name} {server.version}, over {server.transport}. "
        "Each action is a tool call (JSON with name and arguments); the observation is "
        "the tool result as the server returns it.\n"
        f"Tools:\n{tools}\n"
    )


def registration(server: RealServer, *, control: dict[str, Any] | None = None) -> dict[str, Any]:
    """The body of ``PUT /v1/environments/<name>`` for a twin of ``server``."""
    body: dict[str, Any] = {
        "domain": "mcp",
        "description": f"twin of {server.name} {server.version}".strip(),
        "environment": environment_text(server),
        "mcp_tools": server.tools,
        "server": {"name": server.name, "version": server.version},
    }
    if server.instructions:
        body["server"]["instructions"] = server.instructions
    if server.calls:
        body["initial_state"] = {"recorded_calls": server.calls}
    if control:
        body["control"] = control
    return body


def register(sim_url: str, api_key: str, name: str, body: dict[str, Any]) -> str:
    """Register the twin; returns its MCP URL."""
    client = SimClient(sim_url, api_key)
    client.request("PUT", f"/v1/environments/{name}", body)
    return f"{client.base_url}/v1/mcp/{name}"
