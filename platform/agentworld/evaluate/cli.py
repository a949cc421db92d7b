"""The command line of ``jobs/evaluate.py``: its subcommands' inputs (what to read, where
the model and the judge are, where to write) and what each subcommand runs. Every
setting comes from the recipe's ``evaluate`` section and ``--set evaluate.X=V``; the
options here only say where things are."""

from __future__ import annotations

import argparse
import contextlib
import json
from dataclasses import replace
from urllib.parse import urlparse

from agentworld.cli import job_parser, recipe_options, url
from agentworld.cluster import local_ray
from agentworld.evaluate import run
from agentworld.evaluate.config import EvaluateConfig, InferConfig
from agentworld.scoring.config import JudgeConfig

HELP = {
    "infer": "predict the observation of every item of the input",
    "fidelity": "infer (+ judge with --judge-url) + score on held-out real trajectories",
    "judge": "judge the run's predictions",
    "score": "per-domain summary, table and chart of the run",
    "compare": "one table and chart over several runs",
}


def build_parser(doc: str | None) -> argparse.ArgumentParser:
    p = job_parser(doc, recipe=False)
    sub = p.add_subparsers(dest="command", required=True)
    for name in HELP:
        s = sub.add_parser(name, help=HELP[name], parents=[recipe_options()])
        if name in ("infer", "fidelity"):
            _add_input_options(s)
            _add_model_options(s)
        if name in ("fidelity", "judge"):
            g = s.add_argument_group("judge")
            g.add_argument(
                "--judge-url", required=name == "judge", help="its OpenAI-compatible URL"
            )
            g.add_argument("--judge-model", help="model name at --judge-url (default: its first)")
        if name in ("fidelity", "score"):
            s.add_argument("--baseline-train", help=BASELINE_HELP)
        if name == "score":
            s.add_argument("--name", help="label of the model (default: from the infer manifest)")
        if name == "compare":
            s.add_argument(
                "--summaries", type=url, nargs="+", required=True, help="summary.json URLs"
            )
        s.add_argument("--out", type=url, required=True, help="run directory (path or URL)")
        if name in ("score", "compare"):
            s.add_argument("--metric", help="chart metric: rule.<name> or judge.<name>")
    return p


BASELINE_HELP = (
    "training data the retrieval baseline retrieves from (prepare's samples/sft, record "
    "shards or AgentWorldBench rows); default: the input's training split, when the input "
    "is prepare's samples"
)


def _add_input_options(s: argparse.ArgumentParser) -> None:
    s.add_argument(
        "--input", type=url, required=True, help="AgentWorldBench dir, records or samples"
    )
    s.add_argument("--format", default="auto", choices=["auto", "awb", "record", "samples"])
    s.add_argument("--split", default="eval", help="prepare samples: eval, train or all")
    s.add_argument("--name", help="label of the model in tables and charts")


def _add_model_options(p: argparse.ArgumentParser) -> None:
    """The model under evaluation: a local checkpoint or an endpoint."""
    g = p.add_argument_group("model under evaluation")
    src = g.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "--model", type=url, help="HF checkpoint URL: vLLM batch inference on Ray Data"
    )
    src.add_argument("--endpoint", help="OpenAI-compatible base URL, e.g. http://host:8000/v1")
    g.add_argument("--served-model", help="model name at --endpoint (default: its first model)")


def infer_config(base: EvaluateConfig, args: argparse.Namespace) -> InferConfig:
    """The recipe's infer config, pointed at the model the command line names."""
    cfg = base.infer
    if not args.endpoint:
        return replace(cfg, backend="vllm")
    endpoint = replace(cfg.endpoint, base_url=args.endpoint, model=args.served_model)
    return replace(cfg, backend="endpoint", endpoint=endpoint)


def judge_config(base: EvaluateConfig, args: argparse.Namespace) -> JudgeConfig:
    """The recipe's judge config, pointed at the judge the command line names."""
    endpoint = replace(base.judge.endpoint, base_url=args.judge_url, model=args.judge_model)
    return replace(base.judge, endpoint=endpoint)


def model_name(args: argparse.Namespace) -> str:
    """How the run is labelled in tables and charts."""
    if getattr(args, "name", None):
        return args.name
    if getattr(args, "model", None):
        # The last two path parts: "demo/model", "sft/hf" say more than "model" or "hf".
        return "/".join(args.model.rstrip("/").split("/")[-2:])
    if getattr(args, "served_model", None):
        return args.served_model

    return urlparse(args.endpoint).netloc if getattr(args, "endpoint", None) else "model"


def run_command(args: argparse.Namespace, base: EvaluateConfig) -> int:
    """Run the subcommand; its configs are built (and validated) before any work."""

    infer_cfg = infer_config(base, args) if args.command in ("infer", "fidelity") else None
    judge_cfg = judge_config(base, args) if getattr(args, "judge_url", None) else None
    if infer_cfg is not None:
        split = None if args.split == "all" else args.split
        ray_needed = local_ray() if args.model else contextlib.nullcontext()
        with ray_needed:  # vLLM engines run as Ray actors; an endpoint needs no cluster
            m = run.infer_stage(
                args.input, args.out, infer_cfg, model_url=args.model, name=model_name(args),
                fmt=args.format, split=split,
            )  # fmt: skip
        _report("infer", m)
    if judge_cfg is not None:
        _report("judge", run.judge_stage(args.out, judge_cfg))
    if args.command in ("score", "fidelity"):
        fidelity = args.command == "fidelity"
        given = getattr(args, "baseline_train", None)
        m = run.score_stage(
            args.out,
            model=model_name(args) if fidelity or args.name else run.infer_model(args.out),
            metric=getattr(args, "metric", None),
            title=f"Sim-vs-real fidelity: {model_name(args)}" if fidelity else None,
            baseline_train=(given, "auto") if given else None,
        )
        _report("score", m)
        print(run.read_table(args.out))
    if args.command == "compare":
        _report("compare", run.compare_stage(args.summaries, args.out, metric=args.metric))
    return 0


def _report(stage: str, manifest: dict) -> None:
    print(f"[evaluate.{stage}] {manifest['status']}: {json.dumps(manifest['counts'])}")
