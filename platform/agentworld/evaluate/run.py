"""The driver of the evaluate stage: its steps over a run directory, with manifests and
reruns:

  <run>/infer/   parts/, predictions.jsonl, failed.jsonl, quarantine.jsonl, manifest.json
  <run>/judge/   parts/, judgments.jsonl, failed.jsonl, manifest.json
  <run>/score/   summary.json, table.md, chart.png, manifest.json
  <run>/closed_loop/  parts/, rows.jsonl, failed.jsonl, drift.json, drift.md, drift.png,
                 manifest.json

A stage whose manifest is complete and whose inputs have not changed since does
nothing; ``infer`` is complete only when no item failed, so a rerun retries failures.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from agentworld.evaluate.baselines import Retrieval, baseline_rows
from agentworld.evaluate.closed_loop import run_closed_loop
from agentworld.evaluate.config import ClosedLoopConfig, InferConfig
from agentworld.evaluate.drift import drift_png, drift_summary, drift_table
from agentworld.evaluate.episodes import episodes_from_items
from agentworld.evaluate.infer import run_infer
from agentworld.evaluate.items import load_items
from agentworld.evaluate.judge_predictions import run_judge
from agentworld.evaluate.report import (
    chart_png,
    comparison_table,
    default_metric,
    markdown_table,
    with_baselines,
)
from agentworld.evaluate.score import add_baselines, summarize
from agentworld.io import (
    exists,
    join,
    read_bytes,
    read_jsonl,
    read_manifest,
    write_bytes,
    write_jsonl,
    write_manifest,
)
from agentworld.scoring.config import JudgeConfig


def _stamp(url: str, **so: Any) -> str | None:
    """When a stage's manifest was written: what a later stage records as its input."""
    m = read_manifest(url, **so)
    return m and m["written_at"]


def _up_to_date(url: str, inputs: dict[str, Any], config: Any = None, **so: Any) -> bool:
    m = read_manifest(url, **so)
    same_config = config is None or m and m["config"] == _as_json(config)
    return bool(m and m["status"] == "complete" and m["inputs"] == inputs and same_config)


def _as_json(obj: Any) -> Any:
    return json.loads(json.dumps(asdict(obj)))


def _check_same_run(url: str, inputs: dict[str, Any], cfg: InferConfig, **so: Any) -> None:
    """One run directory holds the predictions of one model on one input with one way of
    sampling: resuming it with another would mix them. Concurrency, retries, replicas,
    max_items and the like may change between runs."""
    m = read_manifest(url, **so)
    if m is None:
        return
    old = {k: m["inputs"].get(k) for k in ("input", "format", "split", "model")}
    old |= {"backend": m["config"]["backend"], "sampling": m["config"]["sampling"]}
    new = {k: inputs[k] for k in ("input", "format", "split", "model")}
    new |= {"backend": cfg.backend, "sampling": _as_json(cfg.sampling)}
    for key, value in new.items():
        if old[key] != value:
            raise ValueError(
                f"{url} holds predictions made with {key} = {old[key]!r}, not {value!r}: "
                "use another --out"
            )


def _rows(url: str, **so: Any) -> list[dict[str, Any]]:
    return read_jsonl(url, **so) if exists(url, **so) else []


def infer_stage(
    input_url: str,
    run_url: str,
    cfg: InferConfig,
    *,
    model_url: str | None = None,
    name: str = "model",
    fmt: str = "auto",
    split: str | None = "eval",
    **so: Any,
) -> dict[str, Any]:
    """Load items, predict the missing ones, write the manifest; returns it."""

    out = join(run_url, "infer")
    model = model_url if cfg.backend == "vllm" else cfg.endpoint.base_url
    inputs = {"input": input_url, "format": fmt, "split": split, "model": model, "name": name}
    if _up_to_date(out, inputs, cfg, **so):
        return read_manifest(out, **so)
    _check_same_run(out, inputs, cfg, **so)
    loaded = load_items(input_url, fmt=fmt, split=split, **so)
    write_jsonl(join(out, "quarantine.jsonl"), loaded.rejected, **so)
    counts = asdict(run_infer(loaded.items, cfg, out, model_url=model_url, **so))
    counts["quarantined"] = len(loaded.rejected)
    return write_manifest(
        out,
        stage="evaluate.infer",
        inputs=inputs,
        config=cfg,
        counts={**counts, "input_format": loaded.fmt},
        outputs={"predictions": join(out, "predictions.jsonl")},
        status="complete" if counts["failed"] == 0 else "partial",
        **so,
    )


