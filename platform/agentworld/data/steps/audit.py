"""The audit step: the records prepare removed, each with its reason, under
``quarantine/`` (line, error, field, reason, raw text), ``contaminated/`` (overlap and
the evaluation record it matched), ``duplicates/`` (every member of every cluster, the
survivor included, with cluster ids and what it duplicates)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from agentworld.data.hashed_shards import write_sharded
from agentworld.data.labels import only_state
from agentworld.data.report import state_tables
from agentworld.data.steps.base import Done, Step, StepContext, StepResult
from agentworld.data.steps.count import CountResult
from agentworld.data.steps.dedup import DedupResult
from agentworld.io import join

QUARANTINE_COLUMNS = [
    "uid",
    "input",
    "offset",
    "line",
    "error",
    "field",
    "reason",
    "domain",
    "source",
    "raw",
]
CONTAMINATED_COLUMNS = [
    "uid",
    "trajectory_id",
    "domain",
    "source",
    "input",
    "offset",
    "overlap",
    "eval_id",
    "record",
]
DUPLICATE_COLUMNS = [
    "uid",
    "trajectory_id",
    "domain",
    "source",
    "input",
    "offset",
    "state",
    "dup_of",
    "kept_uid",
    "exact_cluster",
    "near_cluster",
]


@dataclass(frozen=True)
class AuditResult(StepResult):
    """Shards written per audit directory."""

    quarantine: int
    contaminated: int
    duplicates: int


def run(ctx: StepContext, done: Done) -> AuditResult:
    shards = write_audit(
        ctx.labelled,
        ctx.job.out,
        counts=state_tables(done[CountResult].states)["totals"],
        clustered=done[DedupResult].clustered,
        rows_per_shard=ctx.job.data.rows_per_shard,
        storage_options=ctx.run_dir.storage_options,
    )
    ctx.progress("audit", ", ".join(f"{k}: {v} shards" for k, v in shards.items()))
    return AuditResult(**shards)


STEP = Step("audit", AuditResult, run)


def _clustered(block: pa.Table) -> pa.Table:
    keep = pc.or_(
        pc.is_valid(block.column("exact_cluster")), pc.is_valid(block.column("near_cluster"))
    )
    return block.filter(keep)


def write_audit(
    labelled: Callable[[list[str]], Any],
    out_url: str,
    *,
    counts: dict[str, int],
    clustered: int,
    rows_per_shard: int,
    storage_options: dict[str, Any],
) -> dict[str, int]:
    """Write the three audit directories; returns shards written per directory.
    ``labelled(columns)``: the labelled ingest rows, reading only those ingest columns
    (state fields among them come from the labels).
    Each directory reads the columns it writes: the features (shingles, bands: most of
    an ingest row) and, outside contaminated/, the record are never read."""

    plans = [
        (
            "quarantine",
            only_state,
            {"state": "quarantined"},
            counts["quarantined"],
            QUARANTINE_COLUMNS,
        ),
        (
            "contaminated",
            only_state,
            {"state": "contaminated"},
            counts["contaminated"],
            CONTAMINATED_COLUMNS,
        ),
        ("duplicates", _clustered, {}, clustered, DUPLICATE_COLUMNS),
    ]
    shards = {}
    for name, fn, kwargs, n_rows, columns in plans:
        rows = labelled(columns).map_batches(fn, batch_format="pyarrow", fn_kwargs=kwargs or None)
        stats = write_sharded(
            rows,
            join(out_url, name),
            n_rows=n_rows,
            rows_per_shard=rows_per_shard,
            key="uid",
            sort_by=["uid"],
            columns=columns,
            spill_url=join(out_url, "_work", "groups", name),
            storage_options=storage_options,
        )
        shards[name] = stats.num_rows
    return shards
