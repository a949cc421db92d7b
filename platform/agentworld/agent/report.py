"""The agent report: ``report.json``, ``report.md`` and PNG charts under the run
directory. Sections: agents evaluated on held-out tasks in the real environment (per
family), controlled vs uncontrolled simulation, warm vs cold start, WM2Real, steps/s,
injection probes."""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

from agentworld.agent.intervals import comparison_lines, interval_text, learned_lines
from agentworld.io import join, write_bytes
from agentworld.io.storage import copy_local_dir_to

TITLES = {
    "untrained": "untrained (demonstrations only)",
    "sim": "RL in sim (controlled)",
    "sim_uncontrolled": "RL in sim (uncontrolled)",
    "real": "RL in real",
    "cold_sim": "RL in sim, cold start",
}


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{100 * v:.1f}"
    return str(v)


def _agents_table(agents: dict[str, Any]) -> list[str]:
    lines = [
        "| agent | family | n | success % | item F1 | row F1 | end reasons |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, res in agents.items():
        for family, s in res["real_eval"].items():
            reasons = ", ".join(f"{k} {v}" for k, v in sorted(s["end_reasons"].items()))
            lines.append(
                f"| {TITLES.get(name, name)} | {family} | {s['n']} | {_fmt(s['success_rate'])} | "
                f"{_fmt(s['item_f1'])} | {_fmt(s['row_f1'])} | {reasons} |"
            )
    return lines


def _pair(report: dict[str, Any], a: str, b: str, title: str) -> list[str]:
    agents = report["agents"]
    if a not in agents or b not in agents:
        return [
            f"## {title}",
            "",
            f"not run (needs the agents {a!r} and {b!r} in agent.variants)",
            "",
        ]
    lines = [
        f"## {title}",
        "",
        "| family | "
        + f"{TITLES[a]} success % | {TITLES[b]} success % | {a} item F1 | {b} item F1 |",
        "|---|---|---|---|---|",
    ]
    for family, s in agents[a]["real_eval"].items():
        t = agents[b]["real_eval"].get(family, {})
        lines.append(
            f"| {family} | {_fmt(s['success_rate'])} | {_fmt(t.get('success_rate'))} | "
            f"{_fmt(s['item_f1'])} | {_fmt(t.get('item_f1'))} |"
        )
    return [*lines, ""]


def markdown(report: dict[str, Any]) -> str:
    lines = [
        "# Agents trained in the simulator",
        "",
        f"World model: `{report['world_model']}`; {report['counts']['eval_tasks']} held-out tasks, "
        f"evaluated in the REAL environment. Success and F1 in %.",
        "",
        "## Agents on held-out tasks (real environment)",
        "",
        *_agents_table(report["agents"]),
        "",
        "## What carries signal at this size",
        "",
        *(learned_lines(report) or ["- no agent's held-out success interval lies above zero"]),
        "",
        "## Comparisons (paired by task, 95% bootstrap interval)",
        "",
        *(comparison_lines(report) or ["- only one agent ran"]),
        "",
        "Success per agent and family with its interval: "
        + "; ".join(
            f"{name} {family} {interval_text(e['success'])}"
            for name, fams in report.get("intervals", {}).items()
            for family, e in fams.items()
        ),
        "",
        *_pair(report, "sim", "sim_uncontrolled", "Controlled vs uncontrolled simulation"),
        *_pair(report, "sim", "cold_sim", "Warm start from the world model vs cold start"),
        "## WM2Real",
        "",
    ]
    for name, w in report.get("wm2real", {}).items():
        lines.append(
            f"- {name}: {w['sim_successes']} successful of {w['sim_episodes']} simulated episodes; "
            f"replayed in real, {w['still_succeeding']} still succeed (share {_fmt(w['share'])} %)"
        )
    speed = report.get("steps_per_s", {})
    lines += ["", "## Environment steps per second", ""]
    for mode, s in speed.items():
        lines.append(
            f"- {mode}: {s['steps_per_s']:.1f} steps/s ({s['steps']} steps, concurrency {s['concurrency']})"
        )
    if "sim" in speed and "real" in speed and speed["real"]["steps_per_s"]:
        lines.append(
            f"- sim / real: {speed['sim']['steps_per_s'] / speed['real']['steps_per_s']:.2f}x"
        )
    probes = report.get("probes")
    if probes:
        lines += [
            "",
            "## Injection probes",
            "",
            f"{probes['probes']} probe actions against the controlled simulator; it revealed "
            f"unearned reference facts {probes['leaks']} times (rate {_fmt(probes['leak_rate'])} %).",
        ]
    lines += [
        "",
        "## Oracle solutions in the real environment",
        "",
        f"success {_fmt(report.get('oracle_success'))} %",
        "",
    ]
    return "\n".join(lines)


def charts(report: dict[str, Any], out_dir: str) -> list[str]:
    """success_by_family.png, f1.png, steps_per_s.png (local directory)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(out_dir, exist_ok=True)
    agents = report["agents"]
    families = sorted({f for a in agents.values() for f in a["real_eval"]})
    paths = []
    for name, key, title in (
        ("success_by_family.png", "success_rate", "success rate (real env, held-out)"),
        ("f1.png", "item_f1", "table item F1 (real env, held-out)"),
    ):
        fig, ax = plt.subplots(figsize=(8, 4))
        width = 0.8 / max(len(agents), 1)
        for i, (agent, res) in enumerate(agents.items()):
            vals = [100 * (res["real_eval"].get(f, {}).get(key) or 0.0) for f in families]
            ax.bar([x + i * width for x in range(len(families))], vals, width, label=agent)
        ax.set_xticks([x + 0.4 - width / 2 for x in range(len(families))], families)
        ax.set_ylabel("%")
        ax.set_ylim(0, 100)  # a row of zeros must still read as 0 %
        ax.set_title(title)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, name))
        plt.close(fig)
        paths.append(name)
    speed = report.get("steps_per_s", {})
    if speed:
        fig, ax = plt.subplots(figsize=(4, 3))
        ax.bar(list(speed), [s["steps_per_s"] for s in speed.values()])
        ax.set_ylabel("env steps / s")
        ax.set_title("steps/s at equal concurrency")
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, "steps_per_s.png"))
        plt.close(fig)
        paths.append("steps_per_s.png")
    return paths


def write_report(out_url: str, report: dict[str, Any]) -> dict[str, str]:
    write_bytes(join(out_url, "report.json"), json.dumps(report, indent=2, default=str).encode())
    write_bytes(join(out_url, "report.md"), markdown(report).encode())
    with tempfile.TemporaryDirectory() as tmp:
        names = charts(report, tmp)
        copy_local_dir_to(tmp, out_url)
    return {
        "json": join(out_url, "report.json"),
        "md": join(out_url, "report.md"),
        **{n: join(out_url, n) for n in names},
    }
