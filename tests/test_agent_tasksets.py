"""Generated task sets at scale: a task and its held-out side do not change when more
tasks are generated, no search document or table module is on both sides, every
terminal question kind is solved by its oracle in the real sandbox and failed by a
wrong end state, and a search answer given as a result number is resolved against the
list the environment showed (the wrong number, a number past the list, or a number
with no list shown all fail)."""

from __future__ import annotations

import re

import pytest

from agentworld.agent.checkers import resolve_result_number, shown_results
from agentworld.agent.config import LimitsConfig, TasksConfig
from agentworld.agent.envs import RealEnv
from agentworld.agent.episodes import replay
from agentworld.agent.tasksets import generate_tasks, split_key, tool

FAMILIES = ("search", "table", "terminal")


@pytest.fixture(scope="module")
def big():
    return generate_tasks(TasksConfig(families=FAMILIES, per_family=300))


@pytest.fixture(scope="module")
def real_env():
    env = RealEnv(LimitsConfig(max_turns=8))
    yield env
    env.close()


def test_the_split_of_a_task_does_not_change_when_more_are_generated(big):
    small = generate_tasks(TasksConfig(families=FAMILIES, per_family=40))
    by_id = {t.id: t for t in big}
    assert len(big) == 900
    for t in small:
        assert by_id[t.id] == t, t.id  # the same task, on the same side
    for family in FAMILIES:
        tasks = [t for t in big if t.family == family]
        held = sum(t.split == "eval" for t in tasks)
        assert 0 < held < len(tasks), family


def test_no_search_target_or_table_module_is_on_both_sides(big):
    for family in ("search", "table"):
        sides: dict[str, set[str]] = {}
        for t in big:
            if t.family == family:
                sides.setdefault(split_key(t), set()).add(t.split)
        assert all(len(s) == 1 for s in sides.values()), family
        assert {"train", "eval"} == set().union(*sides.values()), family


def test_terminal_tasks_vary_and_each_kind_is_checked_on_the_end_state(big, real_env):
    terminal = [t for t in big if t.family == "terminal"]
    assert len({t.prompt for t in terminal}) > 150  # not a handful of memorizable prompts
    kinds = {}
    for t in terminal:
        kind = re.search(r"above|below|total|largest|smallest|data rows", t.prompt).group(0)
        kinds.setdefault(kind, t)
    assert len(kinds) == 6
    for t in kinds.values():
        assert replay(real_env, t, t.solution).success, (t.id, t.solution)
        wrong = f"{int(t.answer) + 1}" if t.answer.isdigit() else t.answer + "x"
        ep = replay(real_env, t, [f"echo {wrong} > answer.txt", f"ANSWER: {t.answer}"])
        assert not ep.success, t.id  # the right reply does not save a wrong end state


def test_search_oracles_answer_by_result_number_with_short_queries(big, real_env):
    search = [t for t in big if t.family == "search"]
    numbered = [t for t in search if t.solution[-1].split()[-1].isdigit()]
    assert len(numbered) > 0.9 * len(search)
    for t in numbered[:15]:
        assert replay(real_env, t, t.solution).success, t.id


def test_a_result_number_is_resolved_against_what_the_environment_showed(big, real_env):
    t = next(t for t in big if t.family == "search" and t.solution[-1] == "ANSWER: 1")
    search = t.solution[0]
    assert replay(real_env, t, [search, "ANSWER: 1"]).success
    assert replay(real_env, t, [search, "ANSWER: [1]"]).success
    for wrong in ("ANSWER: 2", "ANSWER: 9", "ANSWER: 0"):
        assert not replay(real_env, t, [search, wrong]).success, wrong
    # A number with no result list shown names nothing.
    assert not replay(real_env, t, ["ANSWER: 1"]).success
    # The latest list counts: after a search for something else, 1 is another document.
    other = tool("search", query="socket connection timeout", k=5)
    assert not replay(real_env, t, [search, other, "ANSWER: 1"]).success


def test_result_numbers_on_hand_cases():
    from agentworld.agent.tasks import Task

    task = Task(id="s", family="search", prompt="p", answer="json.loads")
    shown = 'Results for "x" (2 shown):\n1. json.dumps (function) score=3\n   ...\n2. json.loads (function) score=2'
    history = [("a", shown), ("b", "No document with id 'x'.")]
    assert shown_results(history) == ["json.dumps", "json.loads"]
    assert resolve_result_number(task, "2", history) == "json.loads"
    assert resolve_result_number(task, "#1", history) == "json.dumps"
    assert resolve_result_number(task, "3", history) == "3"
    assert resolve_result_number(task, "json.loads is it", history) == "json.loads is it"
    other = Task(id="t", family="terminal", prompt="p", answer="2")
    assert resolve_result_number(other, "2", history) == "2"
