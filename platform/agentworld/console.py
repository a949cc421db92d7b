"""What a person running a job sees: one line per stage event and rate-limited
progress lines with a time-left estimate, kept apart from the libraries' own logs.

Stage code calls :func:`say` and :class:`Progress`. A standalone job prints them to
stdout. Under :func:`captured` (the demo runs each stage inside one), the process's
stdout and stderr (file descriptors 1 and 2, so Ray's, Ray Data's and vLLM's output
and C-level writes too) go to the stage's log file, while :func:`say` still reaches
the terminal.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import IO, Any

_sink: IO[str] | None = None
"""Where :func:`say` writes while output is captured; None: sys.stdout."""


def say(line: str) -> None:
    """One line for the person at the terminal."""
    print(line, file=_sink or sys.stdout, flush=True)


def duration(seconds: float) -> str:
    """``75`` -> ``1m15s``; ``3700`` -> ``1h01m``."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


class Every:
    """A gate for rate-limited lines: open at most once per ``every_s`` seconds of
    ``clock``, and whenever forced (a final line, one that carries news)."""

    def __init__(self, every_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.every_s, self.clock = every_s, clock
        self._last = float("-inf")

    def due(self, *, force: bool = False) -> bool:
        now = self.clock()
        if force or now - self._last >= self.every_s:
            self._last = now
            return True
        return False


class Progress:
    """Progress of one stage over ``total`` units (None when unknown), printed at most
    every ``every_s`` seconds and always at the end, with the time left estimated from
    the rate so far."""

    def __init__(self, stage: str, total: int | None, unit: str, *, every_s: float = 5.0) -> None:
        self.stage, self.total, self.unit = stage, total, unit
        self.t0 = time.monotonic()
        self._every = Every(every_s)
        self._first: tuple[int, float] | None = None
        """(done, time) at the first update: the rate is measured from there, so that
        start-up (a cluster, an engine loading) does not count as work."""

    def line(self, done: int, fields: dict[str, Any]) -> str:
        now = time.monotonic()
        elapsed = now - self.t0
        if self._first is None:
            self._first = (done, now)
        head = (
            f"[{self.stage}] {done}/{self.total} {self.unit}"
            if self.total
            else (f"[{self.stage}] {done} {self.unit}")
        )
        parts = [head]
        parts += [f"{k} {_fmt(v)}" for k, v in fields.items()]
        since = now - self._first[1]
        rate = (done - self._first[0]) / since if since > 0 else 0.0
        if self.total and done < self.total and rate > 0:
            parts.append(f"about {duration((self.total - done) / rate)} left")
        elif self.total and done >= self.total:
            parts.append(f"in {duration(elapsed)}")
        return " | ".join(parts)

    def update(self, done: int, **fields: Any) -> None:
        final = self.total is not None and done >= self.total
        if self._every.due(force=final):
            say(self.line(done, fields))


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


@contextlib.contextmanager
def captured(log_path: str) -> Iterator[str]:
    """Send this process's stdout and stderr to ``log_path`` (appended) for the block;
    :func:`say` keeps writing to the terminal. Blocks nest: an inner one switches the
    output to its own file and gives it back to the outer one's at the end. Yields the
    log path."""
    global _sink
    os.makedirs(os.path.dirname(os.path.abspath(log_path)), exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    saved = os.dup(1), os.dup(2)
    outermost = _sink is None
    if outermost:
        _sink = os.fdopen(os.dup(saved[0]), "w", buffering=1)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    try:
        yield log_path
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, log_fd):
            os.close(fd)
        if outermost:
            _sink.close()
            _sink = None
