"""One prepare run: the job (what to read, where to write, how), its output directory
with the step markers under ``<out>/_work/``, and the progress lines it prints. Light
to import: the job command line builds a PrepareJob before anything heavy loads."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agentworld.data.config import DataConfig
from agentworld.io import exists, join, read_bytes, write_bytes
from agentworld.io.storage import remove
from agentworld.model.config import ModelConfig

# Settings that may change between a killed run and its resumption.
_RUNTIME_ONLY = ("num_workers", "block_records", "split_bytes", "progress_bars")


@dataclass(frozen=True, kw_only=True)
class PrepareJob:
    """One prepare run: what to read, where to write, how."""

    inputs: tuple[str, ...]
    out: str
    data: DataConfig
    model: ModelConfig
    """The model the samples are for: its tokenizer (``pretrained``) or vocabulary size."""
    seq_len: int
    """Training sequence length (train.seq_len): samples are cut and packed to it."""
    eval_sets: tuple[str, ...] = ()
    recipe_name: str = "custom"
    """Recorded in the manifest."""

    def fingerprint(self) -> dict[str, Any]:
        data = {k: v for k, v in dataclasses.asdict(self.data).items() if k not in _RUNTIME_ONLY}
        return {
            "inputs": list(self.inputs),
            "eval_sets": list(self.eval_sets),
            "data": json.loads(json.dumps(data)),
            "seq_len": self.seq_len,
            "vocab_size": self.model.vocab_size,
            "pretrained": self.model.pretrained,
        }


@dataclass
class RunDir:
    """The output directory, its step markers and its storage options."""

    out: str
    storage_options: dict[str, Any] = field(default_factory=dict)

    def url(self, *parts: str) -> str:
        return join(self.out, *parts)

    def done(self, step: str) -> dict[str, Any] | None:
        """The result a finished step recorded in its marker, or None."""

        url = self.url("_work", f"{step}.done.json")
        if not exists(url, **self.storage_options):
            return None
        return json.loads(read_bytes(url, **self.storage_options))

    def mark(self, step: str, result: dict[str, Any]) -> None:
        """Record that ``step`` finished, with its result."""

        data = json.dumps(result, indent=2, sort_keys=True, default=str).encode()
        write_bytes(self.url("_work", f"{step}.done.json"), data, **self.storage_options)

    def clear(self, *parts: str) -> None:
        remove(self.url(*parts), recursive=True, **self.storage_options)

    def check_fingerprint(self, job: PrepareJob) -> None:
        """Record the run's settings, or refuse to mix runs with different settings."""

        url = self.url("_work", "run.json")
        wanted = job.fingerprint()
        if exists(url, **self.storage_options):
            found = json.loads(read_bytes(url, **self.storage_options))
            diff = sorted(k for k in set(found) | set(wanted) if found.get(k) != wanted.get(k))
            if diff:
                raise ValueError(
                    f"{self.out} holds a prepare run with other settings ({', '.join(diff)} "
                    "differ); use another --out or delete it"
                )
            return
        write_bytes(
            url, json.dumps(wanted, indent=2, sort_keys=True).encode(), **self.storage_options
        )


class Progress:
    """Step lines on stdout: '[prepare] 3/8 count: ... (12.3s)'."""

    def __init__(self, log: Callable[[str], None], steps: tuple[str, ...]) -> None:
        self.log, self.steps, self.t0 = log, steps, time.time()

    def __call__(self, step: str, message: str) -> None:
        n = len(self.steps)
        i = self.steps.index(step) + 1 if step in self.steps else n
        self.log(f"[prepare] {i}/{n} {step}: {message} ({time.time() - self.t0:.1f}s)")
