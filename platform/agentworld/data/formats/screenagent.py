"""ScreenAgent sessions: a folder of step files, one JSON per step
(``<timestamp>_translate.json``: ``task_prompt_en``, ``send_prompt_en``,
``LLM_response_editer_en``, ``actions``, ``saved_image_name``, ``session_id``), a screen
image per step under ``images/``. A session cycles through planning (``PlanAction``),
acting (mouse and keyboard actions) and evaluating (``EvaluateSubTaskAction``: the
model judges the screen after the act).

Each acting step followed by an evaluation is one turn: its actions as pyautogui calls
(agentworld.data.formats.desktop_ui), the evaluation of the screen that followed as
the observation (the text the source has about that screen: its verdict and what it
saw), the path of that screen's image. The prose around the act's JSON is the
reasoning; the task, the screen size and the plan are the environment. Negative
samples (``*_neg_*.json``, alternative answers written for training) are left out and
counted. Domain os.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from agentworld.data.formats import desktop_ui
from agentworld.data.formats.base import Head, Item, Problem, Unit, describe, expect, guarded
from agentworld.schema import RecordError, Trajectory, Turn

FORMAT = "screenagent"
_STEP = re.compile(r"^\d{4}-\d\d-\d\d_[\d-]+_translate\.json$")
_NEG = re.compile(r"_translate_neg\w*\.json$")
_JSON_BLOCK = re.compile(r"```json\s*(.*?)```", re.S)
ACTS = ("MouseAction", "KeyboardAction", "WaitAction")


def detect(path: str, head: Head) -> bool:
    return head.is_dir and any(_STEP.match(n) for n in head.names)


def read(unit: Unit) -> Iterator[Item]:
    names = unit.names()
    steps, negatives = [], sum(1 for n in names if _NEG.search(n))
    for name in (n for n in names if _STEP.match(n)):
        try:
            steps.append((name, expect(json.loads(unit.read_text(name)), dict, name)))
        except (json.JSONDecodeError, RecordError) as e:
            yield Problem(position=name, reason=describe(e), error=type(e).__name__)
    sessions: dict[str, list] = {}
    for name, step in steps:
        sessions.setdefault(str(step.get("session_id") or "session"), []).append((name, step))
    for sid, session in sessions.items():
        yield guarded(f"session {sid}", lambda s=session, i=sid: build(unit, i, s, negatives))


def build(unit: Unit, sid: str, steps: list[tuple[str, dict]], negatives: int) -> Trajectory:
    turns, unobserved, plan = [], [], []
    for k, (name, step) in enumerate(steps):
        actions = expect(step.get("actions") or [], list, f"{name}.actions")
        kinds = {a.get("action_type") for a in actions if isinstance(a, dict)}
        if "PlanAction" in kinds and not plan:
            plan = [str(a.get("element")) for a in english(step) if isinstance(a, dict)]
        if not kinds & set(ACTS):
            continue
        code = "\n".join(act_call(a, f"{name}.actions[{i}]") for i, a in enumerate(actions))
        after = steps[k + 1][1] if k + 1 < len(steps) else None
        verdict = evaluation(after) if after else None
        if verdict is None:
            unobserved.append(code)
            continue
        turns.append(
            Turn(
                action=code,
                observation=verdict,
                reasoning=_prose(step.get("LLM_response_editer_en")) or None,
                screenshot=_image(unit, after),
                metadata={"step": name},
            )
        )
    first = steps[0][1]
    return Trajectory(
        id=f"{unit.label}#{sid}",
        domain="os",
        source=unit.source(FORMAT),
        environment=_environment(first, plan),
        turns=tuple(turns),
        metadata={
            "format": FORMAT,
            "negative_samples_left_out": negatives,
            "unobserved_actions": unobserved,
        },
    )


def act_call(a: Any, where: str) -> str:
    """One ScreenAgent action as a pyautogui call."""
    a = expect(a, dict, where)
    kind = a.get("action_type")
    if kind == "MouseAction":
        pos = a.get("mouse_position") if isinstance(a.get("mouse_position"), dict) else {}
        x, y = pos.get("width"), pos.get("height")
        mouse = a.get("mouse_action_type")
        button = a.get("mouse_button")
        calls = {
            "click": lambda: desktop_ui.call("click", x=x, y=y, button=button),
            "double_click": lambda: desktop_ui.call("doubleClick", x=x, y=y, button=button),
            "move": lambda: desktop_ui.call("moveTo", x=x, y=y),
            "drag": lambda: desktop_ui.call("dragTo", x=x, y=y, button=button),
            "scroll_up": lambda: desktop_ui.call("scroll", clicks=a.get("scroll_repeat", 1)),
            "scroll_down": lambda: desktop_ui.call(
                "scroll", clicks=-int(a.get("scroll_repeat", 1))
            ),
        }
        if mouse in calls:
            return calls[mouse]()
        raise RecordError(f"unknown mouse_action_type {mouse!r}", field=where)
    if kind == "KeyboardAction":
        if a.get("keyboard_action_type") == "text":
            return desktop_ui.call("write", message=str(a.get("keyboard_text", "")))
        keys = [desktop_ui.key_name(k) for k in str(a.get("keyboard_key", "")).split("+") if k]
        return (
            desktop_ui.call("hotkey", keys=keys)
            if len(keys) > 1
            else desktop_ui.call("press", keys=keys[0] if keys else "")
        )
    if kind == "WaitAction":
        return f"time.sleep({json.dumps(a.get('wait_time', 1))})"
    raise RecordError(f"unknown action_type {kind!r}", field=where)


def english(step: dict) -> list:
    """The step's actions as its English answer writes them (the JSON block of
    ``LLM_response_editer_en``), else as recorded (``actions``, often Chinese text)."""
    found = _JSON_BLOCK.search(str(step.get("LLM_response_editer_en") or ""))
    if found:
        try:
            parsed = json.loads(found.group(1))
        except json.JSONDecodeError:
            parsed = None
        parsed = [parsed] if isinstance(parsed, dict) else parsed
        if isinstance(parsed, list) and all(isinstance(a, dict) for a in parsed):
            return parsed
    return step.get("actions") if isinstance(step.get("actions"), list) else []


def evaluation(step: dict) -> str | None:
    """The text an evaluation step has about the screen: its verdict and its words."""
    actions = english(step)
    verdicts = [
        a
        for a in actions
        if isinstance(a, dict) and a.get("action_type") == "EvaluateSubTaskAction"
    ]
    if not verdicts:
        return None
    v = verdicts[0]
    lines = [f"Evaluation: {v.get('situation')}"]
    if v.get("advice"):
        lines.append(f"Advice: {v['advice']}")
    prose = _prose(step.get("LLM_response_editer_en"))
    if prose:
        lines.append(prose)
    return "\n".join(lines)


def _prose(text: Any) -> str:
    return _JSON_BLOCK.sub(" ", text).strip() if isinstance(text, str) else ""


def _image(unit: Unit, step: dict) -> str | None:
    name = step.get("saved_image_name")
    return unit.child(f"images/{name}") if isinstance(name, str) and name else None


def _environment(first: dict, plan: list[str]) -> str:
    task = first.get("task_prompt_en") or first.get("task_prompt") or ""
    size = f"{first.get('video_width')}x{first.get('video_height')}"
    text = f"Task: {task}\nScreen: {size} (Linux desktop over VNC)"
    if plan:
        text += "\nPlan:\n" + "\n".join(f"{i}. {p}" for i, p in enumerate(plan, start=1))
    return text
