"""cpt: continued pre-training of the Qwen3-MoE world model on whole trajectories
(Ray Train TorchTrainer + DeepSpeed, experts split across workers).

Reads <data>/tokenizer and <data>/packed/cpt/{train,eval} (the prepare stage's output)
and writes under --out: checkpoints/ (Ray Train, newest N kept), hf/ (the HF export:
safetensors + tokenizer + chat template, which transformers and vLLM load), wandb/
(offline) and manifest.json. A finished run does nothing on rerun; a restarted one
resumes from its newest checkpoint.

Run:  python jobs/cpt.py --data runs/demo/prepared --out runs/demo/cpt --recipe debug_cpu
      python jobs/cpt.py ... --set train.max_steps=20 --set train.learning_rate=3e-3
      ray job submit --working-dir . -- python jobs/cpt.py --data s3://bucket/prepared --out s3://bucket/cpt
"""

from __future__ import annotations

import argparse
import sys

from agentworld.cli import run_job

INIT = "HF checkpoint to start from (default: recipe.model.pretrained, else a fresh model)"


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
    return run_locally(train_job(recipe, stage="cpt", data=data, out=out, init=init))


if __name__ == "__main__":
    sys.exit(run_job("cpt", main))
