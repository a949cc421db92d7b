"""Probe (issue 14): does the ``small_cpu`` world model pass the parameter-free baselines
with far more training than the 2-core CPU allows, or stay below them?

One process, no Ray or DeepSpeed: the recipe's model (agentworld.model.build), CPT then
SFT on the carried packed rows with the project's loss (train.loss.forward_losses: doc
boundaries from position ids, loss mask) under bf16 autocast, AdamW as train.ds_config
sets it, the recipe's learning rates, warm-up and cosine. Each phase gets its share of
``--time-budget-s`` (training only): after 5 timed steps it re-plans its step count so
the cosine still ends decayed. At ``--eval-points`` of SFT: held-out losses, and greedy
``generate`` on the held-out items, prompts built, outputs parsed and scored as the
evaluate stage does (fit_prompt, prediction_row, summarize, add_baselines), beside the
baselines' predictions made on the CPU (bench/gpu_fidelity_carry.py, evaluate.baselines).

Run:    python bench/gpu_fidelity_probe.py --data .probe/carry --out OUTDIR
Smoke:  ... --device cpu --cpt-steps 2 --sft-steps 2 --max-items 8
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import pyarrow.parquet as pq
import torch

from agentworld.evaluate.items import EvalItem, prediction_row
from agentworld.evaluate.placement import fit_prompt
from agentworld.evaluate.score import add_baselines, summarize
from agentworld.model.build import build_model
from agentworld.recipes import load
from agentworld.train.batch import PackedBatch, collate
from agentworld.train.ds_config import deepspeed_config
from agentworld.train.loss import forward_losses, warmup_cosine

COLUMNS = ("input_ids", "loss_mask", "position_ids", "doc_lens")
BASES = ("copy_previous", "retrieval")


def load_rows(folder: Path, device: str) -> PackedBatch:
    """Every packed row under ``folder`` as one PackedBatch (N, T) on ``device``."""
    tables = [pq.read_table(p, columns=list(COLUMNS)) for p in sorted(folder.glob("*.parquet"))]
    columns = {k: [v for t in tables for v in t.column(k).to_pylist()] for k in COLUMNS}
    return collate(columns).to(device)


def take(b: PackedBatch, idx) -> PackedBatch:
    return PackedBatch(*(x[idx] for x in (b.input_ids, b.loss_mask, b.position_ids, b.valid)))


def losses(model, batch: PackedBatch, a):
    m = a.recipe.model
    moe = {"num_experts": m.num_experts, "top_k": m.experts_per_token}
    with torch.autocast(a.device, dtype=torch.bfloat16):
        return forward_losses(model, batch, aux_coef=m.router_aux_loss_coef, **moe)


@torch.no_grad()
def heldout_loss(model, rows: PackedBatch, a) -> float:
    """Token-mean LM loss over held-out packed rows (as train.worker.evaluate)."""
    model.eval()
    total = count = 0.0
    for i in range(0, rows.input_ids.shape[0], a.batch_rows):
        out = losses(model, take(rows, slice(i, i + a.batch_rows)), a)
        total, count = total + float(out.lm) * out.num_targets, count + out.num_targets
    model.train()
    return total / max(count, 1.0)


def train_phase(model, rows: PackedBatch, a, name: str, steps: int, lr: float, budget: float):
    """``steps`` AdamW steps (fewer when ``budget`` seconds do not allow them) over
    reshuffled epochs of ``rows``; SFT evaluates at ``a.eval_points`` of its plan."""
    t = a.recipe.train
    p = deepspeed_config(t, a.recipe.cluster, 1)["optimizer"]["params"]
    hp = {"betas": tuple(p["betas"]), "eps": p["eps"], "weight_decay": p["weight_decay"]}
    opt = torch.optim.AdamW(model.parameters(), lr=lr, **hp)
    gen, n = torch.Generator().manual_seed(t.seed), rows.input_ids.shape[0]
    order, pos, plan, step, log = torch.randperm(n, generator=gen), 0, steps, 0, []
    start, eval_s, first = time.perf_counter(), 0.0, 0.0
    while step < plan:
        if pos + a.batch_rows > n:  # a new epoch, reshuffled
            order, pos = torch.randperm(n, generator=gen), 0
        batch = take(rows, order[pos : pos + a.batch_rows].to(a.device))
        pos += a.batch_rows
        sched = {"warmup_steps": t.warmup_steps, "min_lr_ratio": t.min_lr_ratio}
        for g in opt.param_groups:
            g["lr"] = lr * warmup_cosine(step, max_steps=plan, **sched)
        out = losses(model, batch, a)
        opt.zero_grad(set_to_none=True)
        out.total.backward()
        gnorm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), t.grad_clip))
        opt.step()
        step += 1
        elapsed = time.perf_counter() - start - eval_s
        if step == 1:
            first = elapsed  # the first step pays for kernel set-up
        elif step == 6 and plan > 6:  # re-plan so that the cosine still ends decayed
            per_step = (elapsed - first) / 5
            plan = max(7, min(steps, int((budget - first) / per_step)))
            print(f"[{name}] {per_step * 1e3:.0f} ms/step: plan {plan} of {steps}", flush=True)
        elif elapsed > budget * 1.15:  # the estimate was wrong: stop here, and say so
            print(f"[{name}] over its time budget at step {step}", flush=True)
            plan = step
        if step % a.log_every == 0 or step == plan:
            lr_now = opt.param_groups[0]["lr"]
            log.append({"step": step, "loss": out.lm.item(), "lb": out.load_balance.item()})
            log[-1] |= {"grad_norm": gnorm, "lr": lr_now, "s": round(elapsed, 1)}
            print(f"[{name}] {log[-1]}", flush=True)
        if name == "sft" and step in {max(1, round(f * plan)) for f in a.eval_points} | {plan}:
            t0 = time.perf_counter()
            a.evaluate(model, step, plan)
            eval_s += time.perf_counter() - t0
    seconds = round(time.perf_counter() - start - eval_s, 1)
    return {"steps": step, "requested": steps, "train_s": seconds, "log": log}


def left_padded(prompts: list[list[int]], pad: int):
    """(B, T) input ids and attention mask of token-id prompts, padded on the left."""
    width = max(len(x) for x in prompts)
    ids = torch.full((len(prompts), width), pad, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for r, x in enumerate(prompts):
        ids[r, width - len(x) :], mask[r, width - len(x) :] = torch.tensor(x), 1
    return ids, mask


@torch.no_grad()
def generate_scores(model, tok, items: list[EvalItem], baselines: dict, a, max_new=None) -> dict:
    """Greedy predictions for ``items``, scored beside the baselines on the same items."""
    infer = a.recipe.evaluate.infer
    max_new = max_new or a.max_new_tokens or infer.sampling.max_tokens
    budget = infer.vllm.engine.max_model_len - max_new
    prompts = [fit_prompt(tok, i.messages, budget) for i in items]
    todo = [k for k, p in enumerate(prompts) if p[1] is None]
    todo.sort(key=lambda k: len(prompts[k][0]))  # similar lengths share a batch
    stop_ids = {"eos_token_id": tok.eos_token_id, "pad_token_id": tok.pad_token_id}
    model.eval()
    model.config.use_cache, model.config.output_router_logits = True, False
    rows, t0 = [], time.perf_counter()
    for s in range(0, len(todo), a.eval_batch):
        chunk = todo[s : s + a.eval_batch]
        ids, mask = left_padded([prompts[k][0] for k in chunk], tok.pad_token_id)
        with torch.autocast(a.device, dtype=torch.bfloat16):
            out = model.generate(
                input_ids=ids.to(a.device), attention_mask=mask.to(a.device), do_sample=False,
                max_new_tokens=max_new, max_time=a.eval_max_s, **stop_ids,
            )  # fmt: skip
        for k, new in zip(chunk, out[:, ids.shape[1] :].tolist(), strict=True):
            stop = tok.eos_token_id in new
            new = new[: new.index(tok.eos_token_id)] if stop else new
            text = tok.decode(new, skip_special_tokens=True)  # as vLLM's default
            rows.append(prediction_row(items[k], text, "stop" if stop else "length"))
    model.config.use_cache, model.config.output_router_logits = False, True
    model.train()
    keys = {r["key"] for r in rows}
    summary = summarize(rows, model="probe")
    paired = {n: [b for b in bs if b["key"] in keys] for n, bs in baselines.items()}
    add_baselines(summary, paired, rows)
    summary["gen_s"] = round(time.perf_counter() - t0, 1)
    summary["prompt_too_long"] = len(items) - len(todo)
    summary["stopped_at_eos"] = sum(r["finish_reason"] == "stop" for r in rows)
    pick = rows[:: max(1, len(rows) // 4)]
    summary["examples"] = [{k: r[k][:300] for k in ("key", "reference", "output")} for r in pick]
    return summary


def print_table(s: dict) -> None:
    n, eos = s["domains"]["all"]["predictions"], s["stopped_at_eos"]
    loss = f"held-out loss SFT {s['heldout_sft_loss']:.3f} CPT {s['heldout_cpt_loss']:.3f}"
    print(f"\n== {loss}; {n} items in {s['gen_s']}s")
    print(f"({eos} ended at EOS)\ndomain       n | charF1 model  copy  retr margin | ROUGE-L")
    for d, e in s["domains"].items():
        b = [s["baselines"].get(x, {}).get(d, {}).get("rule", {}) for x in BASES]
        f1 = [x.get("char_f1") or 0.0 for x in b]
        margin = s["margin"].get(d, {}).get("char_f1", {}).get("margin", 0.0)
        cells = [e["rule"]["char_f1"], *f1, margin, e["rule"]["rouge_l"]]
        row = "{:9} {:4d} |       {:5.1f} {:5.1f} {:5.1f} {:+6.1f} | {:5.1f}"
        print(row.format(d, e["predictions"], *cells))


def parse_args() -> argparse.Namespace:
    fmt = argparse.RawDescriptionHelpFormatter
    p = argparse.ArgumentParser(description=__doc__, formatter_class=fmt)
    p.add_argument("--data", default=".probe/carry")
    p.add_argument("--out", default=os.environ.get("OUT", "probe-out"))
    p.add_argument("--device", default="cuda")
    p.add_argument("--recipe", default="small_cpu")
    p.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE",
        help="a recipe override, as a job's --set (model.hidden_size=256, train.learning_rate=1e-3)",
    )  # fmt: skip
    p.add_argument("--cpt-steps", type=int, default=1000)
    p.add_argument("--sft-steps", type=int, default=3000)
    p.add_argument("--batch-rows", type=int, default=16, help="packed rows per optimizer step")
    p.add_argument("--time-budget-s", type=float, default=180.0, help="training s, both phases")
    p.add_argument("--cpt-share", type=float, default=0.35, help="CPT's share of the budget")
    p.add_argument(
        "--eval-points", default="0.1,0.25,0.5,1", help="fractions of SFT to evaluate at"
    )
    p.add_argument("--max-items", type=int, default=None)
    p.add_argument("--eval-batch", type=int, default=512)
    p.add_argument("--max-new-tokens", type=int, default=None, help="default: the recipe's")
    p.add_argument("--eval-max-s", type=float, default=40.0, help="cap per generate call")
    p.add_argument("--log-every", type=int, default=250)
    a = p.parse_args()
    a.eval_points, a.recipe = [float(x) for x in a.eval_points.split(",")], load(a.recipe, a.set)
    return a


def main() -> None:
    from transformers import AutoTokenizer

    a, t_start = parse_args(), time.perf_counter()
    data, t = Path(a.data), a.recipe.train
    tok = AutoTokenizer.from_pretrained(str(data / "tokenizer"))
    lines = (data / "heldout_items.jsonl").read_text().splitlines()
    items = [EvalItem(**json.loads(x)) for x in lines]
    items = items[:: max(1, len(items) // (a.max_items or len(items)))][: a.max_items]
    baselines = json.loads((data / "baseline_predictions.json").read_text())
    model = build_model(a.recipe.model, tok, seed=t.seed).to(a.device)
    model.set_attn_implementation(t.attn_implementation)
    model.config.use_cache = False
    names = ("cpt_train", "sft_train", "cpt_eval", "sft_eval")
    cpt, sft, cpt_held, held = (load_rows(data / f, a.device) for f in names)
    rows = dict(zip(names, (x.input_ids.shape[0] for x in (cpt, sft, cpt_held, held)), strict=True))
    params = sum(p.numel() for p in model.parameters()) / 1e6
    print(f"{params:.1f}M params; packed rows {rows}; {len(items)} items", flush=True)

    args = {k: v for k, v in vars(a).items() if k != "recipe"}
    device = torch.cuda.get_device_name() if a.device == "cuda" else a.device
    result = {"args": args, "recipe": a.recipe.name, "params_m": params, "device": device}
    result |= {"rows": rows, "sft_evals": []}
    path = Path(a.out, "gpu_fidelity_probe.json")
    path.parent.mkdir(parents=True, exist_ok=True)

    def save() -> None:  # after every evaluation: a run cut short keeps what it measured
        result["seconds_total"] = round(time.perf_counter() - t_start, 1)
        path.write_text(json.dumps(result, indent=1, default=str))

    def evaluate(m, step: int, plan: int) -> None:
        s = generate_scores(m, tok, items, baselines, a)
        s["heldout_sft_loss"] = heldout_loss(m, held, a)
        s["heldout_cpt_loss"] = heldout_loss(m, cpt_held, a)
        print_table(s)
        result["sft_evals"].append({"step": step, "of": plan, **s})
        save()

    generate_scores(model, tok, items[:2], baselines, a, max_new=4)  # fails before training
    a.evaluate = evaluate
    result["sft_loss_at_init"] = heldout_loss(model, held, a)
    cpt_budget, sft_budget = a.time_budget_s * a.cpt_share, a.time_budget_s * (1 - a.cpt_share)
    result["cpt"] = train_phase(model, cpt, a, "cpt", a.cpt_steps, t.learning_rate, cpt_budget)
    result["sft_loss_after_cpt"] = heldout_loss(model, held, a)
    result["cpt_loss_after_cpt"] = heldout_loss(model, cpt_held, a)
    sft_lr = t.for_stage("sft").learning_rate
    result["sft"] = train_phase(model, sft, a, "sft", a.sft_steps, sft_lr, sft_budget)
    save()
    steps = f"cpt {result['cpt']['steps']} steps, sft {result['sft']['steps']} steps"
    print(f"\n{steps}, {result['seconds_total']}s in all -> {path}")


if __name__ == "__main__":
    main()
