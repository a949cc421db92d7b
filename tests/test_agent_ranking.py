"""Ranking agreement: with the real environment standing in for the simulator the two
orderings agree (tau 1) and nothing is inflated; a simulator that answers every action
with success inflates the weak rungs and the report says so; tau's interval comes from
a bootstrap over the tasks (a hand-made case); the ladder's draws nest; the job runs
the ladder against the simulator API and writes its report once."""

from __future__ import annotations

import dataclasses
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from agentworld.agent.config import LimitsConfig, TasksConfig
from agentworld.agent.envs import RealEnv, SimEnv
from agentworld.agent.ladder import answer_rank, ladder, read_answer, rung_actions
from agentworld.agent.ranking import bootstrap_tau, kendall_tau_b, rank, ranking_table
from agentworld.agent.tasks import Task
from agentworld.agent.tasksets import generate_tasks
from agentworld.agent.world import SimAnswer
from agentworld.evaluate.config import RankingConfig
from tests.test_evaluate_score import load_job


@pytest.fixture(scope="module")
def tasks() -> list[Task]:
    return generate_tasks(TasksConfig(families=("search", "terminal"), per_family=4, seed=0))


CFG = RankingConfig(seeds=2, split="all", bootstrap=300, sim_modes=("sim",))


def test_kendall_tau_b_on_hand_cases():
    assert kendall_tau_b([4, 3, 2, 1], [0.9, 0.5, 0.2, 0.1]) == 1.0
    assert kendall_tau_b([4, 3, 2, 1], [1, 2, 3, 4]) == -1.0
    assert kendall_tau_b([1, 1, 0, 0], [1, 1, 0, 0]) == 1.0  # the same ties: full agreement
    assert kendall_tau_b([3, 2, 1], [1, 1, 1]) is None  # a constant side orders nothing
    # one discordant pair of six, no ties: (5 - 1) / 6
    assert kendall_tau_b([4, 3, 2, 1], [4, 3, 1, 2]) == pytest.approx(4 / 6)


def test_tau_interval_comes_from_a_bootstrap_over_the_tasks():
    ladder_real = np.array([[1.0, 0.5, 0.0]] * 4)  # (tasks, rungs): every task ranks alike
    sim = ladder_real.copy()
    sim[3] = [0.0, 0.5, 1.0]  # the simulator reverses the ladder on one task in four
    got = bootstrap_tau(ladder_real, sim, samples=2000, seed=0)
    # On all four tasks the sim's means still fall with the rungs: tau 1. A resample
    # with as many reversed tasks as agreeing ones is constant (no tau); one with more
    # reversed ones (0 or 1 agreeing of 4, p = 0.051; 6% of the defined) gives -1.
    assert got["tau"] == 1.0
    assert got["ci95"] == [-1.0, 1.0]
    assert 0.17 < got["undefined"] / 2000 < 0.25  # P(2 of 4 agreeing) = 0.211
    assert bootstrap_tau(ladder_real, sim, samples=2000, seed=0) == got  # seeded
    agreeing = bootstrap_tau(ladder_real, ladder_real, samples=500)
    assert agreeing["ci95"] == [1.0, 1.0] and agreeing["undefined"] == 0


def test_the_ladder_replaces_nested_shares_of_the_oracle(tasks):
    task = next(t for t in tasks if t.family == "terminal")
    rungs = ladder((0.25, 0.5, 0.75))
    assert [r.name for r in rungs] == ["oracle", "oracle_25", "oracle_50", "oracle_75", "random"]
    assert rung_actions(task, rungs[0], 0) == list(task.solution[:-1])
    for seed in range(20):
        replaced = [
            {
                i
                for i, (a, o) in enumerate(
                    zip(rung_actions(task, r, seed), task.solution, strict=False)
                )
                if a != o
            }
            for r in rungs
        ]
        assert all(lo <= hi for lo, hi in zip(replaced, replaced[1:], strict=False))  # nested
        assert replaced[0] == set() and replaced[-1] == set(range(len(task.solution) - 1))
    assert read_answer(task, "7\nagent@box:~$ ") == "7"
    assert read_answer(task, "agent@box:~$ ") is None


def test_the_oracle_rung_reads_the_result_number_its_answer_names(tasks):
    # Two documents can share a description and its score; the target then ranks second
    # and the oracle answers "2". Read the first result and the oracle rung fails in the
    # real environment itself.
    task = next(t for t in tasks if t.family == "search")
    shown = (
        'Results for "Return self.tzinfo.utcoffset(self)." (2 shown, 9 documents searched):\n'
        "1. datetime.datetime.utcoffset (method) score=12.60\n   Return ...\n"
        "2. datetime.time.utcoffset (method) score=12.60\n   Return ...\n"
    )
    second = dataclasses.replace(task, solution=(*task.solution[:-1], "ANSWER: 2"))
    assert read_answer(second, shown) == "datetime.time.utcoffset"
    named = dataclasses.replace(task, solution=(*task.solution[:-1], "ANSWER: a.b"))
    assert read_answer(named, shown) == "datetime.datetime.utcoffset"
    assert read_answer(dataclasses.replace(task, solution=("x", "ANSWER: 3")), shown) is None


