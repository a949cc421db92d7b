"""Bench: RL rollout throughput and weight-sync cost, measured in one run.

1. Rollout tokens/s through the vLLM rollout actor (the RL loop's path: token ids in,
   G samples per prompt) against transformers ``generate`` in this process, the median
   of --rounds timed rounds each (the paired rounds' range beside it), on the same
   model (``--recipe``'s shape: by default the ``medium_cpu`` 23M-parameter MoE, as on
   the tiny one engine overheads dominate) and the same prompts, sampling settings and
   token budget.
2. Weight-sync time as a share of step time over a few real GRPO steps, and where one
   sync's time goes (the learner's gather, the transfer, the engines' write and reload).
3. GRPO siblings: an agent group's first turn, G episodes of one task and seed, so G
   identical prompts of one sample each. The rollout engine sends them as one request
   of G samples; the baseline sends the same prompts as G requests to the same engine
   (vLLM's ``generate``), its prefix cache on and reset before each.

Goals: the vLLM actor >= 1.5x transformers' tokens/s; weight sync <= 10% of step time;
siblings as one request >= 1.0x separate requests (tokens/s).

Run:  python bench/bench_rl.py [--quick] [--recipe small_cpu]   (writes bench/results/rl.json)
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
import time
from pathlib import Path

from _quick import parse_sized
from _results import goal, write_result

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "2")
os.environ.setdefault("WANDB_MODE", "offline")

# The same medium_cpu model at --quick (the ratio means little on the tiny one), fewer
# and shorter rollouts and one step fewer.
QUICK = {"contexts": 4, "group": 4, "new_tokens": 16, "steps": 2, "rounds": 3}


def build_inputs(tmp: str, a: argparse.Namespace):
    """A checkpoint of ``--recipe``'s shape (tokenizer trained on generated trajectories)
    and tokenized contexts from the same trajectories."""
    from agentworld.model import build_tiny_checkpoint, load_tokenizer
    from agentworld.recipes import get_recipe
    from agentworld.rl.data import LoadResult, context_from_row, sample_rows, tokenize_contexts
    from agentworld.schema.examples import sample_trajectories

    trajs = sample_trajectories(60, seed=3)
    texts = [t.environment for t in trajs] + [
        x for t in trajs for turn in t.turns for x in (turn.action, turn.observation)
    ]
    recipe = get_recipe(a.recipe)
    build_tiny_checkpoint(texts, f"{tmp}/init", recipe.model)
    contexts = [context_from_row(r) for r in sample_rows(trajs)]
    contexts = tokenize_contexts(
        contexts, load_tokenizer(f"{tmp}/init"), max_prompt_tokens=512, result=LoadResult()
    )
    rl = dataclasses.replace(
        recipe.rl,
        contexts_per_step=a.contexts,
        group_size=a.group,
        max_steps=a.steps,
        wandb=False,
        rollout=dataclasses.replace(recipe.rl.rollout, max_new_tokens=a.new_tokens),
        learner=dataclasses.replace(recipe.rl.learner, learning_rate=1e-4),
    )
    return dataclasses.replace(recipe, rl=rl), contexts


def vllm_tokens_per_s(workers, prompts: list[list[int]], group: int, rounds: int) -> dict:
    workers.rollout.generate(prompts[:2], n=2)  # warm-up
    timed = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        out = workers.rollout.generate(prompts, n=group)
        timed.append((sum(len(c.token_ids) for g in out for c in g), time.perf_counter() - t0))
    return _rounds(timed)


def _rounds(timed: list[tuple[int, float]]) -> dict:
    """Tokens and seconds of each timed round, and the median round's tokens/s."""
    rates = sorted(t / s for t, s in timed)
    return {
        "tokens": sum(t for t, _ in timed),
        "seconds": sum(s for _, s in timed),
        "rounds_tokens_per_s": [round(t / s, 1) for t, s in timed],
        "tokens_per_s": rates[len(rates) // 2],
    }


def rollout_ratio(vllm: dict, hf: dict) -> dict:
    """The ratio of the two median rounds, and its range over the rounds paired in order
    (round i of one against round i of the other)."""
    pairs = [
        v / h for v, h in zip(vllm["rounds_tokens_per_s"], hf["rounds_tokens_per_s"], strict=True)
    ]
    return {
        "ratio": vllm["tokens_per_s"] / hf["tokens_per_s"],
        "paired_rounds_range": [round(min(pairs), 3), round(max(pairs), 3)],
    }


def hf_tokens_per_s(
    model_dir: str, prompts: list[list[int]], eos_id: int, pad_id: int, a: argparse.Namespace
) -> dict:
    """transformers generate: the same prompts (left-padded batch), G samples each,
    the same budget, ``a.rounds`` timed rounds; tokens counted up to and including the
    end-of-turn token (the batch runs until its longest row ends)."""
    import torch

    from agentworld.model import load_model

    model = load_model(model_dir, dtype=torch.float32).eval()
    model.config.output_router_logits = False  # a training-time output; breaks cached decoding
    width = max(len(p) for p in prompts)
    ids = torch.tensor([[pad_id] * (width - len(p)) + list(p) for p in prompts])
    attn = (
        torch.arange(width)[None, :] >= torch.tensor([width - len(p) for p in prompts])[:, None]
    ).long()
    kwargs = dict(
        do_sample=True,
        temperature=1.0,
        top_p=1.0,
        num_return_sequences=a.group,
        max_new_tokens=a.new_tokens,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
    )
    with torch.no_grad():
        model.generate(
            input_ids=ids[:2], attention_mask=attn[:2], **{**kwargs, "max_new_tokens": 4}
        )
        torch.manual_seed(0)
        timed = []
        for _ in range(a.rounds):
            t0 = time.perf_counter()
            out = model.generate(input_ids=ids, attention_mask=attn, **kwargs)
            seconds = time.perf_counter() - t0
            rows = out[:, width:].tolist()
            timed.append(
                (sum(r.index(eos_id) + 1 if eos_id in r else len(r) for r in rows), seconds)
            )
    return _rounds(timed)


def sync_share(recipe, workers, contexts, pad_id: int, steps: int) -> dict:
    from agentworld.rl.loop import Trainer
    from agentworld.rl.rewards import build_rewards

    rows: list[dict] = []
    trainer = Trainer(
        rl=recipe.rl,
        workers=workers,
        contexts=contexts,
        rewards=build_rewards(recipe.rl),
        pad_id=pad_id,
        log=lambda step, m: rows.append(m),
    )
    trainer.run(0, steps)
    step_s = sum(r["time/step_s"] for r in rows)
    sync_s = sum(r["time/sync_s"] for r in rows)
    return {
        "steps": steps,
        "step_s": step_s,
        "sync_s": sync_s,
        "sync_share": sync_s / step_s,
        "per_step": [{k: r[k] for k in r if k.startswith("time/")} for r in rows],
        "where": sync_breakdown(workers, steps),
    }


def sync_breakdown(workers, version: int) -> dict:
    """One more sync, in parts: the learner's gather of the full weights, then the
    transfer and each engine's write of the tensors, reload into the running model and
    cache reset (the rest of the push is the transfer through Ray's object store)."""
    import ray

    total = workers.sync_weights(version + 1)
    engines = ray.get([e.load_times.remote() for e in workers.rollout.engines])
    return {"total_s": total, **workers.last_sync, "engines": engines}


def sibling_rollouts(model_dir: str, recipe, prompts: list[list[int]], group: int) -> dict:
    """Tokens/s of ``group`` siblings per prompt, one sample each: one request per prompt
    (``RolloutEngine.generate``) vs one request per sibling, alternately, twice."""
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    from agentworld.rl.rollout import RolloutEngine

    cfg = recipe.rl.rollout
    engine = RolloutEngine(model_dir, cfg, seed=0)
    siblings = [p for p in prompts for _ in range(group)]
    params = SamplingParams(
        temperature=cfg.temperature,
        top_p=cfg.top_p,
        max_tokens=cfg.max_new_tokens,
        skip_special_tokens=False,
    )

    def separate() -> int:
        outs = engine.llm.generate(
            [TokensPrompt(prompt_token_ids=p) for p in siblings], params, use_tqdm=False
        )
        return sum(len(o.outputs[0].token_ids) for o in outs)

    def grouped() -> int:
        return sum(len(c.token_ids) for g in engine.generate(siblings, n=1) for c in g)

    figures = {"separate": [0, 0.0], "grouped": [0, 0.0]}
    try:
        engine.generate(siblings[:2], n=1)  # warm-up
        for _ in range(2):
            for name, run in (("separate", separate), ("grouped", grouped)):
                engine.llm.reset_prefix_cache()
                t0 = time.perf_counter()
                figures[name][0] += run()
                figures[name][1] += time.perf_counter() - t0
    finally:
        engine.close()
    out = {
        k: {"tokens": t, "seconds": sec, "tokens_per_s": t / sec} for k, (t, sec) in figures.items()
    }
    out["speedup"] = out["grouped"]["tokens_per_s"] / out["separate"]["tokens_per_s"]
    return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--contexts", type=int, default=8, help="prompts per rollout and RL step")
    p.add_argument("--group", type=int, default=8, help="samples per prompt (GRPO group)")
    p.add_argument("--new-tokens", type=int, default=64, help="token budget per sample")
    p.add_argument("--steps", type=int, default=3, help="GRPO steps timed for the sync share")
    p.add_argument(
        "--rounds", type=int, default=5, help="timed rollouts of each engine (the median counts)"
    )
    p.add_argument(
        "--recipe",
        default="medium_cpu",
        choices=("small_cpu", "medium_cpu"),
        help="the model's shape (the weight sync's goal is stated at small_cpu)",
    )
    return parse_sized(p, QUICK, argv)


def main() -> int:
    a = parse_args()
    import ray

    from agentworld.model import load_tokenizer
    from agentworld.rl.placement import RLWorkers

    ray.init(
        num_cpus=4,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": str(ROOT / "platform")}},
    )
    with tempfile.TemporaryDirectory() as tmp:
        recipe, contexts = build_inputs(tmp, a)
        tok = load_tokenizer(f"{tmp}/init")
        prompts = [list(c.prompt_ids) for c in contexts[: a.contexts]]
        workers = RLWorkers(recipe.rl, recipe.train, f"{tmp}/init")
        try:
            vllm = vllm_tokens_per_s(workers, prompts, a.group, a.rounds)
            sync = sync_share(recipe, workers, contexts, tok.pad_token_id, a.steps)
        finally:
            workers.close()
        hf = hf_tokens_per_s(f"{tmp}/init", prompts, tok.eos_token_id, tok.pad_token_id, a)
        ray.shutdown()
        siblings = sibling_rollouts(f"{tmp}/init", recipe, prompts, a.group)
    speed = rollout_ratio(vllm, hf)
    result = {
        "model": a.recipe,
        "quick": a.quick,
        "prompts": a.contexts,
        "group_size": a.group,
        "max_new_tokens": a.new_tokens,
        "vllm_actor": vllm,
        "transformers_generate": hf,
        "rollout_speedup_vs_transformers": speed["ratio"],
        "rollout_paired_rounds_range": speed["paired_rounds_range"],
        "weight_sync": sync,
        "siblings": siblings,
    }
    goals = [
        goal(
            "vllm_vs_transformers_rollout",
            result["rollout_speedup_vs_transformers"],
            ">=",
            1.5,
            f"RL rollouts through the vLLM actor beat transformers generate (tokens/s, {a.recipe})",
        ),
        goal(
            "weight_sync_share",
            sync["sync_share"],
            "<=",
            0.1,
            f"weight sync learner -> vLLM is a small part of a GRPO step ({a.recipe})",
        ),
        goal(
            "siblings_one_request_vs_separate",
            siblings["speedup"],
            ">=",
            1.0,
            "a GRPO group's siblings share their prompt: G identical prompts as one request "
            "of G samples vs G requests (rollout tokens/s, same engine)",
        ),
    ]
    out = write_result("rl", result, goals)
    print(
        f"rollout: vLLM actor {vllm['tokens_per_s']:.0f} tok/s vs transformers generate "
        f"{hf['tokens_per_s']:.0f} tok/s (median of {a.rounds} rounds each) -> "
        f"{result['rollout_speedup_vs_transformers']:.2f}x, paired rounds "
        f"{result['rollout_paired_rounds_range']}"
    )
    print(
        f"weight sync: {sync['sync_s']:.2f}s of {sync['step_s']:.2f}s over {a.steps} steps "
        f"-> {sync['sync_share']:.1%} of step time"
    )
    print(
        f"siblings: one request {siblings['grouped']['tokens_per_s']:.0f} tok/s vs separate "
        f"{siblings['separate']['tokens_per_s']:.0f} tok/s -> {siblings['speedup']:.2f}x"
    )
    print(f"-> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
