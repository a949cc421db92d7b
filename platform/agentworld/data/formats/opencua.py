"""OpenCUA / AgentNet samples: ``{task_id, user_task_description, steps: [{step_num,
image, action, inner_monologue: {observation, thought, low_level_instruction},
ground_truth_actions, ...}]}``, human computer-use demonstrations on Windows and macOS.

Step k's action and step k+1's screen are one turn: the pyautogui code as recorded
(points are screen fractions), the recorded description of the screen that followed
(``inner_monologue.observation``) as the observation, the path of its screenshot. The
thought is the reasoning; the low-level instruction rides in the turn. The closing
``computer.terminate(status=...)`` gives the outcome; the task and the first screen's
description are the environment. Domain os.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from agentworld.data.formats.base import Head, Item, Unit, expect, guarded, has_keys, load_json
from agentworld.schema import Outcome, Trajectory, Turn

FORMAT = "opencua"
_TERMINATE = re.compile(r"computer\.terminate\(status=['\"](\w+)['\"]\)")


def detect(path: str, head: Head) -> bool:
    return has_keys(head, "steps") and has_keys(head, "inner_monologue")


def read(unit: Unit) -> Iterator[Item]:
    yield guarded("file", lambda: build(unit, load_json(unit)))


def build(unit: Unit, doc: Any) -> Trajectory:
    doc = expect(doc, dict, "<file>")
    steps = sorted(
        (
            expect(s, dict, f"steps[{i}]")
            for i, s in enumerate(expect(doc.get("steps"), list, "steps"))
        ),
        key=lambda s: s.get("step_num", 0),
    )
    turns, outcome = [], None
    for k, step in enumerate(steps):
        action = expect(step.get("action"), str, f"steps[{k}].action")
        done = _TERMINATE.search(action)
        if done:
            outcome = Outcome(success=done.group(1) == "success", note=done.group(1))
            break
        if k + 1 >= len(steps):
            break
        monologue = _monologue(step)
        turns.append(
            Turn(
                action=action,
                observation=_screen(steps[k + 1], f"steps[{k + 1}]"),
                reasoning=monologue.get("thought") or None,
                screenshot=_image(unit, steps[k + 1]),
                metadata={
                    "step": step.get("step_num", k),
                    "instruction": monologue.get("low_level_instruction"),
                },
            )
        )
    first = steps[0] if steps else {}
    return Trajectory(
        id=unit.label,
        domain="os",
        source=unit.source(FORMAT),
        environment=f"Task: {doc.get('user_task_description', '')}\n\nScreen: {_screen(first, 'steps[0]')}",
        turns=tuple(turns),
        outcome=outcome,
        metadata={"format": FORMAT, "high_level_task": doc.get("high_level_task_description")},
    )


def _monologue(step: dict) -> dict[str, Any]:
    value = step.get("inner_monologue")
    return value if isinstance(value, dict) else {}


def _screen(step: dict, where: str) -> str:
    return expect(
        _monologue(step).get("observation", ""), str, f"{where}.inner_monologue.observation"
    )


def _image(unit: Unit, step: dict) -> str | None:
    name = step.get("image")
    return unit.child(name) if isinstance(name, str) and name else None
