"""InterCode results: an object of tasks by id, each ``{environment, dataset, task_id,
query, turn_history: {actions, observations, rewards, valid_action}, summary}``.

The i-th action and the i-th observation are a turn (its reward and validity in the
turn's metadata); the task's query is the environment text. Domain ``terminal`` (bash,
and the interpreters InterCode also drives). Outcome: the best reward of the episode,
a success at 1.0. A task whose lists differ in length is quarantined, the others read.
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
from agentworld.schema import Outcome, RecordError, Trajectory, Turn

FORMAT = "intercode"


def detect(path: str, head: Head) -> bool:
    return has_keys(head, "turn_history")


def read(unit: Unit) -> Iterator[Item]:
    for member in iter_container(unit.read_text()):
        if isinstance(member, Problem):
            yield member
            continue
        key, task = member
        yield guarded(f"task [{key!r}]", lambda k=key, t=task: build(unit, str(k), t))


def build(unit: Unit, key: str, task: Any) -> Trajectory:
    task = expect(task, dict, "task")
    history = expect(task.get("turn_history"), dict, "turn_history")
    actions = expect(history.get("actions"), list, "turn_history.actions")
    observations = expect(history.get("observations"), list, "turn_history.observations")
    if len(actions) != len(observations):
        raise RecordError(
            f"{len(actions)} actions but {len(observations)} observations", field="turn_history"
        )
    rewards = history.get("rewards") or []
    valid = history.get("valid_action") or []
    turns = tuple(
        Turn(
            action=expect(a, str, f"turn_history.actions[{i}]"),
            observation=_text(o, f"turn_history.observations[{i}]"),
            metadata=_step_meta(rewards, valid, i),
        )
        for i, (a, o) in enumerate(zip(actions, observations, strict=True))
    )
    env = task.get("environment")
    summary = task.get("summary") if isinstance(task.get("summary"), dict) else {}
    return Trajectory(
        id=f"{unit.label}#{key}",
        domain="terminal",
        source=unit.source(FORMAT),
        environment=_environment(task),
        turns=turns,
        outcome=_outcome(summary.get("max_reward", rewards[-1] if rewards else None)),
        metadata={"format": FORMAT, "environment_name": env if isinstance(env, str) else None},
    )


def _text(value: Any, where: str) -> str:
    """An observation: text, or a value (SQL rows) as its text."""
    if value is None:
        return ""
    return value if isinstance(value, str) else str(value)


def _step_meta(rewards: list, valid: list, i: int) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    if i < len(rewards) and isinstance(rewards[i], int | float):
        meta["reward"] = rewards[i]
    if i < len(valid) and isinstance(valid[i], bool):
        meta["valid_action"] = valid[i]
    return meta


def _environment(task: dict) -> str:
    env = task.get("environment") or "interactive shell"
    query = expect(task.get("query", ""), str, "query")
    return f"InterCode environment: {env}\nTask: {query}"


def _outcome(reward: Any) -> Outcome | None:
    if isinstance(reward, bool) or not isinstance(reward, int | float):
        return None
    return Outcome(reward=float(reward), success=reward >= 1.0)
