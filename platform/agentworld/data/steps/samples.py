"""The samples step: the kept SFT samples, un-packed, as
``samples/sft/part-XXXXX.parquet`` (agentworld.data.sample_rows.SFT_SAMPLE_COLUMNS; shards
a killed run already wrote are kept)."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from agentworld.data.hashed_shards import write_sharded
from agentworld.data.placement import read_staging
from agentworld.data.sample_rows import SFT_SAMPLE_COLUMNS
from agentworld.data.steps.base import Done, Step, StepContext, StepResult
from agentworld.data.steps.tokenize import TokenizeResult


@dataclass(frozen=True)
class SamplesResult(StepResult):
    sft_samples: int
    shards: int


def run(ctx: StepContext, done: Done) -> SamplesResult:
    run_dir = ctx.run_dir
    n = sum(
        r["n"] for r in done[TokenizeResult].rows if r["kind"] == "sft" and r["drop_reason"] is None
    )
    # Only the columns the shards hold: the tokens and masks (most of the staging
    # bytes) would otherwise travel through the shuffle to be dropped at the write.
    samples = read_staging(
        run_dir.url("_work", "samples"),
        run_dir.storage_options,
        columns=["kind", "drop_reason", *SFT_SAMPLE_COLUMNS],
    ).map_batches(_sft_kept, batch_format="pyarrow")
    stats = write_sharded(
        samples,
        run_dir.url("samples", "sft"),
        n_rows=n,
        rows_per_shard=ctx.job.data.rows_per_shard,
        key="trajectory_id",
        sort_by=["trajectory_id", "turn_idx"],
        columns=SFT_SAMPLE_COLUMNS,
        spill_url=run_dir.url("_work", "groups", "samples"),
        storage_options=run_dir.storage_options,
        skip_existing=True,
    )
    ctx.progress("samples", f"{n} SFT samples in {stats.num_rows} shards")
    return SamplesResult(sft_samples=n, shards=stats.num_rows)


STEP = Step("samples", SamplesResult, run)


def _sft_kept(block: pa.Table) -> pa.Table:
    keep = pc.and_(pc.equal(block.column("kind"), "sft"), pc.is_null(block.column("drop_reason")))
    return block.filter(keep)
