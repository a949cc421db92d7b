"""Evaluation items: one "predict turn k" question each, read from AgentWorldBench files
(``*_test.jsonl``, one per domain), our record shards, or prepare's per-turn samples.

Messages are built as the published evaluation builds them
(``agentworld.schema.awb_row_messages`` / ``predict_turn_messages``). Bad rows are
returned apart with a reason naming the file, line and field; they never stop a read.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any, Literal

from agentworld.io import Rejected, iter_records, list_shards, read_parquet
from agentworld.io.shards import iter_jsonl_lines
from agentworld.schema import (
    InvalidValueError,
    MissingFieldError,
    RecordError,
    Trajectory,
    awb_row_messages,
    loads_json,
    parse_output,
    predict_turn_messages,
)
from agentworld.schema.awb import strip_marker
from agentworld.schema.domains import normalize_domain

InputFormat = Literal["auto", "awb", "record", "samples"]
Message = dict[str, str]


@dataclass(frozen=True, kw_only=True)
class EvalItem:
    key: str
    """``<trajectory id>#<turn_idx>``: unique per item, what resumption tracks."""
    id: str
    task: str
    """AgentWorldBench task name (may be ``prefix/domain``)."""
    domain: str
    turn_idx: int
    """1-based turn whose observation is predicted."""
    total_turns: int | None
    messages: list[Message]
    reference: str
    """The real observation (marker removed)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def item_key(traj_id: str, turn_idx: int) -> str:
    return f"{traj_id}#{turn_idx}"


def prediction_row(item: EvalItem, output: str, finish_reason: str | None) -> dict[str, Any]:
    """An item with its raw output and the observation parsed from it."""

    return {
        **item.to_dict(),
        "output": output,
        "prediction": parse_output(output).observation,
        "finish_reason": finish_reason,
    }


def failure_row(item: EvalItem, error: str, attempts: int) -> dict[str, Any]:
    return {"key": item.key, "domain": item.domain, "error": error, "attempts": attempts}


def items_from_row(row: dict[str, Any]) -> EvalItem:
    """One AgentWorldBench row; raises RecordError naming the field."""

    messages = awb_row_messages(row)  # validates the row
    k = row["turn_idx"]
    return EvalItem(
        key=item_key(row["id"], k),
        id=row["id"],
        task=row["task"],
        domain=normalize_domain(row["task"]),
        turn_idx=k,
        total_turns=row["total_turns"],
        messages=messages,
        reference=strip_marker(row["response"][k - 1]),
    )


def items_from_trajectory(traj: Trajectory) -> list[EvalItem]:
    """The turns the record marks for evaluation (AgentWorldBench origin), else all."""

    awb = traj.metadata.get("awb", {})
    turn_idxs = awb.get("turn_idx") or range(1, len(traj.turns) + 1)
    return [
        EvalItem(
            key=item_key(traj.id, k),
            id=traj.id,
            task=awb.get("task", traj.domain),
            domain=traj.domain,
            turn_idx=k,
            total_turns=len(traj.turns),
            messages=predict_turn_messages(traj, k),
            reference=traj.turns[k - 1].observation,
        )
        for k in turn_idxs
    ]


def item_from_sample(row: dict[str, Any]) -> EvalItem:
    """One row of prepare's ``samples/sft`` Parquet shards."""

    for name in ("trajectory_id", "domain", "turn_idx", "messages_json", "reference"):
        if row.get(name) is None:
            raise MissingFieldError("required field is missing", field=name)
    try:
        messages = json.loads(row["messages_json"])
    except ValueError as e:
        raise InvalidValueError(f"not JSON: {e}", field="messages_json") from None
    if not isinstance(messages, list) or not messages or messages[-1].get("role") != "user":
        raise InvalidValueError("must end with the action as a user message", field="messages_json")
    return EvalItem(
        key=item_key(row["trajectory_id"], int(row["turn_idx"])),
        id=row["trajectory_id"],
        task=row["domain"],
        domain=row["domain"],
        turn_idx=int(row["turn_idx"]),
        total_turns=None,
        messages=messages,
        reference=row["reference"],
    )


