"""Intervals on held-out tasks: per-family success and table F1 with a bootstrap over
the tasks, paired comparisons that carry signal only where the interval excludes zero,
and the report's lines that say so."""

from __future__ import annotations

from agentworld.agent.intervals import (
    agent_intervals,
    comparison_lines,
    comparisons,
    entry,
    interval_text,
    learned_lines,
    paired,
)
from agentworld.agent.report import markdown


def rows(successes: list[int], family: str = "terminal") -> list[dict]:
    return [
        {"task": f"{family}-{i}", "family": family, "score": {"success": bool(s)}}
        for i, s in enumerate(successes)
    ]


def test_entry_is_the_mean_with_a_bootstrap_interval_around_it():
    e = entry([1.0] * 30 + [0.0] * 70)
    assert e["n"] == 100 and abs(e["mean"] - 0.3) < 1e-9
    lo, hi = e["ci95"]
    assert 0.18 < lo < 0.3 < hi < 0.42
    assert entry([1.0])["ci95"] is None and entry([])["mean"] is None


def test_table_tasks_get_item_and_row_f1_intervals():
    table = [
        {
            "task": f"t{i}",
            "family": "table",
            "score": {"success": False, "item_f1": 0.5, "row_f1": 0.25},
        }
        for i in range(4)
    ]
    out = agent_intervals(rows([1, 0, 1, 1]) + table)
    assert set(out) == {"terminal", "table", "all"}
    assert out["table"]["item_f1"]["mean"] == 0.5 and out["table"]["row_f1"]["mean"] == 0.25
    assert "item_f1" not in out["terminal"] and out["terminal"]["success"]["mean"] == 0.75
    assert out["all"]["success"]["n"] == 8


def test_a_comparison_has_signal_only_where_its_interval_excludes_zero():
    better, base = rows([1] * 20 + [0] * 20), rows([0] * 40)
    d = paired(better, base)["terminal"]
    assert d["signal"] and d["ci95"][0] > 0 and abs(d["mean"] - 0.5) < 1e-9
    # The same success rate on different tasks: the pairs cancel, no signal.
    shuffled = rows([0] * 20 + [1] * 20)
    assert not paired(better, shuffled)["terminal"]["signal"]
    assert not paired(base, base)["all"]["signal"]
    assert paired(base, better)["all"]["signal"]  # worse is signal too, with a negative sign


def test_comparisons_cover_the_agents_that_ran_and_the_report_says_which_carry_signal():
    ran = {"untrained": rows([0] * 40), "real": rows([1] * 20 + [0] * 20), "sim": rows([0] * 40)}
    cs = comparisons(ran)
    assert [(c["a"], c["b"]) for c in cs] == [
        ("sim", "untrained"),
        ("real", "untrained"),
        ("real", "sim"),
    ]
    report = {"comparisons": cs}
    lines = comparison_lines(report)
    assert any("RL in real vs untrained, terminal" in x and ": signal" in x for x in lines)
    assert any("RL in sim (controlled) vs untrained" in x and "no signal" in x for x in lines)
    # One family: "all" would repeat each line (and be counted twice as signal).
    assert len(lines) == 3 and not any(", all:" in x for x in lines), lines
    two = {k: v + rows([0] * 10, family="search") for k, v in ran.items()}
    assert sum(", all:" in x for x in comparison_lines({"comparisons": comparisons(two)})) == 3
    assert interval_text(entry([1.0, 0.0]), signed=True).startswith("+50.0 [")
    md = markdown(
        {
            "world_model": "wm",
            "counts": {"eval_tasks": 40},
            "agents": {},
            "comparisons": cs,
            "intervals": {k: agent_intervals(v) for k, v in ran.items()},
        }
    )
    assert "RL in real vs untrained, terminal: success +50.0 [" in md


def test_the_demo_report_shows_the_intervals_and_which_comparisons_carry_signal(tmp_path):
    import json

    from agentworld.report.sections import agent_section

    ran = {"untrained": rows([0] * 40), "real": rows([1] * 20 + [0] * 20), "sim": rows([0] * 40)}
    summary = {"terminal": {"n": 40, "success_rate": 0.5, "item_f1": None, "row_f1": None}}
    report = {
        "agents": {"untrained": {"real_eval": summary}, "real": {"real_eval": summary}},
        "intervals": {k: agent_intervals(v) for k, v in ran.items()},
        "comparisons": comparisons(ran),
    }
    (tmp_path / "agent").mkdir()
    (tmp_path / "agent" / "report.json").write_text(json.dumps(report))
    bench = tmp_path / "agents.json"
    s = agent_section(str(tmp_path), {"agent": {}}, bench=str(bench))
    assert not any(n.startswith("At the benchmark's size") for n in s.notes)  # none there
    bench.write_text(json.dumps({"comparisons": comparisons(ran), "counts": {"eval_tasks": 40}}))
    with_bench = agent_section(str(tmp_path), {"agent": {}}, bench=str(bench)).notes
    at = with_bench.index(next(n for n in with_bench if n.startswith("At the benchmark's size")))
    assert "40 held-out tasks" in with_bench[at]
    assert with_bench[at + 1 :] == [n for n in s.notes if n.startswith("RL in ")]
    assert s.tables[0].rows[1][4].startswith("50.0 [")  # real's success with its interval
    assert any("2 of 3 carry signal" in n for n in s.notes)  # one family: no "all" repeat
    assert any(
        n.startswith("RL in real vs untrained, terminal") and n.endswith(": signal")
        for n in s.notes
    )


def test_learned_lines_name_only_successes_whose_interval_is_above_zero():
    report = {
        "intervals": {
            "untrained": agent_intervals(rows([1] * 6 + [0] * 9)),
            "real": agent_intervals(rows([1] + [0] * 14)),
        },
        "agents": {"untrained": {"heldout_nll_init": 6.9, "heldout_nll": 0.31}},
    }
    lines = learned_lines(report)
    assert len(lines) == 2
    assert lines[0].startswith("- untrained solves 40.0 [") and "terminal" in lines[0]
    assert "6.90 from the world-model checkpoint, 0.31 after" in lines[1]
    # One success in 15 can come from nothing: its interval reaches 0, so no line.
    assert not any(line.startswith("- real") for line in lines)
