"""Adapter between the record and AgentWorldBench rows (the published evaluation format).

A row evaluates one turn of one trajectory: ``prompt`` holds every turn's action,
``response`` every turn's observation (each prefixed with OBSERVATION_MARKER),
``current_prompt`` the action of turn ``turn_idx`` (1-based), ``system_str`` the
environment text, ``task`` the domain (possibly ``prefix/domain``).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from agentworld.schema.domains import normalize_domain
from agentworld.schema.errors import InvalidValueError, MissingFieldError, WrongTypeError
from agentworld.schema.record import Trajectory, Turn

OBSERVATION_MARKER = "**Environment Observation:**"
ROW_FIELDS = (
    "task",
    "id",
    "prompt",
    "response",
    "current_prompt",
    "system_str",
    "turn_idx",
    "total_turns",
)


def strip_marker(text: str) -> str:
    """Remove a leading observation marker and the one separator after it."""
    body = text.lstrip()
    if not body.startswith(OBSERVATION_MARKER):
        return text
    body = body[len(OBSERVATION_MARKER) :]
    if body[:1] in ("\n", " "):
        body = body[1:]
    return body


def add_marker(text: str) -> str:
    return f"{OBSERVATION_MARKER}\n{text}"


def turn_prompt(n: int, action: str) -> str:
    """Turn ``n``'s user message as the reference writes it: ``### Turn n`` and
    ``**Action:**`` above the action. An action that already carries the header (a record
    imported from AgentWorldBench rows) is kept as it is."""
    if action.startswith("### Turn "):
        return action
    return f"### Turn {n}\n**Action:**\n{action}"


def reference_system(template: str, environment: str) -> str:
    """The reference's per-domain system prompt, then the session's own environment text
    (tools, initial state, control), which the template cannot know."""
    return f"{template}\n\n{environment}" if environment.strip() else template


def load_system_prompt(prompts_dir: str, domain: str) -> str:
    """``<prompts_dir>/<domain>/system_prompt.txt``, the layout of the reference's released
    ``prompts/`` folder; a missing file raises a RecordError naming it."""
    path = Path(prompts_dir) / normalize_domain(domain) / "system_prompt.txt"
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InvalidValueError(
            f"no system prompt for domain {domain!r}: {path} does not exist", field="domain"
        ) from None


def validate_row(row: Any) -> dict[str, Any]:
    """Check one AgentWorldBench row; raises a RecordError naming the field."""
    if not isinstance(row, dict):
        raise WrongTypeError(f"expected an object, got {type(row).__name__}", field="<row>")
    for key in ROW_FIELDS:
        if row.get(key) is None:
            raise MissingFieldError("required field is missing", field=key)
    for key in ("task", "id", "current_prompt", "system_str"):
        if not isinstance(row[key], str):
            raise WrongTypeError(f"expected str, got {type(row[key]).__name__}", field=key)
    for key in ("prompt", "response"):
        value = row[key]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise WrongTypeError("expected a list of strings", field=key)
    for key in ("turn_idx", "total_turns"):
        if isinstance(row[key], bool) or not isinstance(row[key], int):
            raise WrongTypeError(f"expected int, got {type(row[key]).__name__}", field=key)
    total = row["total_turns"]
    if len(row["prompt"]) != total or len(row["response"]) != total:
        raise InvalidValueError(
            f"prompt has {len(row['prompt'])} and response {len(row['response'])} entries, "
            f"total_turns is {total}",
            field="total_turns",
        )
    if not 1 <= row["turn_idx"] <= total:
        raise InvalidValueError(
            f"turn_idx {row['turn_idx']} is outside 1..{total}", field="turn_idx"
        )
    if row["current_prompt"] != row["prompt"][row["turn_idx"] - 1]:
        raise InvalidValueError(
            "current_prompt differs from prompt[turn_idx-1]", field="current_prompt"
        )
    return row


def rows_to_trajectories(
    rows: list[dict[str, Any]], *, source: str = "agentworldbench"
) -> list[Trajectory]:
    """Group rows by id into trajectories; the evaluated turn indices are kept in metadata."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        groups[validate_row(row)["id"]].append(row)
    return [_group_to_trajectory(group, source) for group in groups.values()]


def row_to_trajectory(row: dict[str, Any], *, source: str = "agentworldbench") -> Trajectory:
    return _group_to_trajectory([validate_row(row)], source)


def _group_to_trajectory(group: list[dict], source: str) -> Trajectory:
    first = group[0]
    for row in group[1:]:
        for key in ("task", "prompt", "response", "system_str"):
            if row[key] != first[key]:
                raise InvalidValueError(
                    f"rows with id {first['id']!r} disagree on {key}", field=key
                )
    turns = tuple(
        Turn(action=a, observation=strip_marker(o))
        for a, o in zip(first["prompt"], first["response"], strict=True)
    )
    return Trajectory(
        id=first["id"],
        domain=normalize_domain(first["task"]),
        source=source,
        environment=first["system_str"],
        turns=turns,
        metadata={"awb": {"task": first["task"], "turn_idx": [r["turn_idx"] for r in group]}},
    )


def trajectory_to_rows(
    traj: Trajectory, *, turn_idxs: list[int] | None = None, system_prompt: str | None = None
) -> list[dict[str, Any]]:
    """One row per evaluated turn (all turns unless the record or caller says otherwise).

    With ``system_prompt`` (a domain's template from the reference's ``prompts/``) the row
    is written as the reference writes its own: ``system_str`` is that template followed
    by the environment text, each prompt is headed ``### Turn N`` / ``**Action:**``.
    """
    awb = traj.metadata.get("awb", {})
    if turn_idxs is None:
        turn_idxs = awb.get("turn_idx") or list(range(1, len(traj.turns) + 1))
    prompts = [t.action for t in traj.turns]
    system = traj.environment
    if system_prompt is not None:
        prompts = [turn_prompt(n, a) for n, a in enumerate(prompts, start=1)]
        system = reference_system(system_prompt, traj.environment)
    responses = [add_marker(t.observation) for t in traj.turns]
    rows = []
    for k in turn_idxs:
        if not 1 <= k <= len(traj.turns):
            raise InvalidValueError(
                f"turn_idx {k} is outside 1..{len(traj.turns)}", field="turn_idx"
            )
        rows.append(
            {
                "task": awb.get("task", traj.domain),
                "id": traj.id,
                "prompt": prompts,
                "response": responses,
                "current_prompt": prompts[k - 1],
                "system_str": system,
                "turn_idx": k,
                "total_turns": len(traj.turns),
            }
        )
    return rows
