"""RL on the pipeline's own outputs, with the learner split the way a large run splits
it: prepare's samples of the collected corpus and a short CPT export (Ray Train +
DeepSpeed; the session's, shared with test_train) as the starting policy; two learner
ranks under ZeRO-3 with the experts split between them (AutoEP), one vLLM engine. What
is checked is the weight sync: rank 0's gather of the ZeRO-3 partitions and of both
ranks' expert slices is the learners' weights bit for bit, and it reaches the engine,
whose log-probabilities then equal the learners'.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from agentworld.model.engine import EngineConfig
from agentworld.rl.config import LearnerConfig, RLConfig, RolloutConfig
from tests.test_rl_loop import SYNC_ATOL, _probe, probe_batch
from tests.test_train import short_recipe

pytestmark = pytest.mark.slow


def _recipe(**train):
    base = short_recipe()
    return dataclasses.replace(base, train=dataclasses.replace(base.train, **train))


@pytest.fixture(scope="module")
def pipeline_outputs(packed_data, cpt_run, tmp_path_factory):
    """(prepare's run directory, the starting policy, a directory for the RL run): the
    session's prepare output for the collected corpus and its short CPT export, made by
    the stages themselves (shared with test_train)."""
    return packed_data, f"{cpt_run[0]}/hf", tmp_path_factory.mktemp("rl-pipeline")


@pytest.fixture(scope="module")
def parallel_recipe():
    """ZeRO-3, two learner ranks, experts split 2 ways; a 2-step run."""
    rl = RLConfig(
        contexts_per_step=4,
        group_size=4,
        max_steps=2,
        seed=0,
        rollout=RolloutConfig(
            max_new_tokens=32,
            max_prompt_tokens=512,
            engine=EngineConfig(max_model_len=1024, dtype="float32"),
        ),
        learner=LearnerConfig(num_learners=2, expert_parallel_size=2),
        checkpoint_every=2,
        call_timeout_s=600,
    )
    recipe = _recipe(zero_stage=3)
    return dataclasses.replace(recipe, rl=rl)


@pytest.fixture(scope="module")
def parallel_workers(ray_cluster, pipeline_outputs, parallel_recipe):
    from agentworld.rl.placement import RLWorkers

    w = RLWorkers(parallel_recipe.rl, parallel_recipe.train, pipeline_outputs[1])
    yield w
    w.close()


def test_the_learners_send_exactly_the_weights_they_hold(pipeline_outputs, parallel_workers):
    """Before any step the learners hold the export they loaded: the blob rank 0 sends
    (the gather of ``train/export.full_state_dict``, the HF export's too: ZeRO-3
    partitions and both ranks' expert slices, in checkpoint names and layout) equals that
    file's tensors bit for bit. Runs before the RL test below, which moves the weights."""
    import os

    import ray
    import torch
    from safetensors import safe_open
    from safetensors.torch import load

    sent = load(ray.get(parallel_workers.learners.weights_ref()))
    with safe_open(os.path.join(pipeline_outputs[1], "model.safetensors"), "pt") as f:
        held = {k: f.get_tensor(k) for k in f.keys()}
    assert sorted(sent) == sorted(held)
    differ = [k for k in held if not torch.equal(sent[k], held[k])]
    assert not differ, f"{len(differ)} of {len(held)} tensors differ, e.g. {differ[:3]}"


def test_rl_on_prepare_and_cpt_outputs_with_zero3_and_expert_parallel_learners(
    pipeline_outputs, parallel_recipe, parallel_workers
):
    from agentworld.model import load_tokenizer
    from agentworld.recipes.jobs import rl_job
    from agentworld.rl.learner import learner_deepspeed_config
    from agentworld.rl.run import run

    prepared, init, root = pipeline_outputs
    ds = learner_deepspeed_config(parallel_recipe.rl, parallel_recipe.train)
    assert ds["zero_optimization"]["stage"] == 3
    w = parallel_workers
    probe = _probe(load_tokenizer(init))
    start = np.array(w.learners.logprobs(probe))
    # The engine loaded the CPT export from disk; the learners built ZeRO-3 partitions
    # and expert slices from it: the same function before any sync.
    np.testing.assert_allclose(w.rollout.prompt_logprobs(probe)[0], start, atol=SYNC_ATOL)

    job = rl_job(parallel_recipe, data=prepared, init=init, out=str(root / "rl"))
    manifest = run(job, workers=w)
    assert manifest["status"] == "complete" and manifest["counts"]["steps"] == 2
    assert w.rollout.versions() == [2]
    learned = np.array(w.learners.logprobs(probe))
    np.testing.assert_allclose(w.rollout.prompt_logprobs(probe)[0], learned, atol=SYNC_ATOL)

    # One large update on the probe itself, then a sync: the engine follows the learners
    # to a function far from the one it had (a gather that dropped a rank's experts or
    # a partition would leave it behind or elsewhere).
    before = np.array(w.rollout.prompt_logprobs(probe)[0])
    w.learners.train_step(probe_batch(probe, [1.0] * 4))
    after_learner = np.array(w.learners.logprobs(probe))
    w.sync_weights(1000)
    assert w.rollout.versions() == [1000]
    after = np.array(w.rollout.prompt_logprobs(probe)[0])
    print(
        f"\nengine vs learners: before RL {np.abs(before - learned).max():.2e}, "
        f"after the update {np.abs(after - after_learner).max():.2e}; "
        f"engine change {np.abs(after - before).max():.2e}"
    )
    assert np.abs(after - before).max() > 1e-2
    np.testing.assert_allclose(after, after_learner, atol=SYNC_ATOL)
