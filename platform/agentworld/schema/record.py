"""The trajectory record: every other format is an adapter to and from it.

A trajectory is one episode of an agent acting in an environment: the environment text
(tool definitions, initial state, task), then ordered turns, each an action and the
observation that followed.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from agentworld.schema.domains import get_domain
from agentworld.schema.errors import (
    InvalidValueError,
    MalformedJSONError,
    MissingFieldError,
    RecordError,
    WrongTypeError,
)

RECORD_VERSION = 1


@dataclass(frozen=True, kw_only=True)
class ToolCall:
    """A structured tool call, when the action is one (MCP, chat with tool calls)."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    call_id: str | None = None


@dataclass(frozen=True, kw_only=True)
class Turn:
    """One step: the agent's action and the environment's observation that followed."""

    action: str
    """What the agent did, as text (a command, a rendered tool call, a UI action)."""
    observation: str
    """What the environment answered, as the agent saw it (no evaluation marker)."""
    reasoning: str | None = None
    """The agent's reasoning or message before the action, if recorded."""
    tool_call: ToolCall | None = None
    duration_s: float | None = None
    """Wall time the environment took to answer."""
    exit_code: int | None = None
    screenshot: str | None = None
    """A URL or path of a screenshot taken after the action."""
    metadata: dict[str, Any] = field(default_factory=dict)
    simulator_reasoning: str | None = None
    """The world model's reasoning that leads from the session so far and the action to
    this observation (written by a reasoning simulator or distilled from a teacher,
    jobs/distill.py); not the agent's ``reasoning``. SFT targets it as a think block
    before the observation; scoring never sees it."""


@dataclass(frozen=True, kw_only=True)
class Outcome:
    success: bool | None = None
    reward: float | None = None
    note: str | None = None


@dataclass(frozen=True, kw_only=True)
class Trajectory:
    id: str
    domain: str
    source: str
    """Where the trajectory came from: a collector name, a dataset name, a file."""
    environment: str
    """System text: tool definitions, initial state, task."""
    turns: tuple[Turn, ...]
    outcome: Outcome | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    """Adapter-specific extras (e.g. AgentWorldBench task prefix); JSON values only."""

    def __post_init__(self) -> None:
        validate(self)

    # ---- JSON form -------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["turns"] = [_prune(t) for t in d["turns"]]
        d["version"] = RECORD_VERSION
        return d

    @classmethod
    def from_dict(cls, d: Any) -> Trajectory:
        return trajectory_from_dict(d)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, sort_keys=True)

    @classmethod
    def from_json(cls, line: str | bytes) -> Trajectory:
        return trajectory_from_dict(loads_json(line))

    def text(self) -> str:
        """All text of the trajectory, for dedup and decontamination."""
        parts = [self.environment]
        for t in self.turns:
            parts.append(t.action)
            parts.append(t.observation)
        return "\n".join(parts)


def _prune(turn: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in turn.items() if v is not None and v != {}}


def loads_json(line: str | bytes) -> Any:
    """Parse one JSON document; bad UTF-8 and bad JSON raise MalformedJSONError."""
    if isinstance(line, bytes):
        try:
            line = line.decode("utf-8")
        except UnicodeDecodeError as e:
            raise MalformedJSONError(f"invalid UTF-8 at byte {e.start}") from None
    try:
        return json.loads(line)
    except json.JSONDecodeError as e:
        raise MalformedJSONError(f"malformed JSON: {e.msg} at column {e.colno}") from None
    except RecursionError:  # json's own limit on nesting; a record never nests that deep
        raise MalformedJSONError("malformed JSON: nested too deeply") from None


# ---- validation ------------------------------------------------------------------------