def real() -> RealEnv:
    return RealEnv(LimitsConfig())


def test_with_the_real_environment_as_the_simulator_tau_is_one_and_nothing_inflates(tasks):
    report, results = rank(tasks, {"real": real, "sim": real}, CFG, concurrency=2)
    assert len(results) == 2 * len(tasks) * 5 * CFG.seeds
    for domain, d in report["domains"].items():
        assert d["tau"]["sim"]["tau"] == 1.0, domain
        assert d["tau"]["sim"]["ci95"] == [1.0, 1.0], domain
        assert set(d["inflation"]["sim"].values()) == {0.0}, domain
    real_success = report["domains"]["all"]["success"]["real"]
    assert real_success["oracle"] == 1.0 and real_success["random"] < 0.25
    assert report["domains"]["all"]["real_vs_ladder"] > 0.8  # reality ranks the ladder


class Flattering:
    """A simulator that answers every action with success: whatever the agent did, the
    observation shows it the task's answer, in the shape its family reads."""

    def __init__(self, tasks: list[Task]) -> None:
        self.tasks = tasks
        self.prompts: list = []

    def simulate(self, req) -> SimAnswer:
        # Two tasks may share a question (over other data): their ids tell them apart.
        task = next((t for t in self.tasks if f"[{t.id}]" in req.environment), None)
        task = task or next(t for t in self.tasks if t.prompt in req.environment)
        if task.family == "search":  # the answer at the result number the oracle names
            n = answer_rank(task)
            shown = [*(f"other.doc{i}" for i in range(1, n)), task.answer]
            listed = "".join(
                f"{i}. {d} (function) score=9.99\n   It.\n" for i, d in enumerate(shown, 1)
            )
            text = f'Results for "q" ({n} shown, 794 documents searched):\n{listed}'
        else:
            text = f"{task.answer}\nagent@box:~$ "
        return SimAnswer(observation=text)

    def close(self) -> None:
        pass


def test_a_simulator_that_answers_every_action_with_success_inflates_the_weak_rungs(tasks):
    world = Flattering(tasks)

    def sim() -> SimEnv:
        from agentworld.agent.config import SimConfig

        return SimEnv(LimitsConfig(), world=world, describe=lambda t: f"[{t.id}] Task: {t.prompt}",
                      cfg=SimConfig(), controlled=True)  # fmt: skip

    report, _ = rank(tasks, {"real": real, "sim": sim}, CFG, concurrency=2)
    every = report["domains"]["all"]
    assert set(every["success"]["sim"].values()) == {1.0}  # every rung succeeds in sim
    assert every["inflation"]["sim"]["random"] > 0.75
    assert every["inflation"]["sim"]["oracle"] == 0.0
    assert every["tau"]["sim"]["tau"] is None  # a flat sim ranks nothing
    table = ranking_table(report)
    assert "inflation sim" in table and "undefined (an ordering is constant)" in table
    random_row = next(r for r in table.splitlines() if r.startswith("| all | random"))
    assert f"+{100 * every['inflation']['sim']['random']:.0f}" in random_row


class FlatteringServer:
    """The simulator API's /v1/simulate answering like ``Flattering``."""

    def __init__(self, tasks: list[Task]) -> None:
        world = Flattering(tasks)
        self.calls = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.calls += 1

                class Req:
                    environment = body["environment"]

                data = json.dumps({"observation": world.simulate(Req).observation}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_the_ranking_job_runs_the_ladder_against_the_simulator_api(tasks, tmp_path: Path):
    server = FlatteringServer(generate_tasks(TasksConfig(families=("search",), per_family=3)))
    args = ["ranking", "--out", str(tmp_path), "--set", "agent.sim.backend=serve",
            "--set", f"agent.sim.serve_url={server.url}", "--set", "agent.tasks.families=search",
            "--set", "agent.tasks.per_family=3", "--set", "evaluate.ranking.split=all",
            "--set", "evaluate.ranking.seeds=1", "--set", "evaluate.ranking.bootstrap=50"]  # fmt: skip
    try:
        job = load_job()
        assert job.main(args) == 0
        report = json.loads((tmp_path / "ranking" / "report.json").read_text())
        assert report["sim_modes"] == ["sim", "sim_uncontrolled"]
        d = report["domains"]["search"]
        assert d["tasks"] == 3 and d["inflation"]["sim_uncontrolled"]["random"] > 0.5
        assert "Ranking agreement" in (tmp_path / "ranking" / "report.md").read_text()
        episodes = (tmp_path / "ranking" / "episodes.jsonl").read_text().splitlines()
        assert len(episodes) == 3 * 5 * 3  # tasks x rungs x (real, sim, sim_uncontrolled)
        calls = server.calls
        assert job.main(args) == 0 and server.calls == calls  # finished: nothing rerun
    finally:
        server.close()
