"""infer against a real OpenAI-compatible HTTP endpoint: killed midway and rerun, the
finished items are kept, the rest completed, none duplicated; endpoint failures are
retried by the next run; then judge and score the run through the job."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentworld.config import ConfigError
from agentworld.io import read_jsonl, write_jsonl
from agentworld.schema import trajectory_to_rows
from agentworld.schema.examples import sample_trajectories
from tests.test_evaluate_helpers import GOOD_VERDICT, Reply, ScriptedChatServer
from tests.test_evaluate_score import load_job

ROOT = Path(__file__).resolve().parents[1]
JUDGE_MARK = "You judge a language world model"


def write_bench(tmp_path: Path) -> tuple[str, list[str]]:
    write_jsonl(str(tmp_path / "awb" / "terminal_test.jsonl"), ROWS)
    return str(tmp_path / "awb"), [f"{r['id']}#{r['turn_idx']}" for r in ROWS]


ROWS = [r for t in sample_trajectories(8, seed=3) for r in trajectory_to_rows(t)]


def wait_for(predicate, what: str, limit_s: float = 120.0) -> None:
    deadline = time.monotonic() + limit_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.2)


def test_interrupted_infer_resumes_without_duplicates_then_judge_and_score(tmp_path):
    bench, keys = write_bench(tmp_path)
    run = tmp_path / "run"
    state = {"phase": 1}

    def script(body: dict, n: int) -> Reply:
        if body["messages"][0]["content"].startswith(JUDGE_MARK):
            bad = "cat notes.txt" in body["messages"][1]["content"].split("## Current action")[1]
            return Reply(text="no verdict" if bad else GOOD_VERDICT)
        if state["phase"] == 1 and n > 10:
            return Reply(text="too late", delay_s=300)  # phase 1 stalls: the run is killed
        return Reply(text=f"<predicted_observation>phase{state['phase']}</predicted_observation>")

    with ScriptedChatServer(script) as server:
        args = ["infer", "--input", bench, "--endpoint", server.base_url, "--out", str(run)]
        args += ["--set", "evaluate.infer.flush_every=4"]
        cmd = [sys.executable, str(ROOT / "jobs" / "evaluate.py"), *args]
        cmd += ["--set", "evaluate.infer.endpoint.concurrency=2"]
        env = {**os.environ, "PYTHONPATH": f"{ROOT / 'platform'}:{ROOT}"}
        log = open(tmp_path / "infer.log", "wb")
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
        parts = run / "infer" / "parts"
        try:
            wait_for(
                lambda: len(list(parts.glob("part-*.jsonl"))) >= 2 or proc.poll() is not None,
                "two parts",
            )
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        log.close()
        assert proc.returncode == -signal.SIGKILL, (tmp_path / "infer.log").read_text()[-2000:]
        kept = {r["key"]: r for p in sorted(parts.glob("part-*.jsonl")) for r in read_jsonl(str(p))}
        assert len(kept) == 8 and not (run / "infer" / "manifest.json").exists()

        state["phase"] = 2
        served_before = len(server.requests)
        job = load_job()
        assert job.main(args) == 0
        redone = len(server.requests) - served_before

        predictions = read_jsonl(str(run / "infer" / "predictions.jsonl"))
        assert [p["key"] for p in predictions] == keys  # every item once, in input order
        assert redone == len(keys) - len(kept)  # finished items were not asked again
        for p in predictions:
            assert p["prediction"] == ("phase1" if p["key"] in kept else "phase2")
        manifest = json.loads((run / "infer" / "manifest.json").read_text())
        assert manifest["status"] == "complete"
        assert manifest["counts"] | {"input_format": "awb"} == {
            "items": len(keys),
            "resumed": 8,
            "predicted": len(keys) - 8,
            "failed": 0,
            "quarantined": 0,
            "input_format": "awb",
        }
        served = len(server.requests)
        assert job.main(args) == 0
        assert len(server.requests) == served  # complete: a rerun does nothing

        assert job.main(["judge", "--out", str(run), "--judge-url", server.base_url]) == 0
        assert job.main(["score", "--out", str(run)]) == 0
    judgments = read_jsonl(str(run / "judge" / "judgments.jsonl"))
    assert [j["key"] for j in judgments] == keys
    invalid = sum("cat notes.txt" == p["messages"][-1]["content"] for p in predictions)
    summary = json.loads((run / "score" / "summary.json").read_text())
    judge = summary["domains"]["terminal"]["judge"]
    assert (judge["valid"], judge["failed"]) == (len(keys) - invalid, invalid)
    assert (
        judge["factuality"] == 50.0
        and summary["model"] == "127.0.0.1:" + server.base_url.split(":")[2].split("/")[0]
    )


def test_endpoint_failures_are_counted_then_retried(tmp_path):
    bench, keys = write_bench(tmp_path)
    broken = {"on": True}

    def script(body: dict, n: int) -> Reply:
        if broken["on"] and body["messages"][-1]["content"] == ROWS[0]["current_prompt"]:
            return Reply(status=500)
        return Reply(text="ok")

    job = load_job()
    run = str(tmp_path / "run")
    with ScriptedChatServer(script) as server:
        args = [
            "infer",
            "--input",
            bench,
            "--endpoint",
            server.base_url,
            "--out",
            run,
            "--set",
            "evaluate.infer.endpoint.max_retries=1",
        ]
        job.main(args)
        manifest = json.loads((tmp_path / "run" / "infer" / "manifest.json").read_text())
        failed = read_jsonl(f"{run}/infer/failed.jsonl")
        assert manifest["status"] == "partial" and manifest["counts"]["failed"] == len(failed) > 0
        assert all(f["error"].startswith("HTTP 500") and f["attempts"] == 2 for f in failed)
        broken["on"] = False
        job.main(args)
    manifest = json.loads((tmp_path / "run" / "infer" / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["counts"]["predicted"] == len(failed)
    assert [p["key"] for p in read_jsonl(f"{run}/infer/predictions.jsonl")] == keys
    with pytest.raises(ValueError, match="holds predictions made with sampling"):
        job.main(
            [*args, "--set", "evaluate.infer.sampling.temperature=0.7"]
        )  # would mix two ways of sampling


def test_the_penalties_reach_the_endpoint_and_the_engine_only_when_set():
    from agentworld.evaluate.placement import sampling_params
    from agentworld.scoring.chat_client import run_sync
    from agentworld.scoring.config import EndpointConfig, SamplingConfig

    plain, penalized = (
        SamplingConfig(),
        SamplingConfig(frequency_penalty=0.4, repetition_penalty=1.1),
    )
    messages = [{"role": "user", "content": "ls"}]
    with ScriptedChatServer(lambda body, n: Reply(text="ok")) as server:
        cfg = EndpointConfig(base_url=server.base_url)
        for sampling in (plain, penalized):
            run_sync(cfg, lambda client, s=sampling: client.complete(messages, s))
    first, second = server.requests
    assert "frequency_penalty" not in first and "repetition_penalty" not in first
    assert (second["frequency_penalty"], second["repetition_penalty"]) == (0.4, 1.1)
    params = sampling_params(dataclasses.asdict(penalized))
    assert (params.frequency_penalty, params.repetition_penalty) == (0.4, 1.1)
    with pytest.raises(ConfigError, match="sampling.repetition_penalty"):
        SamplingConfig(repetition_penalty=0.0)
