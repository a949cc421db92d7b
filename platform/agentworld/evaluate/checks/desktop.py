"""Desktop (os) checks on the screens ``agentworld.collect.os`` records: an ``Error:``
line when the action failed, a ``Window:`` line with the focused window's title, then
the accessibility tree one element a line (``[id] role "name", states, value=...``, two
spaces of indent per level; a run of buttons shares a row ``push-buttons: [4] "New",
[5] "Open"``), cut at a cap with an ``[observation truncated: ...]`` line.

- ``desktop_tree_wellformed``: the predicted screen has the window line and a tree that
  parses: every line an element or a row, each level at most one deeper than the line
  before, every id unique;
- ``window_title``: the focused window's title of the real screen.

Ingested desktop recordings write another format (``ui.ui_elements_parse``); each check
here is None where the real screen is not a recorded one.
"""

from __future__ import annotations

import re

from agentworld.collect.os import tree_text
from agentworld.collect.os.tree_text import line_ids
from agentworld.evaluate.checks import ui

_HEAD = re.compile(r"^(?:Error: .*|Window: .*|\[observation truncated: \d+ more lines\])?$")


def is_screen(text: str) -> bool:
    """Whether ``text`` is a recorded desktop screen (it has the window line)."""
    return tree_text.window_title(text) is not None


def wellformed(text: str) -> bool:
    """Whether the screen has its window line and every tree line is an element or a
    row, nested one level at a time, with unique ids."""
    if not is_screen(text):
        return False
    depth, seen = -1, set()
    for line in text.split("\n"):
        if _HEAD.match(line):
            continue
        ids = line_ids(line)
        if not ids:
            return False
        level = (len(line) - len(line.lstrip(" "))) // 2
        if level > depth + 1 or seen & set(ids) or len(set(ids)) < len(ids):
            return False
        depth = level
        seen.update(ids)
    return True


def desktop_tree_wellformed(predicted: str, real: str) -> bool | None:
    """The predicted screen parses; None when the real text is not a recorded screen."""
    if not is_screen(real):
        return None
    return wellformed(predicted)


def window_title(predicted: str, real: str) -> bool | None:
    """The real screen's focused window; None when the real text is not a screen."""
    title = tree_text.window_title(real)
    if title is None:
        return None
    return tree_text.window_title(predicted) == title


def ingested_elements_parse(predicted: str, real: str) -> bool | None:
    """``ui.ui_elements_parse`` for desktop recordings from elsewhere; None on a
    recorded screen, which the two checks above cover."""
    if is_screen(real):
        return None
    return ui.ui_elements_parse(predicted, real)
