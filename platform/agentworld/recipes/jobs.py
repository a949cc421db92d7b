"""Jobs built from a recipe: each stage's job takes its own sections of the recipe and
the few values it needs from others, never the whole Recipe; these functions are the
one place that picks them. The jobs (``jobs/*.py``), the pipeline and the tests call
them."""

from __future__ import annotations

import dataclasses
from typing import Literal

from agentworld.agent.job import AgentJob
from agentworld.data.job import PrepareJob
from agentworld.recipes.config import Recipe
from agentworld.rl.job import RLJob
from agentworld.train.job import TrainJob


def prepare_job(
    recipe: Recipe, *, inputs: tuple[str, ...], out: str, eval_sets: tuple[str, ...] = ()
) -> PrepareJob:
    return PrepareJob(
        inputs=tuple(inputs),
        out=out,
        eval_sets=tuple(eval_sets),
        data=recipe.data,
        model=recipe.model,
        seq_len=recipe.train.seq_len,
        recipe_name=recipe.name,
    )


def train_job(
    recipe: Recipe,
    *,
    stage: Literal["cpt", "sft"],
    data: str,
    out: str,
    init: str | None = None,
) -> TrainJob:
    """A CPT or SFT job; its manifest records the recipe with the stage's own training
    settings (SFT's steps and learning rate)."""
    job = TrainJob(
        stage=stage,
        data=data,
        out=out,
        init=init,
        model=recipe.model,
        train=recipe.train,
        cluster=recipe.cluster,
        name=recipe.name,
    )
    config = dataclasses.asdict(dataclasses.replace(recipe, train=job.train))
    return dataclasses.replace(job, config=config)


def rl_job(recipe: Recipe, *, data: str, init: str, out: str) -> RLJob:
    config = dataclasses.asdict(recipe)
    return RLJob(data=data, init=init, out=out, rl=recipe.rl, train=recipe.train, config=config)


def agent_job(
    recipe: Recipe,
    *,
    command: Literal["train", "evaluate"],
    out: str,
    world_model: str,
    data: str | None = None,
    agents: dict[str, str] | None = None,
) -> AgentJob:
    return AgentJob(
        command=command,
        out=out,
        world_model=world_model,
        data=data,
        agents=agents or {},
        cfg=recipe.agent,
        train=recipe.train,
        config=dataclasses.asdict(recipe),
    )
