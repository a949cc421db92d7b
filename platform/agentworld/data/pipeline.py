"""The prepare pipeline: stages in order, each recorded by a marker under
``<out>/_work/`` when it finishes, so that a killed run resumes at the first unfinished
stage (redoing it from a clean state) and a finished run (``manifest.json`` complete)
does nothing.

  ingest     read + validate + features           -> _work/ingest/ (every input line once)
  dedup      exact + near-dup clusters            -> _work/labels.parquet
  count      per-domain/source/input states, eval split threshold
  audit      quarantine/ contaminated/ duplicates/
  tokenizer  tokenizer/ (trained on kept training text, or the pretrained one)
  tokenize   CPT documents + SFT samples          -> _work/samples/
  pack       packed/{cpt,sft}/{train,eval}/part-XXXXX.parquet (written shards are kept)
  samples    samples/sft/part-XXXXX.parquet
then report.json, the printed table and manifest.json.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agentworld.console import say
from agentworld.data.config import DataConfig
from agentworld.recipes.config import Recipe

STAGES = ("ingest", "dedup", "count", "audit", "tokenizer", "tokenize", "pack", "samples")
# Settings that may change between a killed run and its resumption.
_RUNTIME_ONLY = ("num_workers", "block_records", "split_bytes", "progress_bars")


@dataclass(frozen=True, kw_only=True)
class PrepareJob:
    """One prepare run: what to read, where to write, how."""

    inputs: tuple[str, ...]
    out: str
    recipe: Recipe
    eval_sets: tuple[str, ...] = ()

    @property
    def data(self) -> DataConfig:
        return self.recipe.data

    def fingerprint(self) -> dict[str, Any]:
        data = {k: v for k, v in dataclasses.asdict(self.data).items() if k not in _RUNTIME_ONLY}
        return {
            "inputs": list(self.inputs),
            "eval_sets": list(self.eval_sets),
            "data": json.loads(json.dumps(data)),
            "seq_len": self.recipe.train.seq_len,
            "vocab_size": self.recipe.model.vocab_size,
            "pretrained": self.recipe.model.pretrained,
        }


@dataclass
class RunDir:
    """The output directory, its stage markers and its storage options."""

    out: str
    storage_options: dict[str, Any] = field(default_factory=dict)

    def url(self, *parts: str) -> str:
        from agentworld.io import join

        return join(self.out, *parts)

    def done(self, stage: str) -> dict[str, Any] | None:
        from agentworld.io import exists, read_bytes

        url = self.url("_work", f"{stage}.done.json")
        if not exists(url, **self.storage_options):
            return None
        return json.loads(read_bytes(url, **self.storage_options))

    def mark(self, stage: str, result: dict[str, Any]) -> None:
        from agentworld.io import write_bytes

        data = json.dumps(result, indent=2, sort_keys=True, default=str).encode()
        write_bytes(self.url("_work", f"{stage}.done.json"), data, **self.storage_options)

    def clear(self, *parts: str) -> None:
        from agentworld.io.storage import remove

        remove(self.url(*parts), recursive=True, **self.storage_options)

    def check_fingerprint(self, job: PrepareJob) -> None:
        """Record the run's settings, or refuse to mix runs with different settings."""
        from agentworld.io import exists, read_bytes, write_bytes

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
    """Stage lines on stdout: '[prepare] 3/8 count: ... (12.3s)'."""

    def __init__(self, log: Callable[[str], None]) -> None:
        self.log, self.t0 = log, time.time()

    def __call__(self, stage: str, message: str) -> None:
        i = STAGES.index(stage) + 1 if stage in STAGES else len(STAGES)
        self.log(f"[prepare] {i}/{len(STAGES)} {stage}: {message} ({time.time() - self.t0:.1f}s)")


def prepare(job: PrepareJob, *, log: Callable[[str], None] = say) -> dict[str, Any]:
    """Run (or resume, or skip) the prepare stage; returns the report."""
    from agentworld.data import stages
    from agentworld.data.ray_env import data_context, storage_options_for
    from agentworld.io import is_complete

    check_inputs(job)
    run = RunDir(job.out, storage_options_for(job.out))
    if is_complete(job.out, **run.storage_options):
        run.check_fingerprint(job)
        log(f"[prepare] {job.out} is complete; nothing to do")
        return json.loads(_read(run.url("report.json"), run.storage_options))
    run.check_fingerprint(job)
    progress = Progress(log)
    state: dict[str, Any] = {}
    with data_context(job.data):
        for stage in STAGES:
            result = run.done(stage)
            if result is None:
                result = getattr(stages, f"run_{stage}")(job, run, state, progress)
                run.mark(stage, result)
            else:
                progress(stage, "already done")
            state[stage] = result
    return stages.finish(job, run, state, progress)


def check_inputs(job: PrepareJob) -> None:
    """Every input and evaluation set exists: fail before any work, naming the URL."""
    from agentworld.data.ray_env import storage_options_for
    from agentworld.io import exists

    for kind, urls in (("input", job.inputs), ("eval set", job.eval_sets)):
        for url in urls:
            if not exists(url, **storage_options_for(url)):
                raise FileNotFoundError(f"{kind} {url!r} does not exist")


def _read(url: str, storage_options: dict[str, Any]) -> bytes:
    from agentworld.io import read_bytes

    return read_bytes(url, **storage_options)
