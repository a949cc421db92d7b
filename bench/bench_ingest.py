"""Ingest throughput of the adapters (agentworld.data.formats) on the largest JSON
recordings of ../shared/realdata, against reading the same files with ``json.load``
alone: the parse floor, since no adapter reads a JSON file faster than parsing it.

Each format's file is copied --copies times into a temporary folder. Both sides read
every copy in one process: ours as prepare's ingest step reads it (plan_ranges and
read_range: the listing, detection by the file's head, the adapter, validation, each
record's JSON and its ingest row), the floor with ``json.load`` (``json.loads`` per line
for JSONL). Records/s on both sides count the records the adapter makes of the copies.
Each side runs three times, alternated, and its best time counts. The ratio ours/floor
is the share of the parse speed that ingest keeps (1.0 would cost nothing beyond the
parse).

Run:  python bench/bench_ingest.py [--copies 40] [--quick]   -> bench/results/ingest.json
      (the recordings: ../shared/realdata, or $AGENTWORLD_REALDATA)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from _quick import parse_sized
from _results import goal, write_result
from agentworld.data.ingest_rows import ReaderSpec, plan_ranges, read_range

ROOT = Path(__file__).resolve().parents[1]
LARGEST = {
    "openhands": "swe/OpenHands__multi_swe_bench_output.jsonl",
    "mcp_xml": "function_calling/MiroFlow__task_result.mcp_xml.json",
    "openai_chat": "function_calling/tau-bench__gpt-4o-airline.first20.json",
    "intercode": "terminal/intercode__ic_bash_multiturn_gpt-4_10_turns_fs_1.json",
    "swe_agent": "swe/SWE-agent__marshmallow-1867.function_calling_replace.traj",
}
"""The five largest JSON recordings, one per format."""


def ours(folder: Path) -> tuple[int, float]:
    """Records made and seconds, reading the folder as prepare's ingest step does."""
    t0 = time.perf_counter()
    spec = ReaderSpec()
    records = 0
    for r in plan_ranges([str(folder)], split_bytes=1 << 27, storage_options={}):
        for block in read_range(r, spec):
            records += block.column("status").to_pylist().count("ok")
    return records, time.perf_counter() - t0


def floor(files: list[Path]) -> float:
    """Seconds to parse every file with json alone."""
    t0 = time.perf_counter()
    for f in files:
        with open(f, "rb") as fh:
            if f.suffix == ".jsonl":
                for line in fh:
                    if line.strip():
                        json.loads(line)
            else:
                json.load(fh)
    return time.perf_counter() - t0


def measure(src: Path, copies: int, work: Path) -> dict:
    folder = work / src.stem
    folder.mkdir()
    files = [folder / f"copy{k:04d}{src.suffix}" for k in range(copies)]
    for f in files:
        shutil.copyfile(src, f)
    ours(folder)  # imports and first-use costs out of the timing
    best_ours = best_floor = float("inf")
    records = 0
    for _ in range(3):
        best_floor = min(best_floor, floor(files))
        records, s = ours(folder)
        best_ours = min(best_ours, s)
    return {
        "file": str(src.relative_to(src.parents[1])),
        "bytes": src.stat().st_size * copies,
        "records": records,
        "ours_records_per_s": records / best_ours,
        "json_load_records_per_s": records / best_floor,
        "ratio_ours_vs_json_load": best_floor / best_ours,
        "ours_s": best_ours,
        "json_load_s": best_floor,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--copies", type=int, default=40, help="copies of each file read")
    args = parse_sized(p, {"copies": 8}, argv)
    data = Path(os.environ.get("AGENTWORLD_REALDATA") or ROOT.parent / "shared" / "realdata")
    if not data.is_dir():
        print(f"bench_ingest: the recordings are not at {data} (set AGENTWORLD_REALDATA)")
        return 2
    work = Path(tempfile.mkdtemp(prefix="bench-ingest-"))
    try:
        formats = {fmt: measure(data / path, args.copies, work) for fmt, path in LARGEST.items()}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    records = sum(f["records"] for f in formats.values())
    ours_s = sum(f["ours_s"] for f in formats.values())
    floor_s = sum(f["json_load_s"] for f in formats.values())
    ratio = floor_s / ours_s
    result = {
        "copies": args.copies,
        "quick": args.quick,
        "records": records,
        "ours_records_per_s": records / ours_s,
        "json_load_records_per_s": records / floor_s,
        "ratio_ours_vs_json_load": ratio,
        "formats": formats,
    }
    for fmt, f in formats.items():
        print(
            f"{fmt:12} {f['records']:6} records  ours {f['ours_records_per_s']:9.1f}/s  "
            f"json.load {f['json_load_records_per_s']:9.1f}/s  ratio {f['ratio_ours_vs_json_load']:.3f}"
        )
    print(f"{'all':12} {records:6} records  ratio ours/json.load {ratio:.3f}")
    goals = [
        goal(
            "ingest_vs_json_load",
            ratio,
            ">=",
            0.1,
            "records/s of prepare's ingest read (detection, adapter, validation, row) vs "
            "json.load alone on the same five largest real recordings",
        )
    ]
    write_result("ingest", result, goals)
    print(json.dumps({**result, "goals": goals}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
