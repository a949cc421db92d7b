"""The released model as a starting point, end to end on CPU: a corpus is prepared
with the checkpoint's own tokenizer (``model.pretrained``), then a tiny Qwen3.5-MoE saved
as the released one is (``...ForConditionalGeneration``, a vision config, language
weights only) goes CPT -> SFT -> export on Ray Train + DeepSpeed with 2 workers, its
experts split between them. Held-out loss falls; the export declares the same
architecture under the same weight names, keeps the tokenizer's special tokens and chat
template, and loads with AutoModelForCausalLM.

Each Ray Train run takes about 110 s here, nearly all start-up, so only the released
architecture runs end to end; Qwen3 and Qwen3-MoE checkpoints go through the same
loss and export code in test_model_family_units.py (and the project's own Qwen3-MoE
through Ray Train in test_train.py)."""

from __future__ import annotations

import dataclasses
import json
import os

import pytest

from agentworld.recipes import debug_cpu
from agentworld.schema.examples import sample_trajectories
from agentworld.train.config import TrainConfig
from tests.family_checkpoints import build_family_checkpoint, family_tokenizer
from tests.test_model_family_units import FAMILY, corpus

SEQ_LEN = 256
STEPS = 8


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


@pytest.mark.slow
def test_the_released_architecture_continues_training_and_exports_as_itself(
    family_checkpoints, family_prepared, tmp_path
):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from agentworld.model.family import checkpoint_architecture

    family = "qwen3_5_moe"
    original = family_checkpoints[family]
    prepared_tok = AutoTokenizer.from_pretrained(os.path.join(family_prepared, "tokenizer"))
    assert prepared_tok.chat_template == AutoTokenizer.from_pretrained(original).chat_template
    cpt, lines = _train("cpt", family, original, family_prepared, str(tmp_path / "cpt"))
    first, last = _falls(cpt)
    assert last < first, (family, first, last)
    # The kernel fallback is said once per run, by the driver.
    assert len([x for x in lines if "PyTorch fallback" in x]) == 1, lines
    placement = cpt["counts"]["expert_placement"]
    assert [r["experts"] for r in placement] == [[0, 1], [2, 3]]
    assert all(r["moe_layers"] == 4 for r in placement)
    sft, _ = _train(
        "sft", family, original, family_prepared, str(tmp_path / "sft"), init=cpt["outputs"]["hf"]
    )
    first, last = _falls(sft)
    assert last < first, (family, first, last)

    export = sft["outputs"]["hf"]
    before, after = checkpoint_architecture(original), checkpoint_architecture(export)
    assert (after.architectures, after.wrapped, after.family) == (
        before.architectures,
        before.wrapped,
        before.family,
    )
    original_config = json.load(open(os.path.join(original, "config.json")))
    assert json.load(open(os.path.join(export, "config.json"))) == original_config
    from safetensors import safe_open

    def names(path):
        with safe_open(os.path.join(path, "model.safetensors"), "pt") as f:
            return set(f.keys())

    assert names(export) == names(original)  # language weights only, original names
    model = AutoModelForCausalLM.from_pretrained(export, dtype=torch.float32)
    reference = AutoModelForCausalLM.from_pretrained(original, dtype=torch.float32)
    assert type(model) is type(reference)
    tok, tok0 = AutoTokenizer.from_pretrained(export), AutoTokenizer.from_pretrained(original)
    assert tok.chat_template == tok0.chat_template and tok.get_vocab() == tok0.get_vocab()
    assert tok.all_special_tokens == tok0.all_special_tokens
    assert (tok.eos_token, tok.pad_token) == (tok0.eos_token, tok0.pad_token)
