"""Sim-vs-real fidelity on trajectories recorded from real environments: a simulator
endpoint that reproduces the real terminal observations exactly and answers the other
domains wrongly gets exactly that, per domain, in the report (and judge scores)."""

from __future__ import annotations

import json

import pytest

from agentworld.evaluate.items import load_items
from tests.test_evaluate_helpers import GOOD_VERDICT, Reply, ScriptedChatServer
from tests.test_evaluate_judge import SCORES
from tests.test_evaluate_score import load_job


@pytest.mark.slow
def test_fidelity_report_on_collected_trajectories(collected_corpus, tmp_path):
    items = load_items(collected_corpus).items
    real = {json.dumps(i.messages, sort_keys=True): i for i in items}
    domains = {i.domain for i in items}
    assert "terminal" in domains and len(domains) > 1

    def simulator(body: dict, n: int) -> Reply:
        if body["messages"][0]["content"].startswith("You judge"):
            return Reply(text=GOOD_VERDICT)
        item = real[json.dumps(body["messages"], sort_keys=True)]
        return Reply(text=item.reference if item.domain == "terminal" else "no such thing")

    run = tmp_path / "fidelity"
    with ScriptedChatServer(simulator) as server:
        args = ["fidelity", "--input", collected_corpus, "--endpoint", server.base_url]
        args += ["--out", str(run), "--name", "sim", "--judge-url", server.base_url]
        assert load_job().main(args) == 0

    summary = json.loads((run / "score" / "summary.json").read_text())
    assert set(summary["domains"]) == domains | {"all"} and summary["model"] == "sim"
    for domain in domains:
        entry = summary["domains"][domain]
        assert entry["rule"]["exact_match"] == (100.0 if domain == "terminal" else 0.0)
        assert entry["judge"]["valid"] == entry["predictions"] > 0
    assert summary["domains"]["all"]["predictions"] == len(items)
    assert summary["domains"]["all"]["judge"]["factuality"] == (SCORES["factuality"] - 1) * 25
    table = (run / "score" / "table.md").read_text()
    assert table.startswith("## Sim-vs-real fidelity: sim")
    assert (run / "score" / "chart.png").exists()
