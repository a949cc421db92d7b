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
