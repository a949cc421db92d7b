"""Arrow form of the record, for Parquet shards and Ray Data blocks.

Free-form dicts (metadata, tool arguments) are stored as JSON strings so that every
block has one fixed schema, whatever the records hold.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

from agentworld.schema.record import Trajectory, trajectory_from_dict

TURN_TYPE = pa.struct(
    [
        ("action", pa.string()),
        ("observation", pa.string()),
        ("reasoning", pa.string()),
        ("tool_name", pa.string()),
        ("tool_arguments", pa.string()),
        ("tool_call_id", pa.string()),
        ("duration_s", pa.float64()),
        ("exit_code", pa.int64()),
        ("screenshot", pa.string()),
        ("metadata", pa.string()),
        ("simulator_reasoning", pa.string()),
    ]
)

TRAJECTORY_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("domain", pa.string()),
        ("source", pa.string()),
        ("environment", pa.string()),
        ("turns", pa.list_(TURN_TYPE)),
        ("outcome_success", pa.bool_()),
        ("outcome_reward", pa.float64()),
        ("outcome_note", pa.string()),
        ("metadata", pa.string()),
    ]
)


def to_arrow_row(traj: Trajectory) -> dict[str, Any]:
    """A flat row matching TRAJECTORY_SCHEMA."""
    turns = []
    for t in traj.turns:
        turns.append(
            {
                "action": t.action,
                "observation": t.observation,
                "reasoning": t.reasoning,
                "tool_name": t.tool_call.name if t.tool_call else None,
                "tool_arguments": json.dumps(t.tool_call.arguments, ensure_ascii=False)
                if t.tool_call
                else None,
                "tool_call_id": t.tool_call.call_id if t.tool_call else None,
                "duration_s": t.duration_s,
                "exit_code": t.exit_code,
                "screenshot": t.screenshot,
                "metadata": json.dumps(t.metadata, ensure_ascii=False) if t.metadata else None,
                "simulator_reasoning": t.simulator_reasoning,
            }
        )
    o = traj.outcome
    return {
        "id": traj.id,
        "domain": traj.domain,
        "source": traj.source,
        "environment": traj.environment,
        "turns": turns,
        "outcome_success": o.success if o else None,
        "outcome_reward": o.reward if o else None,
        "outcome_note": o.note if o else None,
        "metadata": json.dumps(traj.metadata, ensure_ascii=False) if traj.metadata else None,
    }


def from_arrow_row(row: dict[str, Any]) -> Trajectory:
    """Inverse of to_arrow_row; validates like the JSON form."""
    turns = []
    for t in row["turns"]:
        turn = {
            k: t.get(k)
            for k in (
                "action",
                "observation",
                "reasoning",
                "simulator_reasoning",
                "duration_s",
                "exit_code",
                "screenshot",
            )
        }
        if t.get("tool_name") is not None:
            turn["tool_call"] = {
                "name": t["tool_name"],
                "arguments": json.loads(t["tool_arguments"] or "{}"),
                "call_id": t.get("tool_call_id"),
            }
        turn["metadata"] = json.loads(t["metadata"]) if t.get("metadata") else {}
        turns.append(turn)
    has_outcome = any(
        row.get(k) is not None for k in ("outcome_success", "outcome_reward", "outcome_note")
    )
    return trajectory_from_dict(
        {
            "id": row["id"],
            "domain": row["domain"],
            "source": row["source"],
            "environment": row["environment"],
            "turns": turns,
            "outcome": {
                "success": row.get("outcome_success"),
                "reward": row.get("outcome_reward"),
                "note": row.get("outcome_note"),
            }
            if has_outcome
            else None,
            "metadata": json.loads(row["metadata"]) if row.get("metadata") else {},
        }
    )


def to_arrow_table(trajs: list[Trajectory]) -> pa.Table:
    return pa.Table.from_pylist([to_arrow_row(t) for t in trajs], schema=TRAJECTORY_SCHEMA)


def from_arrow_table(table: pa.Table) -> list[Trajectory]:
    return [from_arrow_row(r) for r in table.to_pylist()]
