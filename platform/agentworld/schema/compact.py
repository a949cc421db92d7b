"""The one compaction rule for environment text: tool definitions written as JSON (an
MCP server's tool list, one object per line; ``Tools: [...]`` as the chat adapter and
the simulator write it; OpenAI-style ``{"type": "function", ...}``) become one
signature line per tool:

  - git_log(repo_path: string, max_count?: integer = 10): Shows the commit logs

JSON schemas spend most of their characters on titles, braces and quotes; an MCP
server's tool list is several times longer than anything else in an episode and, at a
small recipe's sequence length, left no room for a single turn. What a simulator needs
(tool names, parameter names, types, which are required, defaults, what the tool does)
is kept; parameter titles and descriptions are not.

``render_messages`` applies it, so prepare, evaluate, RL and serve all see the same
text. Other lines are left exactly as they are; compacted text compacts to itself.
"""

from __future__ import annotations

import json
from typing import Any

_SCHEMA_KEYS = ("inputSchema", "input_schema", "parameters")
_MAX_PREFIX = 40
"""A label before the JSON on the same line (``Tools: ``) is kept when at most this long."""


def compact_environment(text: str) -> str:
    """``text`` with every line that holds JSON tool definitions rewritten as signatures."""
    if '"name"' not in text:  # the cheap common case: no JSON tool definition at all
        return text
    return "\n".join(_compact_line(line) for line in text.split("\n"))


def _compact_line(line: str) -> str:
    starts = [i for i in (line.find("{"), line.find("[")) if i >= 0]
    if not starts or '"name"' not in line:
        return line
    at = min(starts)
    prefix, body = line[:at], line[at:].strip()
    if len(prefix) > _MAX_PREFIX:
        return line
    try:
        value = json.loads(body)
    except ValueError:
        return line
    tools = value if isinstance(value, list) else [value]
    if not tools or not all(_tool_function(t) is not None for t in tools):
        return line
    signatures = "\n".join(tool_signature(t) for t in tools)
    return f"{prefix.rstrip()}\n{signatures}" if prefix.strip() else signatures


def _tool_function(tool: Any) -> dict[str, Any] | None:
    """The definition proper (the ``function`` of an OpenAI-style tool), or None when
    ``tool`` is not a tool definition."""
    if not isinstance(tool, dict):
        return None
    if tool.get("type") == "function" and isinstance(tool.get("function"), dict):
        tool = tool["function"]
    if not isinstance(tool.get("name"), str):
        return None
    if not any(isinstance(tool.get(k), dict) for k in _SCHEMA_KEYS):
        return None
    return tool


def tool_signature(tool: dict[str, Any]) -> str:
    """``- name(param: type, optional?: type = default): description``."""
    fn = _tool_function(tool)
    if fn is None:
        raise ValueError(f"not a tool definition: {json.dumps(tool)[:200]}")
    schema = next(fn[k] for k in _SCHEMA_KEYS if isinstance(fn.get(k), dict))
    params = ", ".join(_params(schema))
    description = " ".join(str(fn.get("description", "")).split())
    return f"- {fn['name']}({params})" + (f": {description}" if description else "")


def _params(schema: dict[str, Any]) -> list[str]:
    props = schema.get("properties")
    if not isinstance(props, dict):
        # A shorthand {"param": "type"} as hand-written tool lists use it.
        return [f"{k}: {_type(v)}" for k, v in schema.items() if k not in ("type", "required")]
    required = set(schema.get("required") or ())
    out = []
    for name, spec in props.items():
        spec = spec if isinstance(spec, dict) else {"type": spec}
        text = f"{name}{'' if name in required else '?'}: {_type(spec)}"
        if "default" in spec:
            text += f" = {json.dumps(spec['default'], ensure_ascii=False)}"
        out.append(text)
    return out


def _type(spec: Any) -> str:
    if isinstance(spec, str):
        return spec
    if not isinstance(spec, dict):
        return "any"
    if "enum" in spec and isinstance(spec["enum"], list):
        return "|".join(json.dumps(v, ensure_ascii=False) for v in spec["enum"])
    for key in ("anyOf", "oneOf"):
        if isinstance(spec.get(key), list):
            return "|".join(_type(s) for s in spec[key])
    kind = spec.get("type", "any")
    if isinstance(kind, list):
        return "|".join(str(k) for k in kind)
    if kind == "array":
        return f"{_type(spec.get('items', 'any'))}[]"
    return str(kind)
