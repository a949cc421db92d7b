"""JSONL and Parquet shards of records on any fsspec URL.

Reads stream line by line (JSONL) or row group by row group (Parquet), so a shard of
several GB never sits in memory whole. A bad line never stops a read in
``errors="collect"`` mode: it is returned as a Rejected with the line and the reason.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import pyarrow as pa
import pyarrow.parquet as pq

from agentworld.io.storage import atomic_write, get_fs
from agentworld.schema import RecordError, Trajectory, loads_json
from agentworld.schema.arrow import from_arrow_row, to_arrow_table
from agentworld.schema.awb import row_to_trajectory
from agentworld.schema.chat import chat_to_trajectory
from agentworld.schema.errors import MissingFieldError
from agentworld.schema.record import trajectory_from_dict

SHARD_SUFFIXES = (".jsonl", ".jsonl.gz", ".parquet")
Format = Literal["record", "awb", "chat"]


@dataclass(frozen=True, kw_only=True)
class Rejected:
    """A line or row that failed to parse or validate, and why."""

    source: str
    line: int
    raw: str
    error: RecordError

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "line": self.line, "raw": self.raw, **self.error.to_dict()}


@dataclass(kw_only=True)
class ReadResult:
    records: list[Any] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)


def list_shards(
    url: str, *, suffixes: tuple[str, ...] = SHARD_SUFFIXES, **storage_options: Any
) -> list[str]:
    """Shard URLs under a directory (recursively), or the URL itself if it is a file;
    sorted, so shard order is deterministic. Hidden and temporary files are skipped."""
    fs, path = get_fs(url, **storage_options)
    if fs.isfile(path):
        return [url]
    found = fs.find(path)
    proto = url.split("://", 1)[0] + "://" if "://" in url else ""
    out = []
    for p in sorted(found):
        name = p.rsplit("/", 1)[-1]
        if name.startswith(".") or name.startswith("_") or not name.endswith(suffixes):
            continue
        out.append(proto + p if proto and not p.startswith(proto) else p)
    return out


# ---- JSONL -----------------------------------------------------------------------------


def iter_jsonl_lines(url: str, **storage_options: Any) -> Iterator[tuple[int, bytes]]:
    """(1-based line number, raw bytes) of each non-empty line, streamed."""
    fs, path = get_fs(url, **storage_options)
    compression = "gzip" if path.endswith(".gz") else None
    with fs.open(path, "rb", compression=compression) as f:
        for n, raw in enumerate(f, start=1):
            if raw.strip():
                yield n, raw.rstrip(b"\r\n")


def _raw_text(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")


def parse_line(raw: bytes, fmt: Format) -> Trajectory:
    return parse_object(loads_json(raw), fmt)


def parse_object(obj: Any, fmt: Format) -> Trajectory:
    """One parsed JSON object of a shard of format ``fmt``, adapted and validated
    (RecordError naming the field when it is bad)."""
    if fmt == "record":
        return trajectory_from_dict(obj)
    if fmt == "awb":
        return row_to_trajectory(obj)
    if fmt == "chat":
        if not isinstance(obj, dict) or "messages" not in obj:
            raise MissingFieldError("required field is missing", field="messages")
        return chat_to_trajectory(
            obj["messages"],
            id=str(obj.get("id", "")),
            domain=obj.get("domain", "mcp"),
            source=obj.get("source", "chat"),
            tools=obj.get("tools"),
        )
    raise ValueError(f"unknown format {fmt!r}; expected record, awb or chat")


def iter_records(
    url: str,
    *,
    fmt: Format = "record",
    errors: Literal["raise", "collect"] = "raise",
    parse: Callable[[bytes], Any] | None = None,
    **storage_options: Any,
) -> Iterator[Any | Rejected]:
    """Stream parsed records from one shard.

    ``errors="raise"``: the first bad line raises a RecordError naming the shard, line
    and field. ``errors="collect"``: bad lines are yielded as Rejected and reading goes on.
    """
    if url.endswith(".parquet"):
        yield from _iter_parquet_records(url, errors=errors, **storage_options)
        return
    parse = parse or (lambda raw: parse_line(raw, fmt))
    for n, raw in iter_jsonl_lines(url, **storage_options):
        try:
            yield parse(raw)
        except RecordError as e:
            located = e.located(line=n, source=url)
            if errors == "raise":
                raise located from None
            yield Rejected(source=url, line=n, raw=_raw_text(raw), error=located)


def read_records(
    url: str,
    *,
    fmt: Format = "record",
    errors: Literal["raise", "collect"] = "raise",
    **storage_options: Any,
) -> ReadResult:
    """Read every shard under ``url``; good records and rejected lines apart."""
    result = ReadResult()
    for shard in list_shards(url, **storage_options):
        for item in iter_records(shard, fmt=fmt, errors=errors, **storage_options):
            (result.rejected if isinstance(item, Rejected) else result.records).append(item)
    return result


def write_jsonl(url: str, rows: Iterable[Any], **storage_options: Any) -> int:
    """Write dicts or Trajectories as one JSONL shard, atomically. Returns the row count."""
    n = 0
    with atomic_write(url, "wb", **storage_options) as f:
        for row in rows:
            obj = row.to_dict() if hasattr(row, "to_dict") else row
            f.write(json.dumps(obj, ensure_ascii=False, sort_keys=True).encode("utf-8") + b"\n")
            n += 1
    return n


def read_jsonl(url: str, **storage_options: Any) -> list[Any]:
    """All JSON objects of one JSONL shard (raises MalformedJSONError naming the line)."""
    out = []
    for n, raw in iter_jsonl_lines(url, **storage_options):
        try:
            out.append(loads_json(raw))
        except RecordError as e:
            raise e.located(line=n, source=url) from None
    return out


# ---- Parquet ---------------------------------------------------------------------------


def write_parquet(url: str, table: pa.Table | list[Trajectory], **storage_options: Any) -> int:
    """Write a table (or trajectories, in their Arrow form) as one Parquet shard, atomically."""
    if isinstance(table, list):
        table = to_arrow_table(table)
    buf = io.BytesIO()
    pq.write_table(table, buf)
    with atomic_write(url, "wb", **storage_options) as f:
        f.write(buf.getvalue())
    return table.num_rows


def write_parquet_chunks(
    url: str, schema: pa.Schema, chunks: Iterable[pa.Table], **storage_options: Any
) -> int:
    """Write tables of ``schema`` as one Parquet shard, atomically, each as its own row
    group as it comes: a writer holds one chunk at a time, never the shard."""
    rows = 0
    with atomic_write(url, "wb", **storage_options) as f, pq.ParquetWriter(f, schema) as writer:
        for chunk in chunks:
            writer.write_table(chunk, row_group_size=max(1, chunk.num_rows))
            rows += chunk.num_rows
    return rows


def read_parquet(url: str, *, columns: list[str] | None = None, **storage_options: Any) -> pa.Table:
    """One Parquet shard whole (only ``columns``, if given)."""
    fs, path = get_fs(url, **storage_options)
    with fs.open(path, "rb") as f:
        # Without threads: a threaded read through a Python file object leaves pyarrow's
        # thread pool to abort the process at exit ("terminate called without an active
        # exception"; 13 of 20 short processes here, pyarrow 26; apache/arrow#50482).
        return pq.read_table(f, columns=columns, use_threads=False)


def _iter_parquet_records(url: str, *, errors: str, **storage_options: Any) -> Iterator[Any]:
    fs, path = get_fs(url, **storage_options)
    with fs.open(path, "rb") as f:
        pf = pq.ParquetFile(f)
        row_no = 0
        for batch in pf.iter_batches(use_threads=False):  # as read_parquet
            for row in batch.to_pylist():
                row_no += 1
                try:
                    yield from_arrow_row(row)
                except (RecordError, KeyError, TypeError) as e:
                    err = e if isinstance(e, RecordError) else RecordError(f"bad row: {e}")
                    located = err.located(line=row_no, source=url)
                    if errors == "raise":
                        raise located from None
                    yield Rejected(
                        source=url, line=row_no, raw=json.dumps(row, default=str), error=located
                    )
