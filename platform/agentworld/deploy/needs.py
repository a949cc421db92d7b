"""What a stage asks of its cluster, read from its recipe (with the entrypoint's --set
overrides) and arguments: Ray Train
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
        learn, roll = recipe.rl.learner, recipe.rl.rollout.engine
        return Needs(
            learn.num_learners * learn.gpus_per_learner + roll.replicas * roll.gpus_per_replica,
            learn.num_learners * learn.cpus_per_learner + roll.replicas * roll.cpus_per_replica,
            f"{learn.num_learners} learners and {roll.replicas} rollout engines (recipe.rl)",
        )
    if stage == "evaluate" and getattr(args, "model", None) and hasattr(recipe, "evaluate"):
        engine = recipe.evaluate.infer.vllm.engine
        n = engine.replicas
        return Needs(
            n * engine.gpus_per_replica,
            n * engine.cpus_per_replica,
            f"{n} vLLM engines (recipe.evaluate.infer.vllm)",
        )
    return None
