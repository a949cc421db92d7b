"""Baselines on hand-built samples: copy_previous copies the last observation (nothing at
turn 1), retrieval finds the planted training neighbour, and the score job puts both
beside the model with its margin over the best of them, per domain."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from agentworld.evaluate.baselines import Retrieval, copy_previous
from agentworld.io import join, write_jsonl, write_manifest, write_parquet
from agentworld.scoring.metrics import char_f1
from tests.test_evaluate_score import load_job

ENV = "A bash shell in /home/ana on host lab7."


def msgs(*turns: str, env: str = ENV) -> list[dict[str, str]]:
    """system, then alternating actions and observations, ending with an action."""
    out = [{"role": "system", "content": env}]
    for i, text in enumerate(turns):
        out.append({"role": "user" if i % 2 == 0 else "assistant", "content": text})
    return out


def test_copy_previous_is_empty_at_turn_one_and_the_last_observation_later():
    assert copy_previous(msgs("pwd")) == ""
    assert copy_previous(msgs("pwd", "/home/ana", "ls")) == "/home/ana"
    assert copy_previous(msgs("pwd", "/home/ana", "ls", "notes.txt", "ls")) == "notes.txt"


def test_retrieval_finds_the_planted_neighbour():
    noise = [(msgs(f"echo word{i}"), f"word{i}") for i in range(50)]
    planted = (msgs("git log --oneline -3"), "9f1c2ab fix parser\n71aa0e1 add tests")
    index = Retrieval([*noise[:20], planted, *noise[20:]])
    got = index.predict([msgs("cd repo && git log --oneline -5"), msgs("echo word7")])
    assert got == [planted[1], "word7"]
    # A query with no word in the index gets nothing rather than an arbitrary neighbour.
    assert Retrieval([planted]).predict([msgs("zz", env="")]) == [""]
    assert Retrieval([]).predict([msgs("ls")]) == [""]


def _sample(traj: str, turn: int, split: str, messages: list, reference: str) -> dict:
    return {
        "trajectory_id": traj,
        "domain": "terminal" if traj.startswith("t") else "mcp",
        "turn_idx": turn,
        "messages_json": json.dumps(messages),
        "reference": reference,
        "split": split,
    }


SAMPLES = [
    # training split: what retrieval may return
    _sample("t-train", 1, "train", msgs("uname -n"), "lab7"),
    _sample("m-train", 1, "train", msgs('{"name": "now"}', env="MCP time"), "12:00 UTC"),
    # held out: turn 1 (copy has nothing) and turn 2 (copy repeats turn 1)
    _sample("t-eval", 1, "eval", msgs("uname -n"), "lab7"),
    _sample("t-eval", 2, "eval", msgs("uname -n", "lab7", "whoami"), "ana"),
    _sample("m-eval", 1, "eval", msgs('{"name": "now"}', env="MCP time"), "12:05 UTC"),
]


def _infer_run(run: str, samples_url: str, outputs: dict[str, str]) -> None:
    """A run directory as infer leaves it on prepare's eval samples."""
    from agentworld.evaluate.items import load_items

    items = load_items(samples_url, fmt="samples", split="eval").items
    rows = [{**i.to_dict(), "output": outputs[i.key]} for i in items]
    write_jsonl(join(run, "infer", "predictions.jsonl"), rows)
    write_manifest(
        join(run, "infer"),
        stage="evaluate.infer",
        inputs={"input": samples_url, "format": "samples", "split": "eval", "name": "m"},
        config={},
        counts={"input_format": "samples"},
    )


