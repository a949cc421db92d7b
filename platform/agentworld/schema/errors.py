"""Typed errors for bad input. Each names where the problem is (line, field)."""

from __future__ import annotations


class RecordError(ValueError):
    """A record (trajectory, benchmark row, chat conversation) failed validation.

    ``field`` is a dotted path such as ``turns[2].observation``; ``line`` is the 1-based
    line of the shard it came from, when known; ``source`` names the shard.
    """

    def __init__(
        self,
        message: str,
        *,
        field: str | None = None,
        line: int | None = None,
        source: str | None = None,
    ) -> None:
        self.reason = message
        self.field = field
        self.line = line
        self.source = source
        super().__init__(self._render())

    def _render(self) -> str:
        where = []
        if self.source:
            where.append(self.source)
        if self.line is not None:
            where.append(f"line {self.line}")
        if self.field:
            where.append(f"field '{self.field}'")
        prefix = ", ".join(where)
        return f"{prefix}: {self.reason}" if prefix else self.reason

    def located(self, *, line: int | None = None, source: str | None = None) -> RecordError:
        """Return a copy of this error with the line and source filled in."""
        return type(self)(
            self.reason,
            field=self.field,
            line=self.line if line is None else line,
            source=self.source if source is None else source,
        )

    def to_dict(self) -> dict:
        return {
            "error": type(self).__name__,
            "reason": self.reason,
            "field": self.field,
            "line": self.line,
            "source": self.source,
        }


class MalformedJSONError(RecordError):
    """A line is not valid JSON (or not valid UTF-8)."""


class MissingFieldError(RecordError):
    """A required field is absent."""


class WrongTypeError(RecordError):
    """A field has the wrong type."""


class UnknownDomainError(RecordError):
    """The domain is neither built in nor registered."""


class InvalidValueError(RecordError):
    """A field has the right type but a value out of range (e.g. turn_idx)."""
