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

from agentworld.data.decontam import EvalIndex
from agentworld.data.minhash import band_keys, signature
from agentworld.data.text import full_text, ngram_hashes, normalize, turn_text, unit_hash, words

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


@dataclass(frozen=True, kw_only=True)
class FeatureSpec:
    shingle_size: int
    num_perm: int
    bands: int
    rows: int
    seed: int
    priority: tuple[str, ...]
    decontam_threshold: float


def priority_key(rec: dict[str, Any], priority: tuple[str, ...], location: str) -> str:
    """A string whose order is the survivor preference: the smallest key wins."""
    parts = []
    for key in priority:
        if key == "more_turns":
            parts.append(f"{10**9 - len(rec['turns']):010d}")
        elif key == "success":
            parts.append(_SUCCESS_RANK[(rec.get("outcome") or {}).get("success")])
        elif key == "longer":
            parts.append(f"{10**15 - len(full_text(rec)):016d}")
    return _SEP.join([*parts, rec["id"], rec["source"], location])


def exact_hash(rec: dict[str, Any]) -> str:
    return hashlib.blake2b(normalize(full_text(rec)).encode(), digest_size=16).hexdigest()


def record_features(
    rec: dict[str, Any], location: str, spec: FeatureSpec, index: EvalIndex | None
) -> dict[str, Any]:
    shingles = ngram_hashes(words(full_text(rec)), spec.shingle_size)
    sig = signature(shingles, spec.num_perm, spec.seed)
    overlap, eval_id = 0.0, None
    if index is not None and not index.empty:
        overlap, eval_id = index.match(ngram_hashes(words(turn_text(rec)), index.ngram))
    return {
        "trajectory_id": rec["id"],
        "n_turns": len(rec["turns"]),
        "exact_hash": exact_hash(rec),
        "pkey": priority_key(rec, spec.priority, location),
        "bands": band_keys(sig, spec.bands, spec.rows),
        "shingles": shingles,
        "contaminated": overlap >= spec.decontam_threshold,
        "overlap": overlap,
        "eval_id": eval_id if overlap >= spec.decontam_threshold else None,
        "split_hash": unit_hash(rec["id"]),
    }


def featurize(block: pa.Table, spec: FeatureSpec, index: EvalIndex | None) -> pa.Table:
    """Append the feature columns to a block of ingest rows (null on quarantined ones)."""
    cols: dict[str, list] = {name: [] for name, _ in FEATURE_FIELDS}
    rows = zip(
        block.column("status").to_pylist(),
        block.column("record").to_pylist(),
        block.column("input").to_pylist(),
        block.column("offset").to_pylist(),
        strict=True,
    )
    for status, record, url, offset in rows:
        if status != "ok":
            for name in cols:
                cols[name].append(None)
            continue
        feats = record_features(json.loads(record), f"{url}{_SEP}{offset:020d}", spec, index)
        for name in cols:
            cols[name].append(feats[name])
    for name, typ in FEATURE_FIELDS:
        block = block.append_column(pa.field(name, typ), _column(cols[name], typ))
    return block


def _column(values: list, typ: pa.DataType) -> pa.Array:
    if pa.types.is_list(typ):
        return pa.array([None if v is None else np.asarray(v) for v in values], type=typ)
    return pa.array(values, type=typ)
