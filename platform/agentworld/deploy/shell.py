"""The part of POSIX sh a RayJob entrypoint may use, read the way ``/bin/sh -c`` reads
it on the head (Ray's job supervisor runs the entrypoint so): simple commands joined
by ``&&``, words quoted with ``'...'``, ``"..."`` or ``\\``, variables set by an earlier
command of the line (``RUN=$(date -u +%Y%m%d) && python jobs/collect.py --out
s3://b/$RUN/raw``) and ``$(date ...)``, the one command substitution understood here.

Everything else a shell would do (pipes, ``;``, ``||``, redirections, backquotes, other
substitutions, variables the line does not set) is refused with the reason: the
validator checks each job's arguments as the shell will hand them over, so it must know
them. ``$(date ...)`` is evaluated at a fixed instant, ``SAMPLE_TIME``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
import shlex

SAMPLE_TIME = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
"""When ``$(date ...)`` is taken to run, for the check."""
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_OPERATORS = ("&&", "||", ";;", "|", ";", "&", "<", ">", "(", ")", "`", "\n")
_DATE_FORMAT = re.compile(r"(%[YmdHMSjFTyUuVGgeIpaAbBhZ%]|[^%])*")


class ShellError(ValueError):
    """The line uses shell the validator does not read; the message says what."""


@dataclasses.dataclass(frozen=True)
class Expansion:
    """``$NAME`` (``name`` set) or ``$(command)`` (``command`` set)."""

    name: str | None = None
    command: str | None = None


@dataclasses.dataclass(frozen=True)
class Word:
    """One shell word: literal text and expansions, each part quoted or not."""

    parts: tuple[tuple[str | Expansion, bool], ...]

    @property
    def literal(self) -> str | None:
        """The word's text when it holds no expansion."""
        if all(isinstance(p, str) for p, _ in self.parts):
            return "".join(p for p, _ in self.parts)
        return None

    @property
    def expands(self) -> bool:
        return self.literal is None


def split_line(text: str) -> list[list[Word]]:
    """The commands of an ``&&`` line, each a list of words (raises ShellError)."""
    commands: list[list[Word]] = [[]]
    reader = _Reader(text)
    while True:
        reader.skip_blanks()
        if reader.done:
            break
        if reader.text.startswith("&&", reader.i):
            if not commands[-1]:
                raise ShellError("'&&' without a command before it")
            reader.i += 2
            commands.append([])
            continue
        for op in _OPERATORS:
            if reader.text.startswith(op, reader.i):
                raise ShellError(f"{op!r} is not read here: join commands with && only")
        if reader.peek == "#":
            raise ShellError("a comment ('#') is not read here")
        commands[-1].append(reader.word())
    if not commands[-1]:
        raise ShellError("the line is empty" if len(commands) == 1 else "it ends with '&&'")
    return commands


class _Reader:
    """A cursor over the line that reads one word at a time."""

    def __init__(self, text: str) -> None:
        self.text, self.i = text, 0

    @property
    def done(self) -> bool:
        return self.i >= len(self.text)

    @property
    def peek(self) -> str:
        return self.text[self.i]

    def skip_blanks(self) -> None:
        while not self.done and self.peek in " \t":
            self.i += 1

    def word(self) -> Word:
        parts: list[tuple[str | Expansion, bool]] = []
        while not self.done and self.peek not in " \t" and not self._at_operator():
            c = self.peek
            if c == "'":
                end = self.text.find("'", self.i + 1)
                if end < 0:
                    raise ShellError("a ' quote is not closed")
                parts.append((self.text[self.i + 1 : end], True))
                self.i = end + 1
            elif c == '"':
                self.i += 1
                parts += self._double_quoted()
            elif c == "\\":
                parts.append((self.text[self.i + 1 : self.i + 2], True))
                self.i += 2
            elif c == "$":
                parts.append((self._dollar(), False))
            else:
                parts.append((c, False))
                self.i += 1
        return Word(tuple(parts))

    def _at_operator(self) -> bool:
        return any(self.text.startswith(op, self.i) for op in _OPERATORS)

    def _double_quoted(self) -> list[tuple[str | Expansion, bool]]:
        parts: list[tuple[str | Expansion, bool]] = []
        while not self.done and self.peek != '"':
            c = self.peek
            if c == "\\" and self.text[self.i + 1 : self.i + 2] in ('"', "\\", "$", "`"):
                parts.append((self.text[self.i + 1], True))
                self.i += 2
            elif c == "$":
                parts.append((self._dollar(), True))
            elif c == "`":
                raise ShellError("backquotes are not read here; use $(date ...)")
            else:
                parts.append((c, True))
                self.i += 1
        if self.done:
            raise ShellError('a " quote is not closed')
        self.i += 1
        return parts

    def _dollar(self) -> str | Expansion:
        rest = self.text[self.i + 1 :]
        if rest.startswith("(("):
            raise ShellError("arithmetic $((...)) is not read here")
        if rest.startswith("("):
            end = rest.find(")")
            if end < 0 or "(" in rest[1:end]:
                raise ShellError("a $( substitution is not closed, or is nested")
            self.i += end + 2
            return Expansion(command=rest[1:end])
        if rest[:1] and rest[0] in "0123456789?$!#@*-":
            raise ShellError(f"${rest[0]} is not read here: its value is not known before the run")
        braced = rest.startswith("{")
        m = _NAME.match(rest, 1 if braced else 0)
        if m is None or (braced and not rest.startswith("}", m.end())):
            self.i += 1
            return "$"
        self.i += 1 + m.end() + (1 if braced else 0)
        return Expansion(name=m.group())


