"""DeepSpeed vs a plain torch loop on one GPU: the project's MoE (a recipe's shape, built by
agentworld.train.engine.build_model) trained for the same steps on the same packed rows of
random token ids, once through agentworld.train.engine.build_engine (the recipe's ZeRO
stage, bf16, the project's DeepSpeed config; world size 1 over NCCL) and once with torch
AdamW under bf16 autocast (same init, schedule and clipping), in one run.

One change to the project's DeepSpeed config: torch's AdamW (``torch_adam``) instead of
FusedAdam, which DeepSpeed JIT-compiles with nvcc at start-up; ``--fused-adam`` keeps the
config as it is. Tokens/s count real tokens over the steps after ``--warmup``.

Run:  python bench/bench_gpu_train.py [--steps 40] [--out DIR]  -> bench/results/gpu_train.json
Smoke test (tiny debug_cpu model, fp32, gloo):  python bench/bench_gpu_train.py --device cpu --steps 2
Goal: DeepSpeed >= 0.8x the tokens/s of the plain loop.
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import os
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path
from unittest import mock

from _results import goal, write_result


def make_inputs(recipe, steps: int, device: str):
    """(ModelSource, batches, real tokens per batch): a BPE trained on random words, and
    rows of random ids packed as three documents and a pad tail."""
    import numpy as np

    from agentworld.model import train_tokenizer
    from agentworld.train.batch import collate
    from agentworld.train.engine import ModelSource

    rng = np.random.default_rng(0)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    words = ["".join(rng.choice(letters, k)) for k in rng.integers(2, 9, 20000)]
    text = [" ".join(words[i : i + 100]) for i in range(0, len(words), 100)]
    tok = train_tokenizer(text, vocab_size=recipe.model.vocab_size)
    source = ModelSource(tokenizer_url=tempfile.mkdtemp())
    tok.save_pretrained(source.tokenizer_url)
    T, B, batches, tokens = recipe.train.seq_len, recipe.train.micro_batch_size, [], []
    for _ in range(steps):
        lens = [[int(n) for n in rng.integers(T // 4, T // 3, 3)] for _ in range(B)]
        pos = [[p for n in ls for p in range(n)] + [0] * (T - sum(ls)) for ls in lens]
        ids = rng.integers(10, len(tok), (B, T)).tolist()
        b = collate(dict(input_ids=ids, loss_mask=[[1] * T] * B, position_ids=pos, doc_lens=lens))
        tokens.append(b.num_tokens)
        batches.append(b)  # on the CPU, as the worker gets them: each side moves them
    return source, batches, tokens


def timed(step, batches, tokens: list[int], warmup: int) -> dict:
    """Run ``step`` on every batch; tokens/s over the batches after ``warmup``."""
    import torch

    cuda = torch.cuda.is_available() and torch.distributed.get_backend() == "nccl"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    losses, start = [], 0.0
    for i, batch in enumerate(batches):
        if i == warmup:
            sync()
            start = time.perf_counter()
        losses.append(float(step(batch)))  # the loss read back every step, as the worker does
    sync()
    rate = sum(tokens[warmup:]) / (time.perf_counter() - start)
    peak = round(torch.cuda.max_memory_allocated() / 2**30, 3) if cuda else None
    return {"tokens_per_s": round(rate, 1), "peak_gpu_mem_gib": peak, "loss": losses}


def losses_of(model, batch, recipe):
    from agentworld.train.loss import RouterShape, forward_losses

    config = getattr(model, "module", model).config
    return forward_losses(
        model, batch, aux_coef=recipe.model.router_aux_loss_coef, router=RouterShape.of(config)
    )


def plain_run(recipe, source, batches, tokens, warmup: int, device: str) -> dict:
    import torch
    from torch.optim.lr_scheduler import LambdaLR

    from agentworld.train.ds_config import deepspeed_config
    from agentworld.train.engine import build_model
    from agentworld.train.loss import warmup_cosine

    t, device = recipe.train, torch.device(device)
    model = build_model(recipe.model, recipe.train, source)[0].to(device)
    # The optimizer settings and the schedule DeepSpeed gets.
    ds = deepspeed_config(t, recipe.cluster, 1)["optimizer"]["params"]
    opt = torch.optim.AdamW(
        model.parameters(), **{k: ds[k] for k in ("lr", "betas", "eps", "weight_decay")}
    )
    span = {k: getattr(t, k) for k in ("warmup_steps", "max_steps", "min_lr_ratio")}
    sched = LambdaLR(opt, functools.partial(warmup_cosine, **span))

    # Autocast does not cover torch's grouped_mm: transformers runs the experts' matmuls in
    # the weights' dtype, fp32 here (bf16 under DeepSpeed, which holds bf16 weights).
    def step(batch):
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=t.precision == "bf16"):
            losses = losses_of(model, batch.to(device), recipe)
        opt.zero_grad(set_to_none=True)
        losses.total.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), t.grad_clip)
        opt.step()
        sched.step()
        return losses.lm.detach()

    params = sum(p.numel() for p in model.parameters())
    return {**timed(step, batches, tokens, warmup), "params": params, "optimizer": "AdamW"}


def deepspeed_run(recipe, source, batches, tokens, warmup: int, device: str, fused: bool) -> dict:
    from agentworld.train import engine as project
    from agentworld.train.ds_config import deepspeed_config
    from agentworld.train.worker import train_step

    def config(*args, **kwargs):
        cfg = deepspeed_config(*args, **kwargs)
        cfg["optimizer"]["params"]["torch_adam"] |= not fused
        return cfg

    with mock.patch.object(project, "deepspeed_config", config):
        model = project.build_model(recipe.model, recipe.train, source)[0]
        engine = project.build_engine(model, recipe.train, recipe.cluster, 1)

    def step(batch):  # the Ray Train worker's own step: device move, losses, all-reduce
        aux = recipe.model.router_aux_loss_coef
        return train_step(engine, iter([batch]), recipe.train.grad_accum_steps, aux)["loss"]

    out = timed(step, batches, tokens, warmup)
    opt = type(engine.basic_optimizer).__name__
    return {**out, "optimizer": opt, "ds_config": config(recipe.train, recipe.cluster, 1)}


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--device", choices=("cuda", "cpu"), help="default: cuda where there is one")
    p.add_argument("--quick", action="store_true", help="10 steps (make bench-quick)")
    p.add_argument("--recipe", help="default: medium_cpu on cuda, debug_cpu on cpu")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--warmup", type=int, default=5, help="steps left out of tokens/s")
    p.add_argument("--micro-batch", type=int, help="rows of seq_len per step (8 cuda, 2 cpu)")
    p.add_argument("--fused-adam", action="store_true", help="DeepSpeed's FusedAdam (JIT build)")
    p.add_argument("--out", help="also write the JSON into this directory")
    args = p.parse_args()
    import torch
    import torch.distributed as dist

    if args.device is None:
        if not torch.cuda.is_available():  # `make bench` on a CPU machine: nothing to measure
            print("[bench_gpu_train] no CUDA device: skipped (--device cpu for a smoke test)")
            return 0
        args.device = "cuda"
    if args.quick:
        args.steps = min(args.steps, 10)

    from agentworld.recipes import load

    gpu, warmup = args.device == "cuda", max(0, min(args.warmup, args.steps - 1))
    name = args.recipe or ("medium_cpu" if gpu else "debug_cpu")
    micro = args.micro_batch or (8 if gpu else 2)
    # World size 1, every expert on the one rank; bf16 on the GPU, fp32 on CPU.
    sets = (
        f"train.precision={'bf16' if gpu else 'fp32'} train.max_steps={args.steps} "
        f"train.warmup_steps={min(5, args.steps - 1)} train.micro_batch_size={micro} "
        f"train.expert_parallel_size=1 train.grad_accum_steps=1 cluster.num_workers=1 "
        f"cluster.use_gpu={gpu} "
        f"cluster.gpus_per_worker={int(gpu)}"
    )
    recipe = load(name, sets.split())
    if gpu:
        torch.cuda.set_device(0)
    env = dict(MASTER_ADDR="127.0.0.1", MASTER_PORT="29533", RANK="0", LOCAL_RANK="0")
    os.environ.update(env, WORLD_SIZE="1")
    dist.init_process_group("nccl" if gpu else "gloo", rank=0, world_size=1)
    source, batches, tokens = make_inputs(recipe, args.steps, args.device)
    runs = {}
    for side, run in (("plain", plain_run), ("deepspeed", deepspeed_run)):
        gc.collect()  # the plain loop's model and optimizer out of the DeepSpeed run's peak
        if gpu:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        extra = {"fused": args.fused_adam} if side == "deepspeed" else {}
        runs[side] = run(recipe, source, batches, tokens, warmup, args.device, **extra)
        print(
            f"[bench_gpu_train] {side}: {runs[side]['tokens_per_s']:.0f} tok/s", runs[side]["loss"]
        )
    plain, ds = runs["plain"], runs["deepspeed"]
    ratio = ds["tokens_per_s"] / plain["tokens_per_s"]
    gap = max(abs(a - b) for a, b in zip(plain["loss"], ds["loss"], strict=True))
    keys = ("precision", "zero_stage", "seq_len", "micro_batch_size", "max_steps")
    result = {
        "benchmark": "gpu_train",
        "recipe": name,
        "params": plain["params"],
        "device": torch.cuda.get_device_name(0) if gpu else "cpu",
        "train": {k: getattr(recipe.train, k) for k in keys},
        "warmup_steps_excluded": warmup,
        "ratio_deepspeed_vs_plain": round(ratio, 3),
        "max_abs_loss_diff": round(gap, 5),
        "runs": runs,
        "versions": {k: version(k) for k in ("torch", "transformers", "deepspeed")},
    }
    speed = "DeepSpeed (the project's config) costs little over a plain torch loop (tokens/s)"
    same = "DeepSpeed trains what the plain loop trains (loss at every step, same init and rows)"
    goals = [
        goal("deepspeed_vs_plain", ratio, ">=", 0.8, speed),
        goal("max_abs_loss_diff", gap, "<=", 0.05, same),
    ]
    path = write_result("gpu_train", result, goals)
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / path.name).write_text(path.read_text())
    print(json.dumps({k: v for k, v in result.items() if k != "runs"}, indent=2))
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