@dataclass(kw_only=True)
class LoadedItems:
    items: list[EvalItem]
    rejected: list[dict[str, Any]]
    """One entry per bad row: source, line, field, reason."""
    fmt: str


def load_items(
    url: str, *, fmt: InputFormat = "auto", split: str | None = "eval", **storage_options: Any
) -> LoadedItems:
    """All items under ``url`` in input order; duplicated keys after the first are rejected.
    Samples carrying prepare's ``split`` column keep only rows of ``split`` (None: all)."""
    shards = _shards(url, fmt, **storage_options)
    if not shards:
        raise FileNotFoundError(f"no input shards under {url!r}")
    fmt = _detect(shards, **storage_options) if fmt == "auto" else fmt
    out = LoadedItems(items=[], rejected=[], fmt=fmt)
    seen: set[str] = set()
    for shard in shards:
        for n, got in _read_shard(shard, fmt, split, **storage_options):
            if isinstance(got, Rejected):
                out.rejected.append(got.to_dict())
                continue
            for item in got:
                if item.key in seen:
                    out.rejected.append(_duplicate(shard, n, item.key))
                    continue
                seen.add(item.key)
                out.items.append(item)
    return out


def _shards(url: str, fmt: InputFormat, **storage_options: Any) -> list[str]:
    shards = list_shards(url, **storage_options)
    bench = [s for s in shards if s.endswith("_test.jsonl")]
    # An AgentWorldBench directory holds one *_test.jsonl per domain; other files beside
    # them (a README's examples, our outputs) are not questions.
    return bench if fmt in ("auto", "awb") and bench else shards


def _detect(shards: list[str], **storage_options: Any) -> str:
    if all(s.endswith("_test.jsonl") for s in shards):
        return "awb"
    first = shards[0]
    if first.endswith(".parquet"):
        names = read_parquet(first, **storage_options).column_names
        return "samples" if "messages_json" in names else "record"

    for _, raw in iter_jsonl_lines(first, **storage_options):
        try:
            row = json.loads(raw)
        except ValueError:
            continue
        return "awb" if isinstance(row, dict) and "current_prompt" in row else "record"
    return "record"


def _read_shard(shard: str, fmt: str, split: str | None, **storage_options: Any):
    """(line, list of items | Rejected) per input line or row."""
    if fmt == "samples":
        yield from _read_samples(shard, split, **storage_options)
        return
    parse = _parse_awb_line if fmt == "awb" else _parse_record_line
    for n, got in enumerate(
        iter_records(shard, errors="collect", parse=parse, **storage_options), start=1
    ):
        if isinstance(got, Trajectory):  # Parquet record shards yield records directly
            got = items_from_trajectory(got)
        yield (got.line if isinstance(got, Rejected) else n), got


def _parse_awb_line(raw: bytes) -> list[EvalItem]:
    return [items_from_row(loads_json(raw))]


def _parse_record_line(raw: bytes) -> list[EvalItem]:
    return items_from_trajectory(Trajectory.from_json(raw))


def _read_samples(shard: str, split: str | None, **storage_options: Any):
    for n, row in enumerate(read_parquet(shard, **storage_options).to_pylist(), start=1):
        if split is not None and row.get("split", split) != split:
            continue  # the other side of prepare's held-out split
        try:
            yield n, [item_from_sample(row)]
        except RecordError as e:
            raw = json.dumps(row, default=str)
            yield n, Rejected(source=shard, line=n, raw=raw, error=e.located(line=n, source=shard))


def _duplicate(shard: str, line: int, key: str) -> dict[str, Any]:
    return {
        "source": shard,
        "line": line,
        "raw": "",
        "error": "DuplicateItem",
        "field": "id",
        "reason": f"item {key!r} appears earlier in the input; kept the first",
    }
