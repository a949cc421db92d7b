"""The command line of ``jobs/evaluate.py``: its subcommands' inputs (what to read, where
the model and the judge are, where to write) and what each subcommand runs. Every
setting comes from the recipe's ``evaluate`` section and ``--set evaluate.X=V``; the
options here only say where things are."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
from dataclasses import replace
from typing import Any
from urllib.parse import urlparse

from agentworld.cli import job_parser, recipe_options, url
from agentworld.cluster import local_ray
from agentworld.evaluate import run
from agentworld.evaluate.config import EvaluateConfig, InferConfig
from agentworld.evaluate.simulators import (
    ChatSimulator,
    EngineSimulator,
    SessionSimulator,
    Simulator,
)
from agentworld.io import join, read_bytes
from agentworld.model.card import add_fidelity
from agentworld.model.engine import check_engine_can_run
from agentworld.scoring.config import JudgeConfig

HELP = {
    "infer": "predict the observation of every item of the input",
    "closed-loop": "replay held-out real episodes against the simulator on its own history",
    "ranking": "does the simulator rank a ladder of agents as the real environments do?",
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
        if name in ("infer", "fidelity", "closed-loop"):
            _add_input_options(s)
            _add_model_options(s, sessions=name == "closed-loop")
        if name == "ranking":
            s.add_argument(
                "--world-model",
                type=url,
                help="HF checkpoint of the simulator (an in-process engine); not needed "
                "with --set agent.sim.backend=serve",
            )
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


def _add_model_options(p: argparse.ArgumentParser, *, sessions: bool = False) -> None:
    """The model under evaluation: a local checkpoint or an endpoint (or, for closed-loop
    rollouts, the simulator's session API)."""
    g = p.add_argument_group("model under evaluation")
    src = g.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "--model",
        type=url,
        help="HF checkpoint URL: an in-process vLLM engine"
        if sessions
        else "HF checkpoint URL: vLLM batch inference on Ray Data",
    )
    src.add_argument("--endpoint", help="OpenAI-compatible base URL, e.g. http://host:8000/v1")
    if sessions:
        src.add_argument(
            "--simulator",
            help="the simulator API's base URL: one session per episode "
            "(key from evaluate.closed_loop.session_api_key_env)",
        )
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

    url_given = getattr(args, "endpoint", None) or getattr(args, "simulator", None)
    return urlparse(url_given).netloc if url_given else "model"


def run_command(
    args: argparse.Namespace, base: EvaluateConfig, *, session_client: Any = None
) -> int:
    """Run the subcommand; its configs are built (and validated) before any work.
    ``session_client(base_url, api_key)``: the simulator API's client class, for
    closed-loop rollouts through sessions (the job passes ``agentworld.sim``'s: this
    stage sits below ``sim``)."""
    if args.command == "closed-loop":
        return closed_loop_command(args, base, session_client)
    if args.command == "ranking":
        raise ValueError("ranking runs agents: jobs/evaluate.py hands it to agentworld.agent")

    infer_cfg = infer_config(base, args) if args.command in ("infer", "fidelity") else None
    if infer_cfg is not None and infer_cfg.backend == "vllm" and args.model:
        check_engine_can_run(infer_cfg.vllm.engine, args.model)
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
        if fidelity and args.model:  # the export's model card gets what was measured
            summary = json.loads(read_bytes(join(args.out, "score", "summary.json")))
            if add_fidelity(args.model, summary):
                print(f"[evaluate] model card updated: {join(args.model, 'README.md')}")
    if args.command == "compare":
        _report("compare", run.compare_stage(args.summaries, args.out, metric=args.metric))
    return 0


def closed_loop_command(args: argparse.Namespace, base: EvaluateConfig, session_client: Any) -> int:
    cfg = infer_config(base, args)
    loop = base.closed_loop
    if args.simulator:
        if session_client is None:
            raise ValueError("--simulator needs the simulator API's client")
        key = os.environ.get(loop.session_api_key_env, "")
        client = session_client(args.simulator, key)

        def make() -> Simulator:
            return SessionSimulator(client, cfg)
    elif args.endpoint:

        def make() -> Simulator:
            return ChatSimulator(cfg)
    else:
        check_engine_can_run(cfg.vllm.engine, args.model)

        def make() -> Simulator:
            return EngineSimulator.start_engine(cfg, args.model)

    m = run.closed_loop_stage(
        args.input, args.out, cfg, loop, make,
        model=args.model or args.endpoint or args.simulator, name=model_name(args),
        fmt=args.format, split=None if args.split == "all" else args.split,
    )  # fmt: skip
    _report("closed_loop", m)
    print(run.read_drift_table(args.out))
    return 0


def _report(stage: str, manifest: dict) -> None:
    print(f"[evaluate.{stage}] {manifest['status']}: {json.dumps(manifest['counts'])}")
