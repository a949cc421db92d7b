"""Score aggregation equals hand-computed values on a small judged run (including
failed inferences, invalid verdicts and judge endpoint failures); the score job writes
summary, table and chart, and compares runs."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from agentworld.evaluate.score import summarize
from agentworld.io import join, write_jsonl, write_manifest

ROOT = Path(__file__).resolve().parents[1]


def pred(key: str, domain: str, output: str, reference: str) -> dict:
    return {"key": key, "domain": domain, "output": output, "reference": reference}


PREDICTIONS = [
    pred(
        "a#1",
        "terminal",
        "<predicted_observation>3 notes.txt</predicted_observation>",
        "3 notes.txt",
    ),
    pred("a#2", "terminal", "2 notes.txt", "3 notes.txt"),
    pred("m#1", "mcp", '{"a": 1}', '{"a": 2}'),
    pred("m#2", "mcp", "<think>never closed", '{"b": 3}'),
    pred("m#3", "mcp", "x", "y"),
]


def judgment(key: str, domain: str, scores: list[int] | None) -> dict:
    if scores is None:
        return {"key": key, "domain": domain, "ok": False, "scores": None, "total": None}
    named = dict(
        zip(["format", "factuality", "consistency", "realism", "quality"], scores, strict=True)
    )
    return {"key": key, "domain": domain, "ok": True, "scores": named, "total": sum(scores) / 5}


JUDGMENTS = [
    judgment("a#1", "terminal", [5, 5, 5, 5, 5]),
    judgment("a#2", "terminal", [3, 2, 4, 3, 3]),
    judgment("m#1", "mcp", [4, 4, 4, 4, 4]),
    judgment("m#2", "mcp", None),  # no valid verdict
]
JUDGE_FAILED = [{"key": "m#3", "domain": "mcp", "error": "endpoint: HTTP 500"}]
INFER_FAILED = [{"key": "a#3", "domain": "terminal", "error": "request timed out"}]


def test_summary_equals_hand_computed_values():
    s = summarize(
        PREDICTIONS,
        judgments=JUDGMENTS,
        judge_failed=JUDGE_FAILED,
        infer_failed=INFER_FAILED,
        model="m",
    )
    assert list(s["domains"]) == ["mcp", "terminal", "all"]
    t, m, a = (s["domains"][d] for d in ("terminal", "mcp", "all"))
    assert (t["predictions"], t["infer_failed"], m["predictions"], a["infer_failed"]) == (
        2,
        1,
        3,
        1,
    )
    # terminal rule metrics: EM (1+0)/2; char F1 (1+0.9)/2; ROUGE-L (1+3/4)/2.
    assert t["rule"] == pytest.approx(
        {
            "exact_match": 50.0,
            "char_f1": 95.0,
            "rouge_l": 87.5,
            "format_valid": 100.0,
            "json_valid": None,
            "json_items": 0,
        }
    )
    # mcp: char F1 and ROUGE-L (6/7+0+0)/3; format (1+0+1)/3; JSON only over m#1, m#2.
    assert m["rule"] == pytest.approx(
        {
            "exact_match": 0.0,
            "char_f1": 200 / 7,
            "rouge_l": 200 / 7,
            "format_valid": 200 / 3,
            "json_valid": 50.0,
            "json_items": 2,
        }
    )
    assert a["rule"]["char_f1"] == pytest.approx((1 + 0.9 + 6 / 7) / 5 * 100)
    assert a["rule"]["rouge_l"] == pytest.approx((1 + 0.75 + 6 / 7) / 5 * 100)
    # judge: (raw mean - 1) / 4 * 100 over valid verdicts.
    assert t["judge"] == pytest.approx(
        {
            "valid": 2,
            "failed": 0,
            "overall": 75.0,
            "format": 75.0,
            "factuality": 62.5,
            "consistency": 87.5,
            "realism": 75.0,
            "quality": 75.0,
        }
    )
    assert m["judge"] == pytest.approx(
        {
            "valid": 1,
            "failed": 2,
            "overall": 75.0,
            "format": 75.0,
            "factuality": 75.0,
            "consistency": 75.0,
            "realism": 75.0,
            "quality": 75.0,
        }
    )
    assert a["judge"] == pytest.approx(
        {
            "valid": 3,
            "failed": 2,
            "overall": 75.0,
            "format": 75.0,
            "factuality": 200 / 3,
            "consistency": 250 / 3,
            "realism": 75.0,
            "quality": 75.0,
        }
    )


def test_domain_without_valid_verdicts_has_no_scores():
    s = summarize(PREDICTIONS[3:4], judgments=JUDGMENTS[3:4])
    assert s["domains"]["mcp"]["judge"] == {
        "valid": 0,
        "failed": 1,
        "overall": None,
        "format": None,
        "factuality": None,
        "consistency": None,
        "realism": None,
        "quality": None,
    }


def load_job():
    spec = importlib.util.spec_from_file_location("evaluate_job", ROOT / "jobs" / "evaluate.py")
    job = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(job)
    return job


def fake_run(run: str, name: str, judged: bool) -> None:
    """A run directory as infer and judge leave it."""
    write_jsonl(join(run, "infer", "predictions.jsonl"), PREDICTIONS)
    write_jsonl(join(run, "infer", "failed.jsonl"), INFER_FAILED)
    write_manifest(
        join(run, "infer"),
        stage="evaluate.infer",
        inputs={"name": name},
        config={},
        counts={},
        status="partial",
    )
    if judged:
        write_jsonl(join(run, "judge", "judgments.jsonl"), JUDGMENTS)
        write_jsonl(join(run, "judge", "failed.jsonl"), JUDGE_FAILED)
        write_manifest(join(run, "judge"), stage="evaluate.judge", inputs={}, config={}, counts={})


def test_score_and_compare_jobs_write_summary_table_chart(tmp_path, capsys):
    job = load_job()
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    fake_run(a, "model-a", judged=True)
    fake_run(b, "model-b", judged=False)
    assert job.main(["score", "--out", a]) == 0
    assert job.main(["score", "--out", b]) == 0
    summary = json.loads((tmp_path / "a" / "score" / "summary.json").read_text())
    assert summary["model"] == "model-a" and summary["domains"]["all"]["judge"]["failed"] == 2
    table = (tmp_path / "a" / "score" / "table.md").read_text()
    assert "| terminal | 2 | 1 | 50.0 | 95.0 | 87.5 | 100.0 | - | 75.0 |" in table
    assert (tmp_path / "a" / "score" / "chart.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    manifest = json.loads((tmp_path / "b" / "score" / "manifest.json").read_text())
    assert manifest["config"]["metric"] == "rule.rouge_l"  # no judge: rule metric charted

    out = str(tmp_path / "cmp")
    summaries = [f"{a}/score/summary.json", f"{b}/score/summary.json"]
    assert job.main(["compare", "--summaries", *summaries, "--out", out]) == 0
    table = (tmp_path / "cmp" / "table.md").read_text()
    assert "| domain | model-a | model-b |" in table and "| terminal | 87.5 | 87.5 |" in table
    assert (tmp_path / "cmp" / "chart.png").stat().st_size > 1000
    with pytest.raises(ValueError, match="metric: judge has no 'bogus'"):
        job.main(
            ["compare", "--summaries", *summaries[:1], "--out", out, "--metric", "judge.bogus"]
        )
    assert "[evaluate.compare] complete" in capsys.readouterr().out
