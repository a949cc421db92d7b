"""Agents trained inside the simulator, and agents warm-started from the world model.

  train     tasks -> demonstrations -> per agent variant (untrained, sim, sim_uncontrolled,
            real, cold_sim): the demonstration fit, then multi-turn GRPO (vLLM rollout
            engines, DeepSpeed learner) in its environment -> every agent evaluated on
            held-out tasks in the REAL environment, injection probes, WM2Real, steps/s
  evaluate  given agent checkpoints (--agent NAME=PATH): the same evaluation and measures

Writes under --out: report.json, report.md, *.png, tasks.jsonl, episodes/, agents/<v>/hf,
metrics.jsonl, sim_prompts.jsonl, manifest.json (a finished run does nothing on rerun).

Run:  python jobs/agent.py train --recipe debug_cpu --world-model runs/demo/sft/hf \
          --data runs/demo/raw --out runs/demo/agent --set rl.max_steps=2
 or:  ray job submit --working-dir . -- python jobs/agent.py train --recipe qwen35_a3b ...
Any AgentConfig field: --set KEY=VALUE (dotted: tasks.per_family=8, sim.temperature=0.5).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "platform"))

from agentworld.cli import run_job, url  # noqa: E402


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--recipe", default="debug_cpu")
    common.add_argument("--world-model", required=True, type=url, help="world-model HF checkpoint")
    common.add_argument("--out", required=True, type=url, help="run directory (path or URL)")
    common.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="AgentConfig override (repeatable)",
    )
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
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
    from agentworld.agent.run import AgentJob
    from agentworld.config import ConfigError, set_overrides
    from agentworld.io import exists
    from agentworld.recipes import get_recipe

    recipe = get_recipe(args.recipe)
    recipe = dataclasses.replace(recipe, agent=set_overrides(recipe.agent, args.set))
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
    return AgentJob(
        command=args.command,
        out=args.out,
        world_model=args.world_model,
        recipe=recipe,
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
