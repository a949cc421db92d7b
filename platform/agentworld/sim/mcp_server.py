"""Simulated MCP servers: MCP's streamable HTTP transport in front of simulator sessions,
one server per registered environment, at ``/v1/mcp/<environment>``.

Built on the official ``mcp`` SDK's server side: its low-level ``Server`` (``tools/list``
answers the environment's tools, ``tools/call`` steps a session) behind its
``StreamableHTTPSessionManager``. The manager runs stateless, because sessions must not
live in a replica: an MCP session is a simulator session in the shared store, and its
``Mcp-Session-Id`` is the session's id, so any replica serves any request and a
restarted replica carries on. :class:`McpFront` does what the stateful manager would
do around the SDK: it opens the session on a successful ``initialize`` (and sends its
id), checks the id of every later request against the team and the environment (404
otherwise, as for any session), ends the session on ``DELETE``, and answers requests of
the 2026 sessionless protocol revision with ``-32022`` naming the handshake revisions
(a simulator is stateful; clients then fall back to ``initialize``).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import ERROR_CODE_HTTP_STATUS, MCP_PROTOCOL_VERSION_HEADER
from mcp_types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    PROTOCOL_VERSION_META_KEY,
    UNSUPPORTED_PROTOCOL_VERSION,
    ErrorData,
    JSONRPCError,
    UnsupportedProtocolVersionErrorData,
)
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.datastructures import Headers
from starlette.responses import Response

from agentworld.sim.errors import SimError
from agentworld.sim.mcp_results import tool_result
from agentworld.sim.protocol import RegisterEnvironment, ToolCallAction
from agentworld.sim.sessions import Sessions, new_session

SESSION_HEADER = "mcp-session-id"
SERVER_NAME = "agentworld-sim"
_STATE = "agentworld.mcp"


@dataclass
class McpCall:
    """One HTTP request as the front resolved it, for the SDK handlers (they find it in
    the request scope's state)."""

    team: str
    environment: dict[str, Any]
    """The registered environment's record (``RegisterEnvironment`` fields and its name)."""
    session_id: str | None
    opened: str | None = None
    """The session this request's ``initialize`` opened."""


def listed_tools(environment: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool definitions ``tools/list`` answers for ``environment``."""
    return environment.get("mcp_tools") or environment.get("tools") or []


class McpFront:
    """The MCP endpoint of every registered environment, for one replica."""

    def __init__(self, sessions: Sessions, *, max_request_bytes: int) -> None:
        self.sessions = sessions
        self.server = build_server(sessions)
        self.manager = StreamableHTTPSessionManager(
            self.server,
            json_response=True,
            stateless=True,
            max_request_body_size=max_request_bytes,
        )
        self._runner: asyncio.Task | None = None
        self._started: asyncio.Future | None = None

    async def handle(
        self, scope: dict, receive: Any, send: Any, *, team: str, name: str, body: bytes
    ) -> None:
        """Answer one HTTP request to environment ``name`` of ``team`` (its body read)."""
        message = _decode(body) if scope["method"] == "POST" else None
        headers = Headers(scope=scope)
        version = headers.get(MCP_PROTOCOL_VERSION_HEADER)
        if _is_modern(version, message):
            await _unsupported_version(version, message)(scope, receive, send)
            return
        session_id = headers.get(SESSION_HEADER)
        try:
            found = await self.sessions.call("mcp_lookup", team, name, session_id)
            answer = await self._answer_outside_sdk(scope["method"], team, session_id, message)
        except SimError as e:
            answer = _error_response(e.status, _rpc_code(e), e.message, message, e.retry_after_s)
        if answer is not None:
            await answer(scope, receive, send)
            return
        call = McpCall(team=team, environment=found["environment"], session_id=session_id)
        scope.setdefault("state", {})[_STATE] = call
        await self._ensure_running()
        await self.manager.handle_request(scope, _replay(body, receive), _sending_id(send, call))

    async def _answer_outside_sdk(
        self, method: str, team: str, session_id: str | None, message: Any
    ) -> Response | None:
        """The answer to a request the SDK does not see: a DELETE (which ends the
        session), a GET (no server-initiated stream here) or a request without a
        session that does not open one; None for the rest."""
        if method == "DELETE":
            if session_id is None:
                return _error_response(
                    400, INVALID_REQUEST, "Bad Request: Missing session ID", None
                )
            await self.sessions.call("delete", team, session_id)
            return Response(status_code=200)
        if method != "POST":
            return Response(status_code=405, headers={"Allow": "POST, DELETE"})
        opens = isinstance(message, dict) and message.get("method") == "initialize"
        if session_id is None and isinstance(message, dict) and "method" in message and not opens:
            text = "Bad Request: Missing session ID; send initialize first"
            return _error_response(400, INVALID_REQUEST, text, message)
        return None

    async def _ensure_running(self) -> None:
        # The manager's task group must outlive every request: it runs in a task of
        # its own on the replica's event loop, started by the first MCP request.
        if self._runner is None:
            self._started = asyncio.get_running_loop().create_future()
            self._runner = asyncio.create_task(self._run(self._started))
        await asyncio.shield(self._started)

    async def _run(self, started: asyncio.Future) -> None:
        try:
            async with self.manager.run():
                started.set_result(None)
                await asyncio.Event().wait()
        except Exception as e:
            if not started.done():
                started.set_exception(e)
            raise


def build_server(sessions: Sessions) -> Server:
    """The SDK's low-level server whose handlers read the environment and the session
    from the request (see :class:`McpCall`)."""

    async def list_tools(ctx: ServerRequestContext, params: Any) -> types.ListToolsResult:
        tools = listed_tools(_call(ctx).environment)
        return types.ListToolsResult(tools=[types.Tool.model_validate(t) for t in tools])

    async def call_tool(
        ctx: ServerRequestContext, params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        call = _call(ctx)
        tools = {t["name"]: t for t in listed_tools(call.environment)}
        if params.name not in tools:
            # A protocol error, as the specification and the real servers answer it.
            raise MCPError(code=INVALID_PARAMS, message=f"Unknown tool: {params.name}")
        action = ToolCallAction(name=params.name, arguments=params.arguments or {})
        try:
            turn = await sessions.step(call.team, call.session_id, action)
        except SimError as e:
            raise MCPError(code=_rpc_code(e), message=e.message, data=e.body()["error"]) from None
        return tool_result(
            turn["observation"],
            tool=tools[params.name],
            injected=turn["injected"],
            error_patterns=call.environment.get("error_patterns"),
            meta={"agentworld/session": call.session_id, "agentworld/turn": turn["turn"]},
        )

    async def open_session(ctx: ServerRequestContext, call_next: CallNext) -> HandlerResult:
        """After a successful handshake without a session: open the simulator session
        (its id goes out in the Mcp-Session-Id header) and introduce the environment."""
        result = await call_next(ctx)
        if ctx.method != "initialize" or _call(ctx).session_id is not None:
            return result
        call = _call(ctx)
        spec = RegisterEnvironment.model_validate(_spec_fields(call.environment))
        record = new_session(
            spec.session_spec(), metadata={"via": "mcp"}, environment=call.environment["name"]
        )
        try:
            call.opened = (await sessions.open(call.team, record))["id"]
        except SimError as e:
            raise MCPError(code=_rpc_code(e), message=e.message, data=e.body()["error"]) from None
        return _introduce(result, spec)

    server = Server(SERVER_NAME, on_list_tools=list_tools, on_call_tool=call_tool)
    server.middleware.append(open_session)
    return server


def _call(ctx: ServerRequestContext) -> McpCall:
    state = getattr(ctx.request, "scope", {}).get("state") or {}
    if _STATE not in state:  # only through a front, never over another transport
        raise MCPError(code=INTERNAL_ERROR, message="no simulator session for this request")
    return state[_STATE]


def _spec_fields(environment: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in environment.items() if k in RegisterEnvironment.model_fields}


def _introduce(result: HandlerResult, spec: RegisterEnvironment) -> HandlerResult:
    """The initialize result naming the environment's server (a twin: the real one's)."""
    if spec.server is None or not isinstance(result, dict):
        return result
    info = {"name": spec.server.name, "version": spec.server.version}
    if spec.server.title:
        info["title"] = spec.server.title
    result = {**result, "serverInfo": info}
    if spec.server.instructions:
        result["instructions"] = spec.server.instructions
    return result


def _decode(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        return None  # the SDK answers it with its parse error


def _is_modern(version: str | None, message: Any) -> bool:
    """A request of a sessionless (2026+) protocol revision: by its header, or over a
    bridge that sends none, by the version in its envelope."""
    if version is not None:
        return version not in HANDSHAKE_PROTOCOL_VERSIONS
    params = message.get("params") if isinstance(message, dict) else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and PROTOCOL_VERSION_META_KEY in meta


def _unsupported_version(version: str | None, message: Any) -> Response:
    data = UnsupportedProtocolVersionErrorData(
        supported=list(HANDSHAKE_PROTOCOL_VERSIONS), requested=version or "(in _meta)"
    ).model_dump(mode="json")
    text = "Unsupported protocol version: a simulated server keeps sessions; initialize instead"
    status = ERROR_CODE_HTTP_STATUS.get(UNSUPPORTED_PROTOCOL_VERSION, 400)
    return _error_response(status, UNSUPPORTED_PROTOCOL_VERSION, text, message, data=data)


def _rpc_code(error: SimError) -> int:
    return INVALID_REQUEST if error.status < 500 else INTERNAL_ERROR


def _error_response(
    status: int,
    code: int,
    text: str,
    message: Any,
    retry_after_s: float | None = None,
    *,
    data: Any = None,
) -> Response:
    """A JSON-RPC error answering ``message`` (its id, when it has one) at ``status``."""
    request_id = message.get("id") if isinstance(message, dict) else None
    if not isinstance(request_id, (str, int)) or isinstance(request_id, bool):
        request_id = None
    error = JSONRPCError(
        jsonrpc="2.0", id=request_id, error=ErrorData(code=code, message=text, data=data)
    )
    body = error.model_dump(mode="json", by_alias=True, exclude_none=True)
    body["id"] = request_id  # JSON-RPC wants the member even when it is null
    headers = {"Retry-After": str(max(1, round(retry_after_s)))} if retry_after_s else None
    return Response(
        json.dumps(body), status_code=status, media_type="application/json", headers=headers
    )


def _replay(body: bytes, receive: Any):
    """The request's body (already read) once, then the client's own channel."""
    sent = False

    async def replay() -> dict:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


def _sending_id(send: Any, call: McpCall):
    """``send`` with the Mcp-Session-Id of a session the request opened."""

    async def sending(message: dict) -> None:
        if message["type"] == "http.response.start" and call.opened is not None:
            headers = [*message.get("headers", []), (b"mcp-session-id", call.opened.encode())]
            message = {**message, "headers": headers}
        await send(message)

    return sending
