"""95% intervals on the held-out tasks: each agent's success (and, on table tasks, item
and row F1) per family, with a bootstrap over the tasks; and the report's comparisons
(each agent against the untrained one, controlled against uncontrolled simulation,
warm against cold start, real against simulated training) as paired differences task by
task. A comparison carries signal where its interval excludes zero.

Rows are evaluation episodes as ``Episode.to_dict`` writes them (``task``, ``family``,
``score``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentworld.evaluate.score import paired_interval

METRICS = ("success", "item_f1", "row_f1")
COMPARISONS = (
    ("sim", "untrained", "RL in sim (controlled) vs untrained"),
    ("sim_uncontrolled", "untrained", "RL in sim (uncontrolled) vs untrained"),
    ("real", "untrained", "RL in real vs untrained"),
    ("cold_sim", "untrained", "RL in sim from a cold start vs untrained"),
    ("sim", "sim_uncontrolled", "controlled vs uncontrolled simulation"),
    ("sim", "cold_sim", "warm vs cold start (both RL in sim)"),
    ("real", "sim", "RL in real vs RL in sim"),
)


def value(row: dict[str, Any], metric: str) -> float:
    v = row["score"].get(metric)
    return float(bool(v)) if metric == "success" else float(v or 0.0)


def entry(values: Sequence[float]) -> dict[str, Any]:
    """n, the mean and its 95% bootstrap interval (None under 2 values)."""
    if not values:
        return {"n": 0, "mean": None, "ci95": None}
    return {"n": len(values), "mean": sum(values) / len(values), "ci95": paired_interval(values)}


def _families(rows: Sequence[dict[str, Any]]) -> list[str]:
    return [*sorted({r["family"] for r in rows}), "all"]


def agent_intervals(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """family (and "all") -> metric -> entry; F1 on table tasks only."""
    out = {}
    for family in _families(rows):
        fam = [r for r in rows if family in ("all", r["family"])]
        out[family] = {"success": entry([value(r, "success") for r in fam])}
        tables = [r for r in fam if r["family"] == "table"]
        for metric in ("item_f1", "row_f1"):
            if tables:
                out[family][metric] = entry([value(r, metric) for r in tables])
    return out


def paired(
    a: Sequence[dict[str, Any]], b: Sequence[dict[str, Any]], metric: str = "success"
) -> dict[str, dict[str, Any]]:
    """family -> the mean of ``a - b`` over the tasks both ran, its interval, and
    ``signal``: whether the interval excludes zero."""
    b_by_task = {r["task"]: r for r in b}
    out = {}
    for family in _families(a):
        diffs = [
            value(r, metric) - value(b_by_task[r["task"]], metric)
            for r in a
            if family in ("all", r["family"]) and r["task"] in b_by_task
        ]
        e = entry(diffs)
        ci = e["ci95"]
        e["signal"] = bool(ci) and (ci[0] > 0 or ci[1] < 0)
        out[family] = e
    return out


def comparisons(rows: dict[str, Sequence[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The report's comparisons among the agents that ran."""
    return [
        {"a": a, "b": b, "title": title, "success": paired(rows[a], rows[b])}
        for a, b, title in COMPARISONS
        if a in rows and b in rows
    ]


def interval_text(e: dict[str, Any] | None, *, signed: bool = False) -> str:
    """An entry as the reports print it, in %: ``42.0 [31.5, 52.0]`` (``+`` signs on a
    difference)."""
    if not e or e.get("mean") is None:
        return "-"
    sign = "+" if signed else ""
    text = f"{100 * e['mean']:{sign}.1f}"
    if e.get("ci95"):
        lo, hi = e["ci95"]
        text += f" [{100 * lo:{sign}.1f}, {100 * hi:{sign}.1f}]"
    return text


def comparison_lines(report: dict[str, Any]) -> list[str]:
    """One line per comparison and family: the paired difference and whether it
    carries signal at this size. With one family, "all" would repeat it: left out."""
    lines = []
    for c in report.get("comparisons", []):
        by_family = c["success"]
        for family, e in by_family.items():
            if family == "all" and len(by_family) == 2:
                continue
            verdict = "signal" if e.get("signal") else "no signal (the interval holds 0)"
            lines.append(
                f"- {c['title']}, {family}: success {interval_text(e, signed=True)} points "
                f"over {e['n']} tasks: {verdict}"
            )
    return lines


def learned_lines(report: dict[str, Any]) -> list[str]:
    """What the agents learned at all, which can carry signal where no comparison
    between them does: each agent and family whose held-out success interval lies
    above zero, and the demonstrations' effect on the held-out oracle actions' NLL."""
    lines = []
    for name, fams in report.get("intervals", {}).items():
        for family, e in fams.items():
            s = e.get("success") or {}
            if family != "all" and s.get("ci95") and s["ci95"][0] > 0:
                lines.append(
                    f"- {name} solves {interval_text(s)} % of {s['n']} held-out {family} "
                    "tasks in the real environment: above zero (signal)"
                )
    first = next(iter(report.get("agents", {}).values()), {})
    before, after = first.get("heldout_nll_init"), first.get("heldout_nll")
    if before is not None and after is not None:
        lines.append(
            f"- held-out oracle actions' NLL: {before:.2f} from the world-model checkpoint, "
            f"{after:.2f} after the demonstrations ({next(iter(report['agents']))})"
        )
    return lines
