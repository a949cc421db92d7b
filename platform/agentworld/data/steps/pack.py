"""The pack step: the tokenized samples packed into
``packed/{cpt,sft}/{train,eval}/part-XXXXX.parquet`` (agentworld.data.packed_shards;
shards a killed run already wrote are kept)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentworld.data.packed_shards import pack_samples
from agentworld.data.placement import read_staging
from agentworld.data.steps.base import Done, Step, StepContext, StepResult
from agentworld.data.steps.tokenize import TokenizeResult
from agentworld.data.steps.train_tokenizer import TokenizerResult


@dataclass(frozen=True)
class PackResult(StepResult):
    shards: list[dict[str, Any]]
    """One agentworld.data.packed_shards.PACK_STATS row per shard."""


def run(ctx: StepContext, done: Done) -> PackResult:
    cfg, run_dir = ctx.job.data, ctx.run_dir
    counts: dict[tuple[str, str], int] = {}
    for r in done[TokenizeResult].rows:
        if r["drop_reason"] is None:
            counts[(r["kind"], r["split"])] = counts.get((r["kind"], r["split"]), 0) + r["n"]
    stats = pack_samples(
        read_staging(
            run_dir.url("_work", "samples"),
            run_dir.storage_options,
            columns=["kind", "split", "key", "tokens", "mask", "drop_reason"],
        ),
        counts,
        base_url=run_dir.url("packed"),
        seq_len=ctx.job.seq_len,
        pad_id=done[TokenizerResult].pad_id,
        pack_window=cfg.pack_window,
        seed=cfg.seed,
        cpt_split_min=cfg.cpt_split_min,
        spill_url=run_dir.url("_work", "groups", "pack"),
        storage_options=run_dir.storage_options,
        kinds={"cpt": "cpt", SFT_ROWS[cfg.sft_rows]: "sft"},
    )
    ctx.progress("pack", f"{stats.num_rows} shards, {sum(stats.column('rows').to_pylist())} rows")
    return PackResult(shards=stats.to_pylist())


STEP = Step("pack", PackResult, run)
SFT_ROWS = {"turn": "sft", "trajectory": "sft_window"}
"""The sample kind packed as SFT's training rows, per data.sft_rows."""
