"""Checkers on hand-computed cases: WideSearch item and row F1 (partial, extra, missing
rows, duplicate keys, column-name normalization, number tolerance), the search, terminal
and mcp answer checks, the task file format and the agent config overrides."""

from __future__ import annotations

import json

import pytest

from agentworld.agent.checkers import check_answer, doc_id_of
from agentworld.agent.config import AgentConfig
from agentworld.agent.table_metrics import score_table
from agentworld.agent.tasks import Table, Task, TaskError, read_tasks, write_tasks
from agentworld.config import ConfigError, set_overrides

GOLD = Table(
    columns=("name", "kind", "documented_methods"),
    unique=("name",),
    rows=(("A", "class", "3"), ("B", "function", "0"), ("C", "class", "1"), ("D", "function", "0")),
    metrics={
        "kind": {"metric": "exact"},
        "documented_methods": {"metric": "number", "tolerance": 0.0},
    },
)


def table(*rows: str, header: str = "| name | kind | documented_methods |") -> str:
    return "\n".join([header, "|---|---|---|", *(f"| {r} |" for r in rows)])


def approx(x: float) -> object:
    return pytest.approx(x, abs=1e-9)


def test_perfect_table_scores_one_and_succeeds():
    s = score_table(
        table("A | class | 3", "B | function | 0", "C | class | 1", "D | function | 0"), GOLD
    )
    assert (s.item_f1, s.row_f1, s.success) == (1.0, 1.0, True)


def test_partial_row_counts_its_items_but_not_the_row():
    # B's method count is wrong: rows 3/4 (the row's score is its worst cell), items 11/12.
    s = score_table(
        table("A | class | 3", "B | function | 5", "C | class | 1", "D | function | 0"), GOLD
    )
    assert s.row_precision == approx(0.75) and s.row_recall == approx(0.75)
    assert s.row_f1 == approx(0.75)
    assert s.item_f1 == approx(11 / 12)
    assert not s.success


def test_extra_rows_lower_precision_only():
    s = score_table(
        table(
            "A | class | 3",
            "B | function | 0",
            "C | class | 1",
            "D | function | 0",
            "E | class | 2",
        ),
        GOLD,
    )
    assert (s.row_precision, s.row_recall) == (approx(0.8), approx(1.0))
    assert s.row_f1 == approx(2 * 0.8 / 1.8)
    assert (s.item_precision, s.item_recall) == (approx(12 / 15), approx(1.0))


def test_missing_rows_lower_recall_only():
    s = score_table(table("A | class | 3", "B | function | 0"), GOLD)
    assert (s.row_precision, s.row_recall, s.row_f1) == (approx(1.0), approx(0.5), approx(2 / 3))
    assert (s.item_precision, s.item_recall, s.item_f1) == (approx(1.0), approx(0.5), approx(2 / 3))


def test_duplicate_keys_keep_the_first_row():
    # The second A is dropped, so it neither adds a predicted row nor repairs the first.
    right_first = score_table(table("A | class | 3", "A | class | 9", "B | function | 0"), GOLD)
    assert (right_first.row_precision, right_first.row_recall) == (approx(1.0), approx(0.5))
    wrong_first = score_table(table("A | class | 9", "A | class | 3", "B | function | 0"), GOLD)
    assert (wrong_first.row_precision, wrong_first.row_recall) == (approx(0.5), approx(0.25))
    assert wrong_first.row_f1 == approx(1 / 3)
    assert wrong_first.item_f1 == approx(2 * (5 / 6) * (5 / 12) / (5 / 6 + 5 / 12))


def test_column_names_and_keys_are_normalized_in_any_order():
    answer = table(
        "class | `a` | 3", "function | B | 0", "class | c | 1", "function | **D** | 0",
        header="| **Kind** | Name | Documented Methods |",
    )  # fmt: skip
    assert score_table(f"Here it is:\n{answer}\nDone.", GOLD).success
    renamed = table("A | class | 3", header="| name | type | documented_methods |")
    s = score_table(renamed, GOLD)
    assert (s.item_f1, s.row_f1) == (0.0, 0.0) and "columns" in s.message
    assert score_table("no table here", GOLD).item_f1 == 0.0


def test_number_within_tolerance():
    gold = Table(columns=("city", "population"), unique=("city",), rows=(("X", "100"), ("Y", "2,000")),
                 metrics={"population": {"metric": "number", "tolerance": 0.1}})  # fmt: skip
    near = score_table("| city | population |\n|---|---|\n| X | 105 |\n| Y | 1900 |", gold)
    assert near.row_f1 == 1.0
    far = score_table("| city | population |\n|---|---|\n| X | 111 |\n| Y | about 2000 |", gold)
    assert (far.row_recall, far.item_recall) == (approx(0.5), approx(0.75))


