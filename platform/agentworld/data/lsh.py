"""LSH buckets to candidate pairs, and the verification of candidate pairs by the
actual Jaccard of their shingle sets (plain functions over Arrow groups, no Ray).

A bucket holds the records whose MinHash agrees on one band. Small buckets emit every
pair; an oversized bucket (a boilerplate template seen thousands of times) emits, for
each member in uid order, the pair with its neighbour and with the first few members,
so its cost stays linear and its members still end up connected when they are similar.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from agentworld.data.text import jaccard

BAND_ROWS = pa.schema([("band", pa.int64()), ("uid", pa.int64())])
PAIRS = pa.schema([("a", pa.int64()), ("b", pa.int64())])
# Verification rows: a pair (key, other, null) or a record's shingles (key, null, set).
VERIFY = pa.schema(
    [("key", pa.int64()), ("other", pa.int64()), ("shingles", pa.list_(pa.uint64()))]
)
EDGES = pa.schema([("u", pa.int64()), ("v", pa.int64()), ("jaccard", pa.float64())])


def explode_bands(block: pa.Table) -> pa.Table:
    """(band key, uid) rows, one per band of each record."""
    import pyarrow.compute as pc

    bands = block.column("bands").combine_chunks()
    uids = np.repeat(block.column("uid").to_numpy(), pc.list_value_length(bands).to_numpy())
    return pa.table({"band": pc.list_flatten(bands), "uid": uids}, schema=BAND_ROWS)


def bucket_pairs(uids: np.ndarray, *, all_pairs_max: int, anchors: int) -> np.ndarray:
    """(k, 2) int64 candidate pairs (a < b) of one bucket, deterministic in uid order."""
    u = np.unique(uids)
    m = u.size
    if m < 2:
        return np.empty((0, 2), dtype=np.int64)
    if m <= all_pairs_max:
        i, j = np.triu_indices(m, k=1)
    else:
        near_i = np.arange(m - 1)
        anchor_i = np.repeat(np.arange(min(anchors, m)), m)
        anchor_j = np.tile(np.arange(m), min(anchors, m))
        keep = anchor_j > anchor_i
        i = np.concatenate([near_i, anchor_i[keep]])
        j = np.concatenate([near_i + 1, anchor_j[keep]])
    pairs = np.stack([u[i], u[j]], axis=1)
    return np.unique(pairs, axis=0)


def bucket_group(group: pa.Table, *, all_pairs_max: int, anchors: int) -> pa.Table:
    pairs = bucket_pairs(
        group.column("uid").to_numpy(), all_pairs_max=all_pairs_max, anchors=anchors
    )
    return pa.table({"a": pairs[:, 0], "b": pairs[:, 1]}, schema=PAIRS)


def _split(group: pa.Table) -> tuple[np.ndarray | None, np.ndarray]:
    """The group's own shingle set (None if absent) and the distinct pair partners."""
    other = group.column("other")
    own = group.filter(other.is_null())
    partners = group.filter(other.is_valid())
    shingles = None
    if own.num_rows:
        shingles = own.column("shingles")[0].values.to_numpy(zero_copy_only=False)
    return shingles, partners


def attach_first(group: pa.Table) -> pa.Table:
    """Keyed by pair member a: send a's shingles to b, as (key=b, other=a, shingles)."""
    shingles, partners = _split(group)
    others = np.unique(partners.column("other").to_numpy())
    if shingles is None or others.size == 0:
        return VERIFY.empty_table()
    key = group.column("key")[0].as_py()
    return pa.table(
        {
            "key": others,
            "other": np.full(others.size, key, dtype=np.int64),
            "shingles": pa.array([shingles] * others.size, pa.list_(pa.uint64())),
        },
        schema=VERIFY,
    )


def verify_second(group: pa.Table) -> pa.Table:
    """Keyed by pair member b, holding a's shingles: every candidate pair with its
    actual Jaccard (the caller keeps those at or above the threshold)."""
    shingles, partners = _split(group)
    if shingles is None or partners.num_rows == 0:
        return EDGES.empty_table()
    key = group.column("key")[0].as_py()
    u, v, sims = [], [], []
    for a, a_shingles in zip(
        partners.column("other").to_pylist(), partners.column("shingles"), strict=True
    ):
        sim = jaccard(a_shingles.values.to_numpy(zero_copy_only=False), shingles)
        u.append(a)
        v.append(key)
        sims.append(sim)
    return pa.table({"u": u, "v": v, "jaccard": sims}, schema=EDGES)
