"""MCP tool calls written as XML in the assistant's text, as MiroFlow's agents do::

    <use_mcp_tool>
    <server_name>tool-searching</server_name>
    <tool_name>google_search</tool_name>
    <arguments>{"q": "..."}</arguments>
    </use_mcp_tool>

and answered by the next user message (the tool's result). A file is a task result
``{message_history, summary, final_boxed_answer}`` (or a bare message list). Each call
is one turn: the call as a tool call (its server in the turn's metadata), the text
before it the reasoning, the result the observation; a call no message answers is kept
in the metadata. The system prompt and the task are the environment. Domain ``mcp``:
these are MCP servers' tools, whatever they do.

The tags are read with regular expressions over well-formed tags: the arguments are
JSON, which an XML parser would reject (``<`` and ``&`` in queries).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from agentworld.data.formats.base import Head, Item, Unit, expect, guarded, load_json, text_of
from agentworld.schema import Outcome, RecordError, ToolCall, Trajectory, Turn, render_tool_call

FORMAT = "mcp_xml"
TAG = "<use_mcp_tool>"
_CALL = re.compile(r"<use_mcp_tool>(.*?)</use_mcp_tool>", re.S)
_FIELD = {
    k: re.compile(rf"<{k}>(.*?)</{k}>", re.S) for k in ("server_name", "tool_name", "arguments")
}


def detect(path: str, head: Head) -> bool:
    return TAG in head.text and '"role"' in head.text


def read(unit: Unit) -> Iterator[Item]:
    yield guarded("file", lambda: build(unit, load_json(unit)))


def build(unit: Unit, doc: Any) -> Trajectory:
    messages = doc.get("message_history") if isinstance(doc, dict) else doc
    messages = expect(messages, list, "message_history")
    first = next((i for i, m in enumerate(messages) if _is_call(m)), len(messages))
    environment = "\n\n".join(_text(m, i) for i, m in enumerate(messages[:first]))
    turns, unanswered, final = [], [], None
    for i in range(first, len(messages)):
        m = messages[i]
        if not _is_call(m):
            if _role(m, i) == "assistant":
                final = _text(m, i)
            continue
        answer = messages[i + 1] if i + 1 < len(messages) else None
        call, reasoning = parse_call(_text(m, i), f"message_history[{i}]")
        if not isinstance(answer, dict) or answer.get("role") != "user":
            unanswered.append(render_tool_call(call))
            continue
        turns.append(
            Turn(
                action=render_tool_call(call),
                observation=_text(answer, i + 1),
                reasoning=reasoning or None,
                tool_call=call,
                metadata={"mcp_server": _server(_text(m, i))},
            )
        )
    boxed = doc.get("final_boxed_answer") if isinstance(doc, dict) else None
    return Trajectory(
        id=unit.label,
        domain="mcp",
        source=unit.source(FORMAT),
        environment=environment,
        turns=tuple(turns),
        outcome=Outcome(note=f"answer: {boxed}") if isinstance(boxed, str) else None,
        metadata={"format": FORMAT, "final": final, "unanswered": unanswered},
    )


def parse_call(text: str, where: str) -> tuple[ToolCall, str]:
    """The first ``<use_mcp_tool>`` of ``text`` and the text before it."""
    match = _CALL.search(text)
    if match is None:
        raise RecordError("no <use_mcp_tool> block", field=where)
    body = match.group(1)
    fields = {
        k: (r.search(body).group(1).strip() if r.search(body) else None) for k, r in _FIELD.items()
    }
    if not fields["tool_name"]:
        raise RecordError("<use_mcp_tool> without <tool_name>", field=where)
    raw = fields["arguments"] or "{}"
    try:
        args = json.loads(raw)
    except json.JSONDecodeError:
        args = {"_raw": raw}
    if not isinstance(args, dict):
        args = {"_raw": raw}
    return ToolCall(name=fields["tool_name"], arguments=args), text[: match.start()].strip()


def _server(text: str) -> str | None:
    match = _CALL.search(text)
    found = _FIELD["server_name"].search(match.group(1)) if match else None
    return found.group(1).strip() if found else None


def _is_call(m: Any) -> bool:
    return isinstance(m, dict) and m.get("role") == "assistant" and TAG in text_of(m.get("content"))


def _role(m: Any, i: int) -> str:
    m = expect(m, dict, f"message_history[{i}]")
    return str(m.get("role"))


def _text(m: Any, i: int) -> str:
    _role(m, i)
    return text_of(m.get("content"), f"message_history[{i}].content")
