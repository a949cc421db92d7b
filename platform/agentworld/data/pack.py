"""Best-fit-decreasing packing of tokenized documents into fixed-length rows (plain
numpy/Arrow, no Ray).

Each packed row carries ``position_ids`` that restart at 0 at every document and
``doc_lens``, from which a trainer builds a block-diagonal (per-document) causal mask:
attention never crosses documents. Packing is deterministic: documents are sorted by
(length desc, key) and the rows are shuffled with a seed derived from the group.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

PACKED_SCHEMA = pa.schema(
    [
        ("input_ids", pa.list_(pa.int32())),
        ("loss_mask", pa.list_(pa.int8())),
        ("position_ids", pa.list_(pa.int32())),
        ("doc_lens", pa.list_(pa.int32())),
    ]
)


def best_fit_decreasing(lengths: list[int], keys: list[str], capacity: int) -> list[list[int]]:
    """Bins (lists of document indices); each document goes to the fullest bin it
    fits in, longest documents first. Every length must be <= capacity."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], keys[i]))
    bins: list[list[int]] = []
    free = np.empty(0, dtype=np.int64)  # free space per bin
    for i in order:
        n = lengths[i]
        if n > capacity:
            raise ValueError(f"document {keys[i]!r} has {n} tokens, more than {capacity}")
        fits = np.flatnonzero(free >= n)
        if fits.size:
            b = int(fits[np.argmin(free[fits])])
            bins[b].append(i)
            free[b] -= n
        else:
            bins.append([i])
            free = np.append(free, capacity - n)
    return bins


def pack_documents(
    tokens: list[np.ndarray],
    masks: list[np.ndarray],
    keys: list[str],
    *,
    seq_len: int,
    pad_id: int,
    seed: int,
) -> pa.Table:
    """Rows of PACKED_SCHEMA holding every document exactly once."""
    bins = best_fit_decreasing([t.size for t in tokens], keys, seq_len)
    order = np.random.Generator(np.random.PCG64(seed)).permutation(len(bins))
    cols: dict[str, list] = {name: [] for name in PACKED_SCHEMA.names}
    for b in order:
        docs = bins[b]
        ids = np.full(seq_len, pad_id, dtype=np.int32)
        mask = np.zeros(seq_len, dtype=np.int8)
        pos = np.zeros(seq_len, dtype=np.int32)
        at = 0
        for i in docs:
            n = tokens[i].size
            ids[at : at + n] = tokens[i]
            mask[at : at + n] = masks[i]
            pos[at : at + n] = np.arange(n, dtype=np.int32)
            at += n
        cols["input_ids"].append(ids)
        cols["loss_mask"].append(mask)
        cols["position_ids"].append(pos)
        cols["doc_lens"].append(np.array([tokens[i].size for i in docs], dtype=np.int32))
    return pa.table({name: _list_array(cols[name], name) for name in cols}, schema=PACKED_SCHEMA)


def _list_array(rows: list[np.ndarray], name: str) -> pa.Array:
    typ = PACKED_SCHEMA.field(name).type
    offsets = np.cumsum([0] + [r.size for r in rows]).astype(np.int32)
    flat = np.concatenate(rows) if rows else np.empty(0)
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat, type=typ.value_type))


def efficiency(table: pa.Table, seq_len: int) -> float:
    """Share of non-pad tokens."""
    if table.num_rows == 0:
        return 0.0
    used = sum(sum(x) for x in table.column("doc_lens").to_pylist())
    return used / (table.num_rows * seq_len)
