"""The report's first section, the answer a person wants first: is the world model this
run trained any good, and against what. The model beside the parameter-free baselines
overall and per domain, with the margin, its interval and a verdict in words; then the
agents' headline, the serve latencies and the time per stage. The same verdict closes
the console output (``summary_lines``)."""

from __future__ import annotations

from typing import Any

from agentworld.evaluate.score import margin_text
from agentworld.io import join
from agentworld.report.sections import STAGES, Section, Table, fmt, read_json

BASELINE_WORDS = {
    "copy_previous": "copying the previous observation",
    "retrieval": "retrieving the most similar training observation",
}
METRIC = "char_f1"


def verdict(summary: dict[str, Any]) -> str:
    """One sentence: the model against the best baseline overall (by its interval) and
    on how many domains it wins, naming the baseline it trails on each domain it loses:
    "below" where the domain's interval is under zero (or unknown), "behind ..., within
    the interval" where it reaches zero (a domain holds a few held-out turns)."""
    margins = summary.get("margin", {})
    overall = margins.get("all", {}).get(METRIC)
    domains = {d: m[METRIC] for d, m in margins.items() if d != "all" and METRIC in m}
    if overall is None or not domains:
        return "No baseline was scored beside the model: no verdict."
    won = sorted(d for d, m in domains.items() if m["margin"] > 0)
    lost = sorted(set(domains) - set(won))
    ci = overall.get("ci95")
    if ci and ci[0] > 0:
        head = "The world model beats the best baseline overall"
    elif ci and ci[1] < 0:
        head = "The world model is below the best baseline overall"
    elif overall["margin"] > 0:
        head = "The world model is above the best baseline overall, within the interval"
    else:
        head = "The world model is not above the best baseline overall"
    text = f"{head} ({margin_text(overall)}) and beats it on {len(won)} of {len(domains)} domains"
    below: dict[str, list[str]] = {}
    within: dict[str, list[str]] = {}
    for d in lost:
        ci = domains[d].get("ci95")
        (within if ci and ci[1] >= 0 else below).setdefault(domains[d]["baseline"], []).append(d)
    for groups, phrase in (
        (below, "below {} on {}"),
        (within, "behind {} on {}, within the interval"),
    ):
        for baseline, names in sorted(groups.items()):
            text += "; " + phrase.format(BASELINE_WORDS.get(baseline, baseline), _listed(names))
    return text + "."


def _listed(names: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def summary_section(run: str, found: dict[str, dict | None]) -> Section:
    s = Section("Summary")
    summary = read_json(join(run, "eval", "score", "summary.json"))
    if summary is None:
        s.notes.append("The world model has not been evaluated in this run: no verdict yet.")
    else:
        s.notes.append(verdict(summary))
        s.tables.append(_margin_table(summary))
    s.notes += _agent_lines(run)
    latency = (found.get("serve") or {}).get("counts", {}).get("latency_ms", {})
    if latency:
        calls = ", ".join(f"{name} {fmt(ms, 0)} ms" for name, ms in latency.items())
        s.notes.append(f"Serve: every route answered ({calls}).")
    timings = (read_json(join(run, "pipeline.json")) or {}).get("stages", {})
    if timings:
        parts = [
            f"{st} {fmt(timings[st].get('seconds'), 0)} s" for st, _ in STAGES if st in timings
        ]
        total = sum(t.get("seconds", 0) for t in timings.values())
        s.notes.append(f"Time per stage: {', '.join(parts)}; {total:.0f} s in all.")
    return s


def _margin_table(summary: dict[str, Any]) -> Table:
    names = list(summary.get("baselines", {}))
    head = ["domain", "items", "model", *names, "margin vs best [95% interval]"]
    rows = []
    for domain, entry in summary["domains"].items():
        cells = [domain, fmt(entry["predictions"]), fmt(entry["rule"].get(METRIC))]
        for name in names:
            b = summary["baselines"][name].get(domain)
            cells.append(fmt(b["rule"].get(METRIC)) if b else "-")
        cells.append(margin_text(summary.get("margin", {}).get(domain, {}).get(METRIC)))
        rows.append(cells)
    caption = "Held-out char F1 (0-100); the margin is the model minus the best baseline."
    return Table(head, rows, caption)


def _agent_lines(run: str) -> list[str]:
    report = read_json(join(run, "agent", "report.json"))
    if report is None:
        return []
    parts = []
    for name, agent in report.get("agents", {}).items():
        every = agent.get("real_eval", {}).get("all", {})
        if every.get("success_rate") is not None:
            parts.append(f"{name} {100 * every['success_rate']:.0f}% of {every.get('n', '?')}")
    if not parts:
        return []
    return [f"Agents, held-out tasks solved in the real environment: {', '.join(parts)}."]


def summary_lines(run: str) -> list[str]:
    """The verdict in three lines for the console, the report's path last."""
    summary = read_json(join(run, "eval", "score", "summary.json"))
    first = verdict(summary) if summary else "The world model was not evaluated in this run."
    agents = _agent_lines(run) or ["No agent stage in this run."]
    return [first, agents[0], f"Report: {join(run, 'report', 'index.html')}"]
