"""MCP state checks: a tool result's structure and its error state.

- ``json_parses``: the predicted result parses as JSON where the real one does;
- ``json_shape``: a JSON object with the real one's top-level keys, each value of the
  same JSON type (a list where the real one is a list);
- ``error_agrees``: an error result exactly where the real one is an error.
"""

from __future__ import annotations

import json
import re
from typing import Any

_ERROR_TEXT = re.compile(
    r"^(?:Error\b|MCP error\b|Not a tool call|Tool .* not found|Unknown tool"
    r"|[A-Za-z]*(?:Error|Exception): )",
    re.I,
)


def parse_json(text: str) -> Any:
    """The JSON value of a result (an object or a list), or None when it is not one."""
    text = text.strip()
    if not text or text[0] not in "[{":
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return {dict: "object", list: "array", str: "string"}.get(type(value), "null")


def is_error(text: str) -> bool:
    """Whether a tool result is an error: the server's error text, or a JSON result
    flagged as one."""
    value = parse_json(text)
    if isinstance(value, dict):
        return bool(value.get("isError") or value.get("is_error") or "error" in value)
    return bool(_ERROR_TEXT.match(text.strip()))


def json_parses(predicted: str, real: str) -> bool | None:
    """The predicted result is JSON; None when the real one is not."""
    if parse_json(real) is None:
        return None
    return parse_json(predicted) is not None


def json_shape(predicted: str, real: str) -> bool | None:
    """Same top-level keys with values of the same JSON types (an array for an array);
    None when the real result is not JSON."""
    want = parse_json(real)
    if want is None:
        return None
    got = parse_json(predicted)
    if isinstance(want, list):
        return isinstance(got, list)
    if not isinstance(got, dict):
        return False
    return {k: json_type(v) for k, v in got.items()} == {k: json_type(v) for k, v in want.items()}


def error_agrees(predicted: str, real: str) -> bool:
    """An error result exactly where the real one is an error."""
    return is_error(predicted) == is_error(real)
