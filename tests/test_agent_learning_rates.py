"""The agent's learner fits demonstrations at ``agent.demo_learning_rate`` and takes its
GRPO steps at ``rl.learner.learning_rate``, on one live optimizer (a real DeepSpeed
learner rank in the session's Ray cluster): each phase's optimizer steps report the
rate they used, switching both ways. Its KL term holds RL near the agent as it stood
after the demonstrations (``rl.kl_reference="frozen"``), not the world model it loaded."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest

from agentworld.agent.config import AgentConfig
from agentworld.agent.demos import conversation_transcript, fit_demonstrations
from agentworld.agent.episodes import Episode
from agentworld.agent.grpo import grpo_step
from agentworld.agent.policy import Renderer
from agentworld.agent.tasks import Task
from agentworld.config import ConfigError
from agentworld.model import load_tokenizer
from agentworld.recipes import get_recipe

FIT_LR, RL_LR, KL = 3e-3, 2e-4, 0.05


@pytest.fixture(scope="module")
def learners(ray_cluster, tiny_checkpoint):
    """One learner rank (no rollout engine is started: only its bundle is reserved)."""
    from agentworld.rl.placement import LearnerGroup, build_placement_group

    recipe = get_recipe("debug_cpu")
    rl = recipe.agent.rl
    learner = dataclasses.replace(rl.learner, learning_rate=RL_LR)
    rl = dataclasses.replace(rl, learner=learner, kl_coef=KL)
    assert rl.kl_reference == "frozen"  # the agent's default
    pg = build_placement_group(rl)
    group = LearnerGroup(pg, rl, recipe.train, tiny_checkpoint)
    try:
        group.ready()
        yield group, rl
    finally:
        group.close()
        ray_cluster.util.remove_placement_group(pg)


def _transcripts(tiny_checkpoint: str) -> list:
    renderer = Renderer(load_tokenizer(tiny_checkpoint), max_observation_tokens=32)
    return [
        conversation_transcript(
            renderer, "terminal", "files: a.csv", [f"wc -l a.csv # {i}", f"answer {i}"], ["3"]
        )
        for i in range(4)
    ]


@pytest.fixture(scope="module")
def agent(learners, tiny_checkpoint):
    """The learners with what a fit needs; ``fit()`` takes two demonstration steps."""
    group, rl = learners
    cfg = AgentConfig(rl=rl, demo_learning_rate=FIT_LR)
    transcripts = _transcripts(tiny_checkpoint)
    pad_id = load_tokenizer(tiny_checkpoint).pad_token_id

    def fit() -> list[dict]:
        return fit_demonstrations(
            group, transcripts, steps=2, batch=2, pad_id=pad_id, max_tokens=256, seed=0,
            learning_rate=cfg.fit_learning_rate,
        )  # fmt: skip

    return SimpleNamespace(group=group, rl=rl, transcripts=transcripts, pad_id=pad_id, fit=fit)


@pytest.mark.slow  # a DeepSpeed learner rank (CONTRIBUTING: heavy components are slow)
def test_the_fit_and_the_rl_steps_each_step_at_their_own_rate(agent):
    group, rl, transcripts, pad_id = agent.group, agent.rl, agent.transcripts, agent.pad_id
    fit = agent.fit()
    assert [s["lr"] for s in fit] == pytest.approx([FIT_LR, FIT_LR])

    task = Task(id="t0", family="terminal", prompt="How many rows?", answer="3")

    def rollout(slots):  # one sibling of each group succeeds: no group is flat
        return [
            Episode(task=s.task, mode="real", seed=s.seed, group=s.group,
                    reward=float(i % rl.group_size == 0), transcript=transcripts[i % 4])
            for i, s in enumerate(slots)
        ]  # fmt: skip

    workers = SimpleNamespace(learners=group)
    metrics, _ = grpo_step(
        0, [task], rl, workers=workers, rollout=rollout, sync=lambda: 0.0, pad_id=pad_id
    )
    assert metrics["learner/skipped"] == 0.0
    assert metrics["learner/lr"] == pytest.approx(RL_LR)
    # Back to the fit (a later variant's fit, or a fit after a load): its rate again.
    assert [s["lr"] for s in agent.fit()] == pytest.approx([FIT_LR] * 2)


@pytest.mark.slow  # a DeepSpeed learner rank (CONTRIBUTING: heavy components are slow)
def test_the_kl_reference_is_the_agent_after_its_demonstrations(agent):
    # No reference before the freeze: the weights move from the loaded ones, no KL.
    assert [s["kl"] for s in agent.fit()] == [0.0, 0.0]
    agent.group.freeze_reference()
    first, second = agent.fit()
    assert first["kl"] == pytest.approx(0.0, abs=1e-7)  # the reference is these weights
    assert second["kl"] > 1e-6  # and it stays put while they move


def test_the_fit_takes_the_rl_rate_unless_given_its_own():
    rl = get_recipe("debug_cpu").agent.rl
    assert AgentConfig(rl=rl).fit_learning_rate == rl.learner.learning_rate
    assert AgentConfig(rl=rl, demo_learning_rate=FIT_LR).fit_learning_rate == FIT_LR
    with pytest.raises(ConfigError, match="agent.demo_learning_rate"):
        AgentConfig(demo_learning_rate=0.0)
