"""OpenHands event streams: evaluation ``output.jsonl`` records (``{instance_id,
history, test_result, error, ...}``, one per line) and bare trajectory JSON (the list
of events itself).

An event is an action (``action``, ``args``) or an observation (``observation``,
``content``, ``cause`` = the id of the action it answers). Each observation caused by
an agent's action is one turn: the action's tool call (``tool_call_metadata``: the
function the model called and its arguments) or, without one, the action and its args;
its ``thought`` the reasoning; the observation's text, and its exit code when it ran a
command. An observation whose ``cause`` names no action quarantines the episode: its
pairing is broken. Observations with no cause (an error the runtime raised about a
malformed call) and the user's recall of workspace context are not turns; they are
counted in the metadata. The system prompt and the task are the environment text.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from agentworld.data.formats.base import (
    Head,
    Item,
    Problem,
    Unit,
    expect,
    guarded,
    has_keys,
    iter_container,
)
from agentworld.schema import Outcome, RecordError, ToolCall, Trajectory, Turn, render_tool_call

FORMAT = "openhands"
CLIPPED = "<response clipped>"
"""OpenHands' mark on an observation it cut to its output limit."""


def detect(path: str, head: Head) -> bool:
    if has_keys(head, "instance_id", "history"):
        return True
    return (
        head.text.lstrip().startswith("[")
        and has_keys(head, "id", "source", "timestamp")
        and (has_keys(head, "action") or has_keys(head, "observation"))
    )


def claims_line(obj: Any) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("history"), list) and "instance_id" in obj


def from_line(obj: Any, source: str, position: str) -> Trajectory:
    label = source.split(":", 1)[-1]
    return build(obj, source=source, id=f"{label}#{_native_id(obj, position)}")


def read(unit: Unit) -> Iterator[Item]:
    text = unit.read_text()
    source = unit.source(FORMAT)
    if unit.url.endswith((".jsonl", ".jsonl.gz")) or not text.lstrip().startswith("["):
        yield from _read_lines(text, unit, source)
        return
    events, broken = [], None
    for member in iter_container(text):
        if isinstance(member, Problem):
            broken = member
        else:
            events.append(member[1])
    if broken is not None:  # a stream cut short cannot be paired to its end
        yield broken
        return
    yield guarded("file", lambda: build({"history": events}, source=source, id=unit.label))


def _read_lines(text: str, unit: Unit, source: str) -> Iterator[Item]:
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            yield Problem(
                position=f"line {n}", reason=f"malformed JSON: {e.msg} at column {e.colno}", line=n
            )
            continue
        yield guarded(f"line {n}", lambda o=obj, n=n: from_line(o, source, f"line {n}"), line=n)


def _native_id(obj: Any, position: str) -> str:
    native = obj.get("instance_id") if isinstance(obj, dict) else None
    return str(native) if native is not None else position


def build(doc: Any, *, source: str, id: str) -> Trajectory:
    doc = expect(doc, dict, "<record>")
    events = expect(doc.get("history"), list, "history")
    by_id = {}
    for i, e in enumerate(events):
        e = expect(e, dict, f"history[{i}]")
        if "id" in e:
            by_id[e["id"]] = e
    turns, uncaused, context = [], 0, 0
    for i, e in enumerate(events):
        if "observation" not in e:
            continue
        cause = e.get("cause")
        if cause is None:
            uncaused += 1
            continue
        action = by_id.get(cause)
        if action is None or "action" not in action:
            raise RecordError(
                f"observation id {e.get('id')} refers to no action (cause {cause})",
                field=f"history[{i}]",
            )
        if action.get("source") != "agent":
            context += 1  # the user's side (recall of workspace context), not the agent's act
            continue
        turns.append(_turn(action, e, f"history[{i}]"))
    error = doc.get("error")
    cut = sum(1 for t in turns if "cut_by_source" in t.metadata)
    return Trajectory(
        id=id,
        domain="swe",
        source=source,
        environment=_environment(events, doc),
        turns=tuple(turns),
        outcome=Outcome(note=f"error: {error}") if isinstance(error, str) and error else None,
        metadata={
            "format": FORMAT,
            "uncaused_observations": uncaused,
            "context_observations": context,
            "observations_cut_by_source": cut,
            "final": _final(events),
        },
    )


