"""The browser action space (the reference's web domain, after BrowserGym): an action is
one Python-style call with literal arguments, e.g. ``click('12')``,
``fill('31', 'garden')``, ``goto('http://127.0.0.1:8001/')``.

Standard library only: the driver inside the sandbox dispatches on the same table.
"""

from __future__ import annotations

import ast

# name -> parameter names (every one is required; scroll's are numbers, the rest text)
ACTIONS: dict[str, tuple[str, ...]] = {
    "click": ("bid",),
    "dblclick": ("bid",),
    "hover": ("bid",),
    "focus": ("bid",),
    "fill": ("bid", "value"),
    "clear": ("bid",),
    "select_option": ("bid", "value"),
    "check": ("bid",),
    "uncheck": ("bid",),
    "press": ("bid", "key"),
    "keyboard_press": ("key",),
    "keyboard_type": ("text",),
    "scroll": ("delta_x", "delta_y"),
    "goto": ("url",),
    "go_back": (),
    "go_forward": (),
    "noop": (),
    "send_msg_to_user": ("text",),
    "report_infeasible": ("reason",),
}
_NUMERIC = {"delta_x", "delta_y"}

DESCRIPTION = """\
click(bid) dblclick(bid) hover(bid) focus(bid) check(bid) uncheck(bid) clear(bid)
fill(bid, value) select_option(bid, value) press(bid, key) keyboard_press(key)
keyboard_type(text) scroll(dx, dy) goto(url) go_back() go_forward() noop()
send_msg_to_user(text) (the answer) report_infeasible(reason)"""


class ActionError(ValueError):
    """The text is not one call of the action space."""


def parse_action(text: str) -> tuple[str, dict[str, str | float]]:
    """(name, arguments) of an action text; ActionError says what is wrong."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as e:
        raise ActionError(f"not a function call: {e.msg}") from None
    call = tree.body
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
        raise ActionError("expected one call such as click('12')")
    name = call.func.id
    if name not in ACTIONS:
        raise ActionError(f"unknown action {name!r}; actions: {', '.join(ACTIONS)}")
    params = ACTIONS[name]
    values: dict[str, object] = {}
    try:
        for param, node in zip(params, call.args, strict=False):
            values[param] = ast.literal_eval(node)
        for kw in call.keywords:
            if kw.arg not in params:
                raise ActionError(f"{name}() has no argument {kw.arg!r}")
            values[kw.arg] = ast.literal_eval(kw.value)
    except ValueError:
        raise ActionError(f"{name}() takes literal arguments only") from None
    if len(call.args) > len(params) or set(values) != set(params):
        raise ActionError(f"{name}() takes ({', '.join(params)})")
    return name, {p: _typed(name, p, values[p]) for p in params}


def _typed(name: str, param: str, value: object) -> str | float:
    if param in _NUMERIC:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ActionError(f"{name}(): {param} must be a number")
        return float(value)
    if isinstance(value, int | float) and not isinstance(value, bool) and param == "bid":
        return str(value)  # click(12) means the element with bid "12"
    if not isinstance(value, str):
        raise ActionError(f"{name}(): {param} must be a string")
    return value


def render_action(name: str, **arguments: str | float) -> str:
    """The canonical text of an action (what the record stores and a model reads)."""
    parts = []
    for param in ACTIONS[name]:
        v = arguments[param]
        parts.append(repr(int(v) if isinstance(v, float) and v.is_integer() else v))
    return f"{name}({', '.join(parts)})"
