"""RL checkpoints: ``<out>/checkpoints/step-XXXXXXXX/`` holds the learner's DeepSpeed
checkpoint (model, optimizer, ZeRO partitions) and, written last, ``state.json``; a
directory without it is an interrupted save and is ignored. Only the newest
``keep_checkpoints`` are kept. Context sampling is a function of (seed, step), so the
step number is all the loop itself needs to resume."""

from __future__ import annotations

import json
import re
from typing import Any

from agentworld.io import exists, get_fs, join, read_bytes, write_bytes
from agentworld.io.storage import remove

_STEP_DIR = re.compile(r"step-(\d{8})$")


def checkpoints_url(out_url: str) -> str:
    return join(out_url, "checkpoints")


def tag(step: int) -> str:
    return f"step-{step:08d}"


def complete_steps(out_url: str) -> list[int]:
    root = checkpoints_url(out_url)
    if not exists(root):
        return []
    fs, path = get_fs(root)
    steps = []
    for p in fs.ls(path, detail=False):
        m = _STEP_DIR.search(p.rstrip("/"))
        if m and exists(join(root, m.group(0), "state.json")):
            steps.append(int(m.group(1)))
    return sorted(steps)


def latest_step(out_url: str) -> int:
    """The newest complete checkpoint's step, 0 when there is none."""
    steps = complete_steps(out_url)
    return steps[-1] if steps else 0


def save(workers: Any, out_url: str, step: int, *, keep: int, state: dict[str, Any]) -> None:
    root = checkpoints_url(out_url)
    workers.learners.save(root, tag(step))
    write_bytes(join(root, tag(step), "state.json"), json.dumps({"step": step, **state}).encode())
    for old in complete_steps(out_url)[:-keep]:
        remove(join(root, tag(old)), recursive=True)


def load(workers: Any, out_url: str, step: int) -> dict[str, Any]:
    root = checkpoints_url(out_url)
    workers.learners.load(root, tag(step))
    return json.loads(read_bytes(join(root, tag(step), "state.json")))
