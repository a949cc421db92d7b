"""The ingest step: every input line read once, as a record or a quarantined line, with
the per-record features (shingles, MinHash bands, contamination against the evaluation
sets), written to ``_work/ingest/``.

The staging dataset holds every input line exactly once, which is what the
conservation of counts rests on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentworld.data.config import DataConfig
from agentworld.data.decontam import EvalIndex, build_eval_index
from agentworld.data.features import FeatureSpec, featurize
from agentworld.data.ingest_rows import ReaderSpec, plan_ranges, read_range
from agentworld.data.placement import (
    broadcast,
    fetch,
    read_ranges,
    storage_options_for,
    write_staging,
)
from agentworld.data.steps.base import Done, Step, StepContext, StepResult


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
    ds = ingest_dataset(list(job.inputs), job.data, storage_options_of(job.inputs), index)
    rows = write_staging(ds, run_dir.url("_work", "ingest"), run_dir.storage_options)
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
    from agentworld.schema import Trajectory

    spec = reader_spec(cfg, storage_options)
    trajs = []
    for r in plan_ranges(urls, split_bytes=cfg.split_bytes, storage_options=storage_options):
        for block in read_range(r, spec):
            for status, record in zip(
                block.column("status").to_pylist(), block.column("record").to_pylist(), strict=True
            ):
                if status == "ok":
                    trajs.append(Trajectory.from_json(record))
    return build_eval_index(trajs, cfg.decontam_ngram)


def _featurize_block(block, *, spec: FeatureSpec, index_holder: dict | None):
    return featurize(block, spec, fetch(index_holder))


def ingest_dataset(
    inputs: list[str], cfg: DataConfig, storage_options: dict[str, Any], index: EvalIndex | None
):
    """The lazy Ray Dataset of ingest rows with features (INGEST_SCHEMA + FEATURE_FIELDS)."""
    ranges = plan_ranges(inputs, split_bytes=cfg.split_bytes, storage_options=storage_options)
    if not ranges:
        raise FileNotFoundError(f"no shards (.jsonl, .jsonl.gz, .parquet) under {inputs}")
    ds = read_ranges(ranges, reader_spec(cfg, storage_options))
    holder = broadcast(index) if index is not None and not index.empty else None
    return ds.map_batches(
        _featurize_block,
        batch_format="pyarrow",
        batch_size=None,
        fn_kwargs={"spec": feature_spec(cfg), "index_holder": holder},
    )
