"""Deterministic sharded writes from Ray Data: each row goes to shard
``hash(key) % n`` and each shard is written by one group task as
``part-XXXXX.parquet``, rows sorted, atomically. Names and contents depend on the
data only, never on block sizes or parallelism, so a rerun rewrites identical files
and a resumed run can keep the shards already written."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from agentworld.data.placement import map_groups_via_storage
from agentworld.data.text import hash64
from agentworld.io import exists, join, write_parquet_chunks

SHARD_STATS = pa.schema([("shard", pa.string()), ("rows", pa.int64())])


def shard_name(index: int) -> str:
    return f"part-{index:05d}.parquet"


def shard_index(values: list[Any], n: int) -> np.ndarray:
    """Stable shard of each key value (ints are already hashes; strings are hashed)."""
    if n == 1:
        return np.zeros(len(values), dtype=np.int64)
    hashed = [v if isinstance(v, int) else hash64(str(v)) for v in values]
    return np.asarray(hashed, dtype=np.int64) % n


def add_shard_column(block: pa.Table, *, key: str, n: int, prefix: str) -> pa.Table:
    idx = shard_index(block.column(key).to_pylist(), n)
    names = [f"{prefix}{shard_name(int(i))}" for i in idx]
    return block.append_column("shard", pa.array(names, pa.string()))


def write_group(
    group: pa.Table,
    *,
    base_url: str,
    columns: list[str],
    sort_by: list[str],
    skip_existing: bool,
    storage_options: dict[str, Any],
    chunk_rows: int = 4096,
) -> pa.Table:
    """Write one shard (all rows of one ``shard`` value), sorted, a row group of at
    most ``chunk_rows`` rows at a time: the rows are taken in sorted order chunk by
    chunk, so the task never holds a sorted copy of its group beside the group."""

    name = group.column("shard")[0].as_py()
    url = join(base_url, name)
    if not (skip_existing and exists(url, **storage_options)):
        order = pc.sort_indices(group, sort_keys=[(c, "ascending") for c in sort_by])
        table = group.select(columns)
        chunks = (
            table.take(order.slice(at, chunk_rows)) for at in range(0, len(order), chunk_rows)
        )
        write_parquet_chunks(url, table.schema, chunks, **storage_options)
    return pa.table({"shard": [name], "rows": [group.num_rows]}, schema=SHARD_STATS)


def write_sharded(
    ds,
    base_url: str,
    *,
    n_rows: int,
    rows_per_shard: int,
    key: str,
    sort_by: list[str],
    columns: list[str],
    spill_url: str,
    storage_options: dict[str, Any],
    skip_existing: bool = False,
) -> pa.Table:
    """Write ``ds`` under ``base_url`` as ceil(n_rows / rows_per_shard) shards; returns
    (shard, rows) per shard written. ``spill_url``: a staging directory for the shuffle
    (agentworld.data.placement.map_groups_via_storage)."""
    if n_rows == 0:
        return SHARD_STATS.empty_table()
    n = max(1, math.ceil(n_rows / rows_per_shard))
    tagged = ds.map_batches(
        add_shard_column, batch_format="pyarrow", fn_kwargs={"key": key, "n": n, "prefix": ""}
    )
    tables = map_groups_via_storage(
        tagged,
        "shard",
        write_group,
        spill_url=spill_url,
        storage_options=storage_options,
        fn_kwargs={
            "base_url": base_url,
            "columns": columns,
            "sort_by": sort_by,
            "skip_existing": skip_existing,
            "storage_options": storage_options,
        },
    )
    out = pa.concat_tables(tables) if tables else SHARD_STATS.empty_table()
    return out.sort_by("shard")
