"""asciicast v2 terminal recordings (asciinema): a JSON header line, then one event per
line, ``[time, code, data]`` (``o`` output, ``i`` input, ``r`` resize, ``m`` marker).

The output is played through a terminal emulator (pyte), so that colour codes, cursor
motion, carriage-return progress bars and line edits give the text a person saw, not
the bytes. The screen is as tall as the recording and wide enough that no line wraps;
lines that scroll off the top, or that a clear-screen wipes, are kept in order. The
rendered lines are then split at the shell prompt: a prompt line with a command is a
turn (the command the action, the lines up to the next prompt its output); a prompt
line without one (Enter on an empty prompt) only ends the output before it.

A prompt is the ``PS1`` the header's command or environment sets, or one of the usual
shapes (``bash-5.2$``, ``user@host:~/dir$``, ``[user@host dir]#``, ``$``, ``#``, ``%``).
A broken header quarantines the cast (line 1); a broken event line is quarantined on
its own and the cast is read without it. Domain ``terminal``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pyte

from agentworld.data.formats.base import Head, Item, Problem, Unit, guarded
from agentworld.schema import RecordError, Trajectory, Turn

FORMAT = "asciicast"
MIN_COLUMNS = 1024
"""The emulated screen is at least this wide: a long command line stays one line."""
MAX_LINES = 200_000
"""Lines of output kept; a longer recording keeps its first ones and says so."""
PROMPT_SHAPES = re.compile(
    r"^(?:"
    r"[\w.-]+-\d+(?:\.\d+)*[$#] "  # bash-5.2$
    r"|(?:\([^()\s]+\) )?[\w.-]+@[\w.-]+(?::[^\s$#%>]*)?\s?[$#%] "  # (venv) user@host:~/d$
    r"|\[[\w.-]+@[\w.-]+ [^\]]*\][$#] "  # [user@host dir]$
    r"|[$#%] "  # a bare prompt
    r")"
)
_PS1 = re.compile(r"""PS1=(["'])(.*?)\1""")


def detect(path: str, head: Head) -> bool:
    if path.endswith(".cast"):
        return True
    first = head.text.split("\n", 1)[0]
    try:
        doc = json.loads(first)
    except json.JSONDecodeError:
        return False
    return isinstance(doc, dict) and doc.get("version") == 2 and "width" in doc


def read(unit: Unit) -> Iterator[Item]:
    lines = unit.read_text().splitlines()
    try:
        header = parse_header(lines[0] if lines else "")
    except RecordError as e:
        yield Problem(
            position="line 1",
            reason=f"broken asciicast header: {e.reason}",
            line=1,
            raw=lines[0][:2000] if lines else "",
        )
        return
    events, problems = [], []
    for n, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        try:
            events.append(parse_event(line))
        except RecordError as e:
            problems.append(
                Problem(
                    position=f"line {n}",
                    reason=f"broken event: {e.reason}",
                    line=n,
                    raw=line[:2000],
                )
            )
    yield guarded("file", lambda: build(unit, header, events, skipped=len(problems)))
    yield from problems


def parse_header(line: str) -> dict[str, Any]:
    try:
        header = json.loads(line)
    except json.JSONDecodeError as e:
        raise RecordError(f"not JSON ({e.msg} at column {e.colno})") from None
    if not isinstance(header, dict):
        raise RecordError("not a JSON object")
    if header.get("version") != 2:
        raise RecordError(f"version {header.get('version')!r}, expected 2")
    for key in ("width", "height"):
        value = header.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= 10_000:
            raise RecordError(f"{key} {value!r} is not a screen size")
    return header


def parse_event(line: str) -> tuple[float, str, str]:
    try:
        event = json.loads(line)
    except json.JSONDecodeError as e:
        raise RecordError(f"not JSON ({e.msg} at column {e.colno})") from None
    if (
        not isinstance(event, list)
        or len(event) != 3
        or isinstance(event[0], bool)
        or not isinstance(event[0], int | float)
        or not isinstance(event[1], str)
        or not isinstance(event[2], str)
    ):
        raise RecordError("expected [time, code, data]")
    return float(event[0]), event[1], event[2]


class _Screen(pyte.Screen):
    """A screen that keeps what leaves it: lines scrolled off the top and lines a
    clear-screen wipes, as text, in order."""

    def __init__(self, columns: int, lines: int) -> None:
        super().__init__(columns, lines)
        self.kept: list[str] = []

    def row(self, y: int) -> str:
        line = self.buffer[y]
        return "".join(line[x].data for x in range(max(line) + 1)).rstrip() if line else ""

    def index(self) -> None:
        top, bottom = self.margins or pyte.screens.Margins(0, self.lines - 1)
        if self.cursor.y == bottom and len(self.kept) < MAX_LINES:
            self.kept.append(self.row(top))
        super().index()

    def erase_in_display(self, how: int = 0, *args: Any, **kwargs: Any) -> None:
        if how in (2, 3) or (how == 0 and self.cursor.x == 0 and self.cursor.y == 0):
            rows = [self.row(y) for y in range(self.lines)]
            while rows and not rows[-1]:
                rows.pop()
            self.kept.extend(rows[: max(0, MAX_LINES - len(self.kept))])
        super().erase_in_display(how, *args, **kwargs)

    def text_lines(self) -> list[str]:
        rows = [self.row(y) for y in range(self.lines)]
        while rows and not rows[-1]:
            rows.pop()
        return self.kept + rows


def render(header: dict[str, Any], events: list[tuple[float, str, str]]) -> tuple[list[str], bool]:
    """The lines the recording showed, and whether MAX_LINES cut them."""
    screen = _Screen(max(header["width"], MIN_COLUMNS), header["height"])
    stream = pyte.Stream(screen)
    for _, code, data in events:
        if code == "o":
            stream.feed(data)
        elif code == "r":
            size = re.fullmatch(r"(\d+)x(\d+)", data.strip())
            if size and 0 < int(size.group(2)) <= 10_000:
                screen.resize(
                    lines=int(size.group(2)), columns=max(int(size.group(1)), MIN_COLUMNS)
                )
    return screen.text_lines(), len(screen.kept) >= MAX_LINES


def prompts_of(header: dict[str, Any]) -> tuple[str, ...]:
    """Literal prompts the header sets (``PS1="> " bash``), escapes left out."""
    texts = [str(header.get("command") or "")]
    env = header.get("env") if isinstance(header.get("env"), dict) else {}
    texts.append(str(env.get("PS1") or ""))
    found = [m.group(2) for t in texts for m in _PS1.finditer(t)]
    if env.get("PS1") and "PS1=" not in texts[1]:
        found.append(str(env["PS1"]))
    return tuple(p for p in found if p and "\\" not in p and "$(" not in p)


def command_of(line: str, prompts: tuple[str, ...]) -> str | None:
    """The command on a prompt line ('' for an empty prompt), or None for output."""
    for p in prompts:
        if line.startswith(p):
            return line[len(p) :].strip()
    match = PROMPT_SHAPES.match(line)
    return line[match.end() :].strip() if match else None


def build(unit: Unit, header: dict[str, Any], events: list, *, skipped: int) -> Trajectory:
    lines, cut = render(header, events)
    prompts = prompts_of(header)
    turns: list[Turn] = []
    preamble: list[str] = []
    command: str | None = None
    output: list[str] = []
    for line in lines:
        found = command_of(line, prompts)
        if found is None:
            (output if command is not None else preamble).append(line)
            continue
        if command:
            turns.append(Turn(action=command, observation="\n".join(output).rstrip()))
        command, output = found, []
    if command:
        turns.append(Turn(action=command, observation="\n".join(output).rstrip()))
    if not turns:
        raise RecordError("no shell prompt with a command found in the rendered output")
    return Trajectory(
        id=unit.label,
        domain="terminal",
        source=unit.source(FORMAT),
        environment=_environment(header, preamble),
        turns=tuple(turns),
        metadata={
            "format": FORMAT,
            "prompts": list(prompts),
            "event_lines_skipped": skipped,
            "output_lines_cut": cut,
        },
    )


def _environment(header: dict[str, Any], preamble: list[str]) -> str:
    env = header.get("env") if isinstance(header.get("env"), dict) else {}
    parts = [
        f"Terminal recording: {header.get('title') or 'untitled'}",
        f"Shell: {env.get('SHELL') or 'unknown'}, TERM {env.get('TERM') or 'unknown'}, "
        f"{header['width']}x{header['height']}",
    ]
    if header.get("command"):
        parts.append(f"Command: {header['command']}")
    text = "\n".join(preamble).strip()
    return "\n".join(parts) + (f"\n\n{text}" if text else "")
