"""The command line shared by jobs/cpt.py and jobs/sft.py: parse, build the TrainJob
(bad configuration fails here, before Ray starts), run, report."""

from __future__ import annotations

import argparse
import dataclasses
import os

from agentworld.cli import url


def parse_args(stage: str, doc: str, argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--data", type=url, help="the prepare stage's output (tokenizer/, packed/)")
    p.add_argument("--out", type=url, required=True, help="run directory (path or fsspec URL)")
    p.add_argument("--recipe", default="debug_cpu", help="recipe name (agentworld.recipes)")
    p.add_argument(
        "--init",
        type=url,
        required=False,
        help="HF checkpoint to start from (SFT: the CPT run's hf/)",
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


def local_cpus(cluster) -> int:
    """Logical CPUs of a new local cluster: the worker group plus Ray Data, even on a
    2-core machine (a joined cluster, RAY_ADDRESS, keeps what its nodes have)."""
    return max(os.cpu_count() or 1, cluster.num_workers * cluster.cpus_per_worker + 1)


def main(stage: str, doc: str, argv: list[str] | None = None) -> int:
    """Parse, build (a bad configuration raises ConfigError before Ray starts), run."""
    args = parse_args(stage, doc, argv)
    job = build_job(stage, args)
    from agentworld.cluster import local_ray
    from agentworld.console import say
    from agentworld.train.stage import run_stage

    with local_ray(num_cpus=local_cpus(job.recipe.cluster)):
        manifest = run_stage(job)
    c = manifest["counts"]
    evals = list(c["eval_loss"].values())
    summary = f"held-out loss {evals[0]:.4f} -> {evals[-1]:.4f}" if evals else "no held-out loss"
    say(f"[{stage}] {c['steps']} steps, {summary}, export -> {manifest['outputs']['hf']}")
    return 0
