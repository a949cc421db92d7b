"""The main job on the embedded default: local Ray, a local storage directory, the
vLLM CPU build. Runs the whole pipeline on a small corpus it records itself:

  collect   -> <out>/raw        real terminal, MCP, SWE, search, web and (where set-up
                                installed the desktop) os episodes
  prepare   -> <out>/prepared   validate, dedup, decontaminate, tokenize, pack
  cpt       -> <out>/cpt        Ray Train + DeepSpeed MoE, HF export in cpt/hf
  sft       -> <out>/sft        from cpt/hf, loss on observations only
  rl        -> <out>/rl         GRPO with vLLM rollouts and rule rewards (--skip-rl: none)
  evaluate  -> <out>/eval       sim-vs-real fidelity on held-out turns, beside baselines
  serve     -> <out>/serve      the simulator API on Ray Serve, every route checked once
  agent     -> <out>/agent      agents trained in the simulator, judged in the real env
  report    -> <out>/report     index.html and report.md (also: python jobs/report.py)

One console line per stage start and end, plus progress; each stage's own output goes
to <out>/logs/<stage>.log. A rerun skips finished stages and resumes a killed one.
Run:  python jobs/demo.py --out runs/demo          (or `make demo`)
      python jobs/demo.py --out runs/quick --episodes 8 --max-steps 4 --skip-serve
--recipe and --set reach every stage; --episodes, --max-steps, --max-items size a run.
"""

from __future__ import annotations

import argparse
import os
import sys

from agentworld.cli import job_parser, run_job, url
from agentworld.collect.os.env import desktop_installed

JOBS, DOMAINS = os.path.dirname(os.path.abspath(__file__)), "terminal,mcp,swe,search,web"
SKIPPABLE = ("rl", "serve", "agent")
# The agent stage at the size of a demo (the goal: at most 2 minutes of an idle 2-core machine;
# the full comparison is bench/bench_agents.py). Terminal alone: its demonstrations are
# about 330 tokens (MCP sessions 1-3k, every row of a batch padded to the longest) and its
# sandbox steps cost milliseconds. 80 tasks hold 15 out; 60 demonstration steps took the
# held-out oracle actions' NLL from 6.9 to 0.31 and the agent to 40% [13, 67] of them,
# the figure that carries signal at this size; two GRPO steps per RL agent show the loop
# running (their comparisons hold 0). 104 s in the latest fresh clone's `make demo` on an
# idle machine, its two vLLM engines in the processes that hold them (134 s and 151 s
# before, with vLLM's own processes; 212 s when the fit waited for the rollout engine).
AGENT = (
    "agent.tasks.families=('terminal',)",
    "agent.tasks.per_family=80",
    "agent.demo_steps=60",
    "agent.rl.max_steps=2",
    "agent.rl.rollout.temperature=0.6",
    "agent.limits.max_turns=3",
    "agent.nll_tasks=8",
)


