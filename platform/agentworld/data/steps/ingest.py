"""The ingest step: every input line read once, as a record or a quarantined line, with
the per-record features (shingles, MinHash bands, contamination against the evaluation
sets), written to ``_work/ingest/``.

The staging dataset holds every input line exactly once, which is what the
conservation of counts rests on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agentworld.data.config import DataConfig
from agentworld.data.decontam import EvalIndex, build_eval_index
from agentworld.data.features import FeatureSpec, featurize
from agentworld.data.ingest_rows import ReaderSpec, ReadRange, plan_ranges, read_range
from agentworld.data.placement import (
    STAGING_FILE_BYTES,
    broadcast,
    fetch,
    run_tasks,
    storage_options_for,
)
from agentworld.data.steps.base import Done, Step, StepContext, StepResult
from agentworld.data.text import hash64
from agentworld.io import join, write_parquet_chunks
from agentworld.schema import Trajectory


@dataclass(frozen=True)
class IngestResult(StepResult):
    rows: int
    """Input lines read (records and quarantined lines)."""


def run(ctx: StepContext, done: Done) -> IngestResult:
    job, run_dir = ctx.job, ctx.run_dir
    index = None
    if job.eval_sets:
        index = read_eval_sets(list(job.eval_sets), job.data, storage_options_of(job.eval_sets))
        ctx.progress("ingest", f"eval sets: {len(index.ids)} records, {index.hashes.size} n-grams")
    run_dir.clear("_work", "ingest")
    rows = ingest_to_staging(
        list(job.inputs),
        job.data,
        storage_options_of(job.inputs),
        index,
        url=run_dir.url("_work", "ingest"),
        staging_options=run_dir.storage_options,
        log=lambda m: ctx.progress("ingest", m),
    )
    ctx.progress("ingest", f"{rows} records read")
    return IngestResult(rows=rows)


STEP = Step("ingest", IngestResult, run)


def storage_options_of(urls) -> dict[str, Any]:
    """Storage options for a list of inputs (they share one object store, if any)."""
    for url in urls:
        opts = storage_options_for(url)
        if opts:
            return opts
    return {}


def reader_spec(cfg: DataConfig, storage_options: dict[str, Any]) -> ReaderSpec:
    return ReaderSpec(
        fmt=cfg.input_format,
        block_records=cfg.block_records,
        min_turns=cfg.min_turns,
        max_record_chars=cfg.max_record_chars,
        custom_domains=cfg.custom_domains,
        storage_options=storage_options,
    )


def feature_spec(cfg: DataConfig) -> FeatureSpec:
    bands, rows = cfg.lsh_shape()
    return FeatureSpec(
        shingle_size=cfg.shingle_size,
        num_perm=cfg.num_perm,
        bands=bands,
        rows=rows,
        seed=cfg.seed,
        priority=cfg.survivor_priority,
        decontam_threshold=cfg.decontam_threshold,
    )


def read_eval_sets(urls: list[str], cfg: DataConfig, storage_options: dict[str, Any]) -> EvalIndex:
    """The n-gram index of the evaluation sets (read on the driver: they are small)."""

    spec = reader_spec(cfg, storage_options)
    trajs = []
    for r in plan_ranges(
        urls, split_bytes=cfg.split_bytes, storage_options=storage_options, fmt=cfg.input_format
    ):
        for block in read_range(r, spec):
            for status, record in zip(
                block.column("status").to_pylist(), block.column("record").to_pylist(), strict=True
            ):
                if status == "ok":
                    trajs.append(Trajectory.from_json(record))
    return build_eval_index(trajs, cfg.decontam_ngram)


def ingest_to_staging(
    inputs: list[str],
    cfg: DataConfig,
    storage_options: dict[str, Any],
    index: EvalIndex | None,
    *,
    url: str,
    staging_options: dict[str, Any],
    log: Callable[[str], None] = print,
) -> int:
    """Ingest rows with features (INGEST_SCHEMA + FEATURE_FIELDS) of every input line,
    written under ``url`` as Parquet files of about STAGING_FILE_BYTES; returns the
    rows written. One plain Ray task per file or byte range (``cfg.num_workers`` at a
    time) reads, featurizes and writes its range a block at a time."""
    ranges = plan_ranges(
        inputs, split_bytes=cfg.split_bytes, storage_options=storage_options, fmt=cfg.input_format
    )
    if not ranges:
        raise FileNotFoundError(f"no shards (.jsonl, .jsonl.gz, .parquet) under {inputs}")
    step = max(1, len(ranges) // 10)

    def progress(done: int, total: int) -> None:
        if done % step == 0 or done == total:
            log(f"{done}/{total} input ranges read")

    counts = run_tasks(
        ingest_range,
        ranges,
        workers=cfg.num_workers,
        progress=progress,
        fn_kwargs={
            "reader": reader_spec(cfg, storage_options),
            "features": feature_spec(cfg),
            "index_holder": broadcast(index) if index is not None and not index.empty else None,
            "url": url,
            "storage_options": staging_options,
        },
    )
    return sum(counts)


def ingest_range(
    r: ReadRange,
    *,
    reader: ReaderSpec,
    features: FeatureSpec,
    index_holder: dict | None,
    url: str,
    storage_options: dict[str, Any],
) -> int:
    """Read, featurize and write one range (a task): blocks are gathered up to
    STAGING_FILE_BYTES and each gathering written as one file (a row group per block),
    named by the range and its position in it, so that a retried task rewrites its own
    files and adds none."""

    index, rows, files = fetch(index_holder), 0, 0
    pending: list = []

    def flush() -> None:
        nonlocal files, pending
        name = f"part-{hash64(f'{r.url}:{r.start}'):016x}-{files:05d}.parquet"
        write_parquet_chunks(join(url, name), pending[0].schema, pending, **storage_options)
        files, pending = files + 1, []

    for block in read_range(r, reader):
        pending.append(featurize(block, features, index))
        rows += block.num_rows
        if sum(t.nbytes for t in pending) >= STAGING_FILE_BYTES:
            flush()
    if pending:
        flush()
    return rows
