"""Parse a model's raw output into (reasoning, observation)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from agentworld.schema.awb import OBSERVATION_MARKER

_THINK_OPEN = "<think>"
_THINK_CLOSE = "</think>"
_OBS_BLOCK = re.compile(r"<predicted_observation>(.*?)</predicted_observation>", re.DOTALL)
_OBS_OPEN = "<predicted_observation>"


@dataclass(frozen=True, kw_only=True)
class ParsedOutput:
    observation: str
    reasoning: str | None
    had_block: bool
    """True when the observation came from a <predicted_observation> block."""
    complete: bool
    """False when reasoning was never closed or an observation block never ended."""


def split_reasoning(text: str) -> tuple[str | None, str, bool]:
    """Remove <think> blocks, also nested and unclosed ones.

    Returns (reasoning, rest, closed). An unclosed <think> swallows the rest of the text,
    as a model cut off mid-thought has produced no observation.
    """
    out: list[str] = []
    thoughts: list[str] = []
    depth, pos, closed = 0, 0, True
    start = 0
    tag = re.compile(r"<think>|</think>")
    for m in tag.finditer(text):
        if m.group() == _THINK_OPEN:
            if depth == 0:
                out.append(text[pos : m.start()])
                start = m.end()
            depth += 1
        elif depth > 0:
            depth -= 1
            if depth == 0:
                thoughts.append(text[start : m.start()])
                pos = m.end()
        else:
            # A stray </think> with no opener: everything before it was reasoning
            # (chat templates often put the opening tag into the prompt).
            thoughts.append("".join(out) + text[pos : m.start()])
            out = []
            pos = m.end()
    if depth > 0:
        thoughts.append(text[start:])
        closed = False
    else:
        out.append(text[pos:])
    reasoning = "\n".join(t.strip() for t in thoughts if t.strip()) or None
    return reasoning, "".join(out), closed


def join_reasoning(content: str | None, reasoning: str | None) -> str:
    """An answer as the model wrote it, from the parts a reasoning parser split it into
    (an OpenAI-style ``reasoning_content`` and ``content``): the think block, then the
    rest; ``parse_output`` splits it the same way again."""
    if not reasoning:
        return content or ""
    return f"{_THINK_OPEN}\n{reasoning}\n{_THINK_CLOSE}\n\n{content or ''}"


def parse_output(text: str) -> ParsedOutput:
    reasoning, rest, closed = split_reasoning(text)
    blocks = _OBS_BLOCK.findall(rest)
    had_block = bool(blocks)
    complete = closed
    if blocks:
        body = blocks[-1]
    elif _OBS_OPEN in rest:
        body = rest.rsplit(_OBS_OPEN, 1)[1]
        had_block, complete = True, False
    else:
        body = rest
    return ParsedOutput(
        observation=_strip_observation_marker(body.strip()),
        reasoning=reasoning,
        had_block=had_block,
        complete=complete,
    )


def _strip_observation_marker(text: str) -> str:
    # The reference's format answers "**Environment Observation:**\n<observation>"; a
    # model may write a line before the marker: the observation is what follows it.
    if OBSERVATION_MARKER in text:
        text = text.split(OBSERVATION_MARKER, 1)[1]
    return text.strip()


def extract_observation(text: str) -> str:
    return parse_output(text).observation
