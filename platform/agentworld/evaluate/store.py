"""Resumable result files: finished rows go to ``<dir>/part-XXXXX.jsonl``, one atomically
written file per flush, so a killed run leaves only whole parts behind; a rerun reads
the parts, skips the keys they hold and adds new parts. ``merge`` writes the single
JSONL file a finished stage hands on, in input order.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from agentworld.io import exists, join, list_shards, read_jsonl, write_jsonl

_PART_RE = re.compile(r"part-(\d+)\.jsonl$")


def read_parts(url: str, **storage_options: Any) -> dict[str, dict[str, Any]]:
    """Rows of every part under ``url`` by key; a key repeated in a later part (which the
    writer never produces) keeps its first row."""
    rows: dict[str, dict[str, Any]] = {}
    for part in _parts(url, **storage_options):
        for row in read_jsonl(part, **storage_options):
            rows.setdefault(row["key"], row)
    return rows


def _parts(url: str, **storage_options: Any) -> list[str]:
    if not exists(url, **storage_options):
        return []
    return [
        p for p in list_shards(url, suffixes=(".jsonl",), **storage_options) if _PART_RE.search(p)
    ]


class PartWriter:
    """Buffers finished rows; every ``flush_every`` rows (and on close) writes one part."""

    def __init__(self, url: str, *, flush_every: int, **storage_options: Any) -> None:
        self.url = url
        self.flush_every = flush_every
        self.storage_options = storage_options
        numbers = [int(_PART_RE.search(p).group(1)) for p in _parts(url, **storage_options)]
        self._next = max(numbers, default=-1) + 1
        self._buffer: list[dict[str, Any]] = []
        self.written = 0

    def add(self, row: dict[str, Any]) -> None:
        self._buffer.append(row)
        if len(self._buffer) >= self.flush_every:
            self.flush()

    def flush(self) -> None:
        if not self._buffer:
            return
        name = f"part-{self._next:05d}.jsonl"
        write_jsonl(join(self.url, name), self._buffer, **self.storage_options)
        self._next += 1
        self.written += len(self._buffer)
        self._buffer = []

    def __enter__(self) -> PartWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        # Flushed even when the run fails midway: finished work is never thrown away.
        self.flush()


def merge(
    rows: dict[str, dict[str, Any]], order: Iterable[str], url: str, **storage_options: Any
) -> int:
    """Write the rows whose keys are in ``order``, in that order, as one JSONL file."""
    return write_jsonl(url, (rows[k] for k in order if k in rows), **storage_options)
