"""Command-line options of ``jobs/evaluate.py`` and the configs they build: the
recipe's evaluate config with the options given on the command line replaced."""

from __future__ import annotations

import argparse
from dataclasses import replace

from agentworld.cli import url
from agentworld.evaluate.config import EvaluateConfig, InferConfig
from agentworld.scoring.config import JudgeConfig


def add_model_options(p: argparse.ArgumentParser) -> None:
    """The model under evaluation: a local checkpoint or an endpoint."""
    g = p.add_argument_group("model under evaluation")
    src = g.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "--model", type=url, help="HF checkpoint URL: vLLM batch inference on Ray Data"
    )
    src.add_argument("--endpoint", help="OpenAI-compatible base URL, e.g. http://host:8000/v1")
    g.add_argument("--served-model", help="model name at --endpoint (default: its first model)")
    g.add_argument("--concurrency", type=int, help="requests in flight at --endpoint")
    g.add_argument("--replicas", type=int, help="vLLM engine actors for --model")
    g.add_argument("--max-retries", type=int)
    g.add_argument("--timeout", type=float, help="per-request timeout, seconds")
    g.add_argument("--temperature", type=float)
    g.add_argument("--max-tokens", type=int)
    g.add_argument("--max-model-len", type=int)
    g.add_argument("--max-items", type=int, help="evaluate only the first N items")
    g.add_argument("--flush-every", type=int, help="finished items per written part")


def add_judge_options(p: argparse.ArgumentParser, *, required: bool) -> None:
    g = p.add_argument_group("judge")
    g.add_argument("--judge-url", required=required, help="OpenAI-compatible base URL of the judge")
    g.add_argument("--judge-model", help="model name at --judge-url (default: its first model)")
    g.add_argument("--judge-concurrency", type=int)
    g.add_argument("--judge-timeout", type=float)
    g.add_argument("--judge-retries", type=int, help="extra attempts per request")


def _given(**values: object) -> dict[str, object]:
    return {k: v for k, v in values.items() if v is not None}


def infer_config(base: EvaluateConfig, args: argparse.Namespace) -> InferConfig:
    cfg = base.infer
    endpoint = replace(
        cfg.endpoint,
        **_given(
            base_url=args.endpoint,
            model=args.served_model,
            concurrency=args.concurrency,
            max_retries=args.max_retries,
            timeout_s=args.timeout,
        ),
    )
    sampling = replace(
        cfg.sampling, **_given(temperature=args.temperature, max_tokens=args.max_tokens)
    )
    vllm = replace(cfg.vllm, **_given(replicas=args.replicas, max_model_len=args.max_model_len))
    return replace(
        cfg,
        backend="endpoint" if args.endpoint else "vllm",
        endpoint=endpoint,
        sampling=sampling,
        vllm=vllm,
        **_given(max_items=args.max_items, flush_every=args.flush_every),
    )


def judge_config(base: EvaluateConfig, args: argparse.Namespace) -> JudgeConfig:
    cfg = base.judge
    endpoint = replace(
        cfg.endpoint,
        **_given(
            base_url=args.judge_url,
            model=args.judge_model,
            concurrency=args.judge_concurrency,
            timeout_s=args.judge_timeout,
            max_retries=args.judge_retries,
        ),
    )
    return replace(cfg, endpoint=endpoint)


def model_name(args: argparse.Namespace) -> str:
    """How the run is labelled in tables and charts."""
    if getattr(args, "name", None):
        return args.name
    if getattr(args, "model", None):
        # The last two path parts: "demo/model", "sft/hf" say more than "model" or "hf".
        return "/".join(args.model.rstrip("/").split("/")[-2:])
    if getattr(args, "served_model", None):
        return args.served_model
    from urllib.parse import urlparse

    return urlparse(args.endpoint).netloc if getattr(args, "endpoint", None) else "model"


def add_baseline_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--baseline-train",
        help="training data the retrieval baseline retrieves from (prepare's samples/sft, "
        "record shards or AgentWorldBench rows); default: the input's training split, "
        "when the input is prepare's samples",
    )


def baseline_train(args: argparse.Namespace) -> tuple[str, str] | None:
    given = getattr(args, "baseline_train", None)
    return (given, "auto") if given else None
