"""cpt: continued pre-training of the Qwen3-MoE world model on whole trajectories
(Ray Train TorchTrainer + DeepSpeed, experts split across workers).

Reads <data>/tokenizer and <data>/packed/cpt/{train,eval} (the prepare stage's output)
and writes under --out: checkpoints/ (Ray Train, newest N kept), hf/ (the HF export:
safetensors + tokenizer + chat template, which transformers and vLLM load), wandb/
(offline) and manifest.json. A finished run does nothing on rerun; a restarted one
resumes from its newest checkpoint.

Run:  python jobs/cpt.py --data runs/demo/prepared --out runs/demo/cpt --recipe debug_cpu
      python jobs/cpt.py ... --train max_steps=20 --train learning_rate=3e-3
      ray job submit --working-dir . -- python jobs/cpt.py --data s3://bucket/prepared --out s3://bucket/cpt
"""

from __future__ import annotations

import argparse
import sys

from agentworld.cli import run_job
from agentworld.train import cli


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    return cli.parse_args("cpt", __doc__, argv)


def main(argv: list[str] | None = None) -> int:
    return cli.main("cpt", __doc__, argv)


if __name__ == "__main__":
    sys.exit(run_job("cpt", main))