# The world model's recipe at the size of a demo (debug_cpu's 1M-parameter shape, about
# 12 of the 20 minutes on an idle 2-core machine). 150 episodes: at 60 the model stopped
# improving on held-out turns after about 300 SFT steps while its training loss went on
# falling. SFT trains on whole conversations (each turn's context read once per epoch,
# not once per later turn: 1.6x fewer tokens an epoch).
# RL rolls out whole observations (up to 512 new tokens): at debug_cpu's 48 it rejected
# 519 of 874 contexts, trained on short answers only and lowered the SFT model (59.7 ->
# 56.6 char F1); at 512 it kept 799 and raised it to 65.4.
# SFT 450 steps at a peak rate of 2e-3 (twice debug_cpu's), 3.3 minutes less than 700
# at 1e-3: char F1 64.7 and 58.9 in two runs against 65.8 and 63.8 for 700 steps, on the
# same 47 held-out turns. Runs of one recipe spread by about 6 points, so two runs cannot
# show what the shorter SFT costs (docs/experiments.md).
# Held-out loss every 50 steps and checkpoints every 100 (debug_cpu's 10 would write 45
# checkpoints in SFT alone). The step counts and SFT's rate are for debug_cpu; another
# --recipe keeps its own.
RECIPE = (
    "data.sft_rows=trajectory",
    "rl.rollout.max_new_tokens=512",
    "rl.rollout.engine.max_model_len=1536",
    "train.eval_every=50",
    "train.checkpoint_every=100",
)
STEPS = (
    "train.max_steps=100",
    "train.sft_max_steps=450",
    "train.sft_learning_rate=2e-3",
    "train.warmup_steps=25",
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = job_parser(__doc__)
    p.add_argument("--out", type=url, default=url("runs/demo"), help="run directory")
    p.add_argument("--episodes", type=int, default=150, help="episodes to record")
    p.add_argument("--max-steps", type=int, help="steps of cpt, sft and rl (default: recipe)")
    p.add_argument("--max-items", type=int, help="held-out turns to evaluate (default: all)")
    for stage in SKIPPABLE:
        p.add_argument(f"--skip-{stage}", action="store_true", help=f"leave out the {stage} stage")
    p.add_argument("--num-cpus", type=int, default=4, help="logical CPUs of the local cluster")
    return p.parse_args(argv)


def config_args(args: argparse.Namespace) -> tuple[str, ...]:
    """``--recipe`` and the ``--set`` items every stage gets."""
    # os where set-up installed the desktop, a sixth of the episodes (at 24 episodes on 2
    # loaded cores it added about 20 s of collect: 41 s without it, 63 s with it).
    domains = DOMAINS + (",os" if desktop_installed() else "")
    sized = STEPS if args.recipe == "debug_cpu" else ()
    items = [*RECIPE, *sized, f"collect.domains={domains}", f"collect.episodes={args.episodes}"]
    if n := args.max_steps:
        steps = ("train.max_steps", "train.sft_max_steps", "rl.max_steps")
        items += [*(f"{key}={n}" for key in steps), f"train.warmup_steps={n // 4}"]
    if args.max_items:
        items.append(f"evaluate.infer.max_items={args.max_items}")
    return ("--recipe", args.recipe, *(a for i in [*items, *args.set] for a in ("--set", i)))


def agent_args(args: argparse.Namespace) -> tuple[str, ...]:
    """The agent stage's size (``AGENT``); the user's own ``--set agent.*`` items, which
    ``config_args`` places before these, are applied again after them and win."""
    mine = [item for item in args.set if item.startswith("agent.")]
    return tuple(a for item in [*AGENT, *mine] for a in ("--set", item))


def policy_dir(args: argparse.Namespace) -> str:
    """The export the demo evaluates and serves: RL's, or SFT's when RL is skipped."""
    return f"{args.out.rstrip('/')}/{'sft' if args.skip_rl else 'rl'}/hf"


def plan(args: argparse.Namespace) -> list:
    """The stages in pipeline order, each the job a user would run on its own."""
    from agentworld.pipeline import Stage

    out, cfg = args.out.rstrip("/"), config_args(args)
    policy = policy_dir(args)
    plan = [
        ("collect", f"{out}/raw", ("--out", f"{out}/raw", *cfg)),
        ("prepare", f"{out}/prepared", ("--input", f"{out}/raw", "--out", f"{out}/prepared", *cfg)),
        ("cpt", f"{out}/cpt", ("--data", f"{out}/prepared", "--out", f"{out}/cpt", *cfg)),
        ("sft", f"{out}/sft", ("--data", f"{out}/prepared", "--init", f"{out}/cpt/hf",
                               "--out", f"{out}/sft", *cfg)),
        ("rl", f"{out}/rl", ("--data", f"{out}/prepared", "--init", f"{out}/sft/hf",
                             "--out", f"{out}/rl", *cfg)),
        ("evaluate", f"{out}/eval/score", ("fidelity", *cfg, "--input", f"{out}/prepared/samples/sft",
                                           "--format", "samples", "--model", policy, "--out", f"{out}/eval")),
        ("serve", f"{out}/serve", ("--model", policy, "--smoke", "--out", f"{out}/serve", *cfg)),
        ("agent", f"{out}/agent", ("train", *cfg, *agent_args(args), "--world-model", policy,
                                   "--data", f"{out}/raw", "--out", f"{out}/agent")),
    ]  # fmt: skip
    skipped = {name for name in SKIPPABLE if getattr(args, f"skip_{name}")}
    return [Stage(name=n, done_url=d, argv=a) for n, d, a in plan if n not in skipped]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from agentworld.cluster import local_ray
    from agentworld.console import say
    from agentworld.pipeline import job_mains, run_pipeline
    from agentworld.report import build_report
    from agentworld.report.summary import summary_lines

    rc = run_pipeline(
        plan(args),
        run_url=args.out,
        logs_dir=os.path.join(args.out, "logs"),
        load_main=job_mains(JOBS),
        cluster=lambda: local_ray(num_cpus=args.num_cpus),
    )
    build_report(args.out)
    for line in summary_lines(args.out):
        say(f"[demo] {line}")
    return rc


if __name__ == "__main__":
    sys.exit(run_job("demo", main))
