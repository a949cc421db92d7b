"""Search-R1 rollouts: raw chat-template text (``<|im_start|>role ... <|im_end|>``), one
rollout after another. The model reasons in ``<think>``, searches with ``<search>
query </search>``, the retriever answers in ``<information> ... </information>``, and
the rollout ends with ``<answer>``.

Each search the assistant makes is one turn: the query as a ``search`` tool call, the
text the model wrote since the last result its reasoning, the information block its
observation. A search with no information after it (the rollout stopped) is kept in
the metadata; the answer is the outcome's note. The system and user text (the
instructions and the question) are the environment. A rollout without an assistant
part is quarantined. Domain ``search``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from agentworld.data.formats.base import Head, Item, Unit, guarded
from agentworld.schema import Outcome, RecordError, ToolCall, Trajectory, Turn, render_tool_call

FORMAT = "search_r1"
_ROLLOUT = re.compile(r"<\|im_start\|>system\b")
_PART = re.compile(r"<\|im_start\|>(\w+)\n?(.*?)(?:<\|im_end\|>|(?=<\|im_start\|>)|\Z)", re.S)
_SEARCH = re.compile(r"<search>(.*?)</search>", re.S)
_INFO = re.compile(r"\s*<information>(.*?)</information>", re.S)
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.S)


def detect(path: str, head: Head) -> bool:
    return "<|im_start|>" in head.text and "<search>" in head.text


def read(unit: Unit) -> Iterator[Item]:
    text = unit.read_text()
    starts = [m.start() for m in _ROLLOUT.finditer(text)] or [0]
    for k, start in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else len(text)
        line = text.count("\n", 0, start) + 1
        yield guarded(
            f"rollout {k} (line {line})",
            lambda s=text[start:end], k=k: build(unit, s, k),
            line=line,
        )


def build(unit: Unit, text: str, k: int) -> Trajectory:
    parts = [(m.group(1), m.group(2)) for m in _PART.finditer(text)]
    assistant = "".join(body for role, body in parts if role == "assistant")
    if not any(role == "assistant" for role, _ in parts):
        raise RecordError("no assistant part in the rollout")
    environment = "\n\n".join(body.strip() for role, body in parts if role != "assistant")
    turns, pending, pos = [], [], 0
    for m in _SEARCH.finditer(assistant):
        if m.start() < pos:
            continue  # inside an information block already read
        info = _INFO.match(assistant, m.end())
        query = m.group(1).strip()
        if info is None:
            pending.append(query)
            pos = m.end()
            continue
        call = ToolCall(name="search", arguments={"query": query})
        reasoning = assistant[pos : m.start()].strip()
        turns.append(
            Turn(
                action=render_tool_call(call),
                observation=info.group(1).strip(),
                reasoning=reasoning or None,
                tool_call=call,
            )
        )
        pos = info.end()
    answer = _ANSWER.search(assistant, pos)
    return Trajectory(
        id=f"{unit.label}#{k}",
        domain="search",
        source=unit.source(FORMAT),
        environment=environment,
        turns=tuple(turns),
        outcome=Outcome(note=f"answer: {answer.group(1).strip()}") if answer else None,
        metadata={"format": FORMAT, "unanswered_searches": pending},
    )
