"""SWE-agent ``.traj`` files: ``{environment, trajectory, history, info}``.

Each step of ``trajectory`` is one turn: its ``action`` (a command of SWE-agent's
interface), the ``observation`` that followed, the ``thought`` before it. The
``history`` gives the environment text (the system prompt and the task, without the
demonstrations SWE-agent shows the model first) and, for function-calling agents, the
tool call behind each action (the n-th assistant message answers the n-th step).

Domain: ``swe``; ``terminal`` for a CTF (EnIGMA) run, told by its environment's name
or by its submission being a flag (``FLAG{...}``) rather than a patch. The outcome is
the exit status and the submission SWE-agent reports (a run is not scored here).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from agentworld.data.formats.base import (
    Head,
    Item,
    Unit,
    expect,
    guarded,
    has_keys,
    load_json,
    text_of,
)
from agentworld.data.formats.messages import parse_call
from agentworld.schema import Outcome, Trajectory, Turn

FORMAT = "swe_agent"
_FLAG = re.compile(r"^\s*[\w-]*\{[^{}\n]+\}\s*$")


def detect(path: str, head: Head) -> bool:
    return path.endswith(".traj") or has_keys(head, "trajectory", "history", "info")


def read(unit: Unit) -> Iterator[Item]:
    yield guarded("file", lambda: build(unit, load_json(unit)))


def build(unit: Unit, doc: Any) -> Trajectory:
    doc = expect(doc, dict, "<file>")
    steps = expect(doc.get("trajectory"), list, "trajectory")
    history = expect(doc.get("history", []), list, "history")
    info = expect(doc.get("info") or {}, dict, "info")
    calls = _tool_calls(history)
    turns = [
        _turn(s, f"trajectory[{i}]", calls[i] if i < len(calls) else None)
        for i, s in enumerate(steps)
    ]
    env_name = doc.get("environment")
    return Trajectory(
        id=unit.label,
        domain="terminal" if is_ctf(env_name, info) else "swe",
        source=unit.source(FORMAT),
        environment=_environment(history),
        turns=tuple(turns),
        outcome=Outcome(note=_note(info)),
        metadata={
            "format": FORMAT,
            "environment_name": env_name if isinstance(env_name, str) else None,
            "submission": info.get("submission"),
            "demonstrations_left_out": sum(
                1 for m in history if isinstance(m, dict) and m.get("is_demo")
            ),
        },
    )


def is_ctf(env_name: Any, info: dict) -> bool:
    """A CTF run: its environment says so, or what it submitted is a flag."""
    if isinstance(env_name, str) and "ctf" in env_name.lower():
        return True
    submission = info.get("submission")
    return isinstance(submission, str) and bool(_FLAG.match(submission))


def _turn(step: Any, where: str, call: dict | None) -> Turn:
    step = expect(step, dict, where)
    action = expect(step.get("action"), str, f"{where}.action")
    duration = step.get("execution_time")
    state = step.get("state")
    return Turn(
        action=action.rstrip("\n"),
        observation=expect(step.get("observation") or "", str, f"{where}.observation"),
        reasoning=step.get("thought") or None,
        tool_call=parse_call(call, f"{where}.tool_call") if call else None,
        duration_s=float(duration)
        if isinstance(duration, int | float) and not isinstance(duration, bool)
        else None,
        metadata={"state": state} if state else {},
    )


def _tool_calls(history: list) -> list[dict | None]:
    """The first tool call of each non-demonstration assistant message, in order."""
    out: list[dict | None] = []
    for m in history:
        if isinstance(m, dict) and m.get("role") == "assistant" and not m.get("is_demo"):
            calls = m.get("tool_calls")
            out.append(calls[0] if isinstance(calls, list) and calls else None)
    return out


def _environment(history: list) -> str:
    """The messages before the first action, without demonstrations."""
    parts = []
    for i, m in enumerate(history):
        m = expect(m, dict, f"history[{i}]")
        if m.get("role") == "assistant":
            break
        if not m.get("is_demo"):
            parts.append(text_of(m.get("content"), f"history[{i}].content"))
    return "\n\n".join(p for p in parts if p)


def _note(info: dict) -> str | None:
    status = info.get("exit_status")
    return f"exit_status: {status}" if isinstance(status, str) else None
