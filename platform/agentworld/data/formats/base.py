"""What every adapter shares: the input unit it reads (a file, or a folder read as a
whole, on any fsspec filesystem), the head it is detected by, the Problem it yields for
a part it cannot read, and the small readers of untrusted JSON and text.

An adapter never raises for bad input: each episode it cannot build becomes a Problem
naming its position in the file (``record [3]``, ``line 12``, ``step_2.pkl.gz``), so
that the rest of the file proceeds and every part of it is counted once.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from fsspec import AbstractFileSystem

from agentworld.io import get_fs
from agentworld.schema import RecordError, Trajectory

HEAD_BYTES = 64 * 1024
"""How much of a file detection reads."""

MEDIA_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".webp", ".bmp", ".mp4", ".webm")
"""Files that records point at (screenshots) and that are never input themselves."""


@dataclass(frozen=True, kw_only=True)
class Head:
    """What detection sees of a unit: a file's first bytes, or a folder's entries."""

    text: str = ""
    """The first HEAD_BYTES of a file, decoded (bad UTF-8 replaced); empty for a folder."""
    names: tuple[str, ...] = ()
    """The names inside a folder, sorted; empty for a file."""
    is_dir: bool = False


@dataclass(frozen=True, kw_only=True)
class Problem:
    """A part of a unit that could not be made a record, and why."""

    position: str
    """Where in the unit: ``record [3]``, ``line 12``, ``step_2.pkl.gz``, ``file``."""
    reason: str
    """One line: what is wrong."""
    line: int | None = None
    """The 1-based line, when the position is one."""
    error: str = "RecordError"
    """The kind of error (a RecordError subclass name, or what raised)."""
    raw: str = ""
    """The offending text, when it is at hand (kept in the quarantine, cut)."""


Item = Trajectory | Problem


@dataclass(frozen=True)
class Unit:
    """One input unit: a file, or a folder an adapter reads whole, on any filesystem."""

    url: str
    label: str
    """The unit's path relative to the input it was found under (or its name): the
    ``file`` part of every record's source, stable across machines."""
    storage_options: dict[str, Any] = field(default_factory=dict)

    def fs_path(self) -> tuple[AbstractFileSystem, str]:
        """The unit's filesystem and its path there."""
        return get_fs(self.url, **self.storage_options)

    def is_dir(self) -> bool:
        fs, path = self.fs_path()
        return fs.isdir(path)

    def child(self, name: str) -> str:
        """The URL of ``name`` inside a folder unit (or beside a file unit)."""
        base = self.url.rstrip("/") if self.is_dir() else posixpath.dirname(self.url)
        return f"{base}/{name}"

    def names(self) -> list[str]:
        """Entries of a folder unit (files and folders), sorted."""
        fs, path = self.fs_path()
        return sorted(posixpath.basename(p.rstrip("/")) for p in fs.ls(path, detail=False))

    def exists(self, name: str) -> bool:
        fs, path = get_fs(self.child(name), **self.storage_options)
        return fs.exists(path)

    def read_bytes(self, name: str | None = None) -> bytes:
        fs, path = get_fs(self.child(name) if name else self.url, **self.storage_options)
        with fs.open(path, "rb") as f:
            return f.read()

    def read_text(self, name: str | None = None) -> str:
        """The unit's (or a child's) text; bad UTF-8 is a RecordError naming the byte."""
        data = self.read_bytes(name)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise RecordError(f"invalid UTF-8 at byte {e.start}") from None

    def head(self) -> Head:
        fs, path = self.fs_path()
        if fs.isdir(path):
            return Head(names=tuple(self.names()), is_dir=True)
        with fs.open(path, "rb") as f:
            data = f.read(HEAD_BYTES)
        return Head(text=data.decode("utf-8", errors="replace"))

    def source(self, fmt: str) -> str:
        """A record's ``source``: the format and the file."""
        return f"{fmt}:{self.label}"


# ---- building records --------------------------------------------------------------


ADAPT_ERRORS = (RecordError, KeyError, IndexError, TypeError, ValueError, AttributeError)
"""What building a record from a malformed source raises: any of them is the record's
problem, never the run's."""


def guarded(position: str, build: Callable[[], Trajectory], *, line: int | None = None) -> Item:
    """``build()``, checked, or the Problem naming ``position`` when the source was
    malformed."""
    try:
        return check_record(build())
    except ADAPT_ERRORS as e:
        return Problem(position=position, reason=describe(e), line=line, error=type(e).__name__)


_OPTIONAL_TURN = (
    ("reasoning", str),
    ("screenshot", str),
    ("exit_code", int),
    ("duration_s", float),
)


