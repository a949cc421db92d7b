"""Build the report of a run directory: gather the sections, draw the figures, write
``report/index.html``, ``report/report.md`` and the PNGs."""

from __future__ import annotations

import datetime as dt

from agentworld.io import exists, join, read_bytes, write_bytes
from agentworld.report import figures, render, sections
from agentworld.report.summary import summary_section


def build_report(run_url: str) -> str:
    """Write the report under ``<run>/report`` and return that directory's URL. Works
    on a partial run: a stage that is missing is shown as missing."""
    out = join(run_url, "report")
    found = sections.manifests(run_url)
    stages = sections.stages_section(run_url, found)
    parts = [
        summary_section(run_url, found),
        stages,
        sections.data_section(run_url),
        sections.training_section(run_url, found),
        sections.rl_section(run_url, found),
        sections.fidelity_section(run_url, found),
        sections.serve_section(found),
    ]
    parts.append(sections.agent_section(run_url, found))
    parts.append(sections.provenance_section(found))
    pngs = {
        "loss.png": figures.loss_curves(found),
        "rl.png": figures.rl_curves(sections.read_jsonl(join(run_url, "rl", "metrics.jsonl"))),
        "fidelity.png": figures.fidelity_bars(
            sections.read_json(join(run_url, "eval", "score", "summary.json"))
        ),
        "stages.png": figures.stage_times(
            (sections.read_json(join(run_url, "pipeline.json")) or {}).get("stages", {})
        ),
    }
    for name in sections.AGENT_PNGS:  # the agent stage draws its own
        url = join(run_url, "agent", name)
        pngs[name] = read_bytes(url) if exists(url) else None
    drift_png = join(run_url, "eval", "closed_loop", "drift.png")  # evaluate draws it
    pngs["drift.png"] = read_bytes(drift_png) if exists(drift_png) else None
    if pngs["stages.png"] is not None:
        stages.figures.append(("stages.png", "Seconds per stage."))
    for part in parts:  # a figure is listed only when it could be drawn
        part.figures = [(n, c) for n, c in part.figures if pngs.get(n, b"") is not None]
    for name, data in pngs.items():
        if data is not None:
            write_bytes(join(out, name), data)
    title = "AgentWorld run report"
    stamp = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    subtitle = f"Run {run_url}, report built {stamp}."
    write_bytes(join(out, "index.html"), render.to_html(title, subtitle, parts).encode())
    write_bytes(join(out, "report.md"), render.to_markdown(title, subtitle, parts).encode())
    return out
