"""Adapter between the record and OpenAI-style chat messages with tool calls.

Mapping: the system message is the environment text; messages before the first tool
call (e.g. the user's task) are kept verbatim in ``metadata["chat"]["prefix"]``; each
assistant tool call is one turn (its text content is the turn's ``reasoning``; further
calls of the same assistant message are marked ``parallel``), the matching tool
message its observation; a closing assistant message without tool calls is kept in
``metadata["chat"]["final"]``; the ``tools`` list in ``metadata["chat"]["tools"]``.
"""

from __future__ import annotations

import json
from typing import Any

from agentworld.schema.errors import InvalidValueError, MissingFieldError, WrongTypeError
from agentworld.schema.record import ToolCall, Trajectory, Turn


def render_tool_call(call: ToolCall) -> str:
    """The action text of a tool call, as a model sees it."""
    return json.dumps({"name": call.name, "arguments": call.arguments}, ensure_ascii=False)


def chat_to_trajectory(
    messages: list[dict[str, Any]],
    *,
    id: str,
    domain: str = "mcp",
    source: str = "chat",
    tools: list[dict[str, Any]] | None = None,
) -> Trajectory:
    if not isinstance(messages, list) or not messages:
        raise WrongTypeError("expected a non-empty list of messages", field="messages")
    environment, rest = "", messages
    if _role(messages[0], 0) == "system":
        environment = _content(messages[0], 0)
        rest = messages[1:]
    prefix: list[dict] = []
    turns: list[Turn] = []
    final = None
    i = 0
    while i < len(rest):
        msg, idx = rest[i], i + (len(messages) - len(rest))
        role = _role(msg, idx)
        if role == "assistant" and msg.get("tool_calls"):
            calls = msg["tool_calls"]
            results = rest[i + 1 : i + 1 + len(calls)]
            turns.extend(_turns_from_calls(msg, calls, results, idx))
            i += 1 + len(calls)
            continue
        if turns and role == "assistant" and i == len(rest) - 1:
            final = msg
        elif not turns:
            prefix.append(msg)
        else:
            raise InvalidValueError(
                f"unexpected {role} message between tool calls", field=f"messages[{idx}]"
            )
        i += 1
    meta: dict[str, Any] = {"system": rest is not messages, "prefix": prefix}
    if final is not None:
        meta["final"] = final
    if tools is not None:
        meta["tools"] = tools
    if not environment and tools:
        environment = json.dumps(tools, ensure_ascii=False)
        meta["environment_from_tools"] = True
    return Trajectory(
        id=id,
        domain=domain,
        source=source,
        environment=environment,
        turns=tuple(turns),
        metadata={"chat": meta},
    )


def _turns_from_calls(msg: dict, calls: Any, results: list[dict], idx: int) -> list[Turn]:
    if not isinstance(calls, list):
        raise WrongTypeError("expected a list", field=f"messages[{idx}].tool_calls")
    by_id = {}
    for r_off, res in enumerate(results):
        path = f"messages[{idx + 1 + r_off}]"
        if _role(res, idx + 1 + r_off) != "tool":
            raise InvalidValueError(
                "expected a tool message answering the call", field=f"{path}.role"
            )
        by_id[res.get("tool_call_id")] = (res, path)
    turns = []
    for c_off, call in enumerate(calls):
        path = f"messages[{idx}].tool_calls[{c_off}]"
        tc = _parse_call(call, path)
        if tc.call_id not in by_id:
            raise MissingFieldError(f"no tool message answers call {tc.call_id!r}", field=path)
        res, res_path = by_id[tc.call_id]
        turns.append(
            Turn(
                action=render_tool_call(tc),
                observation=_content(res, res_path),
                reasoning=(msg.get("content") or None) if c_off == 0 else None,
                tool_call=tc,
                metadata={"parallel": True} if c_off > 0 else {},
            )
        )
    return turns


def _parse_call(call: Any, path: str) -> ToolCall:
    if not isinstance(call, dict) or not isinstance(call.get("function"), dict):
        raise WrongTypeError("expected {'id', 'type', 'function': {...}}", field=path)
    fn = call["function"]
    if not isinstance(fn.get("name"), str):
        raise MissingFieldError("tool call has no function name", field=f"{path}.function.name")
    args = fn.get("arguments") or "{}"
    try:
        parsed = json.loads(args) if isinstance(args, str) else args
    except json.JSONDecodeError:
        raise WrongTypeError(
            "arguments are not valid JSON", field=f"{path}.function.arguments"
        ) from None
    if not isinstance(parsed, dict):
        raise WrongTypeError("arguments must be a JSON object", field=f"{path}.function.arguments")
    call_id = call.get("id")
    if not isinstance(call_id, str):
        raise MissingFieldError("tool call has no id", field=f"{path}.id")
    return ToolCall(name=fn["name"], arguments=parsed, call_id=call_id)


def _role(msg: Any, idx: int | str) -> str:
    path = idx if isinstance(idx, str) else f"messages[{idx}]"
    if not isinstance(msg, dict):
        raise WrongTypeError(f"expected an object, got {type(msg).__name__}", field=path)
    role = msg.get("role")
    if role not in ("system", "user", "assistant", "tool"):
        raise InvalidValueError(f"unknown role {role!r}", field=f"{path}.role")
    return role


def _content(msg: dict, idx: int | str) -> str:
    path = idx if isinstance(idx, str) else f"messages[{idx}]"
    content = msg.get("content")
    if content is None:
        return ""
    if not isinstance(content, str):
        raise WrongTypeError(
            f"expected str content, got {type(content).__name__}", field=f"{path}.content"
        )
    return content


def trajectory_to_chat(traj: Trajectory) -> list[dict[str, Any]]:
    """Inverse of chat_to_trajectory (tools, if any, are in metadata['chat']['tools'])."""
    meta = traj.metadata.get("chat", {})
    messages: list[dict[str, Any]] = []
    if meta.get("system", True):
        messages.append({"role": "system", "content": traj.environment})
    messages.extend(meta.get("prefix", []))
    pending: list[dict] = []
    for n, turn in enumerate(traj.turns):
        call = turn.tool_call or ToolCall(
            name="action", arguments={"text": turn.action}, call_id=f"call_{n}"
        )
        call_id = call.call_id or f"call_{n}"
        entry = {
            "id": call_id,
            "type": "function",
            "function": {
                "name": call.name,
                "arguments": json.dumps(call.arguments, ensure_ascii=False),
            },
        }
        if turn.metadata.get("parallel") and messages and messages[-1]["role"] == "assistant":
            messages[-1]["tool_calls"].append(entry)
        else:
            messages.extend(pending)
            pending = []
            messages.append({"role": "assistant", "content": turn.reasoning, "tool_calls": [entry]})
        pending.append({"role": "tool", "tool_call_id": call_id, "content": turn.observation})
    messages.extend(pending)
    if "final" in meta:
        messages.append(meta["final"])
    return messages
