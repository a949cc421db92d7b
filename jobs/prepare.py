"""prepare: raw trajectory shards -> validated, deduplicated, decontaminated, tokenized
and packed training data (Ray Data).

Reads record, AgentWorldBench and chat-with-tool-calls shards (.jsonl, .jsonl.gz,
.parquet) from any fsspec URL and writes under --out: tokenizer/, packed/{cpt,sft}/
{train,eval}/part-XXXXX.parquet, samples/sft/, quarantine/, duplicates/, contaminated/,
report.json and manifest.json. A finished run is not redone; a killed one resumes.

Run:
  python jobs/prepare.py --input runs/demo/raw --out runs/demo/prepared --recipe debug_cpu \\
      [--eval-sets awb_eval/] [--data near_dup_threshold=0.85 --data num_workers=4]
  ray job submit --working-dir . -- python jobs/prepare.py --input s3://bucket/raw ...
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys

PLATFORM = os.path.abspath(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "platform")
)
sys.path.insert(0, PLATFORM)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--input", required=True, help="comma-separated shard files or directories (URLs)"
    )
    p.add_argument("--out", required=True, help="run directory (path or fsspec URL)")
    p.add_argument("--recipe", default="debug_cpu", help="recipe name (agentworld.recipes)")
    p.add_argument(
        "--eval-sets", default="", help="comma-separated evaluation sets to decontaminate against"
    )
    p.add_argument(
        "--data",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="override a DataConfig field of the recipe (repeatable)",
    )
    return p.parse_args(argv)


def _split(value: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in value.split(",") if v.strip())


def build_job(args: argparse.Namespace):
    """The PrepareJob; a bad recipe or override fails here, before any work."""
    from agentworld.data.pipeline import PrepareJob
    from agentworld.recipes import ConfigError, get_recipe
    from agentworld.recipes.config import apply_overrides

    recipe = get_recipe(args.recipe)
    recipe = dataclasses.replace(recipe, data=apply_overrides(recipe.data, args.data, owner="data"))
    inputs = _split(args.input)
    if not inputs:
        raise ConfigError("input", "give at least one input URL")
    return PrepareJob(inputs=inputs, out=args.out, recipe=recipe, eval_sets=_split(args.eval_sets))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    job = build_job(args)
    import ray

    from agentworld.data.pipeline import check_inputs, prepare

    check_inputs(job)  # before any cluster starts
    started = not ray.is_initialized()
    if started:  # joins the cluster of RAY_ADDRESS (ray job submit) or starts a local one
        ray.init(runtime_env={"env_vars": {"PYTHONPATH": PLATFORM}})
    try:
        report = prepare(job)
    finally:
        if started:
            ray.shutdown()
    totals = report["totals"]
    print(f"[prepare] done: kept {totals['kept']} of {totals['read']} records -> {job.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
