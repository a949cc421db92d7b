"""Record filters: each returns keep (None) or the reason to quarantine.

Schema validation itself happens when a line is parsed (agentworld.schema raises a
RecordError naming the field); these filters add the corpus rules on top.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentworld.schema import Trajectory


@dataclass(frozen=True)
class Rejection:
    """Why a filter quarantined a record."""

    error: str
    field: str
    reason: str


class RecordFilter:
    """One rule; ``check`` returns None to keep the record or a Rejection."""

    name = "filter"

    def check(self, traj: Trajectory) -> Rejection | None:
        raise NotImplementedError


@dataclass(frozen=True)
class MinTurns(RecordFilter):
    min_turns: int
    name = "min_turns"

    def check(self, traj: Trajectory) -> Rejection | None:
        if len(traj.turns) >= self.min_turns:
            return None
        return Rejection(
            self.name, "turns", f"{len(traj.turns)} turns, fewer than min_turns {self.min_turns}"
        )


@dataclass(frozen=True)
class MaxChars(RecordFilter):
    max_chars: int
    name = "max_record_chars"

    def check(self, traj: Trajectory) -> Rejection | None:
        n = len(traj.text())
        if n <= self.max_chars:
            return None
        return Rejection(self.name, "turns", f"{n} characters, more than {self.max_chars}")


def build_filters(*, min_turns: int, max_record_chars: int) -> list[RecordFilter]:
    return [MinTurns(min_turns), MaxChars(max_record_chars)]


def first_rejection(traj: Trajectory, filters: list[RecordFilter]) -> Rejection | None:
    for f in filters:
        rejection = f.check(traj)
        if rejection is not None:
            return rejection
    return None
