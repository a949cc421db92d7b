"""Exact dedup of one group of records sharing a normalized-content hash: the record
with the smallest priority key survives (plain function over an Arrow group)."""

from __future__ import annotations

import pyarrow as pa

from agentworld.data.text import hash64

EXACT_IN = pa.schema(
    [
        ("uid", pa.int64()),
        ("exact_hash", pa.string()),
        ("pkey", pa.string()),
        ("bands", pa.list_(pa.int64())),
    ]
)
EXACT_OUT = pa.schema(
    [
        ("uid", pa.int64()),
        ("pkey", pa.string()),
        ("bands", pa.list_(pa.int64())),
        ("dup_of", pa.int64()),
        ("cluster", pa.int64()),
    ]
)


def exact_group(group: pa.Table) -> pa.Table:
    """Every row of the group with ``dup_of`` = the survivor's uid (null for the
    survivor) and ``cluster`` = the group's id (null when the group is one record)."""
    group = group.sort_by([("pkey", "ascending")])
    uids = group.column("uid").to_pylist()
    n = len(uids)
    cluster = hash64(group.column("exact_hash")[0].as_py()) if n > 1 else None
    return pa.table(
        {
            "uid": group.column("uid"),
            "pkey": group.column("pkey"),
            "bands": group.column("bands"),
            "dup_of": pa.array([None] + [uids[0]] * (n - 1), pa.int64()),
            "cluster": pa.array([cluster] * n, pa.int64()),
        },
        schema=EXACT_OUT,
    )
