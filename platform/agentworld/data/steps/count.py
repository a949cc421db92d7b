"""The count step: ingest rows per (domain, source, input, final state), checked for
conservation against the lines read, and the per-domain split-hash thresholds of the
held-out split."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from agentworld.data.config import DataConfig
from agentworld.data.report import STATE_KEYS, conserved, grouped_counts, state_tables
from agentworld.data.steps.base import Done, Step, StepContext, StepResult
from agentworld.data.steps.ingest import IngestResult


@dataclass(frozen=True)
class CountResult(StepResult):
    states: list[dict[str, Any]]
    """(domain, source, input, state, n) rows (agentworld.data.report.STATE_KEYS)."""
    eval_threshold: dict[str, float]
    """Per domain, the split hash below which a trajectory is held out."""


def run(ctx: StepContext, done: Done) -> CountResult:
    read = done[IngestResult].rows
    # Only the columns counted: a block's records and raw lines are most of its bytes.
    rows = grouped_counts(ctx.labelled(STATE_KEYS), STATE_KEYS)
    tables = state_tables(rows)
    if tables["totals"]["read"] != read or not conserved(tables["totals"]):
        raise RuntimeError(f"counts are not conserved: {tables['totals']} vs {read} read")
    kept_by_domain = {d: c["kept"] for d, c in tables["by_domain"].items() if c["kept"]}
    thresholds = eval_thresholds(ctx.kept(["domain", "split_hash"]), ctx.job.data, kept_by_domain)
    ctx.progress("count", " ".join(f"{k}={v}" for k, v in tables["totals"].items()))
    return CountResult(states=rows, eval_threshold=thresholds)


STEP = Step("count", CountResult, run)


def _extremes(block: pa.Table, *, k: int) -> pa.Table:
    """Per domain of a block: its k smallest split hashes and its largest one."""
    domains = block.column("domain").to_pylist()
    hashes = block.column("split_hash").to_numpy(zero_copy_only=False)
    rows: dict[str, list[float]] = {}
    for d in set(domains):
        h = np.sort(hashes[np.asarray(domains) == d])
        # Each hash once: the merged list's k smallest must be the domain's.
        rows[d] = h.tolist() if h.size <= k + 1 else [*h[:k].tolist(), float(h[-1])]
    out = [(d, v) for d, vs in rows.items() for v in vs]
    return pa.table({"domain": [d for d, _ in out], "split_hash": [v for _, v in out]})


def eval_thresholds(ds, cfg: DataConfig, kept_by_domain: dict[str, int]) -> dict[str, float]:
    """Per domain, the split-hash threshold below which a trajectory is held out:
    eval_fraction, raised so that the domain's min_eval_trajectories smallest hashes are
    held out (stratified: every domain is evaluated, however small its share), capped
    so that the domain's largest hash trains (a domain with a single kept trajectory
    trains on it)."""
    k = cfg.min_eval_trajectories
    if not kept_by_domain:
        return {}
    parts = ds.map_batches(_extremes, batch_format="pyarrow", fn_kwargs={"k": k}).take_all()
    hashes: dict[str, list[float]] = {}
    for r in parts:
        hashes.setdefault(r["domain"], []).append(r["split_hash"])
    out = {}
    for domain, n in kept_by_domain.items():
        h = sorted(hashes.get(domain, [1.0]))
        threshold = cfg.eval_fraction
        hold = min(k, n - 1)
        if hold > 0:
            threshold = max(threshold, float(np.nextafter(h[hold - 1], 1.0)))
        out[domain] = min(threshold, h[-1]) if n > 1 else min(threshold, h[0])
    return dict(sorted(out.items()))
