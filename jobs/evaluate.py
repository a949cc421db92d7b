"""Evaluate a world model AgentWorldBench-style: infer, judge, score (and compare runs,
or report sim-vs-real fidelity on held-out collected trajectories).

Input: a directory of AgentWorldBench ``*_test.jsonl`` files (one per domain), our
record shards, or prepare's ``samples/sft`` Parquet shards. Outputs under --out (see
agentworld.evaluate.run): predictions and judgments as JSONL, summary.json, table.md,
chart.png, a manifest per stage. Every stage resumes after an interruption.

Run:
  python jobs/evaluate.py infer --input runs/demo/prepared/samples/sft --format samples --model runs/demo/sft/hf --out runs/eval
  python jobs/evaluate.py infer --input awb/ --endpoint http://host:8000/v1 --out runs/eval
  python jobs/evaluate.py judge --out runs/eval --judge-url http://judge:8000/v1
  python jobs/evaluate.py score --out runs/eval
  python jobs/evaluate.py compare --summaries a/score/summary.json b/score/summary.json --out cmp
  python jobs/evaluate.py fidelity --input heldout/ --model runs/sft/hf --out runs/fidelity
or through Ray: ray job submit --working-dir . -- python jobs/evaluate.py <command> ...
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys

from agentworld.cli import run_job, url

HELP = {
    "infer": "predict the observation of every item of the input",
    "fidelity": "infer (+ judge with --judge-url) + score on held-out real trajectories",
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    from agentworld.evaluate.cli import add_baseline_options, add_judge_options, add_model_options

    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--recipe", default="debug_cpu", help="recipe whose evaluate config is the base")
    sub = p.add_subparsers(dest="command", required=True)
    for name in ("infer", "fidelity"):
        s = sub.add_parser(name, help=HELP[name])
        s.add_argument(
            "--input", type=url, required=True, help="AgentWorldBench dir, records or samples"
        )
        s.add_argument("--format", default="auto", choices=["auto", "awb", "record", "samples"])
        s.add_argument("--out", type=url, required=True, help="run directory (path or URL)")
        s.add_argument(
            "--split", default="eval", help="prepare samples: eval, train or all (default eval)"
        )
        add_model_options(s)
        if name == "fidelity":
            add_judge_options(s, required=False)
            add_baseline_options(s)
        s.add_argument("--name", help="label of the model in tables and charts")
    s = sub.add_parser("judge", help="judge the run's predictions")
    s.add_argument("--out", type=url, required=True)
    add_judge_options(s, required=True)
    s = sub.add_parser("score", help="per-domain summary, table and chart of the run")
    s.add_argument("--out", type=url, required=True)
    s.add_argument("--name", help="label of the model (default: from the infer manifest)")
    s.add_argument("--metric", help="chart metric: rule.<name> or judge.<name>")
    add_baseline_options(s)
    s = sub.add_parser("compare", help="one table and chart over several runs")
    s.add_argument(
        "--summaries", type=url, nargs="+", required=True, help="score/summary.json URLs"
    )
    s.add_argument("--out", type=url, required=True)
    s.add_argument("--metric")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from agentworld.evaluate import cli
    from agentworld.evaluate import run as stages
    from agentworld.recipes import get_recipe

    base = get_recipe(args.recipe).evaluate
    # Configs are built (and validated) before any work starts.
    infer_cfg = cli.infer_config(base, args) if args.command in ("infer", "fidelity") else None
    judge_cfg = cli.judge_config(base, args) if getattr(args, "judge_url", None) else None
    if args.command in ("infer", "fidelity"):
        from agentworld.cluster import local_ray

        ray_needed = local_ray() if args.model else contextlib.nullcontext()
        with ray_needed:  # vLLM engines run as Ray actors; an endpoint needs no cluster
            m = stages.infer_stage(
                args.input,
                args.out,
                infer_cfg,
                model_url=args.model,
                name=cli.model_name(args),
                fmt=args.format,
                split=None if args.split == "all" else args.split,
            )
        _report("infer", m)
    if judge_cfg is not None:
        _report("judge", stages.judge_stage(args.out, judge_cfg))
    if args.command in ("score", "fidelity"):
        title = (
            f"Sim-vs-real fidelity: {cli.model_name(args)}" if args.command == "fidelity" else None
        )
        m = stages.score_stage(
            args.out,
            model=_label(args),
            metric=getattr(args, "metric", None),
            title=title,
            baseline_train=cli.baseline_train(args),
        )
        _report("score", m)
        print(stages.read_table(args.out))
    if args.command == "compare":
        _report("compare", stages.compare_stage(args.summaries, args.out, metric=args.metric))
    return 0


def _label(args: argparse.Namespace) -> str:
    if getattr(args, "name", None) or args.command == "fidelity":
        from agentworld.evaluate.cli import model_name

        return model_name(args)
    from agentworld.evaluate.run import infer_model

    return infer_model(args.out)


def _report(stage: str, manifest: dict) -> None:
    print(f"[evaluate.{stage}] {manifest['status']}: {json.dumps(manifest['counts'])}")


if __name__ == "__main__":
    sys.exit(run_job("evaluate", main))
