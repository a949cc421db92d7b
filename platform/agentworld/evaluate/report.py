"""Reports of score summaries: a Markdown table and a PNG chart (per-domain bars, one
bar per model when several summaries are compared)."""

from __future__ import annotations

import io
from typing import Any

from agentworld.evaluate.score import ALL, MARGIN_METRICS, margin_text
from agentworld.scoring.rubrics import DIMENSIONS

RULE_COLUMNS = (
    ("exact_match", "EM"),
    ("char_f1", "char F1"),
    ("rouge_l", "ROUGE-L"),
    ("format_valid", "format ok"),
    ("json_valid", "JSON ok"),
)


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def markdown_table(summary: dict[str, Any], *, title: str | None = None) -> str:
    """One row per domain (and ``all``): counts, rule metrics, judge scores if judged."""
    head = ["domain", "items", "infer failed", *(label for _, label in RULE_COLUMNS)]
    if summary["judged"]:
        head += ["judge overall", *DIMENSIONS, "valid", "failed"]
    head.append("checks ok")
    lines = [f"## {title or summary['model']}", "", _row(head), _row(["---"] * len(head))]
    for domain, d in summary["domains"].items():
        cells = [
            f"**{domain}**" if domain == ALL else domain,
            str(d["predictions"]),
            str(d["infer_failed"]),
        ]
        cells += [_fmt(d["rule"][name]) for name, _ in RULE_COLUMNS]
        if summary["judged"]:
            j = d["judge"]
            cells += [_fmt(j["overall"]), *(_fmt(j[dim]) for dim in DIMENSIONS)]
            cells += [str(j["valid"]), str(j["failed"])]
        cells.append(_fmt(pooled_checks(d)))
        lines.append(_row(cells))
    lines += [
        "",
        "Rule metrics and judge scores are on a 0-100 scale; judge scores are "
        "(raw - 1) / 4 * 100 over valid verdicts; JSON ok counts only JSON observations; "
        "checks ok: the share of the domain's state checks passed, where they apply.",
    ]
    if summary.get("baselines"):
        lines += ["", *baseline_lines(summary)]
    if any(d.get("checks") for d in summary["domains"].values()):
        lines += ["", *check_lines(summary)]
    return "\n".join(lines) + "\n"


def pooled_checks(domain_entry: dict[str, Any]) -> float | None:
    """The share of every applicable state check passed in one domain entry."""
    checks = domain_entry.get("checks") or {}
    if "all" in checks:
        return checks["all"]["passed"]
    n = sum(c["n"] for c in checks.values())
    return sum(c["passed"] * c["n"] for c in checks.values()) / n if n else None


