"""GRPO siblings share their prompt: identical prompts in one rollout call (the agent's
group of episodes with one task and seed, on their first turn) reach vLLM as one request
for all their samples, on the real rollout engine (vLLM CPU build, the tiny checkpoint)."""

from __future__ import annotations

import pytest

from agentworld.model.engine import EngineConfig
from agentworld.rl.config import RolloutConfig
from agentworld.rl.rollout import sibling_groups

pytestmark = pytest.mark.slow


def test_sibling_groups_keep_first_appearance_order():
    assert sibling_groups([[1, 2], [3], [1, 2], [3], [4]]) == [[0, 2], [1, 3], [4]]
    assert sibling_groups([]) == []


@pytest.fixture(scope="module")
def engine(tiny_checkpoint):
    from agentworld.rl.rollout import RolloutEngine

    cfg = RolloutConfig(
        max_new_tokens=6,
        temperature=1.0,
        engine=EngineConfig(max_model_len=1024, dtype="float32"),
    )
    e = RolloutEngine(tiny_checkpoint, cfg, seed=0)
    yield e
    e.close()


def test_siblings_of_a_group_come_from_one_engine_request(engine):
    task_a, task_b = list(range(5, 105)), list(range(200, 260))
    prompts = [task_a] * 4 + [task_b] * 4 + [task_a[:50]]
    before = engine.engine_requests
    out = engine.generate(prompts, n=2)
    # Three distinct prompts: three requests, not nine prefills.
    assert engine.engine_requests - before == 3
    assert [len(samples) for samples in out] == [2] * len(prompts)
    # Each sibling has samples of its own (drawn from one request of 8), not copies.
    group_a = [c.token_ids for samples in out[:4] for c in samples]
    assert len(set(group_a)) > 1
    assert all(c.token_ids for samples in out for c in samples)


def test_greedy_siblings_share_one_answer(engine):
    """At temperature 0 a prompt has one answer: one request of one sample serves every
    copy (vLLM refuses n > 1 when greedy)."""
    task = list(range(300, 340))
    before = engine.engine_requests
    out = engine.generate([task, task, task[:20]], n=2, temperature=0.0)
    assert engine.engine_requests - before == 2
    assert [len(samples) for samples in out] == [2, 2, 2]
    assert len({c.token_ids for samples in out[:2] for c in samples}) == 1
