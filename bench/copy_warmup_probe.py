"""Probe (issue 14): does a model that has learned to copy simulate search better?

The ``small_cpu`` world model does not repeat the query or the opened id that a search
observation repeats from its prompt (bench/search_copy_check.py), though its
architecture learns to copy a random span within about 250 steps when that is the task.
This probe trains a CPT export further, in one process with the project's loss
(train.loss.forward_losses) and the recipe's CPT optimizer and schedule, on the run's
own packed CPT rows (2 rows of ``seq_len`` a step) and, unless ``--no-copy``, on
synthetic copy documents (8 rows of 256 tokens a step: ``1 span 2 span``, ids 1 and 2 as
markers, spans of 4-12 random tokens from id 300 up, the loss on the repeated span
only), and writes an HF export that jobs/sft.py starts from. ``--no-copy`` is the
control: the same extra steps on the real rows alone.

Run:  python bench/copy_warmup_probe.py RUN_DIR/cpt/hf OUT/hf --rows RUN_DIR/prepared \
          --steps 300 [--no-copy]
      then jobs/sft.py --init OUT/hf and jobs/evaluate.py fidelity, as bench_fidelity.py
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM

from agentworld.recipes import load
from agentworld.train.batch import PackedBatch
from agentworld.train.ds_config import deepspeed_config
from agentworld.train.loss import forward_losses, warmup_cosine
from gpu_fidelity_probe import load_rows, take

SPAN, ROW, COPY_ROWS, REAL_ROWS, FIRST_ORDINARY = 12, 256, 8, 2, 300


def copy_rows(vocab: int, gen: torch.Generator) -> PackedBatch:
    """COPY_ROWS rows of packed ``1 span 2 span`` documents."""
    ids, mask, pos, valid = [], [], [], []
    for _ in range(COPY_ROWS):
        i, m, p = [], [], []
        while len(i) + 2 * SPAN + 2 <= ROW:
            n = int(torch.randint(4, SPAN + 1, (), generator=gen))
            span = torch.randint(FIRST_ORDINARY, vocab, (n,), generator=gen).tolist()
            doc = [1, *span, 2, *span]
            i += doc
            m += [False] * (n + 2) + [True] * n
            p += list(range(len(doc)))
        pad = ROW - len(i)
        ids.append(i + [0] * pad)
        mask.append(m + [False] * pad)
        pos.append(p + [0] * pad)
        valid.append([True] * (ROW - pad) + [False] * pad)
    return PackedBatch(*(torch.tensor(x) for x in (ids, mask, pos, valid)))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("init", help="the CPT export (hf/) to train further")
    p.add_argument("out", help="where the new export goes")
    p.add_argument("--rows", required=True, help="the prepare output whose packed/cpt rows run")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--no-copy", action="store_true", help="the control: real rows only")
    p.add_argument("--recipe", default="small_cpu")
    a = p.parse_args()
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    recipe = load(a.recipe)
    m, t = recipe.model, recipe.train
    model = AutoModelForCausalLM.from_pretrained(a.init, torch_dtype=torch.float32)
    real = load_rows(Path(a.rows, "packed", "cpt", "train"), "cpu")
    kw = {"aux_coef": m.router_aux_loss_coef, "num_experts": m.num_experts,
          "top_k": m.experts_per_token}  # fmt: skip
    p = deepspeed_config(t, recipe.cluster, 1)["optimizer"]["params"]  # as CPT's optimizer
    hp = {"betas": tuple(p["betas"]), "eps": p["eps"], "weight_decay": p["weight_decay"]}
    opt = torch.optim.AdamW(model.parameters(), lr=t.learning_rate, **hp)
    span = {"warmup_steps": t.warmup_steps, "max_steps": a.steps, "min_lr_ratio": t.min_lr_ratio}
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: warmup_cosine(s, **span))
    t0 = time.time()
    model.train()
    for step in range(a.steps):
        idx = torch.randint(0, real.input_ids.shape[0], (REAL_ROWS,), generator=gen)
        on_real = forward_losses(model, take(real, idx), **kw)
        total, line = on_real.total, f"real {on_real.lm.item():.3f}"
        if not a.no_copy:
            on_copy = forward_losses(model, copy_rows(model.config.vocab_size, gen), **kw)
            total, line = total + on_copy.total, f"{line} copy {on_copy.lm.item():.3f}"
        opt.zero_grad()
        total.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), t.grad_clip)
        opt.step()
        sched.step()
        if step % 25 == 0 or step == a.steps - 1:
            print(f"step {step} {line} {time.time() - t0:.0f}s", flush=True)
    shutil.copytree(a.init, a.out, dirs_exist_ok=True)
    model.save_pretrained(a.out, safe_serialization=True)
    print("wrote", a.out)


if __name__ == "__main__":
    main()