def check_rows(summary: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """(head, rows) of the state checks: one row per domain and check, the model's pass
    rate beside each baseline's (items: how many the check applies to)."""
    names = list(summary.get("baselines", {}))
    head = ["domain", "check", "items", summary["model"], *names]
    rows = []
    for domain, d in summary["domains"].items():
        for check, c in (d.get("checks") or {}).items():
            if domain == ALL:
                continue
            cells = [domain, check, str(c["n"]), _fmt(c["passed"])]
            for n in names:
                entry = (summary["baselines"][n].get(domain) or {}).get("checks", {})
                cells.append(_fmt(entry[check]["passed"]) if check in entry else "-")
            rows.append(cells)
    return head, rows


def check_lines(summary: dict[str, Any]) -> list[str]:
    """The state checks table (``agentworld.evaluate.checks``)."""
    head, rows = check_rows(summary)
    lines = ["### State checks (% passed)", "", _row(head), _row(["---"] * len(head))]
    lines += [_row(r) for r in rows]
    lines += [
        "",
        "Judge-free checks of what the observation says about the environment's state "
        "(an error, the prompt, a test count, results that exist), over the items each "
        "applies to.",
    ]
    return lines


def baseline_lines(summary: dict[str, Any]) -> list[str]:
    """The model beside every baseline per domain, and its margin over the best one."""

    names = list(summary["baselines"])
    label = dict(RULE_COLUMNS)
    head = ["domain", "items"]
    for metric in MARGIN_METRICS:
        head += [f"{label[metric]} model", *(f"{label[metric]} {n}" for n in names)]
        head.append(f"{label[metric]} margin")
    lines = ["### Against baselines", "", _row(head), _row(["---"] * len(head))]
    for domain, d in summary["domains"].items():
        cells = [f"**{domain}**" if domain == ALL else domain, str(d["predictions"])]
        for metric in MARGIN_METRICS:
            cells.append(_fmt(d["rule"][metric]))
            for n in names:
                entry = summary["baselines"][n].get(domain)
                cells.append(_fmt(entry["rule"][metric] if entry else None))
            cells.append(margin_text(summary["margin"].get(domain, {}).get(metric)))
        lines.append(_row(cells))
    lines += [
        "",
        "copy_previous: the last observation in the context (empty at turn 1); retrieval: "
        "the observation after the most similar environment + action of the training "
        "split (BM25). Margin: the model minus the best baseline (positive = better), "
        "[95% interval: paired bootstrap over the items].",
    ]
    return lines


def with_baselines(summaries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The summaries followed by one pseudo-summary per baseline (those of the first
    summary that has them: runs compared on one input share their baselines), so that
    tables and charts show them as one column or bar each."""
    first = next((s for s in summaries if s.get("baselines")), None)
    extra = [
        {"model": name, "judged": False, "domains": domains}
        for name, domains in (first or {}).get("baselines", {}).items()
    ]
    return [*summaries, *extra]


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def default_metric(summaries: list[dict[str, Any]]) -> str:
    """The judge's overall score when every summary has one, else ROUGE-L."""
    return "judge.overall" if all(s["judged"] for s in summaries) else "rule.rouge_l"


def metric_value(domain_entry: dict[str, Any], metric: str) -> float | None:
    """``rule.<name>`` or ``judge.<name>`` of one domain entry."""
    group, _, name = metric.partition(".")
    if group not in ("rule", "judge") or not name:
        raise ValueError(f"metric: expected rule.<name> or judge.<name>, got {metric!r}")
    section = domain_entry.get(group)
    if section is None:
        return None
    if name not in section:
        raise ValueError(f"metric: {group} has no {name!r}; known: {', '.join(section)}")
    return section[name]


def comparison_table(summaries: list[dict[str, Any]], metric: str) -> str:
    """Domains as rows, models as columns, one metric."""
    domains = _domains(summaries)
    lines = [f"## {metric}", "", _row(["domain", *(s["model"] for s in summaries)])]
    lines.append(_row(["---"] * (len(summaries) + 1)))
    for domain in domains:
        values = [
            metric_value(s["domains"][domain], metric) if domain in s["domains"] else None
            for s in summaries
        ]
        lines.append(_row([domain, *(_fmt(v) for v in values)]))
    return "\n".join(lines) + "\n"


def _domains(summaries: list[dict[str, Any]]) -> list[str]:
    names = {d for s in summaries for d in s["domains"]}
    return sorted(names, key=lambda d: (d == ALL, d))


def chart_png(summaries: list[dict[str, Any]], metric: str, *, title: str = "") -> bytes:
    """Grouped bars: one group per domain, one bar per summary (model)."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on servers and CI
    import matplotlib.pyplot as plt

    domains = _domains(summaries)
    width = 0.8 / max(len(summaries), 1)
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(domains) * max(1, len(summaries) / 2)), 4))
    for i, s in enumerate(summaries):
        values = [
            metric_value(s["domains"][d], metric) if d in s["domains"] else None for d in domains
        ]
        xs = [j + (i - (len(summaries) - 1) / 2) * width for j in range(len(domains))]
        bars = ax.bar(xs, [v or 0.0 for v in values], width, label=s["model"])
        ax.bar_label(bars, labels=[_fmt(v) for v in values], fontsize=7, padding=2)
    ax.set_xticks(range(len(domains)), domains)
    ax.set_ylim(0, 105)
    ax.set_ylabel(f"{metric} (0-100)")
    ax.set_title(title or metric)
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    return buf.getvalue()
