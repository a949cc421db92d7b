"""prepare: raw trajectory shards -> validated, deduplicated, decontaminated, tokenized
and packed training data (Ray Data).

Reads record, AgentWorldBench and chat-with-tool-calls shards (.jsonl, .jsonl.gz,
.parquet) from any fsspec URL and writes under --out: tokenizer/, packed/{cpt,sft}/
{train,eval}/part-XXXXX.parquet, samples/sft/, quarantine/, duplicates/, contaminated/,
report.json and manifest.json. A finished run is not redone; a killed one resumes.

Run:
  python jobs/prepare.py --input runs/demo/raw --out runs/demo/prepared --recipe debug_cpu \\
      [--eval-sets awb_eval/] [--set data.near_dup_threshold=0.85 --set data.num_workers=4]
  ray job submit --working-dir . -- python jobs/prepare.py --input s3://bucket/raw ...
"""

from __future__ import annotations

import argparse
import sys

from agentworld.cli import job_parser, run_job, url, urls


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = job_parser(__doc__)
    p.add_argument(
        "--input", type=urls, required=True, help="comma-separated shard files or directories"
    )
    p.add_argument("--out", type=url, required=True, help="run directory (path or fsspec URL)")
    p.add_argument(
        "--eval-sets",
        type=urls,
        default=(),
        help="comma-separated evaluation sets to decontaminate against",
    )
    return p.parse_args(argv)


def build_job(args: argparse.Namespace):
    """The PrepareJob; a bad recipe or override fails here, before any work."""
    from agentworld.config import ConfigError
    from agentworld.recipes import load
    from agentworld.recipes.jobs import prepare_job

    recipe = load(args.recipe, args.set)
    if not args.input:
        raise ConfigError("input", "give at least one input URL")
    return prepare_job(recipe, inputs=args.input, out=args.out, eval_sets=args.eval_sets)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    job = build_job(args)
    from agentworld.cluster import local_ray
    from agentworld.console import say
    from agentworld.data.run import check_inputs, prepare

    check_inputs(job)  # before any cluster starts
    with local_ray():  # joins the cluster of RAY_ADDRESS (ray job submit) or starts one
        report = prepare(job)
    totals = report["totals"]
    say(f"[prepare] done: kept {totals['kept']} of {totals['read']} records -> {job.out}")
    return 0


if __name__ == "__main__":
    sys.exit(run_job("prepare", main))
