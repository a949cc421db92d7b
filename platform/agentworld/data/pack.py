"""Best-fit-decreasing packing of tokenized documents into fixed-length rows (plain
numpy/Arrow, no Ray).

Each packed row carries ``position_ids`` that restart at 0 at every document and
``doc_lens``, from which a trainer builds a block-diagonal (per-document) causal mask:
attention never crosses documents. Packing is deterministic: documents are sorted by
(length desc, key) and the rows are shuffled with a seed derived from the group.

SFT samples are never cut. CPT documents may be (``split_min`` > 0): a document that
fits no open row fills the row with the most free space, if at least ``split_min``
tokens fit there, and its remainder is placed the same way. Each piece is its own
document in its row, and the first token of a piece is not a target.
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
Piece = tuple[int, int, int]  # (document index, start, end)


def best_fit_decreasing(
    lengths: list[int], keys: list[str], capacity: int, *, split_min: int = 0
) -> list[list[Piece]]:
    """Rows as lists of document pieces; each document goes to the fullest row it fits
    in, longest documents first (cut to fill a row only when ``split_min`` allows)."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], keys[i]))
    bins: list[list[Piece]] = []
    free: list[int] = []  # free space per row
    for i in order:
        start, n = 0, lengths[i]
        if n > capacity and not split_min:
            raise ValueError(f"document {keys[i]!r} has {n} tokens, more than {capacity}")
        while start < n:
            b, take = _place(free, n - start, capacity, split_min)
            if b == len(bins):
                bins.append([])
                free.append(capacity)
            bins[b].append((i, start, start + take))
            free[b] -= take
            start += take
    return bins


def _place(free: list[int], rest: int, capacity: int, split_min: int) -> tuple[int, int]:
    """(row, tokens to put there) for the rest of a document; row == len(free) opens one."""
    room = np.asarray(free, dtype=np.int64)
    fits = np.flatnonzero(room >= rest)
    if fits.size:
        return int(fits[np.argmin(room[fits])]), rest
    if split_min and room.size and room.max() >= split_min:
        b = int(np.argmax(room))
        return b, int(room[b])
    return len(free), min(rest, capacity)


def pack_documents(
    tokens: list[np.ndarray],
    masks: list[np.ndarray],
    keys: list[str],
    *,
    seq_len: int,
    pad_id: int,
    seed: int,
    split_min: int = 0,
) -> pa.Table:
    """Rows of PACKED_SCHEMA holding every token of every document exactly once."""
    bins = best_fit_decreasing([t.size for t in tokens], keys, seq_len, split_min=split_min)
    order = np.random.Generator(np.random.PCG64(seed)).permutation(len(bins))
    cols: dict[str, list] = {name: [] for name in PACKED_SCHEMA.names}
    for b in order:
        ids = np.full(seq_len, pad_id, dtype=np.int32)
        mask = np.zeros(seq_len, dtype=np.int8)
        pos = np.zeros(seq_len, dtype=np.int32)
        at = 0
        for i, start, end in bins[b]:
            n = end - start
            ids[at : at + n] = tokens[i][start:end]
            mask[at : at + n] = masks[i][start:end]
            mask[at] = 0 if start else mask[at]  # a continued piece starts a new document
            pos[at : at + n] = np.arange(n, dtype=np.int32)
            at += n
        cols["input_ids"].append(ids)
        cols["loss_mask"].append(mask)
        cols["position_ids"].append(pos)
        cols["doc_lens"].append(np.array([e - s for _, s, e in bins[b]], dtype=np.int32))
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
