"""stdio to a simulated MCP server, for clients that launch their servers as commands:

    AGENTWORLD_SIM_API_KEY=sk-... python -m agentworld.sim.mcp_stdio \\
        --url http://127.0.0.1:8000 --environment time

A client configured with this command line talks to the simulator's environment
``time`` as if it had started a real server: every JSON-RPC message read on stdin goes
to ``<url>/v1/mcp/<environment>`` over streamable HTTP (the official SDK's client
transport, which keeps the session id and ends the session when stdin closes), and every
answer is written to stdout. After the handshake the negotiated protocol version rides
on every request's header, as the HTTP transport requires. Diagnostics go to stderr.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import anyio
import httpx2
from mcp.client.streamable_http import streamable_http_client
from mcp.server.stdio import stdio_server
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp.shared.message import ClientMessageMetadata, SessionMessage
from mcp_types import PARSE_ERROR, ErrorData, JSONRPCError, JSONRPCRequest, JSONRPCResponse

KEY_ENV = "AGENTWORLD_SIM_API_KEY"


DRAIN_TIMEOUT_S = 300.0
"""After stdin closes, how long the answers still owed are waited for."""


class _Relay:
    """What the bridge watches go by: the protocol version the server chose in the
    handshake, and the requests still waiting for their answer."""

    def __init__(self) -> None:
        self.initialize_id: Any = None
        self.version: str | None = None
        self.pending: set[Any] = set()
        self.drained = anyio.Event()
        self.drained.set()

    def going_up(self, message: SessionMessage) -> SessionMessage:
        inner = message.message
        if isinstance(inner, JSONRPCRequest):
            self.pending.add(inner.id)
            self.drained = anyio.Event()
        if isinstance(inner, JSONRPCRequest) and inner.method == "initialize":
            self.initialize_id, self.version = inner.id, None
        elif self.version is not None:
            headers = {MCP_PROTOCOL_VERSION_HEADER: self.version}
            return SessionMessage(inner, metadata=ClientMessageMetadata(headers=headers))
        return message

    def coming_down(self, message: SessionMessage) -> None:
        inner = message.message
        if isinstance(inner, JSONRPCResponse) and inner.id == self.initialize_id:
            version = (inner.result or {}).get("protocolVersion")
            self.version = version if isinstance(version, str) else None

    def delivered(self, message: SessionMessage) -> None:
        inner = message.message
        if isinstance(inner, (JSONRPCResponse, JSONRPCError)) and inner.id in self.pending:
            self.pending.discard(inner.id)
            if not self.pending:
                self.drained.set()


async def bridge(endpoint: str, api_key: str) -> None:
    """Relay stdin/stdout to ``endpoint`` until stdin closes."""
    relay = _Relay()
    timeout = httpx2.Timeout(30.0, read=300.0)
    headers = {"Authorization": f"Bearer {api_key}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=timeout) as http,
        streamable_http_client(endpoint, http_client=http) as (up_read, up_write),
        stdio_server() as (down_read, down_write),
        down_write,  # closed when done: stdio_server waits for its writer to end
        anyio.create_task_group() as tg,
    ):

        async def upward() -> None:
            async for item in down_read:
                if isinstance(item, Exception):  # a line that is not JSON-RPC
                    error = ErrorData(code=PARSE_ERROR, message=f"Parse error: {item}")
                    reply = JSONRPCError(jsonrpc="2.0", id=None, error=error)
                    await down_write.send(SessionMessage(reply))
                    continue
                await up_write.send(relay.going_up(item))
            # stdin closed: the answers still owed go out before the session ends.
            with anyio.move_on_after(DRAIN_TIMEOUT_S):
                await relay.drained.wait()
            await up_write.aclose()
            tg.cancel_scope.cancel()

        async def downward() -> None:
            async for item in up_read:
                if isinstance(item, Exception):
                    print(f"[mcp_stdio] {endpoint}: {item}", file=sys.stderr)
                    continue
                relay.coming_down(item)
                await down_write.send(item)
                relay.delivered(item)

        tg.start_soon(upward)
        tg.start_soon(downward)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m agentworld.sim.mcp_stdio",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--url", required=True, help="the simulator, e.g. http://127.0.0.1:8000")
    p.add_argument("--environment", required=True, help="a registered environment's name")
    p.add_argument("--api-key-env", default=KEY_ENV, help="variable with the team key")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    key = os.environ.get(args.api_key_env)
    if not key:
        print(f"[mcp_stdio] ${args.api_key_env} holds no simulator key", file=sys.stderr)
        return 2
    base = args.url.rstrip("/").removesuffix("/v1")
    anyio.run(bridge, f"{base}/v1/mcp/{args.environment}", key)
    return 0


if __name__ == "__main__":
    sys.exit(main())
