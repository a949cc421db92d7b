"""AndroidWorld agent histories (the M3A agent's episode data): a JSON list of steps,
``{task_goal, result, action_prompt, action_output, action_reason, summary_prompt,
summary, ui_description}``.

Each step is one turn. The action is the one the agent executed, the JSON after
``Action selected:`` in its summary (``{"action_type": "click", "x": 500, "y": 891}``),
in the android action space (agentworld.data.formats.android_ui; pixels become screen
fractions, the screen's size read from the root element's box). The observation is the
UI element list of the screen after the action, which the summary prompt lists ("Here
is the list for the after screenshot"), or else the next step's ``ui_description``.
A step without either is kept in the metadata. The reasoning is ``action_reason``;
the environment the goal and the first screen's elements. Outcome: the last step's
``result``. Domain android.

The element lines are Python dict literals (``{"index": 8, "is_clickable": False}``);
they are read with ``ast.literal_eval``, which parses literals only.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from typing import Any

from agentworld.data.formats import android_ui
from agentworld.data.formats.base import (
    Head,
    Item,
    Problem,
    Unit,
    expect,
    guarded,
    has_keys,
    iter_container,
)
from agentworld.schema import Outcome, RecordError, Trajectory, Turn

FORMAT = "android_world"
_SELECTED = re.compile(r"Action selected:\s*(\{.*?\})\s*\.?\s", re.S)
_PICKED = re.compile(r"This is the action you picked:\s*(\{.*?\})\s*$", re.M)
_AFTER = re.compile(r"Here is the list for the after screenshot:\n(.*?)(?:\n\s*\n|\Z)", re.S)
_ELEMENT = re.compile(r"^UI element (\d+): (\{.*\})\s*$")
_FLAGS = (
    "clickable",
    "long_clickable",
    "editable",
    "scrollable",
    "focusable",
    "selected",
    "checked",
)


def detect(path: str, head: Head) -> bool:
    return has_keys(head, "task_goal") and (
        has_keys(head, "action_output") or has_keys(head, "summary_prompt")
    )


def read(unit: Unit) -> Iterator[Item]:
    text = unit.read_text()
    members = list(iter_container(text))
    broken = [m for m in members if isinstance(m, Problem)]
    if broken:  # a history cut short: its steps no longer tell one episode
        yield broken[0]
        return
    yield guarded("file", lambda: build(unit, [m[1] for m in members]))


def build(unit: Unit, steps: list) -> Trajectory:
    steps = [expect(s, dict, f"[{i}]") for i, s in enumerate(steps)]
    if not steps:
        raise RecordError("no steps")
    screen = _screen_size(steps[0].get("ui_description"))
    turns, unobserved = [], []
    for k, step in enumerate(steps):
        text, call = step_action(step, screen, f"[{k}]")
        after = _after_list(step)
        if after is None and k + 1 < len(steps):
            after = elements_text(steps[k + 1].get("ui_description"), f"[{k + 1}].ui_description")
        if after is None:
            unobserved.append(text)
            continue
        turns.append(
            Turn(
                action=text,
                observation=after,
                reasoning=step.get("action_reason") or None,
                tool_call=call,
                metadata={"step": k},
            )
        )
    first = steps[0]
    result = steps[-1].get("result")
    return Trajectory(
        id=unit.label,
        domain="android",
        source=unit.source(FORMAT),
        environment=f"Task: {first.get('task_goal', '')}\n\nScreen:\n"
        + (elements_text(first.get("ui_description"), "[0].ui_description") or ""),
        turns=tuple(turns),
        outcome=Outcome(success=result) if isinstance(result, bool) else None,
        metadata={
            "format": FORMAT,
            "unobserved_actions": unobserved,
            "screen": list(screen) if screen else None,
        },
    )


def step_action(step: dict, screen: tuple[int, int] | None, where: str):
    found = _SELECTED.search(str(step.get("summary") or "")) or _PICKED.search(
        str(step.get("summary_prompt") or "")
    )
    if found is None:
        raise RecordError("no executed action ('Action selected: {...}')", field=f"{where}.summary")
    act = expect(json.loads(found.group(1)), dict, f"{where}.summary")
    return json_action(act, screen, where)


def json_action(act: dict, screen: tuple[int, int] | None, where: str):
    """An AndroidWorld JSONAction in the android action space."""
    kind = act.get("action_type")
    where_args = (
        {"element": act.get("index")} if act.get("index") is not None else _point(act, screen)
    )
    table = {
        "click": lambda: android_ui.action("tap", **where_args),
        "long_press": lambda: android_ui.action("long_press", **where_args),
        "input_text": lambda: android_ui.action(
            "type", text=str(act.get("text", "")), element=act.get("index")
        ),
        "scroll": lambda: android_ui.action(
            "scroll", direction=act.get("direction"), element=act.get("index")
        ),
        "navigate_back": lambda: android_ui.action("back"),
        "navigate_home": lambda: android_ui.action("home"),
        "keyboard_enter": lambda: android_ui.action("enter"),
        "open_app": lambda: android_ui.action("open_app", name=act.get("app_name")),
        "wait": lambda: android_ui.action("wait"),
        "answer": lambda: android_ui.action("answer", text=act.get("text")),
        "status": lambda: android_ui.action("status", goal=act.get("goal_status")),
    }
    if kind not in table:
        raise RecordError(f"unknown action_type {kind!r}", field=f"{where}.summary")
    return table[kind]()


def _point(act: dict, screen: tuple[int, int] | None) -> dict[str, Any]:
    x, y = act.get("x"), act.get("y")
    if not isinstance(x, int | float) or not isinstance(y, int | float):
        return {}
    if screen:
        return {"x": android_ui.point(x / screen[0]), "y": android_ui.point(y / screen[1])}
    return {"x": x, "y": y}


def _screen_size(ui: Any) -> tuple[int, int] | None:
    """(width, height) from the root element's box ``[x_min, x_max, y_min, y_max]``."""
    if isinstance(ui, list) and ui and isinstance(ui[0], dict):
        box = ui[0].get("ui_bbox")
        if (
            isinstance(box, list)
            and len(box) == 4
            and all(isinstance(v, int) for v in box)
            and box[1] > 0 < box[3]
        ):
            return box[1], box[3]
    return None


def _after_list(step: dict) -> str | None:
    found = _AFTER.search(str(step.get("summary_prompt") or ""))
    if found is None:
        return None
    return "\n".join(_element(line) for line in found.group(1).splitlines() if line.strip())


def elements_text(ui: Any, where: str) -> str | None:
    """The element list of a ``ui_description`` (its texts and boxes), one a line."""
    if ui is None:
        return None
    lines = []
    for i, entry in enumerate(expect(ui, list, where)):
        entry = expect(entry, dict, f"{where}[{i}]")
        lines.append(_element(str(entry.get("ui_description", "")), entry.get("ui_bbox")))
    return "\n".join(lines)


def _element(line: str, bbox: Any = None) -> str:
    match = _ELEMENT.match(line.strip())
    if match is None:
        return line.strip()
    try:
        fields = ast.literal_eval(match.group(2))
    except (ValueError, SyntaxError):
        return line.strip()
    if not isinstance(fields, dict):
        return line.strip()
    flags = tuple(f for f in _FLAGS if fields.get(f"is_{f}") is True)
    return android_ui.element_line(
        int(match.group(1)),
        kind=fields.get("class_name"),
        text=fields.get("text"),
        desc=fields.get("content_description"),
        flags=flags,
        bbox=bbox,
    )
