"""The desktop action space, after pyautogui: one call with literal arguments, aimed at
an element of the tree by its id or at screen coordinates.

  click(12)  click(640, 400)  double_click(12)  right_click(12)
  type("text")  hotkey("ctrl", "s")  press("enter")
  scroll(-3)  scroll(12, -3)  scroll(640, 400, -3)   (clicks; negative scrolls down)
  drag(12, 30)  drag(100, 200, 300, 200)  wait(1)  done()

Standard library only: the driver inside the sandbox reads the same table.
"""

from __future__ import annotations

import ast

# name -> the argument counts it takes, each with its parameter names
SIGNATURES: dict[str, tuple[tuple[str, ...], ...]] = {
    "click": (("id",), ("x", "y")),
    "double_click": (("id",), ("x", "y")),
    "right_click": (("id",), ("x", "y")),
    "type": (("text",),),
    "hotkey": (),  # one or more key names
    "press": (("key",),),
    "scroll": (("clicks",), ("id", "clicks"), ("x", "y", "clicks")),
    "drag": (("id", "to_id"), ("x", "y", "to_x", "to_y")),
    "wait": ((), ("seconds",)),
    "done": ((),),
}
_TEXT = {"text", "key"}
MAX_WAIT_S = 10.0

DESCRIPTION = """\
click(id) or click(x, y); double_click, right_click alike; type("text");
hotkey("ctrl", "s"); press("enter"); scroll(clicks), scroll(id, clicks) or
scroll(x, y, clicks) (negative: down); drag(id, to_id) or drag(x, y, to_x, to_y);
wait(seconds); done()"""
"""The actions as the environment text lists them: short, since every sample of the
recipe's sequence carries it (pyautogui's key names: ctrl, alt, enter, esc, f2, ...)."""


class ActionError(ValueError):
    """The text is not one call of the action space."""


def parse_action(text: str) -> tuple[str, dict[str, object]]:
    """(name, arguments) of an action text; ActionError says what is wrong."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as e:
        raise ActionError(f"not a function call: {e.msg}") from None
    call = tree.body
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
        raise ActionError('expected one call such as click(12) or type("hello")')
    name = call.func.id
    if name not in SIGNATURES:
        raise ActionError(f"unknown action {name!r}; actions: {', '.join(SIGNATURES)}")
    if call.keywords:
        raise ActionError(f"{name}() takes positional arguments only")
    try:
        values = [ast.literal_eval(node) for node in call.args]
    except ValueError:
        raise ActionError(f"{name}() takes literal arguments only") from None
    if name == "hotkey":
        if not values or not all(isinstance(v, str) and v for v in values):
            raise ActionError('hotkey() takes key names, e.g. hotkey("ctrl", "s")')
        return name, {"keys": [v.lower() for v in values]}
    params = next((p for p in SIGNATURES[name] if len(p) == len(values)), None)
    if params is None:
        forms = " or ".join(f"{name}({', '.join(p)})" for p in SIGNATURES[name])
        raise ActionError(f"{name}() takes {forms}")
    return name, {p: _typed(name, p, v) for p, v in zip(params, values, strict=True)}


def canonical_action(text: str) -> str:
    """The action an agent's text takes, as the record writes it: the last line that is
    one call of the action space, rendered canonically (``click( 12 )`` ->
    ``click(12)``); the text stripped when no line is one."""
    for line in reversed(text.strip().splitlines()):
        try:
            name, arguments = parse_action(line)
        except ActionError:
            continue
        return render_action(name, **arguments)
    return text.strip()


def _typed(name: str, param: str, value: object) -> object:
    if param in _TEXT:
        if not isinstance(value, str):
            raise ActionError(f"{name}(): {param} must be a string")
        return value.lower() if param == "key" else value
    if param in ("id", "to_id"):
        if isinstance(value, str) and value.isdigit():
            value = int(value)  # click('12') means the element [12]
        if isinstance(value, bool) or not isinstance(value, int):
            raise ActionError(f"{name}(): an element id is a whole number, got {value!r}")
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ActionError(f"{name}(): {param} must be a number")
    if param == "seconds":
        if not 0 <= value <= MAX_WAIT_S:
            raise ActionError(f"wait(): seconds must be between 0 and {MAX_WAIT_S:g}")
        return float(value)
    return int(value)


def render_action(name: str, **arguments: object) -> str:
    """The canonical text of an action (what the record stores and a model reads)."""
    if name == "hotkey":
        values = list(arguments["keys"])  # type: ignore[call-overload]
    else:
        params = next(p for p in SIGNATURES[name] if set(p) == set(arguments))
        values = [arguments[p] for p in params]
    return f"{name}({', '.join(_literal(v) for v in values)})"


def _literal(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    return repr(value)
