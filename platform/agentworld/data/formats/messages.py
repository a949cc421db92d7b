"""OpenAI-style chat transcripts with tool calls, read tolerantly, and written back.

Real transcripts are not the strict alternation the platform's own ``chat`` shards are
(agentworld.schema.chat): a user talks between tool calls (tau-bench), the assistant
comments without calling, a call may go unanswered when a run stops, a system prompt
comes as ``developer`` or as a list of text parts. The mapping:

- every message before the first tool call is a part of the environment text (system
  and developer text as is, others as ``[role] text``), their roles and lengths in
  ``metadata["chat"]["environment"]`` so that the text splits back;
- each tool call of an assistant message is one turn (the message's text is the first
  call's reasoning, further calls are ``parallel``), the tool message answering its id
  the observation;
- messages between two calls ride on the next turn, verbatim, in its ``before``;
  messages after the last call in ``metadata["chat"]["after"]``; calls no tool message
  answers in ``metadata["chat"]["unanswered"]``.

``to_messages`` inverts it: record -> messages -> record gives the same record.
"""

from __future__ import annotations

import json
import re
from typing import Any

from agentworld.data.formats.base import expect, text_of
from agentworld.schema import RecordError, ToolCall, Turn, render_tool_call

SYSTEM_ROLES = ("system", "developer")
_SEARCH_TOOL = re.compile(r"search|scrape|crawl|browse|fetch|wiki|web|retriev", re.I)


def domain_from_tools(names: list[str], default: str = "mcp") -> str:
    """``search`` when every tool called is a search, fetch or scrape of the web or a
    corpus; ``default`` (mcp) for any other tool set."""
    return "search" if names and all(_SEARCH_TOOL.search(n) for n in names) else default


def chat_turns(messages: Any) -> tuple[str, list[Turn], dict[str, Any]]:
    """(environment, turns, metadata["chat"]) of a transcript; RecordError naming the
    message when it is malformed."""
    messages = expect(messages, list, "messages")
    first = next((i for i, m in enumerate(messages) if _calls(m, i)), len(messages))
    environment, parts = _environment(messages[:first])
    turns: list[Turn] = []
    meta: dict[str, Any] = {"environment": parts}
    unanswered: list[dict] = []
    before: list[dict] = []
    i = first
    while i < len(messages):
        msg = messages[i]
        calls = _calls(msg, i)
        if not calls:
            before.append(msg)
            i += 1
            continue
        results, i = _tool_results(messages, i + 1)
        for k, call in enumerate(calls):
            tc = parse_call(call, f"messages[{i}].tool_calls[{k}]")
            answer = results.pop(tc.call_id, None)
            if answer is None and results and tc.call_id not in results:
                answer = results.pop(next(iter(results)))  # answered by position, no id
            if answer is None:
                unanswered.append(call)
                continue
            extra: dict[str, Any] = {"parallel": True} if k > 0 else {}
            if k == 0 and before:
                extra["before"], before = before, []
            turns.append(
                Turn(
                    action=render_tool_call(tc),
                    observation=text_of(answer.get("content"), "tool.content"),
                    reasoning=(text_of(msg.get("content")) or None) if k == 0 else None,
                    tool_call=tc,
                    metadata=extra,
                )
            )
    if not turns:
        raise RecordError("no tool call with an answer: nothing the environment said")
    if before:
        meta["after"] = before
    if unanswered:
        meta["unanswered"] = unanswered
    return environment, turns, meta


def _calls(msg: Any, i: int) -> list:
    if not isinstance(msg, dict):
        raise RecordError(
            f"expected a message object, got {type(msg).__name__}", field=f"messages[{i}]"
        )
    calls = msg.get("tool_calls") if msg.get("role") == "assistant" else None
    return expect(calls, list, f"messages[{i}].tool_calls") if calls else []


def _tool_results(messages: list, i: int) -> tuple[dict[Any, dict], int]:
    """The tool messages from ``i`` on, by the call id they answer (or position)."""
    out: dict[Any, dict] = {}
    while i < len(messages) and isinstance(messages[i], dict) and messages[i].get("role") == "tool":
        out[messages[i].get("tool_call_id", f"#{len(out)}")] = messages[i]
        i += 1
    return out, i


def parse_call(call: Any, where: str) -> ToolCall:
    """A ToolCall from ``{"id", "function": {"name", "arguments"}}``; arguments that are
    not a JSON object are kept as text (``{"_raw": ...}``), as the model wrote them."""
    call = expect(call, dict, where)
    fn = expect(call.get("function"), dict, f"{where}.function")
    name = expect(fn.get("name"), str, f"{where}.function.name")
    args = fn.get("arguments")
    if isinstance(args, str):
        try:
            parsed = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError:
            parsed = {"_raw": args}
        args = parsed if isinstance(parsed, dict) else {"_raw": args}
    args = {} if args is None else expect(args, dict, f"{where}.function.arguments")
    call_id = call.get("id")
    return ToolCall(
        name=name, arguments=args, call_id=call_id if isinstance(call_id, str) else None
    )


def _environment(messages: list) -> tuple[str, list[dict[str, Any]]]:
    texts, parts = [], []
    for i, m in enumerate(messages):
        role = m.get("role")
        content = text_of(m.get("content"), f"messages[{i}].content")
        text = content if role in SYSTEM_ROLES else f"[{role}] {content}"
        texts.append(text)
        parts.append({"role": role, "chars": len(text)})
    return "\n\n".join(texts), parts


# ---- back to messages ---------------------------------------------------------------


def to_messages(environment: str, turns: tuple[Turn, ...], meta: dict[str, Any]) -> list[dict]:
    """The transcript a record came from (its text and calls; formatting of JSON
    arguments and of content parts is not kept)."""
    out = _environment_messages(environment, meta.get("environment", []))
    for n, turn in enumerate(turns):
        call = turn.tool_call or ToolCall(name="action", arguments={"text": turn.action})
        call_id = call.call_id or f"call_{n}"
        entry = {
            "id": call_id,
            "type": "function",
            "function": {
                "name": call.name,
                "arguments": json.dumps(call.arguments, ensure_ascii=False),
            },
        }
        out.extend(turn.metadata.get("before", []))
        if turn.metadata.get("parallel"):
            last = max(i for i, m in enumerate(out) if m.get("role") == "assistant")
            out[last]["tool_calls"].append(entry)
        else:
            out.append({"role": "assistant", "content": turn.reasoning, "tool_calls": [entry]})
        out.append({"role": "tool", "tool_call_id": call_id, "content": turn.observation})
    return out + list(meta.get("after", []))


def _environment_messages(environment: str, parts: list[dict[str, Any]]) -> list[dict]:
    if not parts:
        return [{"role": "system", "content": environment}] if environment else []
    out, pos = [], 0
    for part in parts:
        text = environment[pos : pos + part["chars"]]
        pos += part["chars"] + 2
        role = part["role"]
        if role not in SYSTEM_ROLES:
            text = text.removeprefix(f"[{role}] ")
        out.append({"role": role, "content": text})
    return out