def closed_loop_stage(
    input_url: str,
    run_url: str,
    cfg: InferConfig,
    loop: ClosedLoopConfig,
    make_simulator: Any,
    *,
    model: str | None,
    name: str = "model",
    fmt: str = "auto",
    split: str | None = "eval",
    **so: Any,
) -> dict[str, Any]:
    """Closed-loop rollouts of the input's episodes (``make_simulator()`` -> a
    ``Simulator``; ``model``: the checkpoint or URL it stands for), then the drift
    summary, table and chart; returns the manifest."""

    out = join(run_url, "closed_loop")
    inputs = {"input": input_url, "format": fmt, "split": split, "model": model, "name": name}
    settings = {"infer": _as_json(cfg), "closed_loop": _as_json(loop)}
    m = read_manifest(out, **so)
    if m and m["status"] == "complete" and m["inputs"] == inputs and m["config"] == settings:
        return m
    _check_same_rollouts(out, inputs, cfg, loop, **so)
    loaded = load_items(input_url, fmt=fmt, split=split, **so)
    episodes, left_out = episodes_from_items(loaded.items, max_turns=loop.max_turns)
    counts = asdict(run_closed_loop(episodes, make_simulator, loop, out, **so))
    rows = read_jsonl(join(out, "rows.jsonl"), **so)
    summary = drift_summary(rows, model=name)
    write_bytes(join(out, "drift.json"), json.dumps(summary, indent=2).encode(), **so)
    write_bytes(join(out, "drift.md"), drift_table(summary).encode(), **so)
    write_bytes(join(out, "drift.png"), drift_png(summary), **so)
    counts |= {"items_left_out": left_out, "quarantined": len(loaded.rejected)}
    return write_manifest(
        out,
        stage="evaluate.closed_loop",
        inputs=inputs,
        config=settings,
        counts=counts,
        outputs={"rows": join(out, "rows.jsonl"), "drift": join(out, "drift.json")},
        status="complete" if counts["failed"] == 0 else "partial",
        **so,
    )


def _check_same_rollouts(
    url: str, inputs: dict[str, Any], cfg: InferConfig, loop: ClosedLoopConfig, **so: Any
) -> None:
    """A rerun resumes the rollouts of one model on one input, sampled one way and cut
    at the same turn: anything else would mix episodes that are not comparable."""
    m = read_manifest(url, **so)
    if m is None:
        return
    old = {k: m["inputs"].get(k) for k in ("input", "format", "split", "model")}
    old |= {
        "sampling": m["config"]["infer"]["sampling"],
        "max_turns": m["config"]["closed_loop"]["max_turns"],
    }
    new = {k: inputs[k] for k in ("input", "format", "split", "model")}
    new |= {"sampling": _as_json(cfg.sampling), "max_turns": loop.max_turns}
    for key, value in new.items():
        if old[key] != value:
            raise ValueError(
                f"{url} holds rollouts made with {key} = {old[key]!r}, not {value!r}: "
                "use another --out"
            )


def judge_stage(run_url: str, cfg: JudgeConfig, **so: Any) -> dict[str, Any]:
    """Judge the run's predictions that have no judgment yet."""

    out = join(run_url, "judge")
    inputs = {"infer": _stamp(join(run_url, "infer"), **so)}
    if inputs["infer"] is None:
        raise FileNotFoundError(f"{run_url}: no infer/manifest.json; run infer first")
    if _up_to_date(out, inputs, **so):
        return read_manifest(out, **so)
    predictions = read_jsonl(join(run_url, "infer", "predictions.jsonl"), **so)
    counts = asdict(run_judge(predictions, cfg, out, **so))
    return write_manifest(
        out,
        stage="evaluate.judge",
        inputs=inputs,
        config=cfg,
        counts=counts,
        outputs={"judgments": join(out, "judgments.jsonl")},
        status="complete" if counts["endpoint_failed"] == 0 else "partial",
        **so,
    )


def baseline_train_source(run_url: str, **so: Any) -> tuple[str, str] | None:
    """(URL, format) of the training split the retrieval baseline retrieves from, by
    default: the other side of the split when the run evaluated prepare's eval samples;
    None when the input has no training split (AgentWorldBench rows, records)."""
    m = read_manifest(join(run_url, "infer"), **so)
    if m is None:
        return None
    fmt = m["counts"].get("input_format", m["inputs"].get("format"))
    if fmt == "samples" and m["inputs"].get("split") == "eval":
        return m["inputs"]["input"], "samples"
    return None


