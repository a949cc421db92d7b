"""RL on real components: vLLM (CPU build) rollout engines and a DeepSpeed learner as
Ray actors in a placement group, on contexts from the collected corpus.

One set of workers serves the module (starting vLLM and DeepSpeed is the cost): a short
run with the default reward mix (format as a gate) and learning rate that is stopped and
resumed from its checkpoint, whose mechanics are checked (every reward component
reported per step, the weights move, engine and learner log-probabilities agree after
the last sync); the weight sync on its own; the job's CLI. Whether RL raises fidelity is
a claim of bench/bench_fidelity.py, not of a 10-step test.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from agentworld.config import ConfigError
from agentworld.model.engine import EngineConfig
from agentworld.recipes import get_recipe
from agentworld.rl.config import DEFAULT_REWARDS, LearnerConfig, RLConfig, RolloutConfig
from agentworld.rl.learner import TrainBatch

pytestmark = pytest.mark.slow

STEPS, STOP = 10, 5
RL = RLConfig(
    contexts_per_step=8,
    group_size=8,
    max_steps=STEPS,
    seed=0,
    # rewards and learner.learning_rate: the defaults, the configuration runs use.
    rollout=RolloutConfig(
        max_new_tokens=64,
        max_prompt_tokens=512,
        engine=EngineConfig(max_model_len=1024, dtype="float32"),
    ),
    checkpoint_every=2,
    keep_checkpoints=2,
    call_timeout_s=600,  # a stuck actor fails its test instead of stalling the session
)
SYNC_ATOL = 1e-5
"""Engine vs learner log-probabilities after a sync. fp32 on both sides, so only the
kernels differ (vLLM's CPU attention and fused MoE vs torch): on the tiny MoE they
agree within 1e-6 (9.5e-7 after a sync, 6.1e-7 with both reading one checkpoint); a
sync that lost precision (bf16) or a tensor would be off by 1e-3 or more."""
COMPONENTS = ("format", "char_f1", "fixed_lines")
"""Reward components every step reports (json applies only where the observation is JSON)."""


@pytest.fixture(scope="module")
def rl_inputs(collected_corpus, tmp_path_factory):
    """Per-turn samples of the collected corpus in prepare's layout, and a tiny MoE
    whose tokenizer is trained on that corpus (as prepare trains it), warm-started with
    a few supervised steps: RL starts from SFT in the pipeline, and a uniform policy
    over 2048 tokens almost never ends an answer, so GRPO would see flat groups."""
    from agentworld.io import read_records
    from agentworld.model import build_tiny_checkpoint
    from agentworld.rl.data import write_samples

    records = read_records(collected_corpus).records
    root = tmp_path_factory.mktemp("rl")
    write_samples(str(root / "data"), records)
    texts = [t.environment for t in records]
    texts += [x for t in records for turn in t.turns for x in (turn.action, turn.observation)]
    build_tiny_checkpoint(texts, str(root / "init"))
    _warm_start(str(root / "data"), str(root / "init"), steps=40)
    return str(root / "data"), str(root / "init"), root


def _warm_start(data: str, model_dir: str, *, steps: int, batch: int = 8) -> None:
    """Plain supervised steps on (prompt, real observation) pairs, loss on the answer."""
    import torch

    from agentworld.model import load_model, load_tokenizer, save_pretrained
    from agentworld.rl.data import load_contexts, tokenize_contexts

    tok, model = load_tokenizer(model_dir), load_model(model_dir, dtype=torch.float32)
    loaded = load_contexts(data)
    contexts = tokenize_contexts(loaded.contexts, tok, max_prompt_tokens=512, result=loaded)
    rows = []
    for c in contexts:
        answer = tok(c.reference + tok.eos_token, add_special_tokens=False)["input_ids"]
        rows.append(((list(c.prompt_ids) + answer)[:640], len(c.prompt_ids)))
    torch.manual_seed(0)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for _ in range(steps):
        pick = [rows[i] for i in torch.randint(len(rows), (batch,)).tolist()]
        width = max(len(ids) for ids, _ in pick)
        ids = torch.full((batch, width), tok.pad_token_id)
        labels = torch.full((batch, width), -100)
        for r, (x, p) in enumerate(pick):
            ids[r, : len(x)] = torch.tensor(x)
            labels[r, p : len(x)] = torch.tensor(x[p:])
        attention = (ids != tok.pad_token_id).long()
        loss = model(input_ids=ids, attention_mask=attention, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    save_pretrained(model, tok, model_dir)


@pytest.fixture(scope="module")
def recipe():
    return dataclasses.replace(get_recipe("debug_cpu"), rl=RL)


@pytest.fixture(scope="module")
def workers(ray_cluster, rl_inputs, recipe):
    from agentworld.rl.placement import RLWorkers

    w = RLWorkers(recipe.rl, recipe.train, rl_inputs[1])
    yield w
    w.close()


def _probe(tokenizer) -> list[int]:
    """A fixed prompt plus answer, as token ids."""
    messages = [
        {"role": "system", "content": "A bash shell in /home/agent."},
        {"role": "user", "content": "ls"},
        {"role": "assistant", "content": "notes.txt  logs\nagent@sandbox:~$ "},
    ]
    return tokenizer(tokenizer.apply_chat_template(messages, tokenize=False))["input_ids"]


def probe_batch(probe: list[int], advantages: list[float]) -> TrainBatch:
    """The probe once per advantage, the loss on its last 8 tokens."""
    ids = np.array([probe] * len(advantages))
    mask = np.zeros((len(advantages), len(probe) - 1), dtype=np.float32)
    mask[:, -8:] = 1.0
    return TrainBatch(
        input_ids=ids,
        attention_mask=np.ones_like(ids, dtype=np.int8),
        loss_mask=mask,
        advantages=np.array(advantages, dtype=np.float32),
    )


def test_short_run_resumes_with_the_default_reward_mix(rl_inputs, recipe, workers):
    from agentworld.io import read_manifest
    from agentworld.model import load_tokenizer
    from agentworld.recipes.jobs import rl_job
    from agentworld.rl import checkpoint
    from agentworld.rl.run import run

    data, init, root = rl_inputs
    assert RL.rewards == DEFAULT_REWARDS and RL.learner == LearnerConfig()
    assert any(r.name == "format" and r.gate for r in RL.rewards)
    probe = _probe(load_tokenizer(init))
    initial = np.array(workers.learners.logprobs(probe))
    out = str(root / "run")
    job = rl_job(recipe, data=data, init=init, out=out)
    stopped = run(job, workers=workers, stop_after=STOP)
    assert stopped == {"status": "stopped", "step": STOP}
    assert checkpoint.complete_steps(out) == [4, 5]  # every 2 and at the stop; keep 2

    # The checkpoint really restores the learner: disturb it, load, compare.
    saved = np.array(workers.learners.logprobs(probe))
    rng = np.random.default_rng(0)
    junk = TrainBatch(
        input_ids=rng.integers(0, 200, (8, 16)),
        attention_mask=np.ones((8, 16), dtype=np.int8),
        loss_mask=np.ones((8, 15), dtype=np.float32),
        advantages=np.linspace(-1, 1, 8).astype(np.float32),
    )
    workers.learners.train_step(junk)
    assert np.abs(np.array(workers.learners.logprobs(probe)) - saved).max() > 1e-3
    checkpoint.load(workers, out, STOP)
    np.testing.assert_allclose(workers.learners.logprobs(probe), saved, atol=1e-6)

    manifest = run(job, workers=workers)
    rows = [json.loads(line) for line in open(f"{out}/metrics.jsonl")]
    assert [r["step"] for r in rows] == list(range(STEPS))
    print(f"\nmean rule reward per step: {[round(r['reward/rules'], 3) for r in rows]}")
    for key in ("reward/format", "reward/char_f1", "rollout/response_len", "learner/entropy"):
        print(f"{key}: {rows[0][key]:.3f} -> {rows[-1][key]:.3f}")
    print(f"weight sync share of step time: {np.mean([r['time/sync_share'] for r in rows]):.1%}")
    for r in rows:  # every component, every step, on its 0..1 scale
        for name in COMPONENTS:
            assert 0.0 <= r[f"reward/{name}"] <= 1.0, (r["step"], name)
        assert 0.0 <= r["reward/rules"] <= r["reward/format"] + 1e-9  # the gate bounds it
    for key in ("adv/std", "learner/kl", "learner/entropy", "time/rollout_s", "time/sync_s"):
        assert all(key in r for r in rows)
    assert any(r["adv/std"] > 0 for r in rows)  # some group had a signal to learn from
    final = np.array(workers.learners.logprobs(probe))
    assert np.abs(final - initial).max() > 1e-4  # the updates moved the weights
    # The engines sample from the learner's weights: synced after the last step.
    np.testing.assert_allclose(workers.rollout.prompt_logprobs(probe)[0], final, atol=SYNC_ATOL)
    assert manifest["status"] == "complete" and manifest["counts"]["steps"] == STEPS
    assert read_manifest(out)["outputs"]["hf"].endswith("hf")
    assert checkpoint.complete_steps(out) == [8, 10]


def test_weight_sync_is_real(rl_inputs, workers):
    """After an update, the engine's log-probabilities of a fixed text match the
    learner's and differ from the engine's before the update."""
    from agentworld.model import load_tokenizer

    probe = _probe(load_tokenizer(rl_inputs[1]))
    before = np.array(workers.rollout.prompt_logprobs(probe)[0])
    np.testing.assert_allclose(before, workers.learners.logprobs(probe), atol=SYNC_ATOL)
    workers.learners.train_step(probe_batch(probe, [1.0, 1.0, -1.0, 1.0]))
    learner = np.array(workers.learners.logprobs(probe))
    seconds = workers.sync_weights(1000)
    assert workers.rollout.versions() == [1000]
    after = np.array(workers.rollout.prompt_logprobs(probe)[0])
    print(
        f"\nsync {seconds:.2f}s; engine vs learner after: {np.abs(after - learner).max():.2e}; "
        f"engine change: {np.abs(after - before).max():.2e}"
    )
    np.testing.assert_allclose(after, learner, atol=SYNC_ATOL)
    assert np.abs(after - before).max() > 1e-2


def test_job_cli(rl_inputs, capsys):
    """Bad config fails before any work; a finished run does nothing on rerun."""
    import importlib.util

    from tests.conftest import ROOT

    spec = importlib.util.spec_from_file_location("rl_job", ROOT / "jobs" / "rl.py")
    job = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(job)

    data, init, root = rl_inputs
    with pytest.raises(ConfigError, match="rl.max_steps"):
        job.main(
            ["--data", data, "--init", init, "--out", str(root / "x"), "--set", "rl.max_steps=0"]
        )
    with pytest.raises(SystemExit, match="--init"):
        job.main(["--data", data, "--init", str(root / "missing"), "--out", str(root / "x")])
    assert not (root / "x").exists()
    assert job.main(["--data", data, "--init", init, "--out", str(root / "run")]) == 0
    assert "complete; nothing to do" in capsys.readouterr().out
