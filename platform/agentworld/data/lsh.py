"""LSH buckets to candidate pairs, and the verification of candidate pairs by the
actual Jaccard of their shingle sets (plain functions over Arrow tables, no Ray).

A bucket holds the records whose MinHash agrees on one band. Small buckets emit every
pair; an oversized bucket (a boilerplate template seen thousands of times) emits, for
each member in uid order, the pair with its neighbour and with the first few members,
so its cost stays linear and its members still end up connected when they are similar.

Each function takes a whole shuffle partition (every row of a key lands in the same
partition) and finds the runs of equal keys by sorting: no Python call per bucket or
per record.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from agentworld.data.kernels import jaccards

BAND_ROWS = pa.schema([("band", pa.int64()), ("uid", pa.int64())])
PAIRS = pa.schema([("a", pa.int64()), ("b", pa.int64())])
# Verification rows: a pair (key, other, null) or a record's shingles (key, null, set).
VERIFY = pa.schema(
    [("key", pa.int64()), ("other", pa.int64()), ("shingles", pa.list_(pa.uint64()))]
)
EDGES = pa.schema([("u", pa.int64()), ("v", pa.int64()), ("jaccard", pa.float64())])


def explode_bands(block: pa.Table) -> pa.Table:
    """(band key, uid) rows, one per band of each record."""
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


def unique_pairs(pairs: np.ndarray) -> np.ndarray:
    """(k, 2) int64 distinct rows, sorted by (a, b)."""
    if pairs.shape[0] == 0:
        return pairs.reshape(0, 2)
    order = np.lexsort((pairs[:, 1], pairs[:, 0]))
    pairs = pairs[order]
    keep = np.ones(pairs.shape[0], dtype=bool)
    keep[1:] = (pairs[1:] != pairs[:-1]).any(axis=1)
    return pairs[keep]


def _runs(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Starts and sizes of the runs of equal values of a sorted array."""
    if keys.size == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    return starts, np.diff(np.r_[starts, keys.size])


def bucket_partition(part: pa.Table, *, all_pairs_max: int, anchors: int) -> pa.Table:
    """Candidate pairs (a < b) of every bucket of a partition of band rows: the pairs
    ``bucket_pairs`` gives for each bucket, distinct. Buckets of one size are expanded
    together with one index pattern, so the cost is one numpy pass per bucket size."""
    band, uid = part.column("band").to_numpy(), part.column("uid").to_numpy()
    order = np.lexsort((uid, band))
    band, uid = band[order], uid[order]
    # Sized from the rows, not np.r_[False, ...], which is one long for an empty
    # partition (a run whose records were all quarantined has one).
    dup = np.zeros(band.size, dtype=bool)
    dup[1:] = (band[1:] == band[:-1]) & (uid[1:] == uid[:-1])
    band, uid = band[~dup], uid[~dup]
    starts, sizes = _runs(band)
    out = []
    for m in np.unique(sizes[(sizes >= 2) & (sizes <= all_pairs_max)]).tolist():
        first = starts[sizes == m]
        i, j = np.triu_indices(m, k=1)
        out.append(np.stack([uid[first[:, None] + i].ravel(), uid[first[:, None] + j].ravel()], 1))
    for s, m in zip(
        starts[sizes > all_pairs_max].tolist(), sizes[sizes > all_pairs_max].tolist(), strict=True
    ):
        out.append(bucket_pairs(uid[s : s + m], all_pairs_max=all_pairs_max, anchors=anchors))
    pairs = unique_pairs(np.concatenate(out)) if out else np.empty((0, 2), np.int64)
    return pa.table({"a": pairs[:, 0], "b": pairs[:, 1]}, schema=PAIRS)


def flat_sets(column: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(values, (N + 1,) int64 offsets) of a list<uint64> column without nulls."""
    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    arr = arr.cast(pa.large_list(pa.uint64()))
    offsets = arr.offsets.to_numpy().astype(np.int64)
    values = arr.values.to_numpy(zero_copy_only=False)
    return values[offsets[0] : offsets[-1]], offsets - offsets[0]


def pair_jaccards(
    pairs: np.ndarray, uids: np.ndarray, flat: np.ndarray, offsets: np.ndarray
) -> np.ndarray:
    """(k,) Jaccard of each pair (a, b) of uids, given the sets of the records ``uids``
    (sorted) as flat values with offsets. Every pair member must be present."""
    a = np.searchsorted(uids, pairs[:, 0])
    b = np.searchsorted(uids, pairs[:, 1])
    return jaccards(flat, offsets, a, b)


def _own_and_partners(part: pa.Table) -> tuple[pa.Table, pa.Table]:
    """A verification partition's shingle rows (sorted by key) and its pair rows."""
    other = part.column("other")
    own = part.filter(other.is_null()).sort_by("key")
    partners = part.filter(other.is_valid())
    return own, partners


def attach_first(part: pa.Table) -> pa.Table:
    """Keyed by pair member a: send a's shingles to each distinct b, as (key=b,
    other=a, shingles)."""
    own, partners = _own_and_partners(part)
    pairs = unique_pairs(
        np.stack([partners.column("key").to_numpy(), partners.column("other").to_numpy()], 1)
    )
    keys = own.column("key").to_numpy()
    pos = np.minimum(np.searchsorted(keys, pairs[:, 0]), max(keys.size - 1, 0))
    found = keys[pos] == pairs[:, 0] if keys.size else np.zeros(len(pairs), bool)
    pairs, pos = pairs[found], pos[found]
    return pa.table(
        {
            "key": pairs[:, 1],
            "other": pairs[:, 0],
            "shingles": own.column("shingles").take(pa.array(pos, pa.int64())),
        },
        schema=VERIFY,
    )


def verify_second(part: pa.Table) -> pa.Table:
    """Keyed by pair member b, holding a's shingles: every candidate pair with its
    actual Jaccard (the caller keeps those at or above the threshold)."""
    own, partners = _own_and_partners(part)
    keys = own.column("key").to_numpy()
    b = partners.column("key").to_numpy()
    pos = np.minimum(np.searchsorted(keys, b), max(keys.size - 1, 0))
    found = keys[pos] == b if keys.size else np.zeros(b.size, bool)
    partners, pos = partners.filter(pa.array(found)), pos[found]
    n = partners.num_rows
    both = pa.chunked_array(
        [partners.column("shingles").combine_chunks(), own.column("shingles").combine_chunks()]
    )
    flat, offsets = flat_sets(both.combine_chunks())
    sims = jaccards(flat, offsets, np.arange(n), n + pos)
    return pa.table(
        {"u": partners.column("other"), "v": partners.column("key"), "jaccard": sims},
        schema=EDGES,
    )
