"""What a stage asks of its cluster, read from its recipe and arguments: Ray Train
workers (cpt, sft), learners plus rollout engines (rl), vLLM engines (evaluate with a
local model). The validator checks that a RayJob's worker groups can hold it."""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass(frozen=True)
class Needs:
    gpus: float
    cpus: float
    what: str
    """Where the numbers come from, for the error message."""


def stage_needs(stage: str, recipe: Any, args: Any) -> Needs | None:
    """None when the stage's footprint is not known from its recipe."""
    if stage in ("cpt", "sft"):
        c = recipe.cluster
        gpus = c.num_workers * c.gpus_per_worker if c.use_gpu else 0
        return Needs(
            gpus,
            c.num_workers * c.cpus_per_worker,
            f"{c.num_workers} Ray Train workers (recipe.cluster)",
        )
    if stage == "rl" and hasattr(recipe, "rl"):
        learn, roll = recipe.rl.learner, recipe.rl.rollout
        return Needs(
            learn.num_learners * learn.gpus_per_learner + roll.num_engines * roll.gpus_per_engine,
            learn.num_learners * learn.cpus_per_learner + roll.num_engines * roll.cpus_per_engine,
            f"{learn.num_learners} learners and {roll.num_engines} rollout engines (recipe.rl)",
        )
    if stage == "evaluate" and getattr(args, "model", None) and hasattr(recipe, "evaluate"):
        vllm = recipe.evaluate.infer.vllm
        n = getattr(args, "replicas", None) or vllm.replicas
        return Needs(
            n * vllm.num_gpus, n * vllm.num_cpus, f"{n} vLLM engines (recipe.evaluate.infer.vllm)"
        )
    return None
