"""Closed-loop rollouts: the simulator's own earlier observations are the history of
its later turns (the test reads the prompts a scripted model was sent); with a perfect
model the closed-loop and teacher-forced scores are the same; a failed episode is
retried by the next run and finished ones are not asked again; the session API keeps
the history on its side; the in-process engine batches the episodes in flight."""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict
from pathlib import Path

import pytest

from agentworld.agent.ladder import ladder
from agentworld.agent.ranking import ranking_report
from agentworld.evaluate.closed_loop import roll_out, run_closed_loop
from agentworld.evaluate.config import ClosedLoopConfig, InferConfig, RankingConfig
from agentworld.evaluate.drift import drift_png, drift_summary
from agentworld.evaluate.episodes import episodes_from_items
from agentworld.evaluate.items import items_from_trajectory, load_items
from agentworld.evaluate.placement import VLLMPredictor
from agentworld.evaluate.score import add_baselines, summarize
from agentworld.evaluate.simulators import EngineSimulator, Reply, SessionSimulator, Simulator
from agentworld.io import read_jsonl
from agentworld.report import build_report
from agentworld.schema import Trajectory, Turn
from agentworld.scoring.config import SamplingConfig
from tests.test_evaluate_helpers import Reply as HTTPReply
from tests.test_evaluate_helpers import ScriptedChatServer
from tests.test_evaluate_score import load_job

PROMPT = "$ "
TERMINAL = Trajectory(
    id="ep-a",
    domain="terminal",
    source="test",
    environment="A Linux terminal running bash in /home/a.\nThe screen shows:\n$ ",
    turns=(
        Turn(action="ls", observation=f"notes.txt\n{PROMPT}"),
        Turn(action="cat notes.txt", observation=f"hello\n{PROMPT}"),
        Turn(action="wc -l notes.txt", observation=f"1 notes.txt\n{PROMPT}"),
        Turn(
            action="cat gone.txt", observation=f"cat: gone.txt: No such file or directory\n{PROMPT}"
        ),
    ),
)
UTC = {"timezone": "UTC", "datetime": "2026-01-05T09:00:00+00:00", "is_dst": False}
MCP = Trajectory(
    id="ep-b",
    domain="mcp",
    source="test",
    environment="An MCP server, mcp-time 1.0, over stdio.",
    turns=(
        Turn(action='{"name": "get_current_time", "arguments": {"timezone": "UTC"}}',
             observation=json.dumps(UTC)),
        Turn(action='{"name": "get_current_time", "arguments": {"timezone": "Mars/Base"}}',
             observation="Error executing tool get_current_time: Invalid timezone: Mars/Base"),
        Turn(action='{"name": "get_current_time", "arguments": {"timezone": "UTC"}}',
             observation=json.dumps(UTC)),
    ),
)  # fmt: skip
EPISODES = {t.id: t for t in (TERMINAL, MCP)}
SCRIPTED = "SCRIPTED-TURN-2: nothing here"


def write_records(tmp_path: Path) -> str:
    path = tmp_path / "records" / "part-00000.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("".join(t.to_json() + "\n" for t in EPISODES.values()))
    return str(path.parent)


def real_turn(messages: list[dict]) -> tuple[Trajectory, int]:
    """Which episode and turn a prompt asks for: the system text, and the number of
    actions in it."""
    traj = next(t for t in EPISODES.values() if messages[0]["content"] == t.environment)
    return traj, sum(m["role"] == "user" for m in messages)


