"""The demo's own sizes (jobs/demo.py): what every stage of `make demo` is configured
with, and that a user's sizes win. Plain argument handling, no Ray."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from agentworld.recipes import load

ROOT = Path(__file__).resolve().parents[1]


def _demo():
    spec = importlib.util.spec_from_file_location("demo_job", ROOT / "jobs" / "demo.py")
    job = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(job)
    return job


def _recipe(job, *argv: str):
    args = job.config_args(job.parse_args(["--out", "/tmp/x", *argv]))
    name, items = args[1], [args[i + 1] for i in range(2, len(args), 2)]
    return load(name, items)


def test_every_stage_of_the_demo_gets_its_recipe_and_a_users_sizes_win():
    job = _demo()
    r = _recipe(job)
    assert r.name == "debug_cpu" and r.collect.episodes == 150
    assert r.data.sft_rows == "trajectory"
    assert (r.rl.rollout.max_new_tokens, r.rl.rollout.engine.max_model_len) == (512, 1536)
    assert (r.train.max_steps, r.train.sft_max_steps, r.train.sft_learning_rate) == (100, 450, 2e-3)
    assert (r.train.eval_every, r.train.checkpoint_every) == (50, 100)
    small = _recipe(job, "--episodes", "16", "--max-steps", "4", "--set", "train.eval_every=2")
    assert small.collect.episodes == 16 and small.data.sft_rows == "trajectory"
    assert (small.train.max_steps, small.train.sft_max_steps, small.rl.max_steps) == (4, 4, 4)
    assert (small.train.warmup_steps, small.train.eval_every) == (1, 2)
    other = _recipe(job, "--recipe", "small_cpu")  # its own step counts
    assert (other.train.max_steps, other.train.sft_max_steps) == (800, 1000)
    assert other.train.sft_learning_rate is None
