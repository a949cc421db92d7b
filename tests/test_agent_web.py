"""The web task family: tasks at scale keep their held-out side, every task names a
check on the application's state, and in real Chromium each kind's oracle passes while
a wrong answer or form work left undone fails, the checker reading the database file
Datasette served and the tickets the helpdesk actually stored."""

from __future__ import annotations

import collections
import json

import pytest

from agentworld.agent.checkers import check_web
from agentworld.agent.config import LimitsConfig, TasksConfig
from agentworld.agent.envs import RealEnv, canonical_action
from agentworld.agent.episodes import replay
from agentworld.agent.tasks import Task
from agentworld.agent.tasksets import generate_tasks
from agentworld.agent.webtasks import KINDS, oracle_action, resolve_refs
from agentworld.collect.web.sites import write_database

PAGE = '[12] textbox "Title"\n[15] textbox "Your email"\n[30] combobox "Change status" value="open"'


@pytest.fixture(scope="module")
def tasks():
    return generate_tasks(TasksConfig(families=("web",), per_family=200))


def test_web_tasks_at_scale_keep_their_side_and_name_a_state_check(tasks):
    small = generate_tasks(TasksConfig(families=("web",), per_family=30))
    by_id = {t.id: t for t in tasks}
    assert all(by_id[t.id] == t for t in small)  # same task, same side, whatever the count
    kinds = collections.Counter(t.state["kind"] for t in tasks)
    assert set(kinds) == set(KINDS) and min(kinds.values()) > 20
    held = sum(t.split == "eval" for t in tasks)
    assert 20 < held < 100
    for t in tasks:
        assert t.checks and Task.from_dict(json.loads(json.dumps(t.to_dict()))) == t  # a file line


def test_oracle_element_references_resolve_to_the_ids_the_page_shows():
    assert resolve_refs("fill(@textbox:Title@, 'x')", PAGE) == "fill('12', 'x')"
    assert resolve_refs("select_option(@combobox:Change status@, 'closed')", PAGE) == (
        "select_option('30', 'closed')"
    )
    # A reference the page does not show stays, and the browser refuses the action.
    assert resolve_refs("click(@button:Update@)", PAGE) == "click(@button:Update@)"
    assert canonical_action("web", " click(12) ") == "click('12')"
    assert canonical_action("web", "click the button") == "click the button"


class _Apps:
    """A WebState over a real SQLite file and a helpdesk's ticket list."""

    def __init__(self, db_path: str, tickets: list[dict]) -> None:
        self.db_path, self._tickets = db_path, tickets

    def sql(self, db: str, query: str) -> list[tuple]:
        import sqlite3

        with sqlite3.connect(self.db_path) as con:
            return con.execute(query).fetchall()

    def tickets(self) -> list[dict]:
        return self._tickets


def test_check_web_answers_against_the_state_not_the_task_record(tasks, tmp_path):
    task = next(t for t in tasks if t.state["kind"] == "count")
    db = task.state["databases"][0]
    path = str(tmp_path / "db.sqlite")
    write_database(db, path)
    apps = _Apps(path, [])
    assert check_web(task, task.answer, apps).success
    assert not check_web(task, str(int(task.answer) + 1), apps).success
    assert not check_web(task, None, apps).success
    # The database decides: change its rows and the recorded answer fails.
    import sqlite3

    with sqlite3.connect(path) as con:
        con.execute(f"delete from {db['tables'][-1]['name']}")
    assert not check_web(task, task.answer, apps).success
    form = next(t for t in tasks if t.state["kind"] == "new_ticket")
    fields = dict(form.checks[0]["ticket"])
    assert not check_web(form, "done", _Apps(path, [])).success
    assert check_web(form, None, _Apps(path, [{"id": 99, **fields}])).success
    assert not check_web(
        form, "done", _Apps(path, [{"id": 99, **fields, "priority": "low"}])
    ).success


@pytest.fixture(scope="module")
def web_env():
    env = RealEnv(LimitsConfig(max_turns=12))
    yield env
    env.close()


def test_each_kind_passes_its_oracle_in_chromium_and_fails_undone(tasks, web_env):
    for kind in KINDS:
        task = next(t for t in tasks if t.state["kind"] == kind)
        ep = replay(web_env, task, task.solution, resolve=oracle_action)
        assert ep.success, (kind, ep.score, ep.observations[-1][:300])
        if kind in ("new_ticket", "set_status"):
            # Opening the form and answering, without submitting it, stores nothing.
            wrong = [task.solution[0], "ANSWER: done"]
        else:
            wrong = [task.solution[0], "ANSWER: 7777"]
        bad = replay(web_env, task, wrong, resolve=oracle_action)
        assert not bad.success, (kind, bad.score)
        assert "holds" in bad.score["detail"] or "database says" in bad.score["detail"]


def test_a_web_run_without_a_browser_stops_before_any_work(monkeypatch, tmp_path):
    import dataclasses

    from agentworld.agent.run import load_tasks
    from agentworld.collect.web.env import BrowserUnavailable
    from agentworld.config import set_overrides
    from agentworld.recipes import get_recipe
    from agentworld.recipes.jobs import agent_job

    recipe = get_recipe("debug_cpu")
    recipe = dataclasses.replace(
        recipe, agent=set_overrides(recipe.agent, ["tasks.families=('terminal','web')"])
    )
    job = agent_job(recipe, command="train", out=str(tmp_path / "out"), world_model="unused")
    monkeypatch.setenv("PATH", str(tmp_path))  # no chromium here
    monkeypatch.setenv("PLAYWRIGHT_BROWSERS_PATH", str(tmp_path))
    with pytest.raises(BrowserUnavailable, match="apt-get install -y chromium"):
        load_tasks(job)
