"""``score``: per-domain aggregates of judge verdicts and judge-free rule metrics.

Judge: per dimension, the mean raw score (1..5) over valid verdicts normalized as
(raw - 1) / 4 * 100; ``overall`` is the normalized mean of the valid totals (a total is
the mean of an item's five scores); ``valid`` and ``failed`` count judgments (failed =
no well-formed verdict, or the endpoint failed for good). Rule metrics: the mean over
predictions, as percentages; JSON validity only over items whose real observation is
JSON. The ``all`` row pools every item (micro average). State checks
(``agentworld.evaluate.checks``): per domain, each check's pass rate over the items it
applies to; the ``all`` row pools every applicable check of every item.

Margins over the baselines come with a 95% interval: a paired bootstrap over the items
(the model's and the best baseline's scores on the same item), so that a margin on 14
turns is read as what it is.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

import numpy as np

from agentworld.evaluate.checks import run_checks
from agentworld.schema import parse_output
from agentworld.scoring.metrics import METRIC_NAMES, rule_metrics
from agentworld.scoring.rubrics import DIMENSIONS

ALL = "all"


def normalize_score(raw: float) -> float:
    """A 1..5 judge score on the 0..100 scale."""
    return (raw - 1) / 4 * 100


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _by_domain(rows: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[row["domain"]].append(row)
        groups[ALL].append(row)
    return groups


@functools.lru_cache(maxsize=4096)
def _item_metrics(output: str, reference: str) -> dict[str, float | None]:
    """``rule_metrics`` of one prediction, kept: the margins read every item again, and
    ROUGE-L's LCS over a long observation is not free."""
    return rule_metrics(output, reference)


def rule_summary(predictions: list[dict[str, Any]]) -> dict[str, Any]:
    """Rule metrics of prediction rows (``output`` and ``reference`` fields)."""
    per_item = [_item_metrics(p["output"], p["reference"]) for p in predictions]
    out: dict[str, Any] = {}
    for name in METRIC_NAMES:
        values = [m[name] for m in per_item if m[name] is not None]
        mean = _mean(values)
        out[name] = None if mean is None else 100 * mean
    out["json_items"] = sum(m["json_valid"] is not None for m in per_item)
    return out


@functools.lru_cache(maxsize=4096)
def _item_checks(domain: str, prediction: str, reference: str) -> dict[str, bool | None]:
    return run_checks(domain, prediction, reference)


def predicted_observation(row: dict[str, Any]) -> str:
    """The observation a prediction row holds (``prediction``; parsed from ``output``
    for rows written without it)."""
    if row.get("prediction") is not None:
        return row["prediction"]
    return parse_output(row["output"]).observation


def check_summary(rows: list[dict[str, Any]], *, pooled: bool = False) -> dict[str, Any]:
    """``{check: {"passed": % of the items it applies to, "n": those items}}`` over
    prediction rows; ``pooled``: one entry, ``all``, over every applicable check."""
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for row in rows:
        got = _item_checks(row["domain"], predicted_observation(row), row["reference"])
        for name, ok in got.items():
            if ok is not None:
                c = counts["all" if pooled else name]
                c[0] += ok
                c[1] += 1
    return {name: {"passed": 100 * p / n, "n": n} for name, (p, n) in counts.items()}


def judge_summary(judgments: list[dict[str, Any]], endpoint_failed: int = 0) -> dict[str, Any]:
    """Judge aggregates of judgment rows (``ok``, ``scores``, ``total`` fields)."""
    valid = [j for j in judgments if j["ok"]]
    out: dict[str, Any] = {
        "valid": len(valid),
        "failed": len(judgments) - len(valid) + endpoint_failed,
    }
    total = _mean([j["total"] for j in valid])
    out["overall"] = None if total is None else normalize_score(total)
    for d in DIMENSIONS:
        raw = _mean([j["scores"][d] for j in valid])
        out[d] = None if raw is None else normalize_score(raw)
    return out


