"""Agents trained inside the simulator, and agents warm-started from the world model.

  train     tasks -> demonstrations -> per agent variant (untrained, sim, sim_uncontrolled,
            real, cold_sim): the demonstration fit, then multi-turn GRPO (vLLM rollout
            engines, DeepSpeed learner) in its environment -> every agent evaluated on
            held-out tasks in the REAL environment, injection probes, WM2Real, steps/s
  evaluate  given agent checkpoints (--agent NAME=PATH): the same evaluation and measures

Writes under --out: report.json, report.md, *.png, tasks.jsonl, episodes/, agents/<v>/hf,
metrics.jsonl, sim_prompts.jsonl, manifest.json (a finished run does nothing on rerun).

Run:  python jobs/agent.py train --recipe debug_cpu --world-model runs/demo/sft/hf \
          --data runs/demo/raw --out runs/demo/agent --set agent.rl.max_steps=2
 or:  ray job submit --working-dir . -- python jobs/agent.py train --recipe qwen35_a3b ...
Any recipe field: --set KEY=VALUE (dotted: agent.tasks.per_family=8, agent.sim.temperature=0.5).
"""

from __future__ import annotations

import argparse
import sys

from agentworld.cli import job_parser, recipe_options, run_job, url


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False, parents=[recipe_options()])
    common.add_argument("--world-model", required=True, type=url, help="world-model HF checkpoint")
    common.add_argument("--out", required=True, type=url, help="run directory (path or URL)")
    p = job_parser(__doc__, recipe=False)
    sub = p.add_subparsers(dest="command", required=True)
    train = sub.add_parser("train", parents=[common], help="train and compare agents")
    train.add_argument("--data", type=url, help="collected trajectories (demonstrations)")
    ev = sub.add_parser("evaluate", parents=[common], help="evaluate agent checkpoints")
    ev.add_argument("--agent", action="append", default=[], required=True, metavar="NAME=PATH")
    return p


PARSER = build_parser()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    return PARSER.parse_args(argv)


def build_job(args: argparse.Namespace):
    """The AgentJob; a bad recipe, override or input fails here, before any work."""
    from agentworld.config import ConfigError
    from agentworld.io import exists
    from agentworld.model.engine import check_engine_can_run
    from agentworld.recipes import load
    from agentworld.recipes.jobs import agent_job

    recipe = load(args.recipe, args.set)
    agents = {}
    for item in getattr(args, "agent", []):
        name, sep, path = item.partition("=")
        if not sep or not name:
            raise ConfigError("agent", f"{item!r} is not NAME=PATH")
        agents[name] = url(path)
    data = getattr(args, "data", None)
    for flag, u in (("world-model", args.world_model), ("data", data), *agents.items()):
        if u is not None and not exists(u):
            raise ConfigError(flag, f"{u} does not exist")
    if recipe.agent.sim.backend == "engine":
        check_engine_can_run(recipe.agent.sim.engine, args.world_model, field="world-model")
    return agent_job(
        recipe,
        command=args.command,
        out=args.out,
        world_model=args.world_model,
        data=data,
        agents=agents,
    )


def main(argv: list[str] | None = None) -> int:
    job = build_job(parse_args(argv))
    from agentworld.agent.placement import cluster
    from agentworld.agent.run import run

    with cluster():
        manifest = run(job)
    print(f"[agent] done: report {manifest['outputs']['md']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(run_job("agent", main))