def check_record(t: Trajectory) -> Trajectory:
    """``t`` if every value has the type its JSON form reads back with: the record's
    constructor checks its own shape, not its turns' field types, and a source holding
    a number where text belongs must fail here, naming the field, not later when the
    record is read again. Metadata and tool arguments must be JSON."""
    for i, turn in enumerate(t.turns):
        for name in ("action", "observation"):
            if type(getattr(turn, name)) is not str:
                raise RecordError(
                    f"expected str, got {type(getattr(turn, name)).__name__}",
                    field=f"turns[{i}].{name}",
                )
        for name, kind in _OPTIONAL_TURN:
            value = getattr(turn, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, kind)):
                raise RecordError(
                    f"expected {kind.__name__}, got {type(value).__name__}",
                    field=f"turns[{i}].{name}",
                )
        call = turn.tool_call
        if call is not None and not (
            isinstance(call.name, str)
            and isinstance(call.arguments, dict)
            and isinstance(call.call_id, str | None)
        ):
            raise RecordError("tool call of the wrong shape", field=f"turns[{i}].tool_call")
    o = t.outcome
    if o is not None and not (
        isinstance(o.success, bool | None)
        and (o.reward is None or (isinstance(o.reward, float) and not isinstance(o.reward, bool)))
        and isinstance(o.note, str | None)
    ):
        raise RecordError("outcome of the wrong shape", field="outcome")
    try:
        json.dumps([[u.metadata, u.tool_call.arguments if u.tool_call else None] for u in t.turns])
    except (TypeError, ValueError) as e:
        raise RecordError(
            f"turn metadata or tool arguments are not JSON: {e}", field="turns"
        ) from None
    return t


def describe(e: BaseException) -> str:
    """One line on what went wrong building a record."""
    if isinstance(e, RecordError):
        text = f"field '{e.field}': {e.reason}" if e.field else e.reason
    elif isinstance(e, KeyError):
        text = f"missing key {e.args[0]!r}" if e.args else "missing key"
    else:
        text = f"{type(e).__name__}: {e}"
    return " ".join(text.split())[:500]


def expect(value: Any, kind: type | tuple[type, ...], where: str) -> Any:
    """``value`` if it is a ``kind``; else a RecordError naming ``where``."""
    if isinstance(value, bool) and kind in (int, float, (int, float)):
        raise RecordError("expected a number, got bool", field=where)
    if not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise RecordError(f"expected {names}, got {type(value).__name__}", field=where)
    return value


def text_of(content: Any, where: str = "content") -> str:
    """A message's text: a string, or the text parts of a list of parts (OpenAI and
    Anthropic style ``[{"type": "text", "text": ...}]``); None is empty."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for k, part in enumerate(content):
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif not isinstance(part, dict):
                raise RecordError(
                    f"expected a text part, got {type(part).__name__}", field=f"{where}[{k}]"
                )
        return "\n".join(parts)
    raise RecordError(f"expected text, got {type(content).__name__}", field=where)


# ---- untrusted JSON ---------------------------------------------------------------------


def json_error(e: json.JSONDecodeError) -> Problem:
    return Problem(
        position=f"line {e.lineno} column {e.colno}",
        reason=f"malformed JSON: {e.msg}",
        line=e.lineno,
        error="MalformedJSONError",
    )


def load_json(unit: Unit, name: str | None = None) -> Any:
    """The unit's (or a child's) JSON document; a RecordError naming the line if bad."""
    text = unit.read_text(name)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        p = json_error(e)
        where = f"{name}, {p.position}" if name else p.position
        raise RecordError(f"{where}: {p.reason}") from None
    except RecursionError:
        raise RecordError("malformed JSON: nested too deeply") from None


_DECODER = json.JSONDecoder()
_WS = " \t\r\n"


def iter_container(text: str) -> Iterator[tuple[str | int, Any] | Problem]:
    """The members of a top-level JSON array (index, value) or object (key, value), one
    at a time, so that a file cut short or broken in the middle still gives every member
    before the break; the break itself is one Problem naming its line. A document that
    is neither an array nor an object is one Problem."""
    try:  # the whole document at the parser's speed; member by member only if broken
        doc = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        pass
    else:
        if isinstance(doc, list):
            yield from enumerate(doc)
            return
        if isinstance(doc, dict):
            yield from doc.items()
            return
    pos = _skip(text, 0)
    if pos >= len(text) or text[pos] not in "[{":
        yield Problem(position="file", reason="expected a JSON array or object", line=1)
        return
    is_list, end = text[pos] == "[", "]" if text[pos] == "[" else "}"
    pos, index = _skip(text, pos + 1), 0
    try:
        while pos < len(text) and text[pos] != end:
            key: str | int = index
            if not is_list:
                key, pos = _DECODER.raw_decode(text, pos)
                pos = _skip(text, pos)
                if text[pos : pos + 1] != ":" or not isinstance(key, str):
                    raise _bad(text, pos, "expected a key and ':'")
                pos = _skip(text, pos + 1)
            value, pos = _DECODER.raw_decode(text, pos)
            yield key, value
            index, pos = index + 1, _skip(text, pos)
            if text[pos : pos + 1] == ",":
                pos = _skip(text, pos + 1)
            elif text[pos : pos + 1] != end:
                raise _bad(text, pos, f"expected ',' or '{end}'")
        if pos >= len(text):
            raise _bad(text, pos, "the document ends before its last member")
    except json.JSONDecodeError as e:
        yield json_error(e)
    except RecursionError:
        yield Problem(position=f"member {index}", reason="malformed JSON: nested too deeply")


def _skip(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in _WS:
        pos += 1
    return pos


def _bad(text: str, pos: int, msg: str) -> json.JSONDecodeError:
    return json.JSONDecodeError(msg, text, min(pos, len(text)))


def has_keys(head: Head, *keys: str) -> bool:
    """Whether the head names every key as a JSON key (``"key":``)."""
    return all(f'"{k}":' in head.text or f'"{k}" :' in head.text for k in keys)
