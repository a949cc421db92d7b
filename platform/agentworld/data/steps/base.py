"""The contract of a prepare step and what every step is handed.

A step has a name (its marker is ``<out>/_work/<name>.done.json``), a function from
the run's context and the earlier steps' results to its own result, and that result's
type: a dataclass whose fields are the marker's JSON, so that a resumed run reads the
result of a finished step back from its marker instead of redoing it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, Self, TypeVar, cast

import pyarrow as pa

from agentworld.data.job import PrepareJob, Progress, RunDir
from agentworld.data.labels import STATE_FIELDS, Labels, label_block, only_state
from agentworld.data.placement import broadcast, fetch, read_staging
from agentworld.io import read_parquet


class StepResult:
    """Base of the step results (each a dataclass): the marker's JSON and back."""

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
        return cls(**data)


R = TypeVar("R", bound=StepResult)


class Done:
    """The results of the steps run (or found finished) so far, looked up by type:
    ``done[CountResult].eval_threshold``."""

    def __init__(self) -> None:
        self._results: dict[type[StepResult], StepResult] = {}

    def add(self, result: StepResult) -> None:
        self._results[type(result)] = result

    def __getitem__(self, kind: type[R]) -> R:
        return cast(R, self._results[kind])


@dataclass
class StepContext:
    """The job, its run directory and progress printer, and the ingest rows with their
    final state (the dedup labels are broadcast once per run, on first use)."""

    job: PrepareJob
    run_dir: RunDir
    progress: Progress
    _labels: dict[str, Any] | None = field(default=None, repr=False)

    def labelled(self, columns: list[str] | None = None):
        """Ingest rows with their final state (a lazy Ray Dataset); ``columns``: only
        these ingest columns and what the state is found from, read from staging alone
        (names of the state fields the labels add are not read)."""
        if columns is not None:
            columns = sorted({*columns, *LABEL_INPUTS} - {name for name, _ in STATE_FIELDS})
        if self._labels is None:
            url = self.run_dir.url("_work", "labels.parquet")
            self._labels = broadcast(Labels(read_parquet(url, **self.run_dir.storage_options)))
        ds = read_staging(
            self.run_dir.url("_work", "ingest"), self.run_dir.storage_options, columns=columns
        )
        return ds.map_batches(_label, batch_format="pyarrow", fn_kwargs={"holder": self._labels})

    def kept(self, columns: list[str] | None = None):
        """The kept ingest rows (a lazy Ray Dataset); ``columns``: only these (and
        what the state is found from)."""
        return self.labelled(columns).map_batches(
            only_state, batch_format="pyarrow", fn_kwargs={"state": "kept"}
        )


LABEL_INPUTS = ("uid", "status", "contaminated")
"""The ingest columns label_block reads."""


def _label(block: pa.Table, *, holder: dict) -> pa.Table:
    return label_block(block, fetch(holder))


@dataclass(frozen=True)
class Step(Generic[R]):
    """One step of the prepare run, in the order of agentworld.data.run.STEPS."""

    name: str
    result: type[R]
    run: Callable[[StepContext, Done], R]
