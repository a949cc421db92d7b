"""The dedup step: exact and near-duplicate clusters of the clean records (parsed and
not contaminated), written as ``_work/labels.parquet`` (agentworld.data.duplicates does the
work on Ray Data)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from agentworld.data.placement import dataset_from_refs, run_tasks, staging_files
from agentworld.data.steps.base import Done, Step, StepContext, StepResult
from agentworld.io import read_parquet, write_parquet


@dataclass(frozen=True)
class DedupResult(StepResult):
    """agentworld.data.duplicates.DedupStats, the clustered records and the LSH shape."""

    exact_clusters: int
    candidate_pairs: int
    verified_pairs: int
    cc_rounds: int
    near_clusters: int
    extra: dict[str, Any]
    clustered: int
    """Records in a cluster (survivors included): the rows of labels.parquet."""
    bands: int
    rows: int


def run(ctx: StepContext, done: Done) -> DedupResult:
    # not at the top: it brings numba into this light module
    from agentworld.data.duplicates import find_duplicates

    cfg, run_dir = ctx.job.data, ctx.run_dir
    labels, stats = find_duplicates(
        clean_records_of(
            run_dir.url("_work", "ingest"), run_dir.storage_options, workers=cfg.num_workers
        ),
        cfg,
        lambda m: ctx.progress("dedup", m),
    )
    write_parquet(run_dir.url("_work", "labels.parquet"), labels.table, **run_dir.storage_options)
    bands, rows = cfg.lsh_shape()
    return DedupResult(
        **dataclasses.asdict(stats), clustered=labels.table.num_rows, bands=bands, rows=rows
    )


STEP = Step("dedup", DedupResult, run)


DEDUP_COLUMNS = ["uid", "exact_hash", "pkey", "bands", "shingles"]


def clean_records_of(ingest_url: str, storage_options: dict[str, Any], *, workers: int):
    """The dataset find_duplicates takes, materialized: clean_records over each ingest
    staging file under ``ingest_url``, read with only the columns it needs, one plain
    task per file (a Ray Data read of the same files cost 0.1-0.2 s more on 2 CPUs)."""
    files = staging_files(ingest_url, storage_options)
    blocks = run_tasks(
        _clean_file,
        files,
        workers=workers,
        refs=True,
        fn_kwargs={"storage_options": storage_options},
    )
    return dataset_from_refs(blocks)


def _clean_file(url: str, *, storage_options: dict[str, Any]) -> pa.Table:
    columns = ["status", "contaminated", *DEDUP_COLUMNS]
    return clean_records(read_parquet(url, columns=columns, **storage_options))


def clean_records(block: pa.Table) -> pa.Table:
    """The dedup columns of the parsed, uncontaminated records. The columns are chosen
    before the rows: filtering first copied every column of the block, the record's
    JSON text included, only to drop them."""
    ok = pc.and_(
        pc.equal(block.column("status"), "ok"),
        pc.invert(block.column("contaminated").fill_null(False)),
    )
    return block.select(DEDUP_COLUMNS).filter(ok)