def test_later_turns_see_the_scripted_turn_two_in_their_history(tmp_path):
    def script(body: dict, n: int) -> HTTPReply:
        traj, k = real_turn(body["messages"])
        if traj.id == "ep-a" and k == 2:
            return HTTPReply(
                text=f"<think>x</think><predicted_observation>{SCRIPTED}</predicted_observation>"
            )
        return HTTPReply(text=traj.turns[k - 1].observation)

    run = tmp_path / "run"
    with ScriptedChatServer(script) as server:
        args = ["closed-loop", "--input", write_records(tmp_path), "--endpoint", server.base_url,
                "--out", str(run), "--set", "evaluate.closed_loop.episodes_in_flight=2"]  # fmt: skip
        assert load_job().main(args) == 0
    asked = [
        r["messages"]
        for r in server.requests
        if r["messages"][0]["content"] == TERMINAL.environment
    ]
    real2 = TERMINAL.turns[1].observation
    for k in (3, 4):
        at_k = [m for m in asked if sum(x["role"] == "user" for x in m) == k]
        seen = sorted(m[4]["content"] for m in at_k)  # turn 2's observation in the history
        assert seen == sorted([SCRIPTED, real2]), k  # closed loop: its own; teacher-forced: real
        closed = next(m for m in at_k if m[4]["content"] == SCRIPTED)
        # Its own turn 1: the real text as the parser reads it (surrounding blanks off).
        assert closed[2]["content"] == TERMINAL.turns[0].observation.strip()
    assert sum(sum(x["role"] == "user" for x in m) == 1 for m in asked) == 1  # one prompt

    rows = {r["key"]: r for r in read_jsonl(str(run / "closed_loop" / "rows.jsonl"))}
    assert rows["ep-a#2@closed_loop"]["prediction"] == SCRIPTED
    assert rows["ep-a#2@teacher_forced"]["prediction"] == SCRIPTED  # the script's turn 2
    assert rows["ep-a#3@closed_loop"]["prediction"] == TERMINAL.turns[2].observation.strip()
    drift = json.loads((run / "closed_loop" / "drift.json").read_text())
    turn2 = drift["domains"]["terminal"]["turns"]["2"]
    assert turn2["closed_loop"]["exact_match"] == turn2["teacher_forced"]["exact_match"] == 0.0
    assert turn2["closed_loop"]["checks"] < 100.0  # no prompt, no line of output
    assert drift["domains"]["mcp"]["drift"]["char_f1"] == 0.0
    manifest = json.loads((run / "closed_loop" / "manifest.json").read_text())
    assert manifest["status"] == "complete"
    assert manifest["counts"] | {"shared": 0} == {
        "episodes": 2, "resumed": 0, "rolled_out": 2, "failed": 0, "turns": 7, "shared": 0,
        "items_left_out": 0, "quarantined": 0,
    }  # fmt: skip
    assert manifest["counts"]["shared"] == 1 + 3  # ep-a's turn 1, every turn of ep-b
    assert (run / "closed_loop" / "drift.png").stat().st_size > 0


class Perfect(Simulator):
    """A perfect model of the environments: given the real history it answers the real
    observation of the turn asked for; any other history gets another answer. With
    ``wrong_at``, it answers that turn of ep-a wrongly even so."""

    def __init__(self, wrong_at: int | None = None) -> None:
        self.wrong_at = wrong_at

    async def ask(self, messages: list[dict]) -> Reply:
        traj, k = real_turn(messages)
        real = [{"role": "system", "content": traj.environment}]
        for turn in traj.turns[: k - 1]:
            real += [{"role": "user", "content": turn.action},
                     {"role": "assistant", "content": turn.observation}]  # fmt: skip
        real.append({"role": "user", "content": traj.turns[k - 1].action})
        obs = traj.turns[k - 1].observation if messages == real else "off the real history"
        if traj.id == "ep-a" and k == self.wrong_at:
            obs = SCRIPTED
        return Reply(output=obs, observation=obs)


def episodes():
    items = [i for t in EPISODES.values() for i in items_from_trajectory(t)]
    return episodes_from_items(items)[0]


def test_perfect_model_scores_the_same_closed_loop_and_teacher_forced(tmp_path):
    counts = run_closed_loop(episodes(), Perfect, ClosedLoopConfig(), str(tmp_path))
    assert counts.turns == counts.shared == 7  # every pair of prompts was the same
    rows = read_jsonl(str(tmp_path / "rows.jsonl"))
    assert len(rows) == 14
    summary = drift_summary(rows)
    for domain, entry in summary["domains"].items():
        for turn, e in [("all", entry), *entry["turns"].items()]:
            assert e["closed_loop"] == e["teacher_forced"], (domain, turn)
            assert e["closed_loop"]["exact_match"] == 100.0 and e["drift"]["char_f1"] == 0.0
            assert e["closed_loop"]["checks"] == 100.0