def summarize(
    predictions: list[dict[str, Any]],
    *,
    judgments: list[dict[str, Any]] | None = None,
    judge_failed: list[dict[str, Any]] = (),
    infer_failed: list[dict[str, Any]] = (),
    model: str = "model",
) -> dict[str, Any]:
    """The summary JSON: ``{"model", "judged", "domains": {domain or "all": {...}}}``."""
    preds = _by_domain(predictions)
    judged = _by_domain(judgments or [])
    j_failed = _by_domain(judge_failed)
    i_failed = _by_domain(infer_failed)
    domains: dict[str, Any] = {}
    for domain in sorted(set(preds) | set(i_failed) | set(judged), key=lambda d: (d == ALL, d)):
        entry: dict[str, Any] = {
            "predictions": len(preds.get(domain, [])),
            "infer_failed": len(i_failed.get(domain, [])),
            "rule": rule_summary(preds.get(domain, [])),
            "checks": check_summary(preds.get(domain, []), pooled=domain == ALL),
        }
        if judgments is not None:
            entry["judge"] = judge_summary(judged.get(domain, []), len(j_failed.get(domain, [])))
        domains[domain] = entry
    return {"model": model, "judged": judgments is not None, "domains": domains}


MARGIN_METRICS = ("char_f1", "rouge_l")


BOOTSTRAP_SAMPLES = 2000
"""Resamples of the items behind a margin's interval."""


def add_baselines(
    summary: dict[str, Any],
    baselines: dict[str, list[dict[str, Any]]],
    predictions: list[dict[str, Any]],
) -> None:
    """Score each baseline's prediction rows like a model's, into ``summary["baselines"]``
    (``{name: {domain: entry}}``), and the model's margin over the best baseline per
    domain and metric, with its interval, into ``summary["margin"]``. ``predictions`` are
    the model's rows that ``summary`` was made from; rows pair with a baseline's by
    ``key``."""
    summary["baselines"] = {
        name: summarize(rows, model=name)["domains"] for name, rows in baselines.items()
    }
    summary["margin"] = margins(summary, predictions, baselines)


def margins(
    summary: dict[str, Any],
    predictions: list[dict[str, Any]],
    baselines: dict[str, list[dict[str, Any]]],
) -> dict[str, Any]:
    """``{domain: {metric: {"baseline", "baseline_value", "model", "margin", "ci95",
    "paired"}}}``: the model minus the best baseline on that domain (positive = the model
    is better); ``ci95`` the 2.5th and 97.5th percentiles of the mean paired difference
    over bootstrap resamples of the ``paired`` items both scored (None under 2)."""
    model_rows = _by_domain(predictions)
    by_key = {name: {r["key"]: r for r in rows} for name, rows in baselines.items()}
    out: dict[str, Any] = {}
    for domain, entry in summary["domains"].items():
        per_metric = {}
        for metric in MARGIN_METRICS:
            model_value = entry["rule"][metric]
            scored = [
                (b[domain]["rule"][metric], name)
                for name, b in summary.get("baselines", {}).items()
                if domain in b and b[domain]["rule"][metric] is not None
            ]
            if model_value is None or not scored:
                continue
            best_value, best = max(scored)
            diffs = _paired_differences(model_rows.get(domain, []), by_key[best], metric)
            per_metric[metric] = {
                "baseline": best,
                "baseline_value": best_value,
                "model": model_value,
                "margin": model_value - best_value,
                "ci95": paired_interval(diffs),
                "paired": len(diffs),
            }
        out[domain] = per_metric
    return out


def margin_text(m: dict[str, Any] | None) -> str:
    """A margin entry as tables show it: ``+13.1 vs retrieval [+9.0, +17.2]``."""
    if not m:
        return "-"
    ci = m.get("ci95")
    interval = f" [{ci[0]:+.1f}, {ci[1]:+.1f}]" if ci else ""
    return f"{m['margin']:+.1f} vs {m['baseline']}{interval}"


def _paired_differences(
    rows: list[dict[str, Any]], baseline: dict[str, dict[str, Any]], metric: str
) -> list[float]:
    """Per item that both the model and the baseline scored on ``metric``: model minus
    baseline, in points."""
    out = []
    for row in rows:
        other = baseline.get(row["key"])
        if other is None:
            continue
        mine = _item_metrics(row["output"], row["reference"])[metric]
        theirs = _item_metrics(other["output"], other["reference"])[metric]
        if mine is not None and theirs is not None:
            out.append(100 * (mine - theirs))
    return out


def paired_interval(diffs: list[float], *, seed: int = 0) -> list[float] | None:
    """95% percentile interval of the mean of ``diffs`` over ``BOOTSTRAP_SAMPLES``
    resamples with replacement (fixed seed: the same items give the same interval)."""

    if len(diffs) < 2:
        return None
    d = np.asarray(diffs, dtype=np.float64)
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, len(d), size=(BOOTSTRAP_SAMPLES, len(d)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return [float(low), float(high)]
