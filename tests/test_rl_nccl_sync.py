"""The NCCL weight sync's parts that run without a GPU: the group's rank plan, what the
engines are told to expect (the checkpoint's own names, as the file-based sync sends
them), and the config refusing the path where there is no GPU. The broadcast itself
needs CUDA (``bench/bench_rl.py --weight-sync nccl`` on a GPU machine)."""

from __future__ import annotations

import dataclasses
import os

import pytest
from safetensors.torch import load, load_file

from agentworld.config import ConfigError
from agentworld.recipes import get_recipe
from agentworld.rl.learner import CheckpointLayout
from agentworld.rl.nccl_sync import transfer_plan, update_info


def test_every_engine_worker_gets_its_own_rank_after_the_sender():
    plan = transfer_plan(replicas=3, workers_per_replica=2)
    assert plan.world_size == 7
    ranks = [o + w for o in plan.rank_offsets for w in range(2)]
    assert sorted(ranks) == list(range(1, 7))  # none is 0 (the sender), none twice
    with pytest.raises(ValueError, match="engine"):
        transfer_plan(replicas=0, workers_per_replica=1)


def test_the_engines_expect_the_checkpoints_names_shapes_and_dtypes(tiny_checkpoint):
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_checkpoint, dtype=torch.float32)
    state = {k: v.detach() for k, v in model.state_dict().items()}
    layout = CheckpointLayout(model.config)
    info = update_info(layout.tensors(state))
    on_disk = load_file(os.path.join(tiny_checkpoint, "model.safetensors"))
    assert sorted(info["names"]) == sorted(on_disk)  # what vLLM's load_weights reads
    blob = load(layout(state))  # the object-store path: the same tensors
    assert info["names"] == list(layout.tensors(state))
    for name, dtype, shape in zip(info["names"], info["dtype_names"], info["shapes"], strict=True):
        assert (dtype, shape) == (
            str(on_disk[name].dtype).removeprefix("torch."),
            list(blob[name].shape),
        )
        assert list(on_disk[name].shape) == shape


def test_nccl_sync_is_refused_without_gpus():
    rl = get_recipe("debug_cpu").rl
    rollout = dataclasses.replace(rl.rollout, weight_sync="nccl")
    with pytest.raises(ConfigError, match="rl.rollout.weight_sync"):
        dataclasses.replace(rl, rollout=rollout)
    engine = dataclasses.replace(rollout.engine, gpus_per_replica=1.0)
    gpu = dataclasses.replace(rollout, engine=engine)
    learner = dataclasses.replace(rl.learner, gpus_per_learner=1.0)
    assert dataclasses.replace(rl, rollout=gpu, learner=learner).rollout.weight_sync == "nccl"
