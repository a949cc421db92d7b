"""Streaming reads of record, AgentWorldBench and chat shards (JSONL, JSONL.gz, Parquet),
and of the files and folders other agent frameworks write (agentworld.data.formats),
into Arrow blocks of ingest rows. Plain functions: the ingest step's tasks
(agentworld.data.steps.ingest.ingest_range) call them.

A JSONL file larger than ``split_bytes`` is read as several byte ranges (a line belongs
to the range holding its first byte), so one big file is read in parallel and no task
ever holds more than one block of it. Every line becomes exactly one row: a record
(``status = "ok"``) or a quarantined line with the error, the field and the reason.
Consecutive AgentWorldBench rows of one trajectory become one record. A file or folder
of another format is one read task: each episode its adapter reads is a row, and each
part it cannot read is a quarantined row naming the file and the position.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from functools import cache
from typing import Any, Literal

import pyarrow as pa
import pyarrow.parquet as pq

from agentworld.data.formats.base import Problem, Unit, check_record
from agentworld.data.formats.listing import Listed, list_inputs, shard_kind
from agentworld.data.formats.reading import read_unit
from agentworld.data.formats.registry import SHARD_FORMATS, line_format, lookup
from agentworld.data.text import hash64
from agentworld.data.validate import build_filters, first_rejection
from agentworld.io import get_fs, list_shards
from agentworld.io.shards import parse_object
from agentworld.schema import RecordError, Trajectory, loads_json, register_domain
from agentworld.schema.arrow import from_arrow_row
from agentworld.schema.record import RECORD_VERSION, Outcome, ToolCall, Turn

INGEST_SCHEMA = pa.schema(
    [
        ("uid", pa.int64()),
        ("input", pa.string()),
        ("offset", pa.int64()),
        ("line", pa.int64()),
        ("status", pa.string()),
        ("error", pa.string()),
        ("field", pa.string()),
        ("reason", pa.string()),
        ("raw", pa.string()),
        ("record", pa.string()),
        ("domain", pa.string()),
        ("source", pa.string()),
    ]
)
RAW_KEEP_CHARS = 100_000  # a quarantined line is kept up to this many characters


@dataclass(frozen=True)
class ReadRange:
    """A part of one input file that one read task reads."""

    url: str
    start: int
    end: int
    kind: Literal["jsonl", "parquet", "unit"]
    label: str = ""
    """The file's path relative to its input: the ``file`` of an adapter's sources."""


@dataclass(frozen=True, kw_only=True)
class ReaderSpec:
    """Everything a read task needs, passed explicitly (workers see no driver state)."""

    fmt: str = "auto"
    block_records: int = 2000
    min_turns: int = 1
    max_record_chars: int = 8_000_000
    custom_domains: tuple[str, ...] = ()
    storage_options: dict[str, Any] = field(default_factory=dict)


def plan_ranges(
    urls: list[str], *, split_bytes: int, storage_options: dict[str, Any], fmt: str = "auto"
) -> list[ReadRange]:
    """Read ranges of every shard under ``urls``, in a stable order, each shard once;
    unless ``fmt`` is a shard format, also every other file and claimed folder, each one
    range (agentworld.data.formats.listing)."""
    if fmt in SHARD_FORMATS:
        found = [
            Listed(s, shard_kind(s), posixpath.basename(s))
            for url in urls
            for s in list_shards(url, **storage_options)
        ]
    else:
        found = [x for url in urls for x in list_inputs(url, storage_options)]
    listed = {x.url: x for x in reversed(found)}  # each once, its first label
    ranges: list[ReadRange] = []
    for url in sorted(listed):
        x = listed[url]
        if x.kind == "unit":
            ranges.append(ReadRange(url, 0, 0, "unit", x.label))
            continue
        fs, path = get_fs(url, **storage_options)
        size = int(fs.size(path) or 0)
        if x.kind == "parquet":
            ranges.append(ReadRange(url, 0, size, "parquet", x.label))
        elif url.endswith(".gz") or size <= split_bytes:
            ranges.append(ReadRange(url, 0, size, "jsonl", x.label))
        else:
            for start in range(0, size, split_bytes):
                end = min(start + split_bytes, size)
                ranges.append(ReadRange(url, start, end, "jsonl", x.label))
    return ranges


# ---- parsing one line -------------------------------------------------------------------


def detect_format(obj: Any) -> str:
    if isinstance(obj, dict):
        if "turns" in obj:
            return "record"
        if "messages" in obj:
            return "chat"
        if "prompt" in obj and "response" in obj:
            return "awb"
    return line_format(obj) or "record"  # validation then names what is missing


def parse_obj(obj: Any, fmt: str, *, label: str = "", line: int | None = None) -> Trajectory:
    """Adapt one parsed JSON object to a validated Trajectory (RecordError if bad); a
    line of an adapter's format (an OpenHands output record) is read by its adapter,
    its source naming the file (``label``) and its errors the line."""
    fmt = detect_format(obj) if fmt == "auto" else fmt
    if fmt in SHARD_FORMATS:
        return parse_object(obj, fmt)
    position = f"line {line}" if line is not None else "line"
    if not lookup(fmt).lines:
        raise RecordError(f"{label}, {position}: data.input_format={fmt} reads no JSONL lines")
    try:
        return check_record(lookup(fmt).adapter().from_line(obj, f"{fmt}:{label}", position))
    except RecordError as e:
        where = f" field '{e.field}'" if e.field else ""
        raise RecordError(f"{label}, {position}{where}: {e.reason}", field=e.field) from None


@dataclass
class _Item:
    offset: int
    line: int | None
    traj: Trajectory | None = None
    error: RecordError | None = None
    raw: bytes = b""
    obj: Any = None
    error_name: str | None = None
    """The kind of error, when it is not the error's class (an adapter's Problem)."""
    counted: tuple[str, str] | None = None
    """(domain, source) a quarantined row of an adapter's format is counted under, so
    that its source's counts add up; None: guessed from the line's own fields."""


def _parse(offset: int, line: int | None, raw: bytes, fmt: str, label: str = "") -> _Item:
    item = _Item(offset, line, raw=raw)
    try:
        item.obj = loads_json(raw)
        name = detect_format(item.obj) if fmt == "auto" else fmt
        if name not in SHARD_FORMATS:
            item.counted = (lookup(name).domain, f"{name}:{label}")
        item.traj = parse_obj(item.obj, name, label=label, line=line)
    except RecordError as e:
        item.error = e
    except (TypeError, AttributeError, ValueError) as e:  # adapters meeting odd shapes
        item.error = RecordError(f"cannot adapt record: {e}")
    return item


# ---- AgentWorldBench rows of one trajectory ------------------------------------------


def _awb_key(traj: Trajectory) -> tuple | None:
    awb = traj.metadata.get("awb")
    if awb is None:
        return None
    return (traj.id, traj.domain, traj.environment, traj.turns, awb.get("task"))


def merge_awb_rows(items: Iterator[_Item]) -> Iterator[_Item]:
    """Join consecutive AgentWorldBench rows that describe the same trajectory."""
    pending: _Item | None = None
    for item in items:
        key = _awb_key(item.traj) if item.traj is not None else None
        if pending is not None and key is not None and key == _awb_key(pending.traj):
            idx = pending.traj.metadata["awb"]["turn_idx"] + item.traj.metadata["awb"]["turn_idx"]
            pending.traj.metadata["awb"]["turn_idx"] = sorted(set(idx))
            continue
        if pending is not None:
            yield pending
            pending = None
        if key is not None:
            pending = item
        else:
            yield item
    if pending is not None:
        yield pending


# ---- rows ----------------------------------------------------------------------------


# The fields record_json writes by hand; if the schema changes, it falls back to to_json.
_KNOWN_FIELDS = {
    Trajectory: ("id", "domain", "source", "environment", "turns", "outcome", "metadata"),
    Turn: (
        "action",
        "observation",
        "reasoning",
        "tool_call",
        "duration_s",
        "exit_code",
        "screenshot",
        "metadata",
    ),
    ToolCall: ("name", "arguments", "call_id"),
    Outcome: ("success", "reward", "note"),
}
_OPTIONAL_TURN_FIELDS = ("reasoning", "duration_s", "exit_code", "screenshot")


@cache
def _fast_json_ok() -> bool:
    return all(tuple(f.name for f in fields(c)) == names for c, names in _KNOWN_FIELDS.items())


def _turn_dict(turn: Turn) -> dict[str, Any]:
    d: dict[str, Any] = {"action": turn.action, "observation": turn.observation}
    for name in _OPTIONAL_TURN_FIELDS:
        value = getattr(turn, name)
        if value is not None:
            d[name] = value
    call = turn.tool_call
    if call is not None:
        d["tool_call"] = {"name": call.name, "arguments": call.arguments, "call_id": call.call_id}
    if turn.metadata:
        d["metadata"] = turn.metadata
    return d


def record_json(traj: Trajectory) -> str:
    """``traj.to_json()``, the same string, without dataclasses.asdict's recursive deep
    copy (it cost more than parsing): records hold JSON values only (validate checks
    it), which json.dumps writes the same whether copied or not."""
    if not _fast_json_ok():
        return traj.to_json()
    o = traj.outcome
    d = {
        "id": traj.id,
        "domain": traj.domain,
        "source": traj.source,
        "environment": traj.environment,
        "turns": [_turn_dict(t) for t in traj.turns],
        "outcome": None
        if o is None
        else {"success": o.success, "reward": o.reward, "note": o.note},
        "metadata": traj.metadata,
        "version": RECORD_VERSION,
    }
    return json.dumps(d, ensure_ascii=False, sort_keys=True)


def _guess(obj: Any, key: str) -> str:
    value = obj.get(key) if isinstance(obj, dict) else None
    if key == "domain" and value is None and isinstance(obj, dict):
        value = obj.get("task")
    if not isinstance(value, str) or not value.strip():
        return "unknown"
    return value.strip().lower().rsplit("/", 1)[-1] if key == "domain" else value


def _row(url: str, item: _Item, filters: list) -> dict[str, Any]:
    row: dict[str, Any] = {
        "uid": hash64(f"{url}\x1f{item.offset}"),
        "input": url,
        "offset": item.offset,
        "line": item.line,
    }
    rejection = first_rejection(item.traj, filters) if item.traj is not None else None
    if item.traj is not None and rejection is None:
        t = item.traj
        row.update(status="ok", record=record_json(t), domain=t.domain, source=t.source)
        return row
    if rejection is not None:
        error, field_, reason = rejection.error, rejection.field, rejection.reason
    else:
        error = item.error_name or type(item.error).__name__
        field_, reason = item.error.field, item.error.reason
    raw = item.raw.decode("utf-8", errors="replace")[:RAW_KEEP_CHARS]
    row.update(
        status="quarantined",
        error=error,
        field=field_,
        reason=reason,
        raw=raw,
        domain=item.counted[0] if item.counted else _guess(item.obj, "domain"),
        source=item.counted[1] if item.counted else _guess(item.obj, "source"),
    )
    return row


def _jsonl_items(r: ReadRange, spec: ReaderSpec) -> Iterator[_Item]:
    fs, path = get_fs(r.url, **spec.storage_options)
    compression = "gzip" if path.endswith(".gz") else None
    with fs.open(path, "rb", compression=compression) as f:
        if r.start > 0:
            f.seek(r.start - 1)
            f.readline()  # the line holding byte start-1 belongs to the previous range
        line_no = 0 if r.start == 0 else None
        limit = None if compression else r.end  # tell() of a gzip stream is uncompressed
        while True:
            pos = f.tell()
            if limit is not None and pos >= limit:
                break
            raw = f.readline()
            if not raw:
                break
            line_no = None if line_no is None else line_no + 1
            raw = raw.rstrip(b"\r\n")
            if raw.strip():
                yield _parse(pos, line_no, raw, spec.fmt, r.label or posixpath.basename(r.url))


def _parquet_items(r: ReadRange, spec: ReaderSpec) -> Iterator[_Item]:
    fs, path = get_fs(r.url, **spec.storage_options)
    with fs.open(path, "rb") as f:
        row_no = 0
        for batch in pq.ParquetFile(f).iter_batches(
            batch_size=spec.block_records,
            use_threads=False,  # as io.read_parquet
        ):
            is_record = "turns" in batch.schema.names
            for obj in batch.to_pylist():
                raw = json.dumps(obj, default=str, ensure_ascii=False).encode()
                item = _Item(row_no, row_no + 1, raw=raw, obj=obj)
                try:
                    item.traj = from_arrow_row(obj) if is_record else parse_obj(obj, "awb")
                except RecordError as e:
                    item.error = e
                except (KeyError, TypeError, ValueError) as e:
                    item.error = RecordError(f"bad row: {e}")
                row_no += 1
                yield item


def _unit_items(r: ReadRange, spec: ReaderSpec) -> Iterator[_Item]:
    """A file or folder through its adapter: a row per episode and per Problem, each
    counted under the domain and source the adapter names."""
    unit = Unit(r.url, r.label or posixpath.basename(r.url.rstrip("/")), spec.storage_options)
    for n, read in enumerate(read_unit(unit, spec.fmt)):
        item = _Item(n, None, counted=(read.domain, read.source))
        if isinstance(read.item, Problem):
            p = read.item
            item.line, item.raw, item.error_name = p.line, p.raw.encode(), p.error
            item.error = RecordError(f"{unit.label}, {p.position}: {p.reason}", field=p.position)
        else:
            item.traj = read.item
        yield item


def read_range(r: ReadRange, spec: ReaderSpec) -> Iterator[pa.Table]:
    """Arrow blocks (INGEST_SCHEMA, at most ``block_records`` rows) of one read range."""

    for name in spec.custom_domains:
        register_domain(name)
    filters = build_filters(min_turns=spec.min_turns, max_record_chars=spec.max_record_chars)
    read = {"parquet": _parquet_items, "unit": _unit_items}.get(r.kind, _jsonl_items)
    items = read(r, spec)
    rows: list[dict[str, Any]] = []
    for item in merge_awb_rows(items):
        rows.append(_row(r.url, item, filters))
        if len(rows) >= spec.block_records:
            yield pa.Table.from_pylist(rows, schema=INGEST_SCHEMA)
            rows = []
    if rows:
        yield pa.Table.from_pylist(rows, schema=INGEST_SCHEMA)
