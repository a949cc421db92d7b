"""Packing of tokenized documents into fixed-length rows (plain numpy/Arrow, no Ray):
minimum bin slack for documents that are never cut (each row, opened with the longest
document left, gets the set of remaining documents that fills it best), best fit
decreasing where documents may be cut, and for SFT whichever of the two needs fewer
rows.

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
    in, longest documents first (cut to fill a row only when ``split_min`` allows).
    Rows are kept sorted by (free space, row) so each choice is a bisection."""
    import bisect

    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], keys[i]))
    bins: list[list[Piece]] = []
    by_free: list[tuple[int, int]] = []  # (free space, row), sorted
    for i in order:
        start, n = 0, lengths[i]
        if n > capacity and not split_min:
            raise ValueError(f"document {keys[i]!r} has {n} tokens, more than {capacity}")
        while start < n:
            rest = n - start
            at = bisect.bisect_left(by_free, (rest, -1))  # the fullest row it fits in
            if at == len(by_free) and split_min and by_free and by_free[-1][0] >= split_min:
                at = bisect.bisect_left(by_free, (by_free[-1][0], -1))  # most free space
            if at < len(by_free):
                free, b = by_free.pop(at)
            else:
                free, b = capacity, len(bins)
                bins.append([])
            take = min(rest, free)
            bins[b].append((i, start, start + take))
            bisect.insort(by_free, (free - take, b))
            start += take
    return bins


def minimum_bin_slack(
    lengths: list[int], keys: list[str], capacity: int, *, budget: int = 256
) -> list[list[Piece]]:
    """Rows of whole documents (Gupta and Ho's minimum bin slack): each row takes the
    longest document left, then the subset of the others that leaves the least free
    space, searched depth first, longest first, over at most ``budget`` nodes; then
    any document that still fits. So no document left over fits a closed row, and at
    most one row is half empty or worse."""
    import bisect

    for i, n in enumerate(lengths):
        if n > capacity:
            raise ValueError(f"document {keys[i]!r} has {n} tokens, more than {capacity}")
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], keys[i]))
    neg = [-lengths[i] for i in order]  # ascending: bisect finds the longest that fits
    rows: list[list[Piece]] = []
    while order:
        first, room = order[0], capacity + neg[0]
        del order[0], neg[0]
        chosen = _best_subset(neg, room, budget)
        rest = room + sum(neg[j] for j in chosen)
        taken = set(chosen)
        j = bisect.bisect_left(neg, -rest)
        while j < len(neg) and rest > 0:  # whatever still fits, longest first
            if j not in taken and -neg[j] <= rest:
                taken.add(j)
                rest += neg[j]
            j = max(j + 1, bisect.bisect_left(neg, -rest))
        picked = sorted(taken)
        rows.append([(first, 0, lengths[first])] + [(order[j], 0, -neg[j]) for j in picked])
        for j in reversed(picked):
            del order[j], neg[j]
    return rows


def _best_subset(neg: list[int], room: int, budget: int) -> list[int]:
    """Positions in ``neg`` (negated lengths, ascending) of a subset with the largest
    total <= room found in ``budget`` search nodes; equal lengths are tried once."""
    import bisect

    best: list[int] = []
    best_total, nodes = 0, 0
    chosen: list[int] = []

    def search(start: int, left: int, total: int) -> bool:
        nonlocal best, best_total, nodes
        if total > best_total:
            best, best_total = list(chosen), total
            if left == 0:
                return True
        j = bisect.bisect_left(neg, -left, lo=start)
        last = None
        while j < len(neg):
            nodes += 1
            if nodes > budget:
                return True
            if neg[j] != last:
                last = neg[j]
                chosen.append(j)
                done = search(j + 1, left + neg[j], total - neg[j])
                chosen.pop()
                if done:
                    return True
            j += 1
        return False

    search(0, room, 0)
    return best


def pack_rows(
    lengths: list[int], keys: list[str], capacity: int, *, split_min: int = 0
) -> list[list[Piece]]:
    """The packing pack_documents uses: best fit decreasing when documents may be cut,
    else the one of minimum bin slack and best fit decreasing with fewer rows."""
    bfd = best_fit_decreasing(lengths, keys, capacity, split_min=split_min)
    if split_min:
        return bfd
    mbs = minimum_bin_slack(lengths, keys, capacity)
    return mbs if len(mbs) < len(bfd) else bfd


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
    bins = pack_rows([t.size for t in tokens], keys, seq_len, split_min=split_min)
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
