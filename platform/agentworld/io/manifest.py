"""``manifest.json``: what a stage run read, how it was configured, what it produced.

A stage writes its manifest last, atomically; a finished run is one whose manifest has
``status == "complete"``, which is how reruns know to do nothing.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import subprocess
from importlib.metadata import version
from pathlib import Path
from typing import Any

from agentworld.io.storage import exists, join, read_bytes, write_bytes

MANIFEST_NAME = "manifest.json"


def code_version() -> str:
    """The git commit of the code that runs, or the package version outside a checkout."""
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=here,
            capture_output=True,
            text=True,
            timeout=5,
        )
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        pass

    return f"agentworld-{version('agentworld')}"


def _jsonable(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {k: _jsonable(v) for k, v in dataclasses.asdict(obj).items()}
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    return obj


def write_manifest(
    run_url: str,
    *,
    stage: str,
    inputs: list[str] | dict[str, Any],
    config: Any,
    counts: dict[str, Any],
    outputs: dict[str, Any] | None = None,
    status: str = "complete",
    **storage_options: Any,
) -> dict[str, Any]:
    manifest = {
        "stage": stage,
        "status": status,
        "inputs": _jsonable(inputs),
        "config": _jsonable(config),
        "counts": _jsonable(counts),
        "outputs": _jsonable(outputs or {}),
        "code_version": code_version(),
        "written_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }
    data = json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False).encode("utf-8")
    write_bytes(join(run_url, MANIFEST_NAME), data, **storage_options)
    return manifest


def read_manifest(run_url: str, **storage_options: Any) -> dict[str, Any] | None:
    """The run's manifest, or None when the run has none (not started or not finished)."""
    url = join(run_url, MANIFEST_NAME)
    if not exists(url, **storage_options):
        return None
    return json.loads(read_bytes(url, **storage_options))


def is_complete(run_url: str, **storage_options: Any) -> bool:
    m = read_manifest(run_url, **storage_options)
    return bool(m and m.get("status") == "complete")
