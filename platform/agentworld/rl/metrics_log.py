"""Per-step metrics: ``<out>/metrics.jsonl`` (one JSON object per step, rewritten
atomically, so a resumed run keeps the steps before its checkpoint and no others) and
wandb (offline unless WANDB_MODE says otherwise)."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from typing import Any

from agentworld.console import Progress
from agentworld.io import exists, join, read_bytes, write_bytes
from agentworld.io.manifest import _jsonable


class MetricsLog:
    def __init__(
        self,
        out_url: str,
        *,
        config: Any,
        start_step: int,
        use_wandb: bool,
        max_steps: int | None = None,
    ) -> None:
        self.url = join(out_url, "metrics.jsonl")
        self.progress = Progress("rl", max_steps, "steps", every_s=0.0)
        self.rows = [r for r in self._read() if r["step"] < start_step]
        self.run = _wandb_run(out_url, config) if use_wandb else None

    def _read(self) -> list[dict[str, Any]]:
        if not exists(self.url):
            return []
        return [json.loads(line) for line in read_bytes(self.url).decode().splitlines() if line]

    def __call__(self, step: int, metrics: dict[str, float]) -> None:
        self.rows.append({"step": step, **metrics})
        data = "".join(json.dumps(r, sort_keys=True) + "\n" for r in self.rows)
        write_bytes(self.url, data.encode())
        if self.run is not None:
            self.run.log(metrics, step=step)
        self.progress.update(step + 1, **_progress(metrics))  # steps count from 0

    def close(self) -> None:
        if self.run is not None:
            self.run.finish()


def _progress(m: dict[str, float]) -> dict[str, str]:
    return {
        "reward": f"{m['reward/total']:.3f} (rules {m['reward/rules']:.3f})",
        "len": f"{m['rollout/response_len']:.1f}",
        "kl": f"{m['learner/kl']:.4f}",
        "entropy": f"{m['learner/entropy']:.2f}",
        "rollout": f"{m['time/rollout_s']:.2f}s",
        "sync": f"{m['time/sync_s']:.2f}s ({100 * m['time/sync_share']:.0f}% of step)",
    }


def _wandb_run(out_url: str, config: Any) -> Any:
    import wandb

    os.environ.setdefault("WANDB_MODE", "offline")
    local = (
        out_url.removeprefix("file://")
        if "://" not in out_url or out_url.startswith("file://")
        else tempfile.mkdtemp()
    )
    os.makedirs(local, exist_ok=True)
    run_id = "rl-" + hashlib.sha1(out_url.encode()).hexdigest()[:12]
    return wandb.init(
        project="agentworld",
        job_type="rl",
        id=run_id,
        resume="allow",
        dir=local,
        # Explicit: a process that already ran wandb (the demo's cpt and sft) keeps the
        # settings of its first run, and WANDB_MODE set later would not be read.
        mode=os.environ.get("WANDB_MODE", "offline"),
        config=_jsonable(config),
        settings=wandb.Settings(console="off", silent=True),
    )
