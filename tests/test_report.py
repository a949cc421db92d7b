"""The run report on a partial run: finished stages are shown, the others as missing,
and the page references only figures that were drawn (every one a real PNG)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from agentworld.io import write_manifest

ROOT = Path(__file__).resolve().parents[1]


def test_partial_run_report_shows_missing_stages(tmp_path):
    run = tmp_path / "run"
    write_manifest(str(run / "raw"), stage="collect", inputs=[], config={}, counts={})
    write_manifest(
        str(run / "cpt"),
        stage="cpt",
        inputs=[],
        config={"name": "debug_cpu"},
        counts={"steps": 3, "train_rows": 8, "loss": {"1": 7.0, "2": 6.5, "3": 6.1},
                "eval_loss": {"0": 7.2, "3": 6.4}},
        outputs={"hf": str(run / "cpt" / "hf")},
    )  # fmt: skip
    (run / "rl").mkdir()
    (run / "rl" / "metrics.jsonl").write_text(
        "".join(json.dumps({"step": i, "reward/total": 0.1 * i, "reward/format": 1.0,
                            "reward/format_failed": 0, "learner/kl": 0.01 * i,
                            "time/sync_share": 0.05}) + "\n" for i in range(3))
    )  # fmt: skip
    (run / "pipeline.json").write_text(
        json.dumps({"stages": {"collect": {"seconds": 12, "status": "done"},
                               "cpt": {"seconds": 90, "status": "done"},
                               "rl": {"seconds": 30, "status": "failed"}}})
    )  # fmt: skip
    done = subprocess.run(
        [sys.executable, "jobs/report.py", "--run", str(run)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    md = (run / "report" / "report.md").read_text()
    page = (run / "report" / "index.html").read_text()
    sections = dict(re.findall(r"^## (.+?)\n\n(.*?)(?=^## |\Z)", md, flags=re.M | re.S))
    for missing in ("Data (prepare)", "Fidelity (sim vs real, held-out turns)",
                    "Serve (smoke check)"):  # fmt: skip
        assert sections[missing].startswith("**missing**"), missing
    assert "| rl | failed | 30 |" in md and "| collect | complete | 12 |" in md
    assert "held-out loss 7.2000 -> 6.4000" in sections["CPT and SFT"]
    assert "sft: missing" in sections["CPT and SFT"]
    assert "format_failed" not in sections["RL"] and "| 2 |" in sections["RL"]
    assert "RL run has not finished" in sections["RL"]
    images = re.findall(r'<img src="([^"]+)"', page)
    assert sorted(images) == ["loss.png", "rl.png", "stages.png"], images
    for name in images:
        assert (run / "report" / name).read_bytes()[:4] == b"\x89PNG"
    assert "http" not in page.replace(str(run), "")  # self-contained: no external assets


def test_report_of_a_missing_run_is_a_clear_error(tmp_path):
    done = subprocess.run(
        [sys.executable, "jobs/report.py", "--run", str(tmp_path / "nope")],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1 and "does not exist" in done.stderr


def _summary(margins: dict[str, tuple[float, list[float] | None, str]]) -> dict:
    """A score summary with the given margins (margin, ci95, best baseline) per domain."""
    rule = {"char_f1": 50.0, "rouge_l": 40.0}
    return {
        "model": "sft",
        "domains": {d: {"predictions": 10, "rule": rule} for d in margins},
        "baselines": {"copy_previous": {d: {"rule": rule} for d in margins}},
        "margin": {
            d: {"char_f1": {"margin": m, "ci95": ci, "baseline": b, "model": 50.0}}
            for d, (m, ci, b) in margins.items()
        },
    }


def test_the_verdict_reads_the_interval_and_names_what_each_lost_domain_trails():
    from agentworld.report.summary import verdict

    won = _summary({"all": (6.0, [2.0, 9.5], "retrieval"), "mcp": (8.0, None, "retrieval"),
                    "swe": (3.0, None, "copy_previous"),
                    "search": (-4.0, None, "copy_previous")})  # fmt: skip
    assert verdict(won) == (
        "The world model beats the best baseline overall (+6.0 vs retrieval [+2.0, +9.5]) "
        "and beats it on 2 of 3 domains; below copying the previous observation on search."
    )
    within = _summary({"all": (1.0, [-2.0, 3.0], "retrieval"), "mcp": (1.0, None, "retrieval")})
    assert verdict(within).startswith("The world model is above the best baseline overall, "
                                      "within the interval")  # fmt: skip
    below = _summary({"all": (-9.0, [-12.0, -4.0], "retrieval"), "web": (-9.0, None, "retrieval")})
    assert verdict(below) == (
        "The world model is below the best baseline overall (-9.0 vs retrieval [-12.0, -4.0]) "
        "and beats it on 0 of 1 domains; below retrieving the most similar training "
        "observation on web."
    )
    assert verdict({"domains": {}, "margin": {}}).startswith("No baseline was scored")
    grouped = _summary({"all": (-9.0, [-12.0, -4.0], "retrieval"), "mcp": (-1.0, None, "copy_previous"),
                        "swe": (-3.0, None, "retrieval"), "web": (-2.0, None, "retrieval"),
                        "terminal": (-4.0, None, "copy_previous"), "search": (-5.0, None, "retrieval")})  # fmt: skip
    assert verdict(grouped).endswith(
        "beats it on 0 of 5 domains; below copying the previous observation on mcp and "
        "terminal; below retrieving the most similar training observation on search, swe "
        "and web."
    )
    # A lost domain whose interval reaches zero is not called below (9a7f4e0's clone:
    # terminal -2.6 [-13.6, +9.1] on 8 held-out turns).
    close = _summary({"all": (-9.8, [-19.0, -0.4], "retrieval"), "os": (-37.1, [-58.0, -16.2], "retrieval"),
                      "terminal": (-2.6, [-13.6, 9.1], "retrieval"), "web": (-2.7, [-10.4, 1.9], "retrieval"),
                      "mcp": (-3.0, [-6.0, 0.0], "copy_previous")})  # fmt: skip
    assert verdict(close).endswith(
        "beats it on 0 of 4 domains; below retrieving the most similar training observation "
        "on os; behind copying the previous observation on mcp, within the interval; behind "
        "retrieving the most similar training observation on terminal and web, within the "
        "interval."
    )


def test_the_report_opens_with_the_summary(tmp_path):
    from agentworld.report import build_report
    from agentworld.report.summary import summary_lines

    run = tmp_path / "run"
    (run / "eval" / "score").mkdir(parents=True)
    summary = _summary(
        {"all": (6.0, [2.0, 9.5], "retrieval"), "mcp": (8.0, [1.0, 12.0], "retrieval")}
    )
    (run / "eval" / "score" / "summary.json").write_text(json.dumps(summary))
    (run / "pipeline.json").write_text(json.dumps({"stages": {"cpt": {"seconds": 90}}}))
    build_report(str(run))
    md = (run / "report" / "report.md").read_text()
    assert re.findall(r"^## (.+)$", md, flags=re.M)[0] == "Summary"
    top = md.split("## Stages")[0]
    assert "beats it on 1 of 1 domains." in top
    assert "| mcp | 10 | 50.0 | 50.0 | +8.0 vs retrieval [+1.0, +12.0] |" in top
    assert "Time per stage: cpt 90 s; 90 s in all." in top
    lines = summary_lines(str(run))
    assert len(lines) == 3 and lines[0].startswith("The world model beats")
    assert lines[2] == f"Report: {run / 'report' / 'index.html'}"
