"""Where benchmarks put their figures: bench/results/<name>.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def write_result(name: str, result: dict[str, Any]) -> Path:
    """Write ``result`` as bench/results/<name>.json and return the path."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(result, indent=2, default=str) + "\n")
    return path
