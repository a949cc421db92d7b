"""Exact dedup of one partition of records (all records sharing a normalized-content
hash land in the same partition): within each run of equal hashes, the record with the
smallest priority key survives. Plain function over an Arrow table, vectorized over the
runs (no call per hash)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

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


def run_starts(keys: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """(n,) bool: True where a sorted key column starts a new run of equal keys."""
    n = len(keys)
    starts = np.ones(n, dtype=bool)
    if n > 1:
        same = pc.equal(keys.slice(1), keys.slice(0, n - 1))
        starts[1:] = ~np.asarray(same.to_numpy(zero_copy_only=False), dtype=bool)
    return starts


def exact_partition(part: pa.Table) -> pa.Table:
    """Every row with ``dup_of`` = its run's survivor uid (null for the survivor) and
    ``cluster`` = hash64 of the run's content hash (null when the run is one record)."""
    part = part.sort_by([("exact_hash", "ascending"), ("pkey", "ascending")])
    n = part.num_rows
    new_run = run_starts(part.column("exact_hash"))
    first = np.flatnonzero(new_run)
    run = np.cumsum(new_run) - 1
    size = np.diff(np.append(first, n))
    uids = part.column("uid").to_numpy()
    multi = size[run] > 1
    run_cluster = np.zeros(first.size, dtype=np.int64)
    hashes = part.column("exact_hash")
    for r in np.flatnonzero(size > 1).tolist():  # one hash per cluster, not per record
        run_cluster[r] = hash64(hashes[int(first[r])].as_py())
    cluster = run_cluster[run]
    return pa.table(
        {
            "uid": uids,
            "pkey": part.column("pkey"),
            "bands": part.column("bands"),
            "dup_of": pa.array(uids[first][run], pa.int64(), mask=new_run),
            "cluster": pa.array(cluster, pa.int64(), mask=~multi),
        },
        schema=EXACT_OUT,
    )