def test_score_job_puts_baselines_beside_the_model(tmp_path):
    samples = str(tmp_path / "samples")
    write_parquet(join(samples, "part-00000.parquet"), pa.Table.from_pylist(SAMPLES))
    run = str(tmp_path / "run")
    model = {"t-eval#1": "lab7", "t-eval#2": "root", "m-eval#1": "12:05 UTC"}
    _infer_run(run, samples, model)
    assert load_job().main(["score", "--out", run]) == 0

    summary = json.loads((tmp_path / "run" / "score" / "summary.json").read_text())
    copy, retr = summary["baselines"]["copy_previous"], summary["baselines"]["retrieval"]
    # copy_previous: "" at turn 1 (F1 0), then turn 1's "lab7" for "ana".
    assert copy["terminal"]["rule"]["char_f1"] == pytest.approx(50 * char_f1("lab7", "ana"))
    assert copy["mcp"]["rule"]["char_f1"] == 0.0
    # retrieval: "lab7" for both terminal turns (the planted train neighbour of uname -n).
    assert retr["terminal"]["rule"]["char_f1"] == pytest.approx(50 * (1 + char_f1("lab7", "ana")))
    assert retr["mcp"]["rule"]["char_f1"] == pytest.approx(100 * char_f1("12:00 UTC", "12:05 UTC"))
    margin = summary["margin"]["terminal"]["char_f1"]
    model_f1 = 50 * (1 + char_f1("root", "ana"))
    assert margin["baseline"] == "retrieval"
    assert margin["margin"] == pytest.approx(model_f1 - retr["terminal"]["rule"]["char_f1"])
    assert summary["margin"]["mcp"]["char_f1"]["margin"] > 0  # the model is exact on mcp
    # Two terminal items pair with retrieval's: turn 1 ties (0), turn 2 differs.
    turn2 = 100 * (char_f1("root", "ana") - char_f1("lab7", "ana"))
    assert margin["paired"] == 2
    assert margin["ci95"] == pytest.approx(sorted([0.0, turn2]))
    assert summary["margin"]["mcp"]["char_f1"]["ci95"] is None  # one item: no interval
    rows = (tmp_path / "run" / "score" / "baselines" / "retrieval.jsonl").read_text()
    assert rows.count("\n") == 3
    table = (tmp_path / "run" / "score" / "table.md").read_text()
    assert "### Against baselines" in table and "vs retrieval [" in table


def test_retrieval_needs_a_training_split_or_the_flag(tmp_path):
    """Input without a training split (AgentWorldBench rows): copy only, unless
    --baseline-train names the training data."""
    samples = str(tmp_path / "samples")
    write_parquet(join(samples, "part-00000.parquet"), pa.Table.from_pylist(SAMPLES))
    run = str(tmp_path / "run")
    _infer_run(run, samples, {"t-eval#1": "x", "t-eval#2": "y", "m-eval#1": "z"})
    manifest = json.loads((tmp_path / "run" / "infer" / "manifest.json").read_text())
    manifest["inputs"]["format"] = manifest["counts"]["input_format"] = "awb"
    (tmp_path / "run" / "infer" / "manifest.json").write_text(json.dumps(manifest))
    job = load_job()
    assert job.main(["score", "--out", run]) == 0
    summary = json.loads((tmp_path / "run" / "score" / "summary.json").read_text())
    assert list(summary["baselines"]) == ["copy_previous"]
    assert job.main(["score", "--out", run, "--baseline-train", samples]) == 0
    summary = json.loads((tmp_path / "run" / "score" / "summary.json").read_text())
    assert summary["baselines"]["retrieval"]["terminal"]["rule"]["exact_match"] == 50.0


def test_margin_interval_is_a_paired_bootstrap_over_the_items():
    from agentworld.evaluate.score import add_baselines, paired_interval, summarize

    assert paired_interval([5.0] * 10) == pytest.approx([5.0, 5.0])
    assert paired_interval([3.0]) is None
    rising = [float(x) for x in range(1, 21)]  # every item better: the interval is too
    low, high = paired_interval(rising)
    assert 0 < low < 10.5 < high < 20
    assert paired_interval(rising) == [low, high]  # seeded: the same items, the same interval

    # Ten items: the model is exact where the baseline is empty and empty where the
    # baseline is exact. The margin is 0 and the interval wide, because items pair by
    # key: paired by position, the baseline's rows in reverse order would tie on every item.
    keys = [f"t-{i}#1" for i in range(10)]
    refs = [f"answer {i}" for i in range(10)]
    model = [
        {"key": k, "domain": "terminal", "output": r if i < 5 else "", "reference": r}
        for i, (k, r) in enumerate(zip(keys, refs, strict=True))
    ]
    base = [{**m, "output": "" if i < 5 else m["reference"]} for i, m in enumerate(model)]
    summary = summarize(model)
    add_baselines(summary, {"retrieval": base[::-1]}, model)
    m = summary["margin"]["terminal"]["char_f1"]
    assert m["margin"] == pytest.approx(0.0) and m["paired"] == 10
    low, high = m["ci95"]
    assert low < -40 and high > 40 and low < m["margin"] < high
