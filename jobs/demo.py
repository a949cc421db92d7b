"""The main job on the embedded default: local Ray, a local storage directory, the
vLLM CPU build. Runs the whole pipeline on a small corpus it records itself:

  collect   -> <out>/raw        real terminal, MCP, SWE, search and web episodes
  prepare   -> <out>/prepared   validate, dedup, decontaminate, tokenize, pack
  cpt       -> <out>/cpt        Ray Train + DeepSpeed MoE, HF export in cpt/hf
  sft       -> <out>/sft        from cpt/hf, loss on observations only
  rl        -> <out>/rl         GRPO with vLLM rollouts and rule rewards (--skip-rl: none)
  evaluate  -> <out>/eval       sim-vs-real fidelity on held-out turns, beside baselines
  serve     -> <out>/serve      the simulator API on Ray Serve, every route checked once
  agent     -> <out>/agent      agents trained in the simulator and in the real environment,
                                judged in the real one (--skip-agent: none)
  report    -> <out>/report     index.html and report.md (also: python jobs/report.py)

The console shows one line per stage start and end plus progress; each stage's own
output (Ray, Ray Data, vLLM) goes to <out>/logs/<stage>.log. Every stage is idempotent:
a rerun skips finished stages and resumes a killed one. All stages share one Ray cluster.

Run:  python jobs/demo.py --out runs/demo          (or `make demo`)
      python jobs/demo.py --out runs/quick --episodes 8 --max-steps 4 --skip-serve
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys

from agentworld.cli import run_job, url

JOBS = os.path.dirname(os.path.abspath(__file__))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--out", type=url, default=url("runs/demo"), help="run directory")
    p.add_argument("--recipe", default="debug_cpu")
    p.add_argument("--episodes", type=int, default=24, help="episodes to record")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-steps", type=int, help="steps of cpt, sft and rl (default: recipe)")
    p.add_argument("--max-items", type=int, help="held-out turns to evaluate (default: all)")
    p.add_argument("--skip-rl", action="store_true", help="leave out the RL stage")
    p.add_argument("--skip-serve", action="store_true", help="leave out the Serve check")
    p.add_argument("--skip-agent", action="store_true", help="leave out the agent stage")
    p.add_argument("--num-cpus", type=int, default=4, help="logical CPUs of the local cluster")
    return p.parse_args(argv)


def plan(args: argparse.Namespace) -> list:
    """The stages in pipeline order, each the job a user would run on its own."""
    from agentworld.pipeline import Stage

    out, recipe = args.out.rstrip("/"), ("--recipe", args.recipe)
    n = args.max_steps
    steps = ("--train", f"max_steps={n}", "--train", f"warmup_steps={n // 4}") if n else ()
    policy = f"{out}/sft/hf" if args.skip_rl else f"{out}/rl/hf"
    items = ("--max-items", str(args.max_items)) if args.max_items else ()
    plan = [
        ("collect", f"{out}/raw", ("--out", f"{out}/raw", "--domains", "terminal,mcp,swe,search,web",
                                   "--episodes", str(args.episodes), "--seed", str(args.seed), *recipe)),
        ("prepare", f"{out}/prepared", ("--input", f"{out}/raw", "--out", f"{out}/prepared", *recipe)),
        ("cpt", f"{out}/cpt", ("--data", f"{out}/prepared", "--out", f"{out}/cpt", *recipe, *steps)),
        ("sft", f"{out}/sft", ("--data", f"{out}/prepared", "--init", f"{out}/cpt/hf",
                               "--out", f"{out}/sft", *recipe, *steps)),
    ]  # fmt: skip
    if not args.skip_rl:
        rl_steps = ("--max-steps", str(args.max_steps)) if args.max_steps else ()
        plan.append(("rl", f"{out}/rl", ("--data", f"{out}/prepared", "--init", f"{out}/sft/hf",
                                         "--out", f"{out}/rl", *recipe, *rl_steps)))  # fmt: skip
    plan.append(("evaluate", f"{out}/eval/score", (*recipe, "fidelity", "--input",
                 f"{out}/prepared/samples/sft", "--format", "samples", "--model", policy,
                 "--out", f"{out}/eval", *items)))  # fmt: skip
    if not args.skip_serve:
        plan.append(
            ("serve", f"{out}/serve", ("--model", policy, "--smoke", "--out", f"{out}/serve"))
        )
    if not args.skip_agent:
        plan.append(("agent", f"{out}/agent", ("train", *recipe, "--world-model", policy,
                                               "--data", f"{out}/raw", "--out", f"{out}/agent")))  # fmt: skip
    return [Stage(name=n, done_url=d, argv=a) for n, d, a in plan]


def load_main(name: str):
    """``main`` of jobs/<name>.py, imported from its file."""
    spec = importlib.util.spec_from_file_location(f"agentworld_job_{name}", f"{JOBS}/{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from agentworld.cluster import local_ray
    from agentworld.console import say
    from agentworld.pipeline import run_pipeline
    from agentworld.report import build_report

    rc = run_pipeline(
        plan(args),
        run_url=args.out,
        logs_dir=os.path.join(args.out, "logs"),
        load_main=load_main,
        cluster=lambda: local_ray(num_cpus=args.num_cpus),
    )
    report = build_report(args.out)
    say(f"[demo] report: {report}/index.html (and report.md)")
    return rc


if __name__ == "__main__":
    sys.exit(run_job("demo", main))
