"""Per-record features computed once at ingest: exact-content hash, survivor priority
key, MinHash band keys, shingle set (for verifying candidate pairs), contamination,
split hash. A plain function over an Arrow block (no Ray)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from agentworld.data.decontam import EvalIndex
from agentworld.data.minhash import band_keys_many, signatures
from agentworld.data.text import (
    flat_ngram_hashes,
    full_text,
    ngram_hashes,
    normalize,
    normalized_words,
    turn_text,
    unit_hash,
    words,
)

FEATURE_FIELDS = [
    ("trajectory_id", pa.string()),
    ("n_turns", pa.int32()),
    ("exact_hash", pa.string()),
    ("pkey", pa.string()),
    ("bands", pa.list_(pa.int64())),
    ("shingles", pa.list_(pa.uint64())),
    ("contaminated", pa.bool_()),
    ("overlap", pa.float64()),
    ("eval_id", pa.string()),
    ("split_hash", pa.float64()),
]
_SUCCESS_RANK = {True: "0", None: "1", False: "2"}
_SEP = "\x1f"  # below every printable character: joined keys sort like tuples
_LISTS = ("bands", "shingles")


@dataclass(frozen=True, kw_only=True)
class FeatureSpec:
    shingle_size: int
    num_perm: int
    bands: int
    rows: int
    seed: int
    priority: tuple[str, ...]
    decontam_threshold: float


def priority_key(
    rec: dict[str, Any], priority: tuple[str, ...], location: str, text_len: int | None = None
) -> str:
    """A string whose order is the survivor preference: the smallest key wins.
    ``text_len``: len(full_text(rec)) when the caller already has it."""
    parts = []
    for key in priority:
        if key == "more_turns":
            parts.append(f"{10**9 - len(rec['turns']):010d}")
        elif key == "success":
            parts.append(_SUCCESS_RANK[(rec.get("outcome") or {}).get("success")])
        elif key == "longer":
            n = len(full_text(rec)) if text_len is None else text_len
            parts.append(f"{10**15 - n:016d}")
    return _SEP.join([*parts, rec["id"], rec["source"], location])


def exact_hash(rec: dict[str, Any]) -> str:
    return _exact_of_normalized(normalize(full_text(rec)))


def _exact_of_normalized(norm: str) -> str:
    return hashlib.blake2b(norm.encode(), digest_size=16).hexdigest()


def _contamination(
    recs: list[dict[str, Any]], spec: FeatureSpec, index: EvalIndex | None
) -> tuple[list[float], list[str | None]]:
    if index is None or index.empty:
        return [0.0] * len(recs), [None] * len(recs)
    overlaps, ids = [], []
    for rec in recs:
        overlap, eval_id = index.match(ngram_hashes(words(turn_text(rec)), index.ngram))
        overlaps.append(overlap)
        ids.append(eval_id if overlap >= spec.decontam_threshold else None)
    return overlaps, ids


def block_features(
    recs: list[dict[str, Any]], locations: list[str], spec: FeatureSpec, index: EvalIndex | None
) -> dict[str, Any]:
    """Features of many parsed records at once. Scalar columns are lists; ``bands``
    and ``shingles`` are (flat values, (N + 1,) offsets) pairs.

    Each text is normalized once (the exact hash and the words both come from it);
    words are hashed once per distinct word of the block; shingles, signatures and
    band keys are whole-block array operations."""
    texts = [full_text(r) for r in recs]
    norms, w, w_offsets = normalized_words(texts)
    shingles, sh_offsets = flat_ngram_hashes(w, w_offsets, spec.shingle_size)
    sigs = signatures(shingles, sh_offsets, spec.num_perm, spec.seed)
    bands = band_keys_many(sigs, spec.bands, spec.rows)
    overlaps, eval_ids = _contamination(recs, spec, index)
    return {
        "trajectory_id": [r["id"] for r in recs],
        "n_turns": [len(r["turns"]) for r in recs],
        "exact_hash": [_exact_of_normalized(t) for t in norms],
        "pkey": [
            priority_key(r, spec.priority, loc, len(t))
            for r, loc, t in zip(recs, locations, texts, strict=True)
        ],
        "bands": (bands.reshape(-1), np.arange(len(recs) + 1, dtype=np.int64) * spec.bands),
        "shingles": (shingles, sh_offsets),
        "contaminated": [o >= spec.decontam_threshold for o in overlaps],
        "overlap": overlaps,
        "eval_id": eval_ids,
        "split_hash": [unit_hash(r["id"]) for r in recs],
    }


def record_features(
    rec: dict[str, Any], location: str, spec: FeatureSpec, index: EvalIndex | None
) -> dict[str, Any]:
    """Features of one record (block_features of a block of one)."""
    feats = block_features([rec], [location], spec, index)
    out = {name: values[0] for name, values in feats.items() if name not in _LISTS}
    for name in _LISTS:
        flat, offsets = feats[name]
        out[name] = flat[offsets[0] : offsets[1]]
    return out


def featurize(block: pa.Table, spec: FeatureSpec, index: EvalIndex | None) -> pa.Table:
    """Append the feature columns to a block of ingest rows (null on quarantined ones)."""
    ok = np.asarray(pc.equal(block.column("status"), "ok").fill_null(False))
    rows = np.flatnonzero(ok)
    picked = block.take(pa.array(rows, pa.int64())).select(["record", "input", "offset"])
    recs = [json.loads(r) for r in picked.column("record").to_pylist()]
    locations = [
        f"{url}{_SEP}{offset:020d}"
        for url, offset in zip(
            picked.column("input").to_pylist(), picked.column("offset").to_pylist(), strict=True
        )
    ]
    feats = block_features(recs, locations, spec, index)
    position = np.cumsum(ok) - 1  # row -> index among the ok rows
    for name, typ in FEATURE_FIELDS:
        if name in _LISTS:
            column = _list_column(*feats[name], ok, position, typ)
        else:
            values = feats[name]
            column = pa.array([values[position[i]] if ok[i] else None for i in range(ok.size)], typ)
        block = block.append_column(pa.field(name, typ), column)
    return block


def _list_column(
    flat: np.ndarray, offsets: np.ndarray, ok: np.ndarray, position: np.ndarray, typ: pa.DataType
) -> pa.Array:
    """A list column over all rows from the ok rows' flat values: null elsewhere."""
    sizes = np.zeros(ok.size, dtype=np.int64)
    sizes[ok] = np.diff(offsets)
    full = np.zeros(ok.size + 1, dtype=np.int32)
    np.cumsum(sizes, out=full[1:])
    values = pa.array(flat, typ.value_type)
    return pa.ListArray.from_arrays(pa.array(full), values, type=typ, mask=pa.array(~ok))
