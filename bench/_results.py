"""Where benchmarks put their figures: bench/results/<name>.json.

Every result names the goals its ratios serve, so that ``bench/summary.py`` can put every
ratio beside its goal in bench/results/SUMMARY.md::

    write_result("dedup", figures, goals=[
        goal("near_dup_vs_datasketch", 5.3, ">=", 5.0, "near-dup records/s vs datasketch MinHashLSH"),
    ])
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path
from typing import Any, Literal

RESULTS = Path(
    os.environ.get("AGENTWORLD_BENCH_RESULTS") or Path(__file__).resolve().parent / "results"
)
"""bench/results, or $AGENTWORLD_BENCH_RESULTS (the tests' short runs keep the figures)."""


def goal(
    name: str,
    value: float,
    op: Literal[">=", "<="],
    target: float,
    serves: str,
) -> dict[str, Any]:
    """One ratio and the goal it serves; ``met`` is computed here, never by hand."""
    met = value >= target if op == ">=" else value <= target
    return {
        "name": name,
        "value": round(float(value), 4),
        "op": op,
        "target": target,
        "met": bool(met),
        "serves": serves,
    }


def machine() -> dict[str, Any]:
    """The cores and load the figures were measured under."""
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    return {
        "cores": os.cpu_count(),
        "load_1m": round(load[0], 2),
        "python": platform.python_version(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }


def write_result(
    name: str, result: dict[str, Any], goals: list[dict[str, Any]] | None = None
) -> Path:
    """Write ``result`` (plus its goals and the machine) as bench/results/<name>.json."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    body = {**result, "goals": goals or [], "machine": machine()}
    path.write_text(json.dumps(body, indent=2, default=str) + "\n")
    return path
