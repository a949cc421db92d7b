"""The memory step: with ``data.observation_memory``, ``tokenizer/memory.parquet``, every
turn of the kept training trajectories as an entry of the model's observation memory
(agentworld.model.memory), in uid and turn order whatever the block layout."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pyarrow as pa

from agentworld.data.steps.base import Done, Step, StepContext, StepResult
from agentworld.data.steps.count import CountResult


@dataclass(frozen=True)
class MemoryResult(StepResult):
    entries: int
    """Turns in the memory (0: the run has none)."""


def run(ctx: StepContext, done: Done) -> MemoryResult:
    from agentworld.data.steps.tokenizer import training_sample
    from agentworld.io import write_bytes
    from agentworld.model.memory import FILE, Entry, ObservationMemory

    if not ctx.job.data.observation_memory:
        ctx.progress("memory", "off (data.observation_memory)")
        return MemoryResult(entries=0)
    rows = ctx.kept(["uid", "record", "domain", "split_hash", "trajectory_id"]).map_batches(
        training_sample,
        batch_format="pyarrow",
        fn_kwargs={"thresholds": done[CountResult].eval_threshold, "fraction": 1.0},
    )
    batches = rows.sort("uid").map_batches(_entries, batch_format="pyarrow")
    entries = [
        Entry(*row)
        for b in batches.iter_batches(batch_format="pyarrow")
        for row in zip(*(b.column(n).to_pylist() for n in Entry.FIELDS), strict=True)
    ]
    memory = ObservationMemory(entries)
    run_dir = ctx.run_dir
    write_bytes(run_dir.url("tokenizer", FILE), memory.to_parquet(), **run_dir.storage_options)
    ctx.progress("memory", f"{len(memory)} training turns")
    return MemoryResult(entries=len(memory))


STEP = Step("memory", MemoryResult, run)


def _entries(block: pa.Table) -> pa.Table:
    """One row per turn: what it is matched on, the observation that followed, the
    trajectory id."""
    from agentworld.model.memory import match_text
    from agentworld.schema.compact import compact_environment

    out: dict[str, list[str]] = {"query": [], "observation": [], "trajectory": []}
    for record in block.column("record").to_pylist():
        r = json.loads(record)
        system = compact_environment(r["environment"])
        for turn in r["turns"]:
            out["query"].append(match_text(system, turn["action"]))
            out["observation"].append(turn["observation"])
            out["trajectory"].append(r["id"])
    return pa.table(out)
