"""Every benchmark ratio beside its goal: bench/results/*.json -> bench/results/SUMMARY.md.

One row per goal a result records (a result without goals gets one row saying so), with
the size it ran at, when, and the cores and load it was measured under; then a line with
this machine's cores and load now. ``make bench`` and ``make bench-quick`` run it last.

Only the results of the benchmarks are summarized: ``bench/bench_<name>.py`` writes
``<name>.json``. Any other JSON file in the folder (a one-off experiment, a run saved
under another name) is left out and named on stderr; experiments are written up in
docs/experiments.md, not beside the goals.

A benchmark whose result file is not in the folder (results are large or local, and a
checkout may hold only some) keeps the rows the summary already had for it, so that
regenerating the summary after one benchmark loses no other figure.

Run:  python bench/summary.py [--results bench/results] [--benches bench]   (prints the table too)
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import astuple, dataclass
from pathlib import Path
from typing import Any

from _results import RESULTS, machine

BENCHES = Path(__file__).resolve().parent
"""The folder of the ``bench_<name>.py`` benchmarks whose results are summarized."""

COLUMNS = (
    "bench",
    "ratio",
    "value",
    "goal",
    "met",
    "serves",
    "size",
    "measured at",
    "cores",
    "load 1m",
)
GOAL_FIELDS = ("name", "value", "op", "target", "met", "serves")


@dataclass(frozen=True)
class Row:
    """One line of the table: a ratio against its goal, or a result without goals."""

    bench: str
    ratio: str
    value: str
    goal: str
    met: str
    serves: str
    size: str
    measured_at: str
    cores: str
    load: str

    def cells(self) -> tuple[str, ...]:
        return astuple(self)  # the field order is COLUMNS' order


def benchmark_names(folder: Path) -> set[str]:
    """The result names of the benchmarks in ``folder``: ``bench_<name>.py`` -> ``name``."""
    return {p.stem.removeprefix("bench_") for p in folder.glob("bench_*.py")}


def load_results(directory: Path, names: set[str]) -> dict[str, dict[str, Any]]:
    """Every ``<name>.json`` under ``directory`` whose name is in ``names``, by name
    (any other file is named on stderr and left out); a file that is not a result
    object is an error naming it."""
    results = {}
    for path in sorted(directory.glob("*.json")):
        if path.stem not in names:
            print(f"summary: left out {path.name}: no bench_{path.stem}.py", file=sys.stderr)
            continue
        try:
            body = json.loads(path.read_text())
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: not JSON ({e})") from e
        if not isinstance(body, dict):
            raise ValueError(
                f"{path}: a benchmark result is a JSON object, got {type(body).__name__}"
            )
        results[path.stem] = body
    return results


def _size(result: dict[str, Any]) -> str:
    quick = result.get("quick")
    return "unknown" if quick is None else ("quick" if quick else "full")


def rows_of(name: str, result: dict[str, Any]) -> list[Row]:
    """The table rows of one result."""
    where = result.get("machine") or {}
    common = {
        "bench": name,
        "size": _size(result),
        "measured_at": str(where.get("time", "unknown")),
        "cores": str(where.get("cores", "unknown")),
        "load": str(where.get("load_1m", "unknown")),
    }
    goals = result.get("goals") or []
    if not goals:
        return [Row(ratio="no goal recorded", value="", goal="", met="", serves="", **common)]
    rows = []
    for i, g in enumerate(goals):
        missing = [f for f in GOAL_FIELDS if f not in g]
        if missing:
            raise ValueError(f"{name}.json: goal {i} lacks {', '.join(missing)}")
        rows.append(
            Row(
                ratio=str(g["name"]),
                value=f"{g['value']:.3g}",
                goal=f"{g['op']} {g['target']:g}",
                met="yes" if g["met"] else "no",
                serves=str(g["serves"]),
                **common,
            )
        )
    return rows


def kept_rows(previous: str, names: set[str], results: dict[str, Any]) -> list[Row]:
    """The rows of an earlier SUMMARY.md for the benchmarks in ``names`` that have no
    result here, as they were."""
    rows = []
    for line in previous.splitlines():
        if not line.startswith("| "):
            continue
        cells = [c.replace("\\|", "|") for c in re.split(r" \| ", line.strip()[2:-2])]
        if len(cells) == len(COLUMNS) and cells[0] in names and cells[0] not in results:
            rows.append(Row(*cells))
    return rows


def table(rows: list[Row]) -> str:
    """A Markdown table; ``|`` inside a cell is escaped so that it stays one cell."""

    def line(cells: tuple[str, ...]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    out = [line(COLUMNS), line(tuple("---" for _ in COLUMNS))]
    out += [line(r.cells()) for r in rows]
    return "\n".join(out)


def summary(results: dict[str, dict[str, Any]], here: dict[str, Any], kept: list[Row] = ()) -> str:
    """The whole SUMMARY.md: heading, table, counts and this machine's cores and load;
    ``kept`` rows (benchmarks without a result here) stand in their benchmark's place."""
    rows = [row for name, result in results.items() for row in rows_of(name, result)]
    rows = sorted([*rows, *kept], key=lambda r: r.bench)
    goals = [r for r in rows if r.met]
    met = sum(r.met == "yes" for r in goals)
    return "\n".join(
        [
            "# Benchmark summary",
            "",
            "Written by `bench/summary.py` from `bench/results/*.json` (`make bench`, "
            "`make bench-quick`). Each ratio is measured against its baseline in the same run.",
            "",
            table(rows),
            "",
            f"{met} of {len(goals)} goals met, {len(results)} results"
            + (
                f" ({len({r.bench for r in kept})} more kept from the last summary)."
                if kept
                else "."
            ),
            f"Summarized on a machine with {here['cores']} cores, load {here['load_1m']} "
            f"(1-minute average), at {here['time']}.",
            "",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--results", type=Path, default=RESULTS, help="folder of <name>.json")
    p.add_argument("--benches", type=Path, default=BENCHES, help="folder of bench_<name>.py")
    args = p.parse_args(argv)
    if not args.results.is_dir():
        p.error(f"--results {args.results}: no such folder")
    names = benchmark_names(args.benches)
    results = load_results(args.results, names)
    previous = args.results / "SUMMARY.md"
    kept = kept_rows(previous.read_text(), names, results) if previous.is_file() else []
    text = summary(results, machine(), kept)
    (args.results / "SUMMARY.md").write_text(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