def test_search_terminal_and_mcp_answers():
    search = Task(id="s", family="search", prompt="p", answer="json.loads")
    assert doc_id_of("`json.loads()` parses it") == "json.loads"
    assert check_answer(search, "json.loads").success
    assert not check_answer(search, "json.dumps").success
    assert not check_answer(search, None).success
    terminal = Task(id="t", family="terminal", prompt="p", answer="42")
    assert check_answer(terminal, " 42. ").success and not check_answer(terminal, "41").success
    time = Task(id="m", family="mcp", prompt="p", answer="09:05", state={"answer_kind": "time"})
    assert check_answer(time, "It is 9:05 there.").success
    assert not check_answer(time, "10:05").success
    tab = Task(id="w", family="table", prompt="p", table=GOLD)
    assert check_answer(tab, None).item_f1 == 0.0


def test_task_file_round_trip_and_errors(tmp_path):
    tasks = [
        Task(
            id="s1",
            family="search",
            prompt="find",
            answer="json.loads",
            facts=("f",),
            solution=("a", "ANSWER: x"),
        ),
        Task(id="w1", family="table", prompt="list", table=GOLD, split="eval"),
    ]
    path = str(tmp_path / "tasks.jsonl")
    write_tasks(path, tasks)
    assert read_tasks(path) == tasks
    bad = {
        "family": ({"id": "x", "family": "cooking", "prompt": "p", "answer": "a"}, "family"),
        "answer": ({"id": "x", "family": "search", "prompt": "p"}, "answer"),
        "unknown": ({"id": "x", "family": "search", "prompt": "p", "answer": "a", "colour": 1}, "colour"),
        "table": ({"id": "x", "family": "table", "prompt": "p", "table": {"columns": ["a"], "unique": ["b"], "rows": []}}, "table.unique"),
        "perturbation": ({"id": "x", "family": "search", "prompt": "p", "answer": "a", "perturbations": {"fire": 1}}, "perturbations.fire"),
    }  # fmt: skip
    for name, (row, field) in bad.items():
        p = tmp_path / f"{name}.jsonl"
        p.write_text(json.dumps(row) + "\n")
        with pytest.raises(TaskError) as e:
            read_tasks(str(p))
        assert e.value.field == field and "line 1" in str(e.value), name
    dup = tmp_path / "dup.jsonl"
    dup.write_text((json.dumps(tasks[0].to_dict()) + "\n") * 2)
    with pytest.raises(TaskError, match="line 2.*duplicate"):
        read_tasks(str(dup))


def test_overrides_are_dotted_typed_and_named_when_wrong():
    cfg = set_overrides(
        AgentConfig(),
        ["rl.max_steps=3", "tasks.families=('search',)", "variants=('sim',)"],
        owner="agent",
    )
    assert (cfg.rl.max_steps, cfg.tasks.families, cfg.variants) == (3, ("search",), ("sim",))
    with pytest.raises(ConfigError, match=r"agent\.rl\.max_stepz"):
        set_overrides(AgentConfig(), ["rl.max_stepz=3"], owner="agent")
    with pytest.raises(ConfigError, match=r"agent\.nosuch"):
        set_overrides(AgentConfig(), ["nosuch.x=1"], owner="agent")
    with pytest.raises(ConfigError, match=r"agent\.variants"):
        set_overrides(AgentConfig(), ["variants=('dreaming',)"], owner="agent")
    with pytest.raises(ConfigError, match=r"agent\.limits\.max_tokens"):
        set_overrides(AgentConfig(), ["limits.max_tokens=5000"], owner="agent")


def test_job_command_line_rejects_bad_input_before_any_work(tmp_path, tiny_checkpoint):
    import importlib.util

    spec = importlib.util.spec_from_file_location("agent_job", "jobs/agent.py")
    job = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(job)
    base = ["train", "--world-model", tiny_checkpoint, "--out", str(tmp_path / "out")]
    parsed = job.build_job(job.parse_args([*base, "--set", "agent.rl.max_steps=3"]))
    assert parsed.cfg.rl.max_steps == 3 and parsed.command == "train"
    with pytest.raises(SystemExit) as e:
        job.parse_args([*base, "--bogus-flag", "1"])
    assert e.value.code == 2
    for argv, field in (
        ([*base, "--set", "agent.sim.nosuch=1"], "agent.sim.nosuch"),
        (
            ["train", "--world-model", str(tmp_path / "missing"), "--out", str(tmp_path / "o")],
            "world-model",
        ),
        ([*base, "--data", str(tmp_path / "missing")], "data"),
        (["evaluate", *base[1:], "--agent", "no-path"], "agent"),
    ):
        with pytest.raises(ConfigError) as err:
            job.build_job(job.parse_args(argv))
        assert err.value.field == field
    assert not (tmp_path / "out").exists()
