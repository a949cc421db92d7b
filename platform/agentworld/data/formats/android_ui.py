"""One textual action space and one element list for every android source.

Actions: ``tap(x=0.507, y=0.541)`` or ``tap(element=11)``, ``long_press(...)``,
``swipe(x1=, y1=, x2=, y2=)``, ``scroll(direction="down")``, ``type(text="...")``,
``back()``, ``home()``, ``enter()``, ``open_app(name="Clock")``, ``wait()``,
``answer(text="...")``, ``status(goal="complete")``. Points are fractions of the screen
(0 to 1, x from the left, y from the top) when the source gives them so or gives the
screen's size; else the source's pixels. Elements: ``[index] kind "text" desc="..."
clickable ... bbox=[...]``, one a line, as the source lists them.
"""

from __future__ import annotations

import json
from typing import Any

from agentworld.schema import ToolCall

ACTIONS = (
    "tap",
    "long_press",
    "swipe",
    "scroll",
    "type",
    "back",
    "home",
    "enter",
    "open_app",
    "wait",
    "answer",
    "status",
)


def action(verb: str, /, **arguments: Any) -> tuple[str, ToolCall]:
    """The action's text and its tool call (arguments that are None are left out)."""
    if verb not in ACTIONS:
        raise ValueError(f"unknown android action {verb!r}")
    args = {k: v for k, v in arguments.items() if v is not None}
    text = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in args.items())
    return f"{verb}({text})", ToolCall(name=verb, arguments=args)


def point(value: float) -> float:
    return round(float(value), 4)


def element_line(
    index: int,
    *,
    kind: str | None = None,
    text: str | None = None,
    desc: str | None = None,
    flags: tuple[str, ...] = (),
    bbox: Any = None,
) -> str:
    parts = [f"[{index}]"]
    if kind:
        parts.append(kind)
    if text:
        parts.append(json.dumps(text, ensure_ascii=False))
    if desc and desc != text:
        parts.append(f"desc={json.dumps(desc, ensure_ascii=False)}")
    parts.extend(flags)
    if bbox is not None:
        parts.append(f"bbox={json.dumps(bbox)}")
    return " ".join(parts)
