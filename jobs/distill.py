"""Distil a world model's reasoning into recorded trajectories: for every turn, a teacher
(any OpenAI-compatible endpoint) writes the reasoning that leads from the session so far
and the action to the observation the environment really returned. It lands in each
turn's ``simulator_reasoning``; prepare then trains SFT on ``<think>reasoning</think>``
followed by the observation.

Writes under --out (a local directory):
  journal.jsonl          one line per answered or failed turn, appended as it arrives
  records/part-00000.jsonl   the records with their reasoning (written once, at the end)
  failed.jsonl           the turns the teacher failed on after its retries, with why
  manifest.json          counts; status partial while any turn failed
A killed run resumes from the journal (answered turns are never asked again); a rerun
asks again for the failed ones. Concurrency, retries and timeouts: the recipe's
``distill.endpoint`` (``--set distill.endpoint.concurrency=16``); sampling:
``distill.sampling``.

Run:  python jobs/distill.py --input runs/demo/raw --out runs/demo/distilled --teacher-url http://127.0.0.1:8000/v1
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

from agentworld.cli import job_parser, run_job, urls


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = job_parser(__doc__)
    p.add_argument("--input", type=urls, required=True, help="record shards (files or dirs)")
    p.add_argument("--out", required=True, help="run directory (a local path)")
    p.add_argument("--teacher-url", required=True, help="OpenAI-compatible base URL (.../v1)")
    p.add_argument("--teacher-model", help="served model name (default: the endpoint's first)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from agentworld.config import ConfigError
    from agentworld.console import say
    from agentworld.io import is_complete
    from agentworld.recipes import load
    from agentworld.scoring.distill import distill

    cfg = load(args.recipe, args.set).distill
    endpoint = dataclasses.replace(
        cfg.endpoint, base_url=args.teacher_url, model=args.teacher_model
    )
    cfg = dataclasses.replace(cfg, endpoint=endpoint)
    if "://" in args.out and not args.out.startswith("file://"):
        raise ConfigError("out", "the journal is appended as turns finish: give a local directory")
    out = args.out.removeprefix("file://")
    if is_complete(out):
        say(f"[distill] {out} is complete; nothing to do")
        return 0
    manifest = distill(cfg, args.input, out)
    c = manifest["counts"]
    say(
        f"[distill] {manifest['status']}: {c['reasoned']}/{c['turns']} turns reasoned -> {out}/records"
    )
    return 0


if __name__ == "__main__":
    sys.exit(run_job("distill", main))
