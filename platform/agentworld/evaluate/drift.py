"""The drift of closed-loop rollouts: per domain and turn index, the score of the
closed-loop turns beside the teacher-forced score of the same turns, with the same
rule metrics and state checks as ``score``. The gap (teacher-forced minus closed-loop)
is what compounding errors cost: zero for a simulator that never strays, growing with
the turn index for one whose mistakes feed its later prompts.
"""

from __future__ import annotations

import io
from collections import defaultdict
from typing import Any

from agentworld.evaluate.score import ALL, check_summary, rule_summary

DRIFT_METRICS = ("char_f1", "rouge_l", "exact_match")
MODES = ("teacher_forced", "closed_loop")


def _scores(rows: list[dict[str, Any]]) -> dict[str, float | None]:
    rule = rule_summary(rows)
    out = {m: rule[m] for m in DRIFT_METRICS}
    out["checks"] = check_summary(rows, pooled=True).get("all", {}).get("passed")
    return out


def _gap(entry: dict[str, Any]) -> dict[str, float | None]:
    tf, cl = entry["teacher_forced"], entry["closed_loop"]
    return {
        m: None if tf[m] is None or cl[m] is None else tf[m] - cl[m]
        for m in (*DRIFT_METRICS, "checks")
    }


def _entry(rows: list[dict[str, Any]]) -> dict[str, Any]:
    by_mode = {m: [r for r in rows if r["mode"] == m] for m in MODES}
    entry: dict[str, Any] = {"items": len(by_mode["closed_loop"])}
    entry |= {m: _scores(by_mode[m]) for m in MODES}
    entry["drift"] = _gap(entry)
    return entry


def drift_summary(rows: list[dict[str, Any]], *, model: str = "model") -> dict[str, Any]:
    """``{"model", "metrics", "domains": {domain or "all": {"items", "teacher_forced",
    "closed_loop", "drift", "episodes", "turns": {k: same fields}}}}`` over closed-loop
    rows (``mode`` teacher_forced or closed_loop); scores 0-100, ``checks`` the pooled
    state checks' pass rate, ``drift`` teacher-forced minus closed-loop."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[row["domain"]].append(row)
        groups[ALL].append(row)
    domains: dict[str, Any] = {}
    for domain in sorted(groups, key=lambda d: (d == ALL, d)):
        got = groups[domain]
        entry = _entry(got)
        entry["episodes"] = len({r["id"] for r in got})
        by_turn: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for row in got:
            by_turn[row["turn_idx"]].append(row)
        entry["turns"] = {str(k): _entry(by_turn[k]) for k in sorted(by_turn)}
        domains[domain] = entry
    return {"model": model, "metrics": [*DRIFT_METRICS, "checks"], "domains": domains}


def _fmt(value: float | None, sign: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.1f}" if sign else f"{value:.1f}"


def drift_table(summary: dict[str, Any], metric: str = "char_f1") -> str:
    """Markdown: per domain its overall row, then one row per turn index."""
    head = ["domain", "turn", "items", f"teacher-forced {metric}", f"closed-loop {metric}",
            "drift", "teacher-forced checks", "closed-loop checks"]  # fmt: skip
    lines = [f"## Closed loop: {summary['model']}", "", _row(head), _row(["---"] * len(head))]
    for domain, d in summary["domains"].items():
        for turn, e in [("all", d), *d["turns"].items()]:
            name = f"**{domain}**" if turn == "all" else domain
            lines.append(
                _row([name, turn, str(e["items"]), _fmt(e["teacher_forced"][metric]),
                      _fmt(e["closed_loop"][metric]), _fmt(e["drift"][metric], sign=True),
                      _fmt(e["teacher_forced"]["checks"]), _fmt(e["closed_loop"]["checks"])])
            )  # fmt: skip
    lines += [
        "",
        "Each turn scored twice: teacher-forced (the real earlier observations in the "
        "prompt) and closed-loop (the simulator's own earlier observations, as an agent "
        "meets it). Drift: teacher-forced minus closed-loop (positive = the simulator "
        "loses fidelity on its own history). Scores 0-100; checks: state checks passed.",
    ]
    return "\n".join(lines) + "\n"


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def drift_png(summary: dict[str, Any], metric: str = "char_f1") -> bytes:
    """One panel per domain: ``metric`` by turn index, closed-loop (solid) beside
    teacher-forced (dashed)."""
    import matplotlib  # heavy: only when a chart is drawn

    matplotlib.use("Agg")  # files only: no display on servers and CI
    import matplotlib.pyplot as plt

    domains = [d for d in summary["domains"] if d != ALL] or [ALL]
    fig, axes = plt.subplots(1, len(domains), figsize=(3.4 * len(domains), 3.2), squeeze=False)
    for ax, domain in zip(axes[0], domains, strict=True):
        turns = summary["domains"][domain]["turns"]
        xs = [int(k) for k in turns]
        for mode, style in (("teacher_forced", "o--"), ("closed_loop", "o-")):
            ys = [turns[k][mode][metric] for k in turns]
            ax.plot(xs, [float("nan") if y is None else y for y in ys], style,
                    label=mode.replace("_", "-"))  # fmt: skip
        ax.set_title(domain)
        ax.set_xlabel("turn")
        ax.set_ylim(0, 105)
    axes[0][0].set_ylabel(f"{metric} (0-100)")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    return buf.getvalue()