def _turn(action: dict, obs: dict, where: str) -> Turn:
    args = action.get("args") if isinstance(action.get("args"), dict) else {}
    call = _tool_call(action) or ToolCall(
        name=str(action.get("action")), arguments={k: v for k, v in args.items() if k != "thought"}
    )
    content = expect(obs.get("content", ""), str, f"{where}.content")
    extras = obs.get("extras") if isinstance(obs.get("extras"), dict) else {}
    meta = extras.get("metadata") if isinstance(extras.get("metadata"), dict) else {}
    exit_code = meta.get("exit_code")
    turn_meta: dict[str, Any] = {
        "action": action.get("action"),
        "observation": obs.get("observation"),
    }
    if CLIPPED in content:
        turn_meta["cut_by_source"] = CLIPPED
    return Turn(
        action=render_tool_call(call),
        observation=content,
        reasoning=_thought(action, args),
        tool_call=call,
        exit_code=exit_code
        if isinstance(exit_code, int) and not isinstance(exit_code, bool)
        else None,
        metadata=turn_meta,
    )


def _tool_call(action: dict) -> ToolCall | None:
    """The call the model made for this action, from the response it came in."""
    meta = action.get("tool_call_metadata")
    if not isinstance(meta, dict):
        return None
    call_id = meta.get("tool_call_id")
    try:
        calls = meta["model_response"]["choices"][0]["message"]["tool_calls"] or []
    except (KeyError, IndexError, TypeError):
        calls = []
    for c in calls:
        if isinstance(c, dict) and c.get("id") == call_id and isinstance(c.get("function"), dict):
            args = c["function"].get("arguments") or "{}"
            try:
                parsed = json.loads(args) if isinstance(args, str) else args
            except json.JSONDecodeError:
                parsed = {"_raw": args}
            return ToolCall(
                name=str(c["function"].get("name") or meta.get("function_name")),
                arguments=parsed if isinstance(parsed, dict) else {"_raw": args},
                call_id=call_id if isinstance(call_id, str) else None,
            )
    name = meta.get("function_name")
    return (
        ToolCall(name=name, arguments={}, call_id=call_id if isinstance(call_id, str) else None)
        if isinstance(name, str)
        else None
    )


def _thought(action: dict, args: dict) -> str | None:
    thought = args.get("thought")
    if isinstance(thought, str) and thought.strip():
        return thought
    try:
        content = action["tool_call_metadata"]["model_response"]["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        return None
    return content if isinstance(content, str) and content.strip() else None


def _environment(events: list, doc: dict) -> str:
    """The system prompt, the tools it offers, and the user's first message (the task)."""
    parts = []
    for e in events:
        if e.get("action") == "system" and isinstance(e.get("args"), dict):
            parts.append(str(e["args"].get("content") or e.get("message") or ""))
            if e["args"].get("tools"):
                parts.append("Tools: " + json.dumps(e["args"]["tools"], ensure_ascii=False))
        elif e.get("action") == "message" and e.get("source") == "user":
            parts.append(str(e.get("message") or (e.get("args") or {}).get("content") or ""))
            break
    if not parts and isinstance(doc.get("instruction"), str):
        parts.append(doc["instruction"])
    return "\n\n".join(p for p in parts if p)


def _final(events: list) -> str | None:
    for e in reversed(events):
        if e.get("action") == "finish":
            args = e.get("args") if isinstance(e.get("args"), dict) else {}
            text = args.get("final_thought") or args.get("message") or e.get("message")
            return text if isinstance(text, str) else None
    return None
