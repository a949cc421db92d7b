"""Android in the Wild (AITW) and its Android-in-the-Zoo (AITZ) annotation: a JSON list
of step dicts, ``{episode_id, step_id, instruction, ui_text, ui_types, ui_positions,
result_action_type, result_touch_yx, result_lift_yx, result_action_text, image_path,
coat_*}``, the ``ui_*`` fields JSON-encoded lists of the screen's OCR and icon elements.

Step k's action and step k+1's screen are one turn: the action in the android action
space (agentworld.data.formats.android_ui: a dual-point gesture is a tap when its two
points meet, else a swipe; points are AITW's screen fractions), the element list of the
screen that followed, the path of its screenshot (found beside the file by name, else
the path the step gives). AITZ's generated screen description and action reasoning ride
in the turn. A closing status action ends the episode (its outcome); an action with no
screen after it is kept in the metadata. Steps are grouped by episode. Domain android.
"""

from __future__ import annotations

import json
import posixpath
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

FORMAT = "aitz"
TAP_DISTANCE = 0.04
"""A dual-point gesture whose points are closer than this (screen fractions) is a tap."""
STATUS = {10: "complete", 11: "infeasible"}


def detect(path: str, head: Head) -> bool:
    return has_keys(head, "result_action_type")


def read(unit: Unit) -> Iterator[Item]:
    episodes: dict[str, list] = {}
    for member in iter_container(unit.read_text()):
        if isinstance(member, Problem):
            yield member
            continue
        step = member[1]
        key = str(step.get("episode_id")) if isinstance(step, dict) else f"step [{member[0]}]"
        episodes.setdefault(key, []).append(step)
    for key, steps in episodes.items():
        yield guarded(f"episode {key}", lambda k=key, s=steps: build(unit, k, s))


def build(unit: Unit, key: str, steps: list) -> Trajectory:
    steps = sorted((expect(s, dict, "step") for s in steps), key=lambda s: s.get("step_id", 0))
    turns, unobserved, outcome = [], [], None
    for k, step in enumerate(steps):
        code = step.get("result_action_type")
        if code in STATUS:
            outcome = Outcome(success=code == 10, note=STATUS[code])
            break
        text, call = step_action(step, f"steps[{k}]")
        if k + 1 >= len(steps):
            unobserved.append(text)
            continue
        after = steps[k + 1]
        meta = {"step": step.get("step_id", k)}
        for field, name in (
            ("coat_action_desc", "action_description"),
            ("coat_action_result", "expected_result"),
        ):
            if isinstance(step.get(field), str):
                meta[name] = step[field]
        if isinstance(after.get("coat_screen_desc"), str):
            meta["screen_description"] = after["coat_screen_desc"]
        turns.append(
            Turn(
                action=text,
                observation=screen_text(after, f"steps[{k + 1}]"),
                reasoning=step.get("coat_action_think") or None,
                tool_call=call,
                screenshot=_screenshot(unit, after),
                metadata=meta,
            )
        )
    first = steps[0]
    return Trajectory(
        id=f"{unit.label}#{key}",
        domain="android",
        source=unit.source(FORMAT),
        environment=f"Task: {first.get('instruction', '')}\n\nScreen:\n{screen_text(first, 'steps[0]')}",
        turns=tuple(turns),
        outcome=outcome,
        metadata={"format": FORMAT, "unobserved_actions": unobserved},
    )


def step_action(step: dict, where: str):
    code = step.get("result_action_type")
    if code == 3:
        return android_ui.action("type", text=str(step.get("result_action_text") or ""))
    if code == 4:
        (y1, x1), (y2, x2) = (
            _yx(step.get("result_touch_yx"), where),
            _yx(step.get("result_lift_yx"), where),
        )
        if abs(x1 - x2) + abs(y1 - y2) < TAP_DISTANCE:
            return android_ui.action("tap", x=android_ui.point(x1), y=android_ui.point(y1))
        p = android_ui.point
        return android_ui.action("swipe", x1=p(x1), y1=p(y1), x2=p(x2), y2=p(y2))
    simple = {5: "back", 6: "home", 7: "enter"}
    if code in simple:
        return android_ui.action(simple[code])
    raise RecordError(f"unknown action type {code!r}", field=f"{where}.result_action_type")


def _yx(value: Any, where: str) -> tuple[float, float]:
    pair = json.loads(value) if isinstance(value, str) else value
    if (
        not isinstance(pair, list)
        or len(pair) != 2
        or not all(isinstance(v, int | float) for v in pair)
    ):
        raise RecordError("expected [y, x]", field=f"{where}.result_touch_yx")
    return float(pair[0]), float(pair[1])


def screen_text(step: dict, where: str) -> str:
    """The screen's elements (OCR text and icons), one a line."""
    texts, kinds, boxes = (
        _list(step.get(k), f"{where}.{k}") for k in ("ui_text", "ui_types", "ui_positions")
    )
    lines = []
    for i, kind in enumerate(kinds or texts):
        text = texts[i] if i < len(texts) else None
        lines.append(
            android_ui.element_line(
                i,
                kind=str(kind) if kinds else None,
                text=str(text) if text else None,
                bbox=boxes[i] if i < len(boxes) else None,
            )
        )
    return "\n".join(lines)


def _list(value: Any, where: str) -> list:
    if value is None:
        return []
    parsed = json.loads(value) if isinstance(value, str) else value
    return expect(parsed, list, where)


def _screenshot(unit: Unit, step: dict) -> str | None:
    path = step.get("image_path")
    if not isinstance(path, str) or not path:
        return None
    name = posixpath.basename(path)
    return unit.child(name) if unit.exists(name) else path
