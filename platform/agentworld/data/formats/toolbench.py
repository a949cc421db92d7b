"""ToolBench answers: ``{win, tree, forward_args, compare_candidates, answer_generation}``.

The search tree (DFS over RapidAPI calls) holds abandoned branches; the record is the
winning chain, ``answer_generation.train_messages[-1]``: OpenAI's legacy format, an
assistant ``function_call`` answered by a ``role: function`` message. It is read as
chat with tool calls (agentworld.data.formats.messages) after each call gets an id.
The closing ``Finish`` call has no answer: it is the final answer, in the metadata.

ToolBench cuts long API responses and ends them with ``...``: such a turn says so
(``cut_by_source``). Domain: ``mcp`` (real APIs behind tools), or ``search`` when every
tool called is a search. Outcome: ``win`` (the chain reached an answer).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from agentworld.data.formats.base import Head, Item, Unit, expect, guarded, has_keys, load_json
from agentworld.data.formats.messages import chat_turns, domain_from_tools
from agentworld.schema import Outcome, Trajectory, Turn

FORMAT = "toolbench"
CUT = "..."
_HEAD = re.compile(r'^\s*\{\s*"win"\s*:')


def detect(path: str, head: Head) -> bool:
    return has_keys(head, "answer_generation") or bool(
        _HEAD.match(head.text) and has_keys(head, "tree")
    )


def read(unit: Unit) -> Iterator[Item]:
    yield guarded("file", lambda: build(unit, load_json(unit)))


def build(unit: Unit, doc: Any) -> Trajectory:
    doc = expect(doc, dict, "<file>")
    answer = expect(doc.get("answer_generation"), dict, "answer_generation")
    chains = expect(answer.get("train_messages"), list, "answer_generation.train_messages")
    if not chains:
        raise ValueError("answer_generation.train_messages is empty: no chain to read")
    messages = to_tool_calls(expect(chains[-1], list, "answer_generation.train_messages[-1]"))
    environment, turns, chat = chat_turns(messages)
    cut = 0
    for k, t in enumerate(turns):
        if t.observation.endswith(CUT):
            turns[k] = _with_meta(
                t, cut_by_source=f"ends with {CUT!r}: ToolBench cuts long responses"
            )
            cut += 1
    functions = answer.get("function")
    return Trajectory(
        id=unit.label,
        domain=domain_from_tools([t.tool_call.name for t in turns if t.tool_call]),
        source=unit.source(FORMAT),
        environment=environment,
        turns=tuple(turns),
        outcome=Outcome(success=doc["win"], note=answer.get("finish_type"))
        if isinstance(doc.get("win"), bool)
        else None,
        metadata={
            "format": FORMAT,
            "chat": chat,
            "tools": functions if isinstance(functions, list) else None,
            "final_answer": answer.get("final_answer"),
            "observations_cut_by_source": cut,
        },
    )


def to_tool_calls(messages: list) -> list:
    """Legacy ``function_call`` / ``role: function`` messages as ``tool_calls`` / ``role:
    tool`` ones, each call and its answer sharing an id; the rest as they are."""
    out, pending = [], None
    for i, m in enumerate(messages):
        m = expect(m, dict, f"messages[{i}]")
        call = m.get("function_call")
        if m.get("role") == "assistant" and isinstance(call, dict):
            pending = f"call_{i}"
            fn = {"name": call.get("name"), "arguments": call.get("arguments")}
            out.append(
                {
                    **_without(m, "function_call"),
                    "tool_calls": [{"id": pending, "type": "function", "function": fn}],
                }
            )
        elif m.get("role") == "function":
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": pending,
                    "name": m.get("name"),
                    "content": m.get("content"),
                }
            )
            pending = None
        else:
            out.append(m)
    return out


def _without(m: dict, key: str) -> dict:
    return {k: v for k, v in m.items() if k != key}


def _with_meta(turn: Turn, **extra: Any) -> Turn:
    return replace(turn, metadata={**turn.metadata, **extra})
