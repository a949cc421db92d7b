"""The main job on the embedded default: local Ray, a local storage directory, the
vLLM CPU build. Runs the pipeline end to end on a small corpus it records itself:

  collect   -> <out>/raw        real terminal, MCP, SWE and search episodes
  prepare   -> <out>/prepared   validate, dedup, decontaminate, tokenize, pack
  cpt       -> <out>/cpt        Ray Train + DeepSpeed MoE, HF export in cpt/hf
  sft       -> <out>/sft        from cpt/hf, loss on observations only
  rl        -> <out>/rl         (--with-rl) GRPO with vLLM rollouts, rule rewards
  evaluate  -> <out>/eval       sim-vs-real fidelity on held-out turns (rule metrics)
  serve     -> <out>/serve      the simulator API on Ray Serve, every route checked once

Every stage is idempotent: a rerun skips finished stages and resumes a killed one.
All stages share one local Ray cluster.

Run:  python jobs/demo.py --out runs/demo          (or `make demo`)
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time

JOBS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(JOBS, "..", "platform"))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--out", default="runs/demo", help="run directory (path or fsspec URL)")
    p.add_argument("--recipe", default="debug_cpu")
    p.add_argument("--episodes", type=int, default=24, help="episodes to record")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--with-rl", action="store_true", help="also run a short RL stage")
    p.add_argument("--skip-serve", action="store_true", help="leave out the Serve smoke check")
    p.add_argument(
        "--num-cpus",
        type=int,
        default=4,
        help="logical CPUs of the local Ray cluster: training wants workers + 1 for Ray Data",
    )
    return p.parse_args(argv)


def stages(args: argparse.Namespace) -> list[tuple[str, list[str]]]:
    """(job name, argv) in pipeline order."""
    out, recipe = args.out.rstrip("/"), ["--recipe", args.recipe]
    policy = f"{out}/rl/hf" if args.with_rl else f"{out}/sft/hf"
    plan = [
        ("collect", ["--out", f"{out}/raw", "--domains", "terminal,mcp,swe,search",
                     "--episodes", str(args.episodes), "--seed", str(args.seed), *recipe]),
        ("prepare", ["--input", f"{out}/raw", "--out", f"{out}/prepared", *recipe]),
        ("cpt", ["--data", f"{out}/prepared", "--out", f"{out}/cpt", *recipe]),
        ("sft", ["--data", f"{out}/prepared", "--init", f"{out}/cpt/hf", "--out", f"{out}/sft", *recipe]),
    ]  # fmt: skip
    if args.with_rl:
        plan.append(
            ("rl", ["--data", f"{out}/prepared", "--init", f"{out}/sft/hf", "--out", f"{out}/rl", *recipe])
        )  # fmt: skip
    plan.append(
        ("evaluate", ["--recipe", args.recipe, "fidelity", "--input", f"{out}/prepared/samples/sft",
                      "--format", "samples", "--model", policy, "--out", f"{out}/eval"])
    )  # fmt: skip
    if not args.skip_serve:
        plan.append(("serve", ["--model", policy, "--smoke", "--out", f"{out}/serve"]))
    return plan


def load_job(name: str):
    spec = importlib.util.spec_from_file_location(
        f"agentworld_job_{name}", os.path.join(JOBS, f"{name}.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("WANDB_MODE", "offline")
    import ray

    # One cluster for every stage; logical CPUs may exceed the cores (2 here), so that
    # 2 train workers + Ray Data, or Serve's replicas, fit on a small machine.
    if not ray.is_initialized() and not os.environ.get("RAY_ADDRESS"):
        ray.init(num_cpus=args.num_cpus, include_dashboard=False)
    t0 = time.time()
    for name, job_argv in stages(args):
        t = time.time()
        print(f"[demo] == {name}: python jobs/{name}.py {' '.join(job_argv)}", flush=True)
        rc = load_job(name).main(job_argv)
        if rc:
            print(f"[demo] {name} failed with exit code {rc}; rerun to resume", flush=True)
            return rc
        print(f"[demo] == {name} done in {time.time() - t:.0f}s", flush=True)
    print(f"[demo] pipeline complete in {time.time() - t0:.0f}s -> {args.out}")
    print(f"[demo] fidelity table: {args.out}/eval/score/table.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