def test_one_mistake_compounds_closed_loop_and_shows_as_drift(tmp_path):
    run_closed_loop(episodes(), lambda: Perfect(wrong_at=2), ClosedLoopConfig(), str(tmp_path))
    terminal = drift_summary(read_jsonl(str(tmp_path / "rows.jsonl")))["domains"]["terminal"]
    em = {k: (e["teacher_forced"]["exact_match"], e["closed_loop"]["exact_match"])
          for k, e in terminal["turns"].items()}  # fmt: skip
    # Turn 2 is wrong either way; after it only the closed loop is off the real history.
    assert em == {"1": (100.0, 100.0), "2": (0.0, 0.0), "3": (100.0, 0.0), "4": (100.0, 0.0)}
    assert terminal["turns"]["4"]["drift"]["exact_match"] == 100.0
    assert terminal["drift"]["exact_match"] == 50.0


def test_a_failed_episode_is_retried_and_finished_ones_are_not_asked_again(tmp_path):
    broken = {"on": True}

    def script(body: dict, n: int) -> HTTPReply:
        traj, k = real_turn(body["messages"])
        if traj.id == "ep-b" and k == 2 and broken["on"]:
            return HTTPReply(status=400)  # final: not retried within the run
        return HTTPReply(text=traj.turns[k - 1].observation)

    run = tmp_path / "run"
    with ScriptedChatServer(script) as server:
        args = ["closed-loop", "--input", write_records(tmp_path), "--endpoint", server.base_url,
                "--out", str(run)]  # fmt: skip
        job = load_job()
        assert job.main(args) == 0
        out = run / "closed_loop"
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["status"] == "partial" and manifest["counts"]["failed"] == 1
        assert [f["id"] for f in read_jsonl(str(out / "failed.jsonl"))] == ["ep-b"]
        assert {r["id"] for r in read_jsonl(str(out / "rows.jsonl"))} == {"ep-a"}

        broken["on"] = False
        before = len(server.requests)
        assert job.main(args) == 0
        again = server.requests[before:]
        assert {real_turn(r["messages"])[0].id for r in again} == {"ep-b"}
        assert len(again) == 3  # the perfect answers: one request per turn
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["status"] == "complete"
        assert (manifest["counts"]["resumed"], manifest["counts"]["rolled_out"]) == (1, 1)
        keys = [r["key"] for r in read_jsonl(str(out / "rows.jsonl"))]
        assert len(keys) == len(set(keys)) == 14 and keys[0] == "ep-a#1@teacher_forced"
        served = len(server.requests)
        assert job.main(args) == 0 and len(server.requests) == served  # complete: nothing asked


class FakeSessions:
    """The session API's client methods over an in-memory store; the simulator answers
    from the history it holds, the way the real service renders it."""

    def __init__(self) -> None:
        self.sessions: dict[str, dict] = {}
        self.calls: list[tuple] = []

    def _answer(self, environment: str, history: list[dict], action: str) -> str:
        traj = next(t for t in EPISODES.values() if t.environment == environment)
        k = len(history) + 1
        if traj.id == "ep-a" and k == 2:
            return SCRIPTED
        return f"after [{' | '.join(h['observation'][:6] for h in history)}]"

    def create_session(self, domain: str, **spec) -> dict:
        sid = f"s{len(self.sessions)}"
        self.sessions[sid] = {"environment": spec["environment"], "history": []}
        self.calls.append(("create", domain))
        return {"id": sid, "system": spec["environment"], "max_turns": 64}

    def step(self, sid: str, action: str) -> dict:
        s = self.sessions[sid]
        obs = self._answer(s["environment"], s["history"], action)
        s["history"].append({"action": action, "observation": obs})
        return {"observation": obs, "finish_reason": "stop"}

    def simulate(self, domain: str, action: str, **spec) -> dict:
        return {"observation": self._answer(spec["environment"], spec["history"], action)}

    def delete_session(self, sid: str) -> dict:
        self.calls.append(("delete", sid))
        return {"deleted": sid}


