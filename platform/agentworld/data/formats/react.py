"""ReAct logs as plain text (Reflexion's HotpotQA runs): episodes of ``Question:``,
then ``Thought n:``, ``Action n:``, ``Observation n:`` lines, an observation running on
over following lines until the next header; ``BEGIN CORRECT / INCORRECT / HALTED
AGENTS`` banners group the episodes by how they ended.

Each ``Action n`` with its ``Observation n`` is one turn: the action as written
(``Search[Jonny Craig]``) and as a tool call (``Search`` with its argument), ``Thought n``
its reasoning. An action without an observation is kept in the metadata. The question
is the environment. Outcome: the group (correct = success; halted says so). Domain
``search`` (the tools search and look up an encyclopedia).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from agentworld.data.formats.base import Head, Item, Unit, guarded
from agentworld.schema import Outcome, RecordError, ToolCall, Trajectory, Turn

FORMAT = "react"
_HEADER = re.compile(r"^(Thought|Action|Observation) (\d+):\s?(.*)$")
_BANNER = re.compile(r"^-+ BEGIN (\w+) AGENTS -+$")
_CALL = re.compile(r"^(\w+)\[(.*)\]$", re.S)
_DETECT = re.compile(r"^Thought 1:.*^Action 1:", re.S | re.M)


def detect(path: str, head: Head) -> bool:
    return bool(_DETECT.search(head.text)) and "Observation 1:" in head.text


@dataclass
class _Episode:
    line: int
    question: str
    group: str | None
    fields: dict[tuple[str, int], list[str]] = field(default_factory=dict)
    order: list[int] = field(default_factory=list)


def read(unit: Unit) -> Iterator[Item]:
    for ep in episodes(unit.read_text()):
        yield guarded(f"line {ep.line}", lambda e=ep: build(unit, e), line=ep.line)


def episodes(text: str) -> Iterator[_Episode]:
    group, ep, current = None, None, None
    for n, line in enumerate(text.splitlines(), start=1):
        banner = _BANNER.match(line.strip())
        if banner or line.startswith("Question:"):
            if ep is not None:
                yield ep
            ep, current = None, None
            if banner:
                group = banner.group(1).lower()
            else:
                ep = _Episode(n, line.removeprefix("Question:").strip(), group)
            continue
        header = _HEADER.match(line)
        if ep is not None and header:
            kind, step = header.group(1), int(header.group(2))
            current = ep.fields.setdefault((kind, step), [])
            current.append(header.group(3))
            if step not in ep.order:
                ep.order.append(step)
        elif ep is not None and current is not None:
            current.append(line)
    if ep is not None:
        yield ep


def build(unit: Unit, ep: _Episode) -> Trajectory:
    turns, unanswered = [], []
    for step in ep.order:
        action = _text(ep, "Action", step)
        if action is None:
            continue
        observation = _text(ep, "Observation", step)
        if observation is None:
            unanswered.append(action)
            continue
        turns.append(
            Turn(
                action=action,
                observation=observation,
                reasoning=_text(ep, "Thought", step),
                tool_call=_call(action),
            )
        )
    if not turns and not unanswered:
        raise RecordError("no Action n / Observation n lines after the question")
    return Trajectory(
        id=f"{unit.label}#{ep.line}",
        domain="search",
        source=unit.source(FORMAT),
        environment=f"Question: {ep.question}",
        turns=tuple(turns),
        outcome=_outcome(ep.group),
        metadata={"format": FORMAT, "group": ep.group, "unanswered": unanswered},
    )


def _text(ep: _Episode, kind: str, step: int) -> str | None:
    lines = ep.fields.get((kind, step))
    return None if lines is None else "\n".join(lines).strip()


def _call(action: str) -> ToolCall | None:
    match = _CALL.match(action)
    return ToolCall(name=match.group(1), arguments={"argument": match.group(2)}) if match else None


def _outcome(group: str | None) -> Outcome | None:
    if group == "correct":
        return Outcome(success=True)
    if group in ("incorrect", "halted"):
        return Outcome(success=False, note=group)
    return None
