"""Desktop actions as pyautogui calls, the action space OpenCUA records in and the one
other desktop sources are written in: ``pyautogui.click(x=487, y=193)``,
``pyautogui.write(message="...")``, ``pyautogui.press(keys="enter")``,
``pyautogui.hotkey(keys=["ctrl", "a"])``, ``pyautogui.scroll(clicks=-3)``, one call a
line, arguments as JSON values."""

from __future__ import annotations

import json
from typing import Any


def call(name: str, **arguments: Any) -> str:
    """``pyautogui.<name>(k=v, ...)`` with JSON values; None arguments left out."""
    args = ", ".join(
        f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in arguments.items() if v is not None
    )
    return f"pyautogui.{name}({args})"


def key_name(key: str) -> str:
    """An X keysym or a ``Ctrl+A`` combination in pyautogui's names."""
    names = {
        "return": "enter",
        "super_l": "win",
        "super_r": "win",
        "control_l": "ctrl",
        "control_r": "ctrl",
    }
    return names.get(key.lower(), key.lower())
