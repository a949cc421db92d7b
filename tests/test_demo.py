"""`make demo` as a newcomer runs it, at reduced size: `python jobs/demo.py` in the
repository root with a relative --out. Every stage's manifest, the console, the logs and
the report are checked; the report page is opened in a real headless Chromium; a second
run skips every stage."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from agentworld.io import read_manifest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow
STAGES = {
    "collect": "raw",
    "prepare": "prepared",
    "cpt": "cpt",
    "sft": "sft",
    "rl": "rl",
    "evaluate": "eval/score",
    "serve": "serve",
}
# The agent stage has its own short run in tests/test_agent_run.py; CI's time is spent once.
DEMO = ["--episodes", "16", "--max-steps", "4", "--max-items", "12", "--skip-agent"]


def run_demo(rel_out: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "jobs/demo.py", "--out", rel_out, *DEMO],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=2400,
    )


def failure_story(done: subprocess.CompletedProcess) -> str:
    """The console, and the end of the log the console points at for a failed stage."""
    story = done.stdout[-3000:] + done.stderr[-2000:]
    logs = re.findall(r"\[pipeline\] see (\S+\.log)", done.stdout)
    if logs and Path(logs[-1]).is_file():
        story += f"\n--- end of {logs[-1]}:\n" + Path(logs[-1]).read_text()[-4000:]
    return story


@pytest.fixture(scope="module")
def demo_run():
    """(relative --out, absolute run dir, first run's console) of one reduced demo."""
    rel = f"runs/test-demo-{uuid.uuid4().hex[:8]}"
    first = run_demo(rel)
    yield rel, ROOT / rel, first
    shutil.rmtree(ROOT / rel, ignore_errors=True)


def test_demo_runs_every_stage_from_a_relative_out(demo_run):
    rel, run, first = demo_run
    console = first.stdout
    assert first.returncode == 0, failure_story(first)
    for stage, sub in STAGES.items():
        m = read_manifest(str(run / sub))
        assert m and m["status"] == "complete", f"{stage}: {m}"
        assert f"[pipeline] {stage} started" in console and f"[pipeline] {stage} done" in console
        log = run / "logs" / f"{stage}.log"
        assert log.is_file() and log.stat().st_size > 0, log
    # The console is for a person: stage lines and progress, not Ray's own logs.
    assert "[cpt] step 4/4" in console and "[rl]" in console, console
    for noise in ("PlacementGroupCleaner", "Traceback", "INFO worker.py", "(RayTrainWorker"):
        assert noise not in console, noise
    assert len(console.splitlines()) < 200, len(console.splitlines())
    assert read_manifest(str(run / "raw"))["counts"]["trajectories"] == 16
    assert read_manifest(str(run / "cpt"))["counts"]["steps"] == 4
    assert read_manifest(str(run / "serve"))["counts"]["latency_ms"]["step_1"] > 0
    # Outputs are under the repository root, where the relative path points.
    assert str(run) in read_manifest(str(run / "cpt"))["outputs"]["hf"]
    # The console closes with the verdict, the agents' line and the report's path.
    verdict, agents, where = console.strip().splitlines()[-3:]
    assert re.match(r"\[demo\] The world model .* on \d of \d domains", verdict), verdict
    assert agents == "[demo] No agent stage in this run."
    assert where == f"[demo] Report: {run}/report/index.html", where  # --out made absolute


def test_demo_report_has_every_section(demo_run):
    _, run, _ = demo_run
    md = (run / "report" / "report.md").read_text()
    for title in ("Stages", "Data (prepare)", "CPT and SFT", "RL", "Fidelity", "Serve",
                  "Recipe and versions"):  # fmt: skip
        assert f"## {title}" in md, title
    assert "**missing**" not in md.split("## Recipe")[0].split("## Agents")[0], md
    summary = json.loads((run / "eval" / "score" / "summary.json").read_text())
    for domain in summary["domains"]:
        assert f"| {domain} |" in md
    # The summary answers first: the verdict, then the margin and its interval per domain.
    assert re.findall(r"^## (.+)$", md, flags=re.M)[0] == "Summary"
    top = md.split("## Stages")[0]
    assert re.search(r"The world model .* beats it on \d of \d domains", top), top
    for domain in summary["domains"]:  # a domain of one held-out item has no interval
        assert re.search(rf"^\| {domain} \|.* [+-]\d+\.\d vs \w+", top, flags=re.M), (domain, top)
    assert re.search(r"^\| all \|.* vs \w+ \[[+-]\d+\.\d, [+-]\d+\.\d\] \|$", top, flags=re.M), top
    # Every export carries a model card; the evaluated policy's holds its fidelity.
    from agentworld.model.card import read_card

    for stage in ("cpt", "sft", "rl"):
        assert read_card(str(run / stage / "hf"))["agentworld"]["stage"] == stage
    metrics = read_card(str(run / "rl" / "hf"))["model-index"][0]["results"][0]["metrics"]
    assert any(m["name"].startswith("char_f1 margin vs ") for m in metrics), metrics
    for png in ("loss.png", "rl.png", "fidelity.png", "stages.png"):
        assert (run / "report" / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", png
        assert f"({png})" in md


def test_report_opens_in_a_real_browser(demo_run, tmp_path):
    from playwright.sync_api import sync_playwright

    _, run, _ = demo_run
    chromium = shutil.which("chromium")
    assert chromium, "Debian's chromium is installed by scripts/setup.sh"
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=chromium,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        page = browser.new_page()
        page.goto((run / "report" / "index.html").as_uri())
        page.wait_for_load_state("load")
        widths = page.eval_on_selector_all("img", "imgs => imgs.map(i => i.naturalWidth)")
        requests = page.evaluate("performance.getEntriesByType('resource').map(r => r.name)")
        page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
        browser.close()
    assert len(widths) >= 4 and all(w > 0 for w in widths), widths
    assert all(r.startswith("file://") for r in requests), requests  # no external assets
    assert (tmp_path / "report.png").stat().st_size > 10_000


def test_second_demo_run_skips_every_stage(demo_run):
    rel, _, first = demo_run
    assert first.returncode == 0
    second = run_demo(rel)
    assert second.returncode == 0, failure_story(second)
    for stage in STAGES:
        assert f"[pipeline] {stage}: complete in" in second.stdout, second.stdout
    assert "started:" not in second.stdout, second.stdout
