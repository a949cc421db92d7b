"""The tiny MoE kit: tokenizer with chat template, Qwen3-MoE in HF format, one training
step in transformers, generation through vLLM (CPU build)."""

import pytest

from agentworld.config import ConfigError
from agentworld.model.config import ModelConfig
from agentworld.recipes import debug_cpu, get_recipe, qwen35_a3b
from agentworld.schema import predict_turn_messages
from agentworld.schema.examples import sample_trajectories
from tests.greedy import assert_greedy_agrees


def test_tokenizer_has_specials_and_chat_template(tiny_checkpoint):
    from agentworld.model import SPECIAL_TOKENS, load_tokenizer

    tok = load_tokenizer(tiny_checkpoint)
    for special in SPECIAL_TOKENS:
        assert len(tok.encode(special, add_special_tokens=False)) == 1, special
    messages = predict_turn_messages(sample_trajectories(1)[0], 2)
    text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert text.startswith("<|im_start|>system\n") and text.endswith("<|im_start|>assistant\n")
    ids = tok.encode("$ ls -la /home/user", add_special_tokens=False)
    assert tok.decode(ids) == "$ ls -la /home/user"  # byte-level: lossless


@pytest.mark.slow
def test_tokenizer_cuts_a_long_run_without_spaces_before_bpe():
    """A 1 MiB run without a space (a blob in an observation) reaches BPE as pieces of at
    most LONGEST_WORD characters: as one word, it made training quadratic in its length
    (minutes, found by the fuzzer of tests/test_fuzz_records.py). Text round-trips."""
    from agentworld.model.tokenizer import LONGEST_WORD, train_tokenizer

    blob = "E" * (1 << 20)
    texts = ["ls -la /tmp && echo ok", f"cat blob.txt\n{blob} done", "pwd /home/agent"] * 3
    tok = train_tokenizer(texts, vocab_size=400)
    pieces = tok.backend_tokenizer.pre_tokenizer.pre_tokenize_str(f"x {blob} y")
    assert max(len(p) for p, _ in pieces) <= LONGEST_WORD
    assert "".join(p for p, _ in pieces).replace("\u0120", " ") == f"x {blob} y"
    for text in (f"x {blob} y", "ls -la /tmp && echo ok", "naïve 東京 " + "z" * 300):
        assert tok.decode(tok(text)["input_ids"]) == text


def test_tiny_moe_loads_trains_and_generates_in_vllm(tiny_checkpoint, vllm_engine):
    import torch

    from agentworld.model import load_model, load_tokenizer

    tok = load_tokenizer(tiny_checkpoint)
    model = load_model(tiny_checkpoint, dtype=torch.float32)
    cfg = model.config
    assert cfg.model_type == "qwen3_moe" and cfg.head_dim == 64
    assert cfg.num_experts == 4 and cfg.num_experts_per_tok == 2

    # One training step: the loss is finite and the weights move.
    batch = tok(
        ["$ ls\nnotes.txt\n$ ", "$ pwd\n/home/user1\n$ "], return_tensors="pt", padding=True
    )
    labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
    before = model.lm_head.weight.detach().clone()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    out = model(**batch, labels=labels)
    assert torch.isfinite(out.loss) and out.aux_loss is not None
    out.loss.backward()
    opt.step()
    assert not torch.equal(before, model.lm_head.weight)

    # Generation through vLLM's CPU build, on the same checkpoint.
    from vllm import SamplingParams

    prompt = "<|im_start|>user\nls<|im_end|>\n<|im_start|>assistant\n"
    outs = vllm_engine.generate(
        [prompt], SamplingParams(max_tokens=8, temperature=0.0, ignore_eos=True, logprobs=1)
    )
    completion = outs[0].outputs[0]
    tokens = list(completion.token_ids)
    assert len(tokens) == 8
    # The same checkpoint, untrained, in transformers (fp32 both): every greedy token is
    # the argmax (or ties it within float error), with the same log-probability.
    assert_greedy_agrees(
        load_model(tiny_checkpoint, dtype=torch.float32).eval(), tok, prompt, completion
    )


_IN_PROCESS_SCRIPT = """
import os
import sys

import bm25s  # loads numba's llvmlite, whose lib vLLM's in-process start cannot scan
import flask  # its current_app raises RuntimeError when read outside an app context

from agentworld.model.engine import EngineConfig, close_engine, runs_in_process, start_llm

engine = EngineConfig(max_model_len=512, dtype="float32")
cpus = os.sched_getaffinity(0)
llm = start_llm(sys.argv[1], engine, seed=0)
out = llm.generate(["$ ls"], use_tqdm=False)[0].outputs[0]
print("client", type(llm.llm_engine.engine_core).__name__, len(out.token_ids) > 0)
kept = {"llvmlite.binding.ffi", "flask.globals"} <= set(sys.modules)
print("kept", kept, os.sched_getaffinity(0) == cpus)
print("second", runs_in_process(engine))
close_engine(llm, engine)
print("closed", runs_in_process(engine))
"""


@pytest.mark.slow
def test_a_cpu_engine_alone_in_its_process_runs_in_it(tiny_checkpoint):
    """On the CPU build, ``start_llm`` runs an engine in the calling process where it is
    the only one (no engine-core or worker process to start), beside numba too, and
    leaves the process's modules and the thread's CPUs as they were; never a second
    engine beside the first."""
    import subprocess
    import sys

    run = subprocess.run(
        [sys.executable, "-c", _IN_PROCESS_SCRIPT, tiny_checkpoint],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    tags = ("client", "kept", "second", "closed")
    lines = [line for line in run.stdout.splitlines() if line.split(" ")[0] in tags]
    assert lines == ["client InprocClient True", "kept True True", "second False", "closed True"]


def test_recipes_validate():
    assert debug_cpu().model.head_dim == 64
    big = qwen35_a3b()
    assert big.train.zero_stage == 3 and big.model.num_experts % big.train.expert_parallel_size == 0
    with pytest.raises(ConfigError, match="recipe"):
        get_recipe("nope")
    with pytest.raises(ConfigError, match="model.experts_per_token"):
        ModelConfig(num_experts=2, experts_per_token=3)
    import dataclasses

    from agentworld.train.config import TrainConfig

    with pytest.raises(ConfigError, match="train.expert_parallel_size"):
        dataclasses.replace(debug_cpu(), train=TrainConfig(expert_parallel_size=3))
