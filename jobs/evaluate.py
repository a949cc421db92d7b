"""Evaluate a world model AgentWorldBench-style: infer, judge, score (and compare runs,
or report sim-vs-real fidelity on held-out collected trajectories); roll held-out
episodes out closed-loop; measure whether the simulator ranks agents as reality does.

Input: a directory of AgentWorldBench ``*_test.jsonl`` files (one per domain), our
record shards, or prepare's ``samples/sft`` Parquet shards. Outputs under --out (see
agentworld.evaluate.run): predictions and judgments as JSONL, summary.json, table.md,
chart.png, closed_loop/drift.json, ranking/report.json, a manifest per stage. Every
stage resumes after an interruption.

Run:
  python jobs/evaluate.py infer --input runs/demo/prepared/samples/sft --format samples --model runs/demo/sft/hf --out runs/eval
  python jobs/evaluate.py infer --input awb/ --endpoint http://host:8000/v1 --out runs/eval
  python jobs/evaluate.py judge --out runs/eval --judge-url http://judge:8000/v1
  python jobs/evaluate.py score --out runs/eval
  python jobs/evaluate.py compare --summaries a/score/summary.json b/score/summary.json --out cmp
  python jobs/evaluate.py fidelity --input heldout/ --model runs/sft/hf --out runs/fidelity
  python jobs/evaluate.py closed-loop --input runs/demo/prepared/samples/sft --format samples --model runs/demo/sft/hf --out runs/eval
  python jobs/evaluate.py ranking --world-model runs/demo/sft/hf --out runs/eval
Settings come from the recipe: --recipe NAME --set evaluate.infer.sampling.max_tokens=32
(after the subcommand); or through Ray: ray job submit --working-dir . -- python jobs/evaluate.py <command> ...
"""

from __future__ import annotations

import argparse
import sys

from agentworld.cli import run_job


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    from agentworld.evaluate.cli import build_parser

    return build_parser(__doc__).parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from agentworld.recipes import load

    recipe = load(args.recipe, args.set)
    if args.command == "ranking":
        # the agent stage (sandboxes, the world model's engine) only for this command
        from agentworld.agent.ranking import run_ranking

        return run_ranking(args.world_model, args.out, recipe.agent, recipe.evaluate.ranking)
    from agentworld.evaluate.cli import run_command

    # the simulator's client, for closed-loop rollouts through its sessions
    from agentworld.sim.client import SimClient

    return run_command(args, recipe.evaluate, session_client=SimClient)


if __name__ == "__main__":
    sys.exit(run_job("evaluate", main))
