"""jobs/distill.py against a real OpenAI-compatible endpoint on 127.0.0.1: a minimal
HTTP server in this test that speaks the routes the openai client uses
(``GET /v1/models``, ``POST /v1/chat/completions``), answers slowly enough for a kill to
land mid-run, and fails one turn for good with HTTP 500. (The project's own serve with
a tiny model answers the same routes but takes about 80 s to start.)

The job resumes after a SIGKILL without asking again for an answered turn, writes each
record once, retries the failing turn and then records it as failed."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from agentworld.schema import Trajectory
from agentworld.schema.examples import sample_trajectories
from tests.conftest import ROOT

FAILING = "cat /nonexistent-distill-probe"  # the action whose turn always gets 500


class Teacher(BaseHTTPRequestHandler):
    asked: Counter = Counter()
    delay_s = 0.3
    hold_after = 4
    """Requests past this many wait for ``gate``: the job stalls with that many turns
    answered, however slowly the test's own polling runs on a loaded machine."""
    gate = threading.Event()
    lock = threading.Lock()
    requests = 0

    def log_message(self, *args) -> None:  # quiet
        pass

    def _send(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._send(200, {"object": "list", "data": [{"id": "teacher", "object": "model"}]})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        prompt = body["messages"][-1]["content"]
        action = prompt.split("## Latest action\n", 1)[1].split("\n\n## Observation", 1)[0]
        with Teacher.lock:
            Teacher.asked[action] += 1
            Teacher.requests += 1
            held = Teacher.requests > Teacher.hold_after
        if held:
            Teacher.gate.wait(timeout=120)
        time.sleep(self.delay_s)
        if action == FAILING:
            self._send(500, {"error": {"message": "teacher overloaded", "type": "server_error"}})
            return
        answer = f"<think>The agent ran {action!r}; the environment answers as recorded.</think>"
        choice = {"index": 0, "finish_reason": "stop"}
        choice["message"] = {"role": "assistant", "content": answer}
        self._send(200, {"id": "x", "object": "chat.completion", "created": 0,
                         "model": "teacher", "choices": [choice]})  # fmt: skip


@pytest.fixture
def teacher():
    Teacher.asked, Teacher.requests, Teacher.gate = Counter(), 0, threading.Event()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Teacher)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    Teacher.gate.set()
    server.shutdown()


def _records(tmp_path) -> tuple[str, list[Trajectory]]:
    trajs = sample_trajectories(8, seed=4)
    last = trajs[-1]
    turn = last.turns[0].__class__(action=FAILING, observation="cat: No such file or directory")
    trajs[-1] = Trajectory(
        id=last.id, domain="terminal", source="t", environment="bash", turns=(turn,)
    )
    path = tmp_path / "raw.jsonl"
    path.write_text("".join(t.to_json() + "\n" for t in trajs))
    return str(path), trajs


def _cmd(inp: str, out: str, teacher: str) -> list[str]:
    cmd = [sys.executable, str(ROOT / "jobs" / "distill.py"), "--input", inp, "--out", out]
    cmd += ["--teacher-url", teacher, "--set", "distill.endpoint.concurrency=2"]
    return cmd + [
        "--set",
        "distill.endpoint.max_retries=2",
        "--set",
        "distill.endpoint.backoff_s=0.05",
    ]


@pytest.mark.slow
def test_distill_resumes_after_a_kill_writes_each_record_once_and_records_failures(
    teacher, tmp_path
):
    inp, trajs = _records(tmp_path)
    out = tmp_path / "distilled"
    cmd = _cmd(inp, str(out), teacher)
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    journal = out / "journal.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # killed once a few turns are in the journal
        if journal.exists() and len(journal.read_text().splitlines()) >= 4:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    Teacher.gate.set()  # the rerun is answered without holding
    answered_before = {
        json.loads(x)["key"] for x in journal.read_text().splitlines() if '"ok"' in x
    }
    turns = sum(len(t.turns) for t in trajs)
    assert 4 <= len(answered_before) < turns
    assert not (out / "records").exists()
    asked_before = sum(Teacher.asked.values())

    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    # Only the turns without an answer were asked after the restart.
    asked_after = sum(Teacher.asked.values()) - asked_before
    assert asked_after <= turns - len(answered_before) + 2  # the failing turn's 2 retries
    assert Teacher.asked[FAILING] >= 3  # first try + 2 retries (more if asked before the kill)
    entries = [json.loads(x) for x in journal.read_text().splitlines()]
    ok = [e["key"] for e in entries if e["status"] == "ok"]
    assert len(ok) == len(set(ok)) == turns - 1  # each turn answered once, none twice
    records = [
        json.loads(x) for x in (out / "records" / "part-00000.jsonl").read_text().splitlines()
    ]
    assert [r["id"] for r in records] == [t.id for t in trajs]  # each record once, in order
    for record, traj in zip(records, trajs, strict=True):
        for turn, original in zip(record["turns"], traj.turns, strict=True):
            assert turn["observation"] == original.observation
            if original.action == FAILING:
                assert "simulator_reasoning" not in turn
            else:
                assert turn["simulator_reasoning"].startswith(f"The agent ran {original.action!r}")
    failed = [json.loads(x) for x in (out / "failed.jsonl").read_text().splitlines()]
    assert [f["key"] for f in failed] == [f"{trajs[-1].id}#1"]
    assert failed[0]["attempts"] == 3 and "HTTP 500" in failed[0]["error"]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "partial" and manifest["counts"]["reasoned"] == turns - 1
    # The distilled records are valid records: prepare reads them.
    from agentworld.io import read_records

    read = read_records(str(out / "records"))
    assert not read.rejected and read.records[0].turns[0].simulator_reasoning