def expand(commands: list[list[Word]]) -> list[list[str]]:
    """The argument lists the shell hands to each program, after running the line's
    assignments (a command made only of ``NAME=value`` words) in order. Raises
    ShellError for an expansion the validator cannot know."""
    variables: dict[str, str] = {}
    argvs = []
    for words in commands:
        assigns = [_assignment(w) for w in words]
        if all(assigns):
            for name, value in assigns:
                variables[name] = _text(value, variables, split=False)
            continue
        if assigns[0]:
            raise ShellError(
                f"{assigns[0][0]}=... before a program: set job variables in runtimeEnvYAML env_vars"
            )
        argvs.append([_text(w, variables, split=True) for w in words])
    return argvs


def _assignment(word: Word) -> tuple[str, Word] | None:
    first, quoted = word.parts[0] if word.parts else ("", True)
    if quoted or not isinstance(first, str):
        return None
    head = ""
    for i, (part, quoted) in enumerate(word.parts):
        if quoted or not isinstance(part, str):
            return None
        if part == "=":
            return (head, Word(word.parts[i + 1 :])) if _NAME.fullmatch(head) else None
        head += part
    return None


def _text(word: Word, variables: dict[str, str], *, split: bool) -> str:
    out = ""
    for part, quoted in word.parts:
        if isinstance(part, str):
            out += part
            continue
        value = _value(part, variables)
        if split and not quoted and any(c.isspace() for c in value):
            raise ShellError(f"{_show(part)} holds spaces: the shell would split it; quote it")
        out += value
    return out


def _value(part: Expansion, variables: dict[str, str]) -> str:
    if part.name is not None:
        if part.name not in variables:
            raise ShellError(
                f"${part.name} is not set earlier on the line, so its value is unknown"
            )
        return variables[part.name]
    return run_date(part.command or "")


def run_date(command: str) -> str:
    """What ``date [-u] [+FORMAT]`` prints at SAMPLE_TIME (the only substitution read)."""
    argv = shlex.split(command)
    if not argv or argv[0] != "date":
        raise ShellError(f"$({command}) is not read here: only $(date [-u] [+FORMAT]) is")
    rest = argv[1:]
    if rest[:1] == ["-u"]:
        rest = rest[1:]
    if len(rest) > 1 or (rest and not rest[0].startswith("+")):
        raise ShellError(f"$({command}): only date [-u] [+FORMAT] is read here")
    fmt = rest[0][1:] if rest else "%a %b %e %H:%M:%S %Z %Y"
    if not _DATE_FORMAT.fullmatch(fmt):
        raise ShellError(
            f"$({command}): use plain text and %Y %m %d %H %M %S %F %T %j in the format"
        )
    return SAMPLE_TIME.strftime(fmt)


def _show(part: Expansion) -> str:
    return f"${part.name}" if part.name is not None else f"$({part.command})"
