"""sft: supervised fine-tuning of the world model to predict the next observation
(loss on observation tokens only), starting from the CPT export.

Reads <data>/packed/sft/{train,eval} (the prepare stage's output) and the CPT export
given by --init (its hf/ directory, or the CPT run directory), and writes under --out:
checkpoints/, hf/ (the export RL and serving start from), wandb/ and manifest.json.
SFT trains for train.sft_max_steps at a peak of train.sft_learning_rate where the recipe
sets them (debug_cpu: 100 steps), else for CPT's train.max_steps and learning_rate:
``--set train.sft_max_steps=20``.

Run:  python jobs/sft.py --data runs/demo/prepared --init runs/demo/cpt/hf --out runs/demo/sft --recipe debug_cpu
      ray job submit --working-dir . -- python jobs/sft.py --data s3://bucket/prepared \\
          --init s3://bucket/cpt/hf --out s3://bucket/sft
"""

from __future__ import annotations

import argparse
import sys

from agentworld.cli import run_job

INIT = "the CPT export to start from (its hf/ directory)"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    from agentworld.train.run import job_parser

    return job_parser(__doc__, init_help=INIT).parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from agentworld.recipes import load
    from agentworld.recipes.jobs import train_job
    from agentworld.train.run import run_locally

    recipe = load(args.recipe, args.set)
    data, out, init = args.data or "", args.out, args.init
    return run_locally(train_job(recipe, stage="sft", data=data, out=out, init=init))


if __name__ == "__main__":
    sys.exit(run_job("sft", main))
