"""Tokenize kept trajectories into CPT documents and SFT samples, block by block (the
task side of the tokenize step; the tokenizer is loaded once per worker process)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from agentworld.data.chat_tokens import (
    ChatLayout,
    cpt_samples,
    encode_trajectories,
    sft_sample,
    sft_windows,
)
from agentworld.data.vocab import load_tokenizer
from agentworld.schema import Trajectory, register_domain

SAMPLE_SCHEMA = pa.schema(
    [
        ("kind", pa.string()),
        ("split", pa.string()),
        ("key", pa.string()),
        ("tokens", pa.list_(pa.int32())),
        ("mask", pa.list_(pa.int8())),
        ("n_tokens", pa.int64()),
        ("n_targets", pa.int64()),
        ("trajectory_id", pa.string()),
        ("domain", pa.string()),
        ("source", pa.string()),
        ("turn_idx", pa.int32()),
        ("messages_json", pa.string()),
        ("reference", pa.string()),
        ("truncated_turns", pa.int32()),
        ("drop_reason", pa.string()),
    ]
)
SFT_SAMPLE_COLUMNS = ["trajectory_id", "domain", "turn_idx", "messages_json", "reference", "split"]


def _on_tokenizer(tokenizer, name: str, build):
    """``build(tokenizer)``, kept on the tokenizer (loaded once per worker process) so
    that each block reuses it."""
    cached = getattr(tokenizer, name, None)
    if cached is None:
        cached = build(tokenizer)
        setattr(tokenizer, name, cached)
    return cached


_PER_TRAJECTORY = ("split", "trajectory_id", "domain", "source")
"""Columns whose value is the trajectory's, the same on each of its rows."""


def _columns() -> dict[str, list]:
    return {f.name: [] for f in SAMPLE_SCHEMA}


def _add(cols: dict[str, list], **row: Any) -> None:
    """One row's per-sample values (the others null); n_tokens and n_targets from its
    tokens and mask."""
    tokens, mask = row.get("tokens"), row.get("mask")
    row["n_tokens"] = 0 if tokens is None else int(tokens.size)
    row["n_targets"] = 0 if mask is None else int(np.count_nonzero(mask))
    for name, column in cols.items():
        if name not in _PER_TRAJECTORY:
            column.append(row.get(name))


def _add_rows_for(
    cols: dict[str, list],
    traj,
    e,
    layout,
    meta: dict[str, Any],
    seq_len: int,
    truncation: str,
    sft_rows: str = "turn",
) -> None:
    """The CPT documents and SFT samples (or their drop reasons) of one trajectory,
    appended to ``cols``: built column by column, not as a dict per row. With
    ``sft_rows="trajectory"`` also the samples as whole-conversation rows
    (kind ``sft_window``, chat_tokens.sft_windows), which pack then trains on."""
    first = len(cols["kind"])
    for s in cpt_samples(e, meta["key"], seq_len):
        _add(cols, kind="cpt", key=s.key, tokens=s.tokens, mask=s.mask)
    kept = {}
    for k in range(1, len(traj.turns) + 1):
        s = sft_sample(e, layout, meta["key"], k, seq_len=seq_len, truncation=truncation)
        if isinstance(s, str):
            _add(cols, kind="sft", key=f"{meta['key']}:s:{k:05d}", turn_idx=k, drop_reason=s)
            continue
        kept[k] = s
        _add(
            cols,
            kind="sft",
            key=s.key,
            tokens=s.tokens,
            mask=s.mask,
            turn_idx=k,
            messages_json=s.messages_json,
            reference=s.reference,
            truncated_turns=s.truncated_turns,
        )
    if sft_rows == "trajectory":
        for w in sft_windows(e, layout, meta["key"], kept, seq_len):
            _add(cols, kind=w.kind, key=w.key, tokens=w.tokens, mask=w.mask)
    n = len(cols["kind"]) - first
    for name in _PER_TRAJECTORY:
        cols[name].extend([meta[name]] * n)


def tokenize_block(
    block: pa.Table,
    *,
    tokenizer_url: str,
    storage_options: dict[str, Any],
    seq_len: int,
    truncation: str,
    eval_threshold: float | dict[str, float],
    custom_domains: tuple[str, ...] = (),
    sft_rows: str = "turn",
) -> pa.Table:
    """SAMPLE_SCHEMA rows for a block of kept records (dropped samples carry a reason
    and no tokens). ``eval_threshold``: one split-hash threshold, or one per domain."""
    for name in custom_domains:  # records are validated again when parsed here
        register_domain(name)
    tokenizer = load_tokenizer(tokenizer_url, storage_options)
    layout = _on_tokenizer(tokenizer, "_agentworld_layout", ChatLayout.of)
    trajs = [Trajectory.from_json(r) for r in block.column("record").to_pylist()]
    encoded = encode_trajectories(tokenizer, layout, trajs)
    cols = _columns()
    uids = block.column("uid").to_pylist()
    split_hash = block.column("split_hash").to_pylist()
    for traj, e, uid, h in zip(trajs, encoded, uids, split_hash, strict=True):
        meta = {
            "key": f"{uid & (2**64 - 1):016x}",
            "split": "eval" if h < _threshold(eval_threshold, traj.domain) else "train",
            "trajectory_id": traj.id,
            "domain": traj.domain,
            "source": traj.source,
        }
        _add_rows_for(cols, traj, e, layout, meta, seq_len, truncation, sft_rows)
    return _table(cols)


def _threshold(eval_threshold: float | dict[str, float], domain: str) -> float:
    if isinstance(eval_threshold, dict):
        return eval_threshold.get(domain, 0.0)
    return eval_threshold


def _table(cols: dict[str, list]) -> pa.Table:
    arrays = {
        f.name: _lists(cols[f.name], f.type)
        if pa.types.is_list(f.type)
        else pa.array(cols[f.name], f.type)
        for f in SAMPLE_SCHEMA
    }
    return pa.table(arrays, schema=SAMPLE_SCHEMA)


def _lists(values: list[np.ndarray | None], typ: pa.ListType) -> pa.Array:
    """A list column from numpy arrays (None = null) in one copy."""
    sizes = [0 if v is None else v.size for v in values]
    offsets = pa.array(np.cumsum([0, *sizes]).astype(np.int32))
    present = [v for v in values if v is not None]
    flat = np.concatenate(present) if present else np.empty(0)
    mask = pa.array([v is None for v in values])
    return pa.ListArray.from_arrays(offsets, pa.array(flat, typ.value_type), mask=mask)
