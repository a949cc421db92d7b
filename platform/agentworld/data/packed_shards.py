"""Packed shards on Ray Data (the work of the pack step): samples are spread over
packing groups by a stable hash of their key (``ceil(n / pack_window)`` groups per kind
and split), each group is packed best-fit-decreasing by one task and written as
``packed/<kind>/<split>/part-XXXXX.parquet`` (the samples reach their group's task
through storage: a task holds one group, whatever the corpus's size). Shards already
written by a killed run are kept (their content is determined by the data), the rest
are written."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from agentworld.data.bin_packing import PACKED_SCHEMA, packed_chunks
from agentworld.data.hashed_shards import shard_index, shard_name
from agentworld.data.placement import map_groups_via_storage
from agentworld.data.text import hash64
from agentworld.io import exists, join, read_parquet, write_parquet_chunks

PACK_STATS = pa.schema(
    [
        ("shard", pa.string()),
        ("kind", pa.string()),
        ("split", pa.string()),
        ("rows", pa.int64()),
        ("docs", pa.int64()),
        ("tokens", pa.int64()),
        ("targets", pa.int64()),
    ]
)


def group_counts(counts: dict[tuple[str, str], int], pack_window: int) -> dict[str, int]:
    """Packing groups per "kind/split"."""
    return {f"{k}/{s}": max(1, math.ceil(n / pack_window)) for (k, s), n in counts.items() if n}


def assign_group(block: pa.Table, *, groups: dict[str, int], kinds: dict[str, str]) -> pa.Table:
    """Keep packable samples (not dropped, of a kind in ``kinds``), name each by the
    kind it is packed as, and tag it with its shard path."""
    keep = pc.and_(
        pc.is_null(block.column("drop_reason")),
        pc.is_in(block.column("kind"), pa.array(list(kinds))),
    )
    block = block.filter(keep)
    packed_as = [kinds[k] for k in block.column("kind").to_pylist()]
    block = block.set_column(
        block.schema.get_field_index("kind"), "kind", pa.array(packed_as, pa.string())
    )
    kinds, splits = block.column("kind").to_pylist(), block.column("split").to_pylist()
    prefix = [f"{k}/{s}" for k, s in zip(kinds, splits, strict=True)]
    keys = block.column("key").to_pylist()
    names = []
    for p, key in zip(prefix, keys, strict=True):
        g = int(shard_index([key], groups[p])[0])
        names.append(f"{p}/{shard_name(g)}")
    return block.select(["kind", "split", "key", "tokens", "mask"]).append_column(
        "shard", pa.array(names, pa.string())
    )


def pack_group(
    group: pa.Table,
    *,
    base_url: str,
    seq_len: int,
    pad_id: int,
    seed: int,
    cpt_split_min: int,
    storage_options: dict[str, Any],
    chunk_rows: int = 1024,
) -> pa.Table:
    """Pack one group into its shard (or keep the shard a killed run already wrote).
    The shard is written a row group (``chunk_rows`` rows) at a time as its rows are
    filled: a task holds its group's samples and one chunk of packed rows, never the
    packed group."""

    name = group.column("shard")[0].as_py()
    kind = group.column("kind")[0].as_py()
    url = join(base_url, name)
    count = _PackCount()
    if exists(url, **storage_options):
        count.add(read_parquet(url, columns=["doc_lens", "loss_mask"], **storage_options))
    else:
        chunks = packed_chunks(
            [np.asarray(t.values) for t in group.column("tokens")],
            [np.asarray(m.values) for m in group.column("mask")],
            group.column("key").to_pylist(),
            seq_len=seq_len,
            pad_id=pad_id,
            seed=(seed ^ hash64(name)) & 0xFFFFFFFF,
            split_min=cpt_split_min if kind == "cpt" else 0,
            chunk_rows=chunk_rows,
        )
        write_parquet_chunks(url, PACKED_SCHEMA, count.counted(chunks), **storage_options)
    return pa.table(
        {
            "shard": [name],
            "kind": [kind],
            "split": [group.column("split")[0].as_py()],
            "rows": [count.rows],
            "docs": [group.num_rows],
            "tokens": [count.tokens],
            "targets": [count.targets],
        },
        schema=PACK_STATS,
    )


@dataclass
class _PackCount:
    """Rows, tokens and targets of a shard's packed rows, added chunk by chunk."""

    rows: int = 0
    tokens: int = 0
    targets: int = 0

    def add(self, chunk: pa.Table) -> None:
        self.rows += chunk.num_rows
        self.tokens += pc.sum(pc.list_flatten(chunk.column("doc_lens"))).as_py() or 0
        self.targets += pc.sum(pc.list_flatten(chunk.column("loss_mask"))).as_py() or 0

    def counted(self, chunks: Iterator[pa.Table]) -> Iterator[pa.Table]:
        for chunk in chunks:
            self.add(chunk)
            yield chunk


def pack_samples(
    samples,
    counts: dict[tuple[str, str], int],
    *,
    base_url: str,
    seq_len: int,
    pad_id: int,
    pack_window: int,
    seed: int,
    cpt_split_min: int,
    spill_url: str,
    storage_options: dict[str, Any],
    kinds: dict[str, str] | None = None,
) -> pa.Table:
    """Pack every non-dropped sample; PACK_STATS per shard. ``kinds``: the sample kinds
    packed, each to the kind it is packed as (default: cpt and sft as themselves).
    ``spill_url``: a staging directory for the shuffle
    (agentworld.data.placement.map_groups_via_storage)."""
    kinds = kinds or {"cpt": "cpt", "sft": "sft"}
    packed: dict[tuple[str, str], int] = {}
    for (kind, split), n in counts.items():
        if kind in kinds:
            packed[(kinds[kind], split)] = packed.get((kinds[kind], split), 0) + n
    groups = group_counts(packed, pack_window)
    if not groups:
        return PACK_STATS.empty_table()
    tagged = samples.map_batches(
        assign_group, batch_format="pyarrow", fn_kwargs={"groups": groups, "kinds": kinds}
    )
    tables = map_groups_via_storage(
        tagged,
        "shard",
        pack_group,
        spill_url=spill_url,
        storage_options=storage_options,
        fn_kwargs={
            "base_url": base_url,
            "seq_len": seq_len,
            "pad_id": pad_id,
            "seed": seed,
            "cpt_split_min": cpt_split_min,
            "storage_options": storage_options,
        },
    )
    return pa.concat_tables(tables).sort_by("shard") if tables else PACK_STATS.empty_table()
