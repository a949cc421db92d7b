"""The command line shared by jobs/cpt.py and jobs/sft.py: parse, build the TrainJob
(bad configuration fails here, before Ray starts), run, report."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys

PLATFORM = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def parse_args(stage: str, doc: str, argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--data", help="the prepare stage's output URL (tokenizer/, packed/)")
    p.add_argument("--out", required=True, help="run directory (path or fsspec URL)")
    p.add_argument("--recipe", default="debug_cpu", help="recipe name (agentworld.recipes)")
    p.add_argument(
        "--init", required=False, help="HF checkpoint to start from (SFT: the CPT run's hf/)"
    )
    p.add_argument(
        "--train",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="override a TrainConfig field of the recipe (repeatable), e.g. max_steps=20",
    )
    return p.parse_args(argv)


def build_job(stage: str, args: argparse.Namespace):
    """The TrainJob; a bad recipe, override or missing URL raises ConfigError."""
    from agentworld.recipes import get_recipe
    from agentworld.recipes.config import apply_overrides
    from agentworld.train.job import TrainJob

    recipe = get_recipe(args.recipe)
    train = apply_overrides(recipe.train, args.train, owner="train")
    recipe = dataclasses.replace(recipe, train=train)  # re-validates the whole recipe
    return TrainJob(stage=stage, data=args.data or "", out=args.out, recipe=recipe, init=args.init)


def _local_cluster(cluster) -> dict:
    """ray.init arguments. A new local cluster gets enough logical CPUs for the worker
    group plus Ray Data even on a 2-core machine; an existing one (RAY_ADDRESS, as
    under ``ray job submit``) is joined as it is."""
    kwargs: dict = {"runtime_env": {"env_vars": {"PYTHONPATH": PLATFORM}}}
    if not os.environ.get("RAY_ADDRESS"):
        need = cluster.num_workers * cluster.cpus_per_worker + 1
        kwargs["num_cpus"] = max(os.cpu_count() or 1, need)
    return kwargs


def main(stage: str, doc: str, argv: list[str] | None = None) -> int:
    from agentworld.recipes import ConfigError

    args = parse_args(stage, doc, argv)
    try:
        job = build_job(stage, args)
    except ConfigError as e:
        print(f"{stage}: invalid configuration: {e}", file=sys.stderr)
        return 2
    import ray

    from agentworld.train.stage import run_stage

    started = not ray.is_initialized()
    if started:
        ray.init(**_local_cluster(job.recipe.cluster))
    try:
        manifest = run_stage(job)
    except ConfigError as e:
        print(f"{stage}: invalid configuration: {e}", file=sys.stderr)
        return 2
    finally:
        if started:
            ray.shutdown()
    c = manifest["counts"]
    evals = list(c["eval_loss"].values())
    summary = f"held-out loss {evals[0]:.4f} -> {evals[-1]:.4f}" if evals else "no held-out loss"
    print(f"[{stage}] {c['steps']} steps, {summary}, export -> {manifest['outputs']['hf']}")
    return 0
