"""Terminal state checks: what a shell screen must get right beyond its words.

- ``prompt_end``: where the real screen ends with the shell prompt, the predicted one
  ends with the same prompt (user, host and working directory are state);
- ``error_agrees``: an error message where the real command failed, none where it
  succeeded;
- ``line_count``: the output's line count within a factor of two of the real one.
"""

from __future__ import annotations

import re

# The last line of a screen is a prompt when it ends like one ($, #, >, %) and is short.
_PROMPT = re.compile(r"^.{0,120}[$#>%]$")
_ERROR = re.compile(
    r"No such file or directory|command not found|Permission denied|Not a directory"
    r"|Is a directory|cannot (?:access|open|stat|remove|create|read)|Operation not permitted"
    r"|(?:invalid|unrecognized|illegal) option|missing (?:file )?operand|syntax error"
    r"|Traceback \(most recent call last\)|unbound variable|bad substitution"
    r"|Directory not empty|File exists|Segmentation fault|^(?:fatal|error|E): "
    r"|^[A-Za-z]*Error: |^\S+: line \d+: ",
    re.M,
)
LINE_FACTOR = 2.0
"""How far the predicted output's line count may be from the real one (either way)."""


def _lines(text: str) -> list[str]:
    return text.replace("\r\n", "\n").rstrip("\n").split("\n")


def prompt_line(text: str) -> str | None:
    """The screen's last line when it is a shell prompt, else None."""
    last = _lines(text)[-1].rstrip()
    return last if _PROMPT.match(last) else None


def has_error(text: str) -> bool:
    """Whether the screen shows a failed command: a shell or tool error message."""
    return bool(_ERROR.search(text))


def output_text(text: str) -> str:
    """The screen's output, the closing prompt left out."""
    lines = _lines(text)
    if prompt_line(text) is not None:
        lines = lines[:-1]
    return "\n".join(lines)


def output_lines(text: str) -> int:
    """Lines of output on the screen, the closing prompt left out."""
    return sum(1 for line in output_text(text).split("\n") if line.strip())


def prompt_end(predicted: str, real: str) -> bool | None:
    """The predicted screen ends with the real one's prompt; None when the real screen
    does not end with a prompt (a program still running, a session that ended)."""
    want = prompt_line(real)
    if want is None:
        return None
    return prompt_line(predicted) == want


def error_agrees(predicted: str, real: str) -> bool:
    """An error message on the predicted screen exactly where the real one shows one."""
    return has_error(predicted) == has_error(real)


def line_count(predicted: str, real: str) -> bool:
    """The predicted output has within ``LINE_FACTOR`` times the real one's lines
    (counted plus one, so that zero and one line are close)."""
    p, r = output_lines(predicted) + 1, output_lines(real) + 1
    return max(p, r) / min(p, r) <= LINE_FACTOR
