"""From a simulated observation to what a simulated MCP server's ``tools/call`` answers.

The observation's text is the result's one text block, always. Whether it is an
``isError`` result (the world model predicts text, not flags):

- a prescribed tool error (``control.tool_errors``) is one;
- for a tool with an ``outputSchema``, a JSON object that conforms is the structured
  result (``structuredContent``, as a real server sends it), and anything else is an
  error: a client validates the structured result of a successful call against the
  schema, and text that is not that result is what the tool's failures look like
  ("Invalid timezone: ...");
- otherwise a JSON object with an ``error`` key, or text matching one of the
  environment's error patterns (by default lines starting "Error", "Invalid", ...).

An observation written as the collectors record a JSON-RPC error of the real server
(``MCP error -32602: Unknown tool: x``, see ``agentworld.collect.mcp.env``) is answered
as that JSON-RPC error, the way the real server answered.
"""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, TextContent

DEFAULT_ERROR_PATTERNS = (
    r"(?i)^\s*(error|invalid|missing required|unknown|failed|cannot|could not)\b",
)
_RPC_ERROR = re.compile(r"^MCP error (-?\d{1,6}): (.*)$", re.S)


def tool_result(
    observation: str,
    *,
    tool: dict[str, Any],
    injected: bool,
    error_patterns: list[str] | tuple[str, ...] | None = None,
    meta: dict[str, Any] | None = None,
) -> CallToolResult:
    """The result of a call to ``tool`` (its MCP definition) that was simulated as
    ``observation``; raises MCPError for an observation that is a JSON-RPC error."""
    rpc = _RPC_ERROR.match(observation.strip())
    if rpc:
        raise MCPError(code=int(rpc.group(1)), message=rpc.group(2).strip())
    structured = None
    schema = tool.get("outputSchema")
    data = _json_object(observation)
    if injected:
        is_error = True
    elif schema is not None:
        is_error = data is None or not conforms(data, schema)
        structured = None if is_error else data
    elif data is not None:
        is_error = "error" in data
    else:
        patterns = DEFAULT_ERROR_PATTERNS if error_patterns is None else error_patterns
        is_error = any(re.search(p, observation, re.M) for p in patterns)
    return CallToolResult(
        content=[TextContent(type="text", text=observation)],
        structured_content=structured,
        is_error=is_error,
        _meta=meta,
    )


def conforms(data: Any, schema: dict[str, Any]) -> bool:
    return jsonschema.validators.validator_for(schema)(schema).is_valid(data)


def check_output_schema(schema: dict[str, Any]) -> None:
    """Raises jsonschema.SchemaError for a schema that cannot validate anything."""
    jsonschema.validators.validator_for(schema).check_schema(schema)


def _json_object(text: str) -> dict[str, Any] | None:
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None
