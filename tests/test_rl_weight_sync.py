"""What the RL learner sends its rollout engines is its own weights, bit for bit, with
the learner split as a large run splits it: two ranks under ZeRO-3, each holding half
of every MoE layer's experts (AutoEP). The gather is ``train/export.full_state_dict``,
the HF export's as well. No engine here: test_rl_loop and test_rl_pipeline check that
the engines compute with what they are sent.
"""

from __future__ import annotations

import dataclasses
import os

import pytest

from agentworld.recipes import get_recipe
from agentworld.rl.config import LearnerConfig, RLConfig

pytestmark = pytest.mark.slow  # 78 s under load: Ray, two DeepSpeed ranks


@pytest.fixture(scope="module")
def zero3_learners(ray_cluster, tiny_checkpoint):
    """Learner ranks 0 and 1 (ZeRO-3, experts split 2 ways) on the tiny checkpoint."""
    from agentworld.rl.placement import LearnerGroup, build_placement_group

    rl = RLConfig(learner=LearnerConfig(num_learners=2, expert_parallel_size=2), call_timeout_s=600)
    base = get_recipe("debug_cpu").train
    train = dataclasses.replace(base, zero_stage=3)
    pg = build_placement_group(rl)
    group = LearnerGroup(pg, rl, train, tiny_checkpoint)
    try:
        group.ready()
        yield group
    finally:
        group.close()
        ray_cluster.util.remove_placement_group(pg)


def test_the_learners_send_exactly_the_weights_they_hold(zero3_learners, tiny_checkpoint):
    """Before any step the learners hold the checkpoint they loaded: the blob rank 0
    sends (checkpoint names and layout) equals that file's tensors, every expert of both
    ranks included, in the right places."""
    import ray
    import torch
    from safetensors import safe_open
    from safetensors.torch import load

    sent = load(ray.get(zero3_learners.weights_ref()))
    with safe_open(os.path.join(tiny_checkpoint, "model.safetensors"), "pt") as f:
        held = {k: f.get_tensor(k) for k in f.keys()}
    assert sorted(sent) == sorted(held)
    differ = [k for k in held if not torch.equal(sent[k], held[k])]
    assert not differ, f"{len(differ)} of {len(held)} tensors differ, e.g. {differ[:3]}"