def test_the_session_api_keeps_the_closed_loop_history_on_its_side(tmp_path):
    client = FakeSessions()
    ep = next(e for e in episodes() if e.id == "ep-a")

    sim = SessionSimulator(client, InferConfig(sampling=SamplingConfig(max_tokens=64)))
    rows, _ = asyncio.run(roll_out(sim, ep))
    got = {(r["turn_idx"], r["mode"]): r["prediction"] for r in rows}
    # Turn 3 closed loop: the session's own turn-2 answer is in its history.
    assert got[(3, "closed_loop")] == "after [after  | SCRIPT]"
    assert got[(3, "teacher_forced")] == "after [notes. | hello\n]"
    assert [c[0] for c in client.calls] == ["create", "delete"]


@pytest.mark.slow
def test_the_in_process_engine_batches_the_episodes_in_flight(vllm_engine, tmp_path):
    sampling = asdict(SamplingConfig(max_tokens=8))
    sim = EngineSimulator(VLLMPredictor.around(vllm_engine, sampling))
    items = load_items(write_records(tmp_path), fmt="record").items
    eps, _ = episodes_from_items(items)
    counts = run_closed_loop(eps, lambda: sim, ClosedLoopConfig(), str(tmp_path / "out"))
    assert (counts.rolled_out, counts.failed, counts.turns) == (2, 0, 7)
    assert max(sim.batches) >= 2  # both episodes' turns went to the engine together
    rows = {r["key"]: r for r in read_jsonl(str(tmp_path / "out" / "rows.jsonl"))}
    assert len(rows) == 14
    first = rows["ep-a#1@closed_loop"]
    assert first["output"] == rows["ep-a#1@teacher_forced"]["output"]  # same prompt, one answer


def test_the_run_report_shows_checks_drift_tau_and_inflation(tmp_path):
    run = tmp_path / "run"
    eval_dir = run / "eval"
    rows = [
        {"key": "t#1", "domain": "terminal", "output": "x", "prediction": "x",
         "reference": TERMINAL.turns[3].observation},
    ]  # fmt: skip
    summary = summarize(rows, model="sft")
    add_baselines(summary, {"copy_previous": [{**rows[0], "prediction": "", "output": ""}]}, rows)
    (eval_dir / "score").mkdir(parents=True)
    (eval_dir / "score" / "summary.json").write_text(json.dumps(summary))
    run_closed_loop(
        episodes(), lambda: Perfect(wrong_at=2), ClosedLoopConfig(), str(eval_dir / "closed_loop")
    )
    drift = drift_summary(read_jsonl(str(eval_dir / "closed_loop" / "rows.jsonl")), model="sft")
    (eval_dir / "closed_loop" / "drift.json").write_text(json.dumps(drift))
    (eval_dir / "closed_loop" / "drift.png").write_bytes(drift_png(drift))
    results = [
        {"task": f"t{i}", "domain": "search", "rung": rung, "mode": mode,
         "success": (mode == "sim") or rung == "oracle"}
        for i in range(3) for rung in ("oracle", "random") for mode in ("real", "sim")
    ]  # fmt: skip
    ranking = ranking_report(results, ladder(()), ["sim"], RankingConfig(bootstrap=50))
    (eval_dir / "ranking").mkdir()
    (eval_dir / "ranking" / "report.json").write_text(json.dumps(ranking))

    md = (Path(build_report(str(run))) / "report.md").read_text()
    section = md.split("## Fidelity (sim vs real, held-out turns)")[1].split("\n## ")[0]
    assert "| terminal | 1 | 5.6 | 0.0 | 33.3 | 0.0 | 0.0 | 33.3 |" in section  # checks ok
    assert "| terminal | error_agrees | 1 | 0.0 | 0.0 |" in section
    assert "| terminal | 4 | 1 | 100.0 | 57.7 | +42.3 |" in section  # drift at turn 4
    assert "| search | random | 0.0 | 100.0 | +100 |" in section  # inflation
    assert (
        "Kendall tau-b, real vs simulated ranking of the ladder, search (3 tasks): sim "
        "undefined" in section
    )
    assert "![char F1 by turn" in section and (run / "report" / "drift.png").exists()