def _at(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _require(d: dict, key: str, types: type | tuple[type, ...], path: str = "") -> Any:
    """``d[key]`` of one of ``types``; ``path`` names ``d`` (the field named in an
    error is built only when there is one: validation runs on every input record)."""
    value = d.get(key)
    if value is None:
        raise MissingFieldError("required field is missing", field=_at(path, key))
    if type(value) is types:  # the common case, checked first
        return value
    return _typed(value, types, _at(path, key))


def _optional(d: dict, key: str, types: type | tuple[type, ...], path: str = "") -> Any:
    value = d.get(key)
    if value is None or type(value) is types:
        return value
    return _typed(value, types, _at(path, key))


def _typed(value: Any, types: type | tuple[type, ...], path: str) -> Any:
    if isinstance(value, bool) and bool not in (types if isinstance(types, tuple) else (types,)):
        raise WrongTypeError(f"expected {_names(types)}, got bool", field=path)
    if not isinstance(value, types):
        raise WrongTypeError(f"expected {_names(types)}, got {type(value).__name__}", field=path)
    return value


def _names(types: type | tuple[type, ...]) -> str:
    types = types if isinstance(types, tuple) else (types,)
    return " or ".join(t.__name__ for t in types)


def _tool_call_from_dict(d: Any, path: str) -> ToolCall | None:
    if d is None:
        return None
    _typed(d, dict, path)
    args = d.get("arguments") or {}
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except json.JSONDecodeError:
            raise WrongTypeError(
                "arguments is not a JSON object", field=f"{path}.arguments"
            ) from None
    return ToolCall(
        name=_require(d, "name", str, path),
        arguments=_typed(args, dict, f"{path}.arguments"),
        call_id=_optional(d, "call_id", str, path),
    )


def _turn_from_dict(d: Any, path: str) -> Turn:
    if type(d) is not dict:
        _typed(d, dict, path)
    duration = _optional(d, "duration_s", (int, float), path)
    call = d.get("tool_call")
    return Turn(
        action=_require(d, "action", str, path),
        observation=_require(d, "observation", str, path),
        reasoning=_optional(d, "reasoning", str, path),
        tool_call=None if call is None else _tool_call_from_dict(call, f"{path}.tool_call"),
        duration_s=None if duration is None else float(duration),
        exit_code=_optional(d, "exit_code", int, path),
        screenshot=_optional(d, "screenshot", str, path),
        metadata=_optional(d, "metadata", dict, path) or {},
        simulator_reasoning=_optional(d, "simulator_reasoning", str, path),
    )


def _outcome_from_dict(d: Any) -> Outcome | None:
    if d is None:
        return None
    _typed(d, dict, "outcome")
    reward = _optional(d, "reward", (int, float), "outcome")
    return Outcome(
        success=_optional(d, "success", bool, "outcome"),
        reward=None if reward is None else float(reward),
        note=_optional(d, "note", str, "outcome"),
    )


def trajectory_from_dict(d: Any) -> Trajectory:
    """Build and validate a trajectory from its JSON form; errors name the field."""
    _typed(d, dict, "<record>")
    turns = _require(d, "turns", list)
    return Trajectory(
        id=_require(d, "id", str),
        domain=_require(d, "domain", str),
        source=_require(d, "source", str),
        environment=_require(d, "environment", str),
        turns=tuple(_turn_from_dict(t, f"turns[{i}]") for i, t in enumerate(turns)),
        outcome=_outcome_from_dict(d.get("outcome")),
        metadata=_optional(d, "metadata", dict) or {},
    )


def validate(traj: Trajectory) -> None:
    """Check invariants that the types alone do not: raises a RecordError naming the field."""
    if not traj.id.strip():
        raise InvalidValueError("id must not be empty", field="id")
    get_domain(traj.domain)
    if not traj.turns:
        raise InvalidValueError("a trajectory needs at least one turn", field="turns")
    for i, turn in enumerate(traj.turns):
        if not isinstance(turn, Turn):
            raise WrongTypeError(f"expected Turn, got {type(turn).__name__}", field=f"turns[{i}]")
    try:
        json.dumps(traj.metadata)
    except (TypeError, ValueError) as e:
        raise WrongTypeError(f"metadata must be JSON-serializable: {e}", field="metadata") from None


__all__ = [
    "RECORD_VERSION",
    "Outcome",
    "RecordError",
    "ToolCall",
    "Trajectory",
    "Turn",
    "loads_json",
    "trajectory_from_dict",
    "validate",
]