def _baselines(
    run_url: str, predictions: list[dict[str, Any]], train: tuple[str, str] | None, **so: Any
) -> dict[str, list[dict[str, Any]]]:
    """Baseline prediction rows for the run's items, also written under score/baselines/."""

    if not all("messages" in p for p in predictions):
        return {}  # rows without their context (written by hand, not by infer)
    retrieval = None
    if train is not None:
        # split applies to prepare's samples only: their eval rows are the questions.
        examples = load_items(train[0], fmt=train[1], split="train", **so).items
        retrieval = Retrieval((i.messages, i.reference) for i in examples)
    rows = baseline_rows(predictions, retrieval)
    for name, got in rows.items():
        write_jsonl(join(run_url, "score", "baselines", f"{name}.jsonl"), got, **so)
    return rows


def score_stage(
    run_url: str,
    *,
    model: str,
    metric: str | None = None,
    title: str | None = None,
    baseline_train: tuple[str, str] | None = None,
    **so: Any,
) -> dict[str, Any]:
    """Summary JSON, Markdown table and chart of the run (judge scores when judged),
    with the baselines scored on the same items beside the model. ``baseline_train``:
    (URL, format) of the retrieval baseline's training data; default
    ``baseline_train_source``."""

    out = join(run_url, "score")
    train = baseline_train or baseline_train_source(run_url, **so)
    inputs = {
        "infer": _stamp(join(run_url, "infer"), **so),
        "judge": _stamp(join(run_url, "judge"), **so),
        "model": model,
        "metric": metric,
        "baseline_train": list(train) if train else None,
    }
    if inputs["infer"] is None:
        raise FileNotFoundError(f"{run_url}: no infer/manifest.json; run infer first")
    if _up_to_date(out, inputs, **so):
        return read_manifest(out, **so)
    judge_dir = join(run_url, "judge")
    predictions = read_jsonl(join(run_url, "infer", "predictions.jsonl"), **so)
    summary = summarize(
        predictions,
        judgments=_rows(join(judge_dir, "judgments.jsonl"), **so) if inputs["judge"] else None,
        judge_failed=_rows(join(judge_dir, "failed.jsonl"), **so),
        infer_failed=_rows(join(run_url, "infer", "failed.jsonl"), **so),
        model=model,
    )
    add_baselines(summary, _baselines(run_url, predictions, train, **so), predictions)
    metric = metric or default_metric([summary])
    write_outputs(out, [summary], metric=metric, table=markdown_table(summary, title=title), **so)
    return write_manifest(
        out,
        stage="evaluate.score",
        inputs=inputs,
        config={"metric": metric, "title": title},
        counts={d: e["predictions"] for d, e in summary["domains"].items()},
        outputs={
            "summary": join(out, "summary.json"),
            "table": join(out, "table.md"),
            "chart": join(out, "chart.png"),
        },
        **so,
    )


def compare_stage(
    summary_urls: list[str], out: str, *, metric: str | None = None, **so: Any
) -> dict[str, Any]:
    """One table and one chart over several runs' summaries (one bar per model)."""

    summaries = [json.loads(read_bytes(u, **so)) for u in summary_urls]
    metric = metric or default_metric(summaries)
    table = comparison_table(with_baselines(summaries), metric)
    write_outputs(out, summaries, metric=metric, table=table, **so)
    return write_manifest(
        out,
        stage="evaluate.compare",
        inputs=summary_urls,
        config={"metric": metric},
        counts={"models": len(summaries)},
        outputs={"table": join(out, "table.md")},
        **so,
    )


def write_outputs(
    out: str, summaries: list[dict[str, Any]], *, metric: str, table: str, **so: Any
) -> None:
    if len(summaries) == 1:
        data = json.dumps(summaries[0], indent=2, sort_keys=True).encode()
        write_bytes(join(out, "summary.json"), data, **so)
    write_bytes(join(out, "table.md"), table.encode(), **so)
    write_bytes(join(out, "chart.png"), chart_png(with_baselines(summaries), metric), **so)


def infer_model(run_url: str, **so: Any) -> str:
    """The label the run's model was given at infer time."""
    m = read_manifest(join(run_url, "infer"), **so)
    if m is None:
        raise FileNotFoundError(f"{run_url}: no infer/manifest.json; run infer first")
    return m["inputs"]["name"]


def read_table(run_url: str, **so: Any) -> str:
    return read_bytes(join(run_url, "score", "table.md"), **so).decode()


def read_drift_table(run_url: str, **so: Any) -> str:
    return read_bytes(join(run_url, "closed_loop", "drift.md"), **so).decode()
