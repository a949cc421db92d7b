"""Training throughput: Ray Train + DeepSpeed with 1 and 2 workers (experts split over
the 2) against a plain single-process torch loop, on the same tiny Qwen3-MoE and the
same packed rows, measured in one run.

Tokens/s counts real (non-pad) tokens per optimizer step over the steady-state steps
(the first few are left out). The plain loop runs with 1 thread (what one Ray Train
worker gets) and with all cores. The communication share is estimated from the
per-step time with 2 workers against 1 worker at the same per-worker batch: an upper
bound, since on a small machine it also holds the two workers' contention for cores.

Goal: Ray Train + DeepSpeed >= 0.8x the tokens/s of the plain loop on 1 thread.

Run:  python bench/bench_train.py [--steps 20] [--quick]    -> bench/results/train.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import tempfile
import time

from _quick import parse_sized
from _results import goal, write_result

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
os.environ.setdefault("WANDB_MODE", "disabled")
WARMUP = 3
SEQ_LEN = 256
# Five steady-state steps after the WARMUP ones: the start-up costs dominate a quick run.
QUICK = {"steps": 8}


def write_data(out: str, rows: int, seed: int = 0) -> str:
    """A tokenizer and packed rows of random documents (throughput does not depend on
    the text)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from agentworld.model import train_tokenizer

    words = ["ls", "cat notes.txt", "$ echo alpha", "grep -r beta .", "mkdir gamma", "pwd"]
    tok = train_tokenizer([" ".join(words)] * 50, vocab_size=512)
    tok.save_pretrained(os.path.join(out, "tokenizer"))
    rng = np.random.default_rng(seed)
    for split, n in (("train", rows), ("eval", 8)):
        table: dict[str, list] = {
            "input_ids": [],
            "loss_mask": [],
            "position_ids": [],
            "doc_lens": [],
        }
        for _ in range(n):
            lens = [int(x) for x in rng.integers(40, 85, 3)]  # <= 252 tokens
            used = sum(lens)
            table["input_ids"].append(rng.integers(10, len(tok), SEQ_LEN).tolist())
            table["loss_mask"].append([1] * used + [0] * (SEQ_LEN - used))
            table["position_ids"].append(
                [p for n_ in lens for p in range(n_)] + [0] * (SEQ_LEN - used)
            )
            table["doc_lens"].append(lens)
        path = os.path.join(out, "packed", "cpt", split)
        os.makedirs(path, exist_ok=True)
        pq.write_table(pa.table(table), os.path.join(path, "part-00000.parquet"))
    return out


def recipe(workers: int, steps: int):
    from agentworld.recipes import debug_cpu
    from agentworld.train.config import ClusterConfig, TrainConfig

    train = TrainConfig(
        expert_parallel_size=workers,
        seq_len=SEQ_LEN,
        micro_batch_size=4,
        warmup_steps=2,
        max_steps=steps,
        eval_every=steps,
        checkpoint_every=steps,
        wandb_mode="disabled",
    )
    return dataclasses.replace(debug_cpu(), train=train, cluster=ClusterConfig(num_workers=workers))


def plain_loop(data: str, steps: int, threads: int) -> float:
    """Tokens/s of a single-process torch loop: same model, loss, optimizer, batches."""
    import pyarrow.parquet as pq
    import torch

    from agentworld.train.batch import collate
    from agentworld.train.engine import ModelSource, build_model
    from agentworld.train.loss import RouterShape, forward_losses

    torch.set_num_threads(threads)
    r = recipe(1, steps)
    model, _ = build_model(
        r.model, r.train, ModelSource(tokenizer_url=os.path.join(data, "tokenizer"))
    )
    opt = torch.optim.AdamW(model.parameters(), lr=r.train.learning_rate, betas=(0.9, 0.95))
    table = pq.read_table(os.path.join(data, "packed", "cpt", "train"))
    micro, rates = r.train.micro_batch_size, []
    for step in range(steps):
        start = time.perf_counter()
        first = (step * micro) % (table.num_rows - micro + 1)
        batch = collate(table.slice(first, micro).to_pydict())
        losses = forward_losses(
            model,
            batch,
            aux_coef=0.01,
            router=RouterShape.of(model.config),
        )
        opt.zero_grad()
        losses.total.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), r.train.grad_clip)
        opt.step()
        rates.append(batch.num_tokens / (time.perf_counter() - start))
    return statistics.median(rates[WARMUP:])


def ray_train(data: str, out: str, workers: int, steps: int) -> tuple[float, float]:
    """(tokens/s over steady-state steps, wall seconds end to end incl. start-up)."""
    from agentworld.recipes.jobs import train_job
    from agentworld.train.run import run

    rates: list[float] = []

    def collect(event: dict) -> None:
        m = event.get("metrics", {})
        if "tokens_per_s" in m and m["step"] > WARMUP:
            rates.append(m["tokens_per_s"])

    start = time.perf_counter()
    job = train_job(recipe(workers, steps), stage="cpt", data=data, out=out)
    run(job, log=lambda line: None, on_event=collect)
    return statistics.median(rates), time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--steps", type=int, default=20)
    args = parse_sized(p, QUICK, argv)
    if args.steps <= WARMUP:
        p.error(f"--steps must exceed the {WARMUP} warm-up steps left out of the rate")
    import ray

    work = tempfile.mkdtemp(prefix="bench-train-")
    data = write_data(os.path.join(work, "data"), rows=64)
    plain1 = plain_loop(data, args.steps, threads=1)
    plain_all = plain_loop(data, args.steps, threads=os.cpu_count() or 1)
    ray.init(
        num_cpus=4,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": os.path.join(ROOT, "platform")}},
    )
    try:
        one, one_wall = ray_train(data, os.path.join(work, "w1"), 1, args.steps)
        two, two_wall = ray_train(data, os.path.join(work, "w2"), 2, args.steps)
    finally:
        ray.shutdown()
    # Per-step time at the same per-worker batch: tokens/s per worker.
    comm_share = max(0.0, 1.0 - (two / 2) / one)
    result = {
        "model": "debug_cpu (tiny Qwen3-MoE, 4 experts top-2)",
        "quick": args.quick,
        "seq_len": SEQ_LEN,
        "micro_batch_size": 4,
        "steps": args.steps,
        "tokens_per_s": {
            "plain_torch_1_thread": round(plain1, 1),
            f"plain_torch_{os.cpu_count()}_threads": round(plain_all, 1),
            "ray_train_1_worker": round(one, 1),
            "ray_train_2_workers_ep2": round(two, 1),
        },
        "ratio_vs_plain_1_thread": {
            "1_worker": round(one / plain1, 3),
            "2_workers": round(two / plain1, 3),
        },
        "wall_s_including_startup": {
            "1_worker": round(one_wall, 1),
            "2_workers": round(two_wall, 1),
        },
        "comm_share_upper_bound_2_workers": round(comm_share, 3),
        "cpu_count": os.cpu_count(),
    }
    serves = (
        "Ray Train + DeepSpeed costs little over a plain single-process torch loop"
        " (tokens/s, against the loop on 1 thread, what one worker gets)"
    )
    goals = [
        goal("ray_train_1_worker_vs_plain", one / plain1, ">=", 0.8, serves),
        goal("ray_train_2_workers_vs_plain", two / plain1, ">=", 0.8, serves),
    ]
    write_result("train", result, goals)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
