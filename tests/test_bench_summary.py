"""bench/summary.py: every ratio in bench/results/*.json beside its goal in SUMMARY.md;
goal() decides ``met``; --quick replaces a benchmark's default sizes only."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from bench import summary
from bench._quick import parse_sized
from bench._results import goal

MACHINE = {"cores": 2, "load_1m": 3.5, "python": "3.11.0", "time": "2026-01-02T03:04:05"}


def write(directory: Path, name: str, body: dict) -> None:
    (directory / f"{name}.json").write_text(json.dumps(body))


def bench_folder(tmp_path: Path, *names: str) -> Path:
    """A folder holding an empty ``bench_<name>.py`` per name: the benchmarks summarized."""
    folder = tmp_path / "benches"
    folder.mkdir(exist_ok=True)
    for name in names:
        (folder / f"bench_{name}.py").write_text("")
    return folder


def table_rows(text: str) -> list[list[str]]:
    """The body rows of the Markdown table, as cells."""
    lines = [line for line in text.splitlines() if line.startswith("| ")]
    return [[c.strip() for c in line.strip("|").split(" | ")] for line in lines[2:]]


def test_goal_met_for_both_directions() -> None:
    assert goal("speedup", 1.5, ">=", 1.5, "x")["met"] is True
    assert goal("speedup", 1.49, ">=", 1.5, "x")["met"] is False
    assert goal("share", 0.1, "<=", 0.1, "x")["met"] is True
    assert goal("share", 0.11, "<=", 0.1, "x")["met"] is False
    assert goal("errors", 0, "<=", 0, "x")["met"] is True
    assert goal("errors", 1, "<=", 0, "x")["met"] is False


def test_summary_table_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(
        tmp_path,
        "serve",
        {
            "quick": True,
            "throughput_ratio": 11.2,
            "goals": [
                goal("concurrent_vs_sequential", 11.2, ">=", 5.0, "many sessions at once"),
                goal("errors", 2, "<=", 0, "no failed step"),
            ],
            "machine": MACHINE,
        },
    )
    write(tmp_path, "tokenize", {"ratio": 0.5, "machine": {**MACHINE, "load_1m": 9.0}})
    assert summary.main(["--results", str(tmp_path)]) == 0
    text = (tmp_path / "SUMMARY.md").read_text()
    assert capsys.readouterr().out == text  # printed as written
    rows = table_rows(text)
    assert rows == [
        [
            "serve",
            "concurrent_vs_sequential",
            "11.2",
            ">= 5",
            "yes",
            "many sessions at once",
            "quick",
            MACHINE["time"],
            "2",
            "3.5",
        ],
        [
            "serve",
            "errors",
            "2",
            "<= 0",
            "no",
            "no failed step",
            "quick",
            MACHINE["time"],
            "2",
            "3.5",
        ],
        ["tokenize", "no goal recorded", "", "", "", "", "unknown", MACHINE["time"], "2", "9.0"],
    ]
    assert "1 of 2 goals met, 2 results." in text
    assert "Summarized on a machine with" in text and "cores, load" in text


def test_summary_lists_only_the_results_of_benchmarks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A JSON file no ``bench_<name>.py`` writes (a one-off experiment) is no row of the
    table, even with goals of its own, and is named on stderr."""
    serves = "many sessions at once"
    write(tmp_path, "serve", {"goals": [goal("speedup", 6.0, ">=", 5.0, serves)]})
    write(tmp_path, "probe", {"goals": [goal("search_gap", 0.7, ">=", 1.0, "a probe")]})
    argv = ["--results", str(tmp_path), "--benches", str(bench_folder(tmp_path, "serve"))]
    assert summary.main(argv) == 0
    text = (tmp_path / "SUMMARY.md").read_text()
    assert [row[:2] for row in table_rows(text)] == [["serve", "speedup"]]
    assert "1 of 1 goals met, 1 results." in text
    assert "left out probe.json: no bench_probe.py" in capsys.readouterr().err


def test_summary_keeps_the_rows_of_a_benchmark_whose_result_is_not_here(
    tmp_path: Path,
) -> None:
    """Regenerating after one benchmark keeps the other benchmarks' rows, as they were
    (a pipe inside a cell included), when their result files are not in the folder; a
    benchmark with a result gets its rows from it, and a row of no benchmark goes."""
    benches = bench_folder(tmp_path, "serve", "train", "dedup", "gone")
    write(tmp_path, "serve", {"goals": [goal("speedup", 6.0, ">=", 5.0, "old")]})
    write(tmp_path, "train", {"goals": [goal("vs_plain", 0.9, ">=", 0.8, "a | b")]})
    write(tmp_path, "dedup", {"goals": [goal("ratio", 2.0, ">=", 1.0, "dedup")]})
    write(tmp_path, "gone", {"goals": [goal("r", 1.0, ">=", 1.0, "gone")]})
    argv = ["--results", str(tmp_path), "--benches", str(benches)]
    assert summary.main(argv) == 0
    before = table_rows((tmp_path / "SUMMARY.md").read_text())
    assert [r[0] for r in before] == ["dedup", "gone", "serve", "train"]
    (tmp_path / "train.json").unlink()
    write(tmp_path, "serve", {"goals": [goal("speedup", 9.0, ">=", 5.0, "new")]})
    (tmp_path / "gone.json").unlink()  # ... and a benchmark goes with its result
    (benches / "bench_gone.py").unlink()
    assert summary.main(argv) == 0
    text = (tmp_path / "SUMMARY.md").read_text()
    after = table_rows(text)
    assert [r[:3] for r in after] == [
        ["dedup", "ratio", "2"],
        ["serve", "speedup", "9"],
        ["train", "vs_plain", "0.9"],
    ]
    assert after[2] == next(r for r in before if r[0] == "train")
    assert "a \\| b" in text
    assert "3 of 3 goals met, 2 results (1 more kept from the last summary)." in text


def test_summary_names_a_bad_result_file(tmp_path: Path) -> None:
    argv = ["--results", str(tmp_path), "--benches", str(bench_folder(tmp_path, "broken"))]
    (tmp_path / "broken.json").write_text('{"goals": [')
    with pytest.raises(ValueError, match="broken.json: not JSON"):
        summary.main(argv)
    (tmp_path / "broken.json").write_text(json.dumps({"goals": [{"name": "r", "value": 1.0}]}))
    with pytest.raises(ValueError, match="broken.json: goal 0 lacks op, target, met, serves"):
        summary.main(argv)


def test_quick_sizes_replace_defaults_not_explicit_flags() -> None:
    def parser() -> argparse.ArgumentParser:
        p = argparse.ArgumentParser()
        p.add_argument("--items", type=int, default=64)
        p.add_argument("--steps", type=int, default=20)
        return p

    quick = {"items": 8, "steps": 2}
    full = parse_sized(parser(), quick, [])
    assert (full.quick, full.items, full.steps) == (False, 64, 20)
    small = parse_sized(parser(), quick, ["--quick", "--steps", "5"])
    assert (small.quick, small.items, small.steps) == (True, 8, 5)
    with pytest.raises(ValueError, match="no option of this benchmark: \\['itmes'\\]"):
        parse_sized(parser(), {"itmes": 8}, [])
