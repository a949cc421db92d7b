"""The routes of registered environments and their simulated MCP servers, as a part of
``SimIngress`` (which provides ``_admit``, ``_call``, ``_team_of``, ``cfg`` and
``mcp_front``):

- ``PUT /v1/environments/{name}`` registers (or replaces) an environment of the team:
  the session fields, the tools MCP clients are shown, how the server introduces
  itself; ``GET`` lists them or reads one, ``DELETE`` removes one.
- ``/v1/mcp/{environment}`` is that environment's MCP server (streamable HTTP), served
  by ``agentworld.sim.mcp_server.McpFront`` on the official SDK.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import mcp_types
from fastapi import Request
from jsonschema import SchemaError
from pydantic import ValidationError
from starlette.responses import JSONResponse, Response

from agentworld.sim.errors import SimError
from agentworld.sim.mcp_results import check_output_schema
from agentworld.sim.mcp_server import listed_tools
from agentworld.sim.prompt import resolve_domain, system_text
from agentworld.sim.protocol import ENVIRONMENT_NAME, RegisterEnvironment, parse_body


class McpRoutes:
    """Environment and MCP routes of the simulator ingress."""

    async def put_environment(self, name: str, request: Request) -> JSONResponse:
        team = await self._admit(request)
        if not ENVIRONMENT_NAME.match(name):
            message = f"{name!r}: 1-64 of a-z, 0-9, '_' and '-', starting with a letter or digit"
            raise SimError(422, "invalid_field", message, field="name")
        spec = parse_body(RegisterEnvironment, await request.body())
        self._check_environment(spec)
        record = await self._call("put_environment", team, name, spec.model_dump(exclude_none=True))
        return JSONResponse(_environment_view(record))

    async def list_environments(self, request: Request) -> JSONResponse:
        team = await self._admit(request)
        return JSONResponse({"environments": await self._call("list_environments", team)})

    async def get_environment(self, name: str, request: Request) -> JSONResponse:
        team = await self._admit(request)
        return JSONResponse(_environment_view(await self._call("get_environment", team, name)))

    async def delete_environment(self, name: str, request: Request) -> JSONResponse:
        team = await self._admit(request)
        await self._call("delete_environment", team, name)
        return JSONResponse({"name": name, "deleted": True})

    async def mcp(self, environment: str, request: Request) -> Response:
        # The front counts the request against the team's rate itself (with its lookups).
        handle = partial(
            self.mcp_front.handle,
            team=self._team_of(request),
            name=environment,
            body=await request.body(),
        )
        return _AsgiAnswer(handle)

    def _check_environment(self, spec: RegisterEnvironment) -> None:
        """What parsing cannot check: the domain exists, MCP clients accept the tools,
        and a session of it fits the session size limit."""
        resolve_domain(spec.domain)
        for i, tool in enumerate(listed_tools(spec.model_dump(exclude_none=True))):
            where = f"{'mcp_tools' if spec.mcp_tools else 'tools'}.{i}"
            try:
                mcp_types.Tool.model_validate(tool)
                if tool.get("outputSchema") is not None:
                    check_output_schema(tool["outputSchema"])
            except (ValidationError, SchemaError) as e:
                why = str(e).splitlines()[0]
                raise SimError(
                    422, "invalid_field", f"not an MCP tool: {why}", field=where
                ) from None
        chars = len(system_text(spec.session_spec()))
        if chars > self.cfg.limits.max_session_chars:
            raise SimError(
                413,
                "session_too_large",
                f"the environment text is {chars} characters; "
                f"the limit is {self.cfg.limits.max_session_chars}",
                field="environment",
            )


class _AsgiAnswer(Response):
    """A route's answer that is an ASGI application of its own (the MCP front)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.background = None

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)


def _environment_view(record: dict[str, Any]) -> dict[str, Any]:
    view = {k: v for k, v in record.items() if k != "team"}
    view["mcp_path"] = f"/v1/mcp/{record['name']}"
    return view
