"""OpenAI chat transcripts with ``tool_calls`` and ``role: tool`` messages: tau-bench's
result lists (``[{task_id, reward, info, traj}]``), a bare message list (MiroFlow's
message history), or an object holding one under ``traj``, ``messages`` or
``message_history``.

Each transcript is one record (agentworld.data.formats.messages for the mapping). Its
domain is ``search`` when every tool it calls searches or fetches, else ``mcp``; the
record's outcome is the reward the file gives (tau-bench: 1.0 is a success).
"""

from __future__ import annotations

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
from agentworld.data.formats.messages import chat_turns, domain_from_tools
from agentworld.schema import Outcome, RecordError, Trajectory

FORMAT = "openai_chat"
TRANSCRIPT_KEYS = ("traj", "messages", "message_history", "conversation")


def detect(path: str, head: Head) -> bool:
    text = head.text.lstrip()
    return text[:1] in "[{" and has_keys(head, "tool_calls", "role")


def read(unit: Unit) -> Iterator[Item]:
    text = unit.read_text()
    members = list(iter_container(text))
    values = [m for m in members if not isinstance(m, Problem)]
    one = text.lstrip().startswith("{") or (values and _is_message(values[0][1]))
    if not one:  # a list of episodes: each its own record, those before a break kept
        for m in members:
            yield (
                m
                if isinstance(m, Problem)
                else guarded(f"record [{m[0]}]", lambda v=m[1], k=m[0]: build(unit, v, str(k)))
            )
        return
    broken = [m for m in members if isinstance(m, Problem)]
    if broken:  # one transcript: a break anywhere leaves no whole episode
        yield broken[0]
        return
    if text.lstrip().startswith("{"):
        episode = dict(values)
    else:
        episode = {"messages": [v for _, v in values]}
    yield guarded("file", lambda: build(unit, episode, "0"))


def _is_message(value: Any) -> bool:
    return isinstance(value, dict) and "role" in value


def transcript(episode: dict) -> Any:
    for key in TRANSCRIPT_KEYS:
        if key in episode:
            return episode[key]
    raise RecordError(f"no transcript: expected one of {', '.join(TRANSCRIPT_KEYS)}")


def build(unit: Unit, episode: Any, key: str) -> Trajectory:
    episode = expect(episode, dict, "record")
    environment, turns, chat = chat_turns(transcript(episode))
    meta: dict[str, Any] = {"format": FORMAT, "chat": chat}
    native = episode.get("task_id", key)
    if "trial" in episode:
        meta["trial"] = episode["trial"]
    if "info" in episode:
        meta["info"] = episode["info"]
    return Trajectory(
        id=f"{unit.label}#{native}" + (f"-{episode['trial']}" if "trial" in episode else ""),
        domain=domain_from_tools([t.tool_call.name for t in turns if t.tool_call]),
        source=unit.source(FORMAT),
        environment=environment,
        turns=tuple(turns),
        outcome=_outcome(episode.get("reward")),
        metadata=meta,
    )


def _outcome(reward: Any) -> Outcome | None:
    if isinstance(reward, bool) or not isinstance(reward, int | float):
        return None
    return Outcome(reward=float(reward), success=reward >= 1.0)
