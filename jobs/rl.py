"""RL for simulation fidelity: GRPO-family training of the world model with vLLM rollout
engines and a DeepSpeed learner group on Ray, rewarded against the real next observation.

Reads prepare's per-turn samples (``<data>/samples/sft/``), starts from an HF checkpoint
(``--init``, e.g. the SFT stage's ``<out>/hf``), and writes under ``--out``:
  metrics.jsonl   one line of metrics per step (also wandb, offline by default)
  checkpoints/    learner checkpoints (step-XXXXXXXX/); a rerun resumes from the newest
  hf/             the trained policy, HF format (vLLM and transformers load it)
  quarantine/     contexts left out, with the reason
  manifest.json   written last; a rerun of a finished run does nothing

Run:  python jobs/rl.py --data runs/prepare --init runs/sft/hf --out runs/rl --recipe debug_cpu
 or:  ray job submit --working-dir . -- python jobs/rl.py --data ... --init ... --out ...
The rubric judge is on when the recipe lists a ``judge`` reward, or with
``--judge-url http://host:port/v1`` (any OpenAI-compatible endpoint; weight 1). Settings
come from the recipe's ``rl`` section: ``--set rl.max_steps=20 --set rl.wandb=false``.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

from agentworld.cli import job_parser, run_job, url


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = job_parser(__doc__)
    p.add_argument("--data", type=url, required=True, help="prepare run dir or samples/sft URL")
    p.add_argument("--init", type=url, required=True, help="HF checkpoint URL to start from")
    p.add_argument("--out", type=url, required=True, help="run directory (path or fsspec URL)")
    p.add_argument("--judge-url", help="add the rubric judge reward on this endpoint")
    p.add_argument("--judge-model", help="served judge model (default: the endpoint's first)")
    return p.parse_args(argv)


def build_recipe(args: argparse.Namespace):
    """The named recipe with the command line's overrides; validated before any work."""
    from agentworld.recipes import load
    from agentworld.rl.config import RewardSpec
    from agentworld.scoring.config import EndpointConfig, JudgeConfig

    recipe = load(args.recipe, args.set)
    if not args.judge_url:
        return recipe
    rl = recipe.rl
    endpoint = EndpointConfig(base_url=args.judge_url, model=args.judge_model)
    rewards = tuple(r for r in rl.rewards if r.name != "judge")
    judge = dict(judge=JudgeConfig(endpoint=endpoint), rewards=(*rewards, RewardSpec(name="judge")))
    return dataclasses.replace(recipe, rl=dataclasses.replace(rl, **judge))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from agentworld.io import exists
    from agentworld.model.engine import check_engine_can_run

    recipe = build_recipe(args)  # bad config fails here, before Ray or any model starts
    for flag, given in (("--data", args.data), ("--init", args.init)):
        if not exists(given):
            raise SystemExit(f"{flag}: {given} does not exist")
    check_engine_can_run(recipe.rl.rollout.engine, args.init, field="init")
    from agentworld.cluster import local_ray
    from agentworld.console import say
    from agentworld.recipes.jobs import rl_job
    from agentworld.rl.run import run

    with local_ray():
        manifest = run(rl_job(recipe, data=args.data, init=args.init, out=args.out))
    counts = manifest.get("counts", {})
    say(
        f"[rl] done: {counts.get('steps')} steps, reward {counts.get('reward_first', 0):.3f} -> "
        f"{counts.get('reward_last', 0):.3f}; policy at {manifest.get('outputs', {}).get('hf')}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(run_job("rl", main))
