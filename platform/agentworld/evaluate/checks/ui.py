"""Android and desktop (os) UI checks, on the element lists the ingest adapters write
(``agentworld.data.formats.android_ui``): one element a line, ``[index] kind "text"
desc="..." flags bbox=[...]``.

- ``ui_elements_parse``: the predicted list parses where the real one does: every line
  an element (no more unreadable lines than the real list has), indices unique, boxes
  JSON lists of numbers.
"""

from __future__ import annotations

import json
import re

_QUOTED = r'"(?:[^"\\]|\\.)*"'
_ELEMENT = re.compile(
    rf"^\[(?P<index>\d+)\](?: [A-Za-z_$][\w.$]*)?(?: {_QUOTED})?(?: desc={_QUOTED})?"
    r"(?: [a-z_]+)*(?: bbox=(?P<bbox>\[[^\]]*\]))?$"
)


def element_index(line: str) -> int | None:
    """The index of an element line, or None when the line is not one."""
    m = _ELEMENT.match(line.strip())
    if m is None:
        return None
    if m.group("bbox") is not None:
        try:
            box = json.loads(m.group("bbox"))
        except ValueError:
            return None
        if not all(isinstance(v, int | float) for v in box):
            return None
    return int(m.group("index"))


def parse_elements(text: str) -> tuple[list[int], int]:
    """(indices of the element lines, count of lines that are not elements)."""
    indices, bad = [], 0
    for line in text.split("\n"):
        if not line.strip():
            continue
        index = element_index(line)
        if index is None:
            bad += 1
        else:
            indices.append(index)
    return indices, bad


def ui_elements_parse(predicted: str, real: str) -> bool | None:
    """The predicted element list parses as well as the real one; None when the real
    observation is not an element list."""
    real_indices, real_bad = parse_elements(real)
    if not real_indices:
        return None
    indices, bad = parse_elements(predicted)
    return bool(indices) and bad <= real_bad and len(set(indices)) == len(indices)
