"""One input unit through its adapter: the format chosen (or detected), every record
or problem it yields with the domain and source its row is counted under. Nothing a
unit holds stops the read: a unit no adapter claims, or an adapter failing on a shape
it never met, is one more Problem."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from agentworld.data.formats.base import Item, Problem, Unit, describe
from agentworld.data.formats.registry import FORMATS, SHARD_FORMATS, detect, lookup

UNCLAIMED = "unclaimed"
"""The source of every unit no adapter claims: one row in the report's source table
however many such files an input holds (each is named in its reason and its input)."""


@dataclass(frozen=True)
class Read:
    """One thing read from a unit: a record or a problem, and where it is counted."""

    item: Item
    domain: str
    source: str


def read_unit(unit: Unit, fmt: str) -> Iterator[Read]:
    """Everything in ``unit`` read as ``fmt`` (``auto``: detected from its head)."""
    name = fmt
    if fmt == "auto":
        name = _detect(unit)
        if name is None:
            tried = ", ".join(FORMATS)
            problem = Problem(position="file", reason=f"no adapter claims it (tried: {tried})")
            yield Read(problem, "unknown", UNCLAIMED)
            return
    elif fmt in SHARD_FORMATS:
        reason = f"data.input_format={fmt} reads only JSONL and Parquet shards"
        yield Read(Problem(position="file", reason=reason), "unknown", f"{fmt}:{unit.label}")
        return
    row = lookup(name)
    source = unit.source(name)
    n = 0
    try:
        for item in row.adapter().read(unit):
            domain = item.domain if not isinstance(item, Problem) else row.domain
            yield Read(item, domain, source)
            n += 1
    except Exception as e:  # noqa: BLE001 - untrusted input: the unit's problem, not the run's
        where = f"after record {n}" if n else "file"
        yield Read(
            Problem(position=where, reason=describe(e), error=type(e).__name__), row.domain, source
        )


def _detect(unit: Unit) -> str | None:
    try:
        head = unit.head()
    except OSError:
        return None
    return detect(unit.url, head)
