"""The desktop as the agent reads it: the accessibility tree of the windows on screen,
one element a line, ``[id] role "name"`` with its states and value, indented by depth
(the web domain's form, with AT-SPI's roles).

Compacted the way readers of such trees expect: unnamed containers (panels, fillers,
scroll panes, tool bars) give way to their children; leaves with nothing to read or aim
at are left out, and so is a label that repeats its parent's name; a run of three or
more buttons (or of a menu bar's menus) shares one line, ``push-buttons: [4] "New",
[5] "Open"``. Nodes come from the driver (``accessibility.py``) as dicts: id, role,
name, states, text, value, children.

Standard library only: the driver renders inside the sandbox, and the playbooks on the
host read observations back with ``elements``.
"""

from __future__ import annotations

import json
import re
from typing import Any

TRANSPARENT = {
    "panel",
    "filler",
    "scroll pane",
    "viewport",
    "layered pane",
    "section",
    "split pane",
    "page tab list",
    "tool bar",
    "menu bar",
    "redundant object",
    "unknown",
    "invalid",
    "embedded",
    "form",
    "grouping",
}
"""Roles that hold others and say nothing themselves (when they have no name)."""
NEVER = {"separator", "scroll bar"}
TEXT_ROLES = {"text", "entry", "password text", "terminal", "paragraph", "document text"}
"""Roles whose text is their value (value="..."), not their name."""
ROW_ROLES = {"push button", "toggle button", "menu", "radio button"}
FIELD_ROLES = {"check box", "menu item", "check menu item", "radio menu item", "list item"}
FIELD_ROLES |= {"spin button", "combo box", "slider", "page tab"}
INTERACTIVE = ROW_ROLES | TEXT_ROLES | FIELD_ROLES
"""Roles that say "disabled" when the application makes them insensitive."""
ROW_MIN = 3
STATES = ("active", "focused", "selected", "checked", "pressed", "expanded", "editable")
_MAX_NAME = 120
_MAX_VALUE = 600


def _norm(text: Any) -> str:
    return " ".join(str(text or "").split())


def _quote(text: str, limit: int = _MAX_NAME) -> str:
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return json.dumps(text, ensure_ascii=False)


def slug(role: str) -> str:
    """AT-SPI's role name as one word: ``push button`` -> ``push-button``."""
    return role.replace(" ", "-")


def _states(node: dict[str, Any]) -> list[str]:
    have = set(node.get("states") or ())
    out = [s for s in STATES if s in have]
    if "editable" in out and node["role"] not in TEXT_ROLES:
        out.remove("editable")  # a combo box's entry says it; the box need not
    if node["role"] in INTERACTIVE and not {"enabled", "sensitive"} & have:
        out.append("disabled")
    return out


def _value(node: dict[str, Any]) -> str | None:
    if node["role"] in TEXT_ROLES and node.get("text") is not None:
        return "value=" + _quote(node["text"], _MAX_VALUE)
    if node.get("value") is not None:
        v = float(node["value"])
        return f"value={int(v) if v.is_integer() else round(v, 4)}"
    return None


def _name(node: dict[str, Any]) -> str:
    name = _norm(node.get("name"))
    if not name and node["role"] not in TEXT_ROLES:
        name = _norm(node.get("text"))  # an icon's or a label's text
    return name


class _Line:
    """One rendered element, before rows are joined."""

    def __init__(self, node: dict[str, Any], name: str, parts: list[str]) -> None:
        self.node, self.name, self.parts = node, name, parts
        self.children: list[_Line] = []

    def text(self) -> str:
        return ", ".join(self.parts)

    def row_item(self) -> str:
        item = f"[{self.node['id']}] {_quote(self.name)}"
        extra = self.parts[1:]
        return item + (f" ({', '.join(extra)})" if extra else "")


def _build(node: dict[str, Any], parent_name: str) -> list[_Line]:
    """The lines a node stands for: itself with its children, or its children only."""
    role, name = node["role"], _name(node)
    kids: list[_Line] = []
    for child in node.get("children") or ():
        kids += _build(child, name or parent_name)
    if role in NEVER:
        return []
    if role in TRANSPARENT and not name:
        return kids
    if role == "label" and name == parent_name:
        return kids
    states, value = _states(node), _value(node)
    if not (name or value or set(states) - {"disabled"} or kids) and role not in TEXT_ROLES:
        return []  # nothing to read, nothing to aim at
    head = f"[{node['id']}] {slug(role)}" + (f" {_quote(name)}" if name else "")
    line = _Line(node, name, [head, *states, *([value] if value else [])])
    line.children = kids
    return [line]


def _emit(lines: list[_Line], depth: int, out: list[str]) -> None:
    i = 0
    while i < len(lines):
        line = lines[i]
        role = line.node["role"]
        j = i
        while (
            j < len(lines)
            and lines[j].node["role"] == role
            and role in ROW_ROLES
            and not lines[j].children
            and lines[j].name
        ):
            j += 1
        if j - i >= ROW_MIN:
            items = ", ".join(x.row_item() for x in lines[i:j])
            out.append("  " * depth + f"{slug(role)}s: {items}")
            i = j
            continue
        out.append("  " * depth + line.text())
        _emit(line.children, depth + 1, out)
        i += 1


def render_tree(windows: list[dict[str, Any]]) -> str:
    """The windows' trees as text, a window (frame, dialog) at depth 0; the active
    window first, so that a cut observation keeps what the user is working in."""
    out: list[str] = []
    active = [w for w in windows if "active" in (w.get("states") or ())]
    for window in active + [w for w in windows if w not in active]:
        _emit(_build(window, ""), 0, out)
    return "\n".join(out)


def window_title(observation: str) -> str | None:
    """The focused window's title an observation shows (its ``Window:`` line, as
    :func:`format_observation` writes it), or None when it has none."""
    m = re.search(r"^Window: (.*)$", observation, re.M)
    return m.group(1).strip() if m else None


def format_observation(title: str, tree: str, error: str | None, cap: int) -> tuple[str, int]:
    """The observation text and how many characters the cap cut off: the real error
    first when the action failed, the focused window's title, then the tree."""
    head = [f"Error: {error}", ""] if error else []
    head.append(f"Window: {title}" if title else "Window: (none focused)")
    text = "\n".join([*head, tree]) if tree else "\n".join(head)
    if len(text) <= cap:
        return text, 0
    cut = text.rfind("\n", 0, cap)
    cut = cut if cut > 0 else cap
    rest = text[cut:].count("\n")
    return text[:cut] + f"\n[observation truncated: {rest} more lines]", len(text) - cut


_LINE = re.compile(r'^\s*\[(\d+)\] ([a-z][a-z-]*)(?: ("(?:[^"\\]|\\.)*"))?(.*)$')
_ROW = re.compile(r"^\s*([a-z][a-z-]*)s: (.*)$")
_REST = re.compile(r'^(?:, (?:[a-z]+|value=(?:"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?)))*$')
"""What follows an element's name: its states and value, as ``_build`` writes them."""
_ITEM = re.compile(r'\[(\d+)\] ("(?:[^"\\]|\\.)*")(?: \(([^)]*)\))?')


def elements(observation: str) -> list[tuple[int, str, str, str]]:
    """(id, role, name, rest of the line) of every element of an observation, those in
    rows included (their states as the rest)."""
    out = []
    for line in observation.splitlines():
        m = _LINE.match(line)
        if m:
            out.append((int(m[1]), m[2], json.loads(m[3]) if m[3] else "", m[4]))
            continue
        m = _ROW.match(line)
        if m:
            for item in _ITEM.finditer(m[2]):
                out.append((int(item[1]), m[1], json.loads(item[2]), item[3] or ""))
    return out


def line_ids(line: str) -> list[int]:
    """The ids of the elements one tree line shows (several on a row), or [] when the
    line is not an element or a row."""
    m = _LINE.match(line)
    if m:
        return [int(m[1])] if _REST.match(m[4]) else []
    m = _ROW.match(line)
    if not m:
        return []
    items = list(_ITEM.finditer(m[2]))
    if not items or ", ".join(i[0] for i in items) != m[2].strip():
        return []
    return [int(i[1]) for i in items]


def find(observation: str, role: str, name: str | None = None, *, has: str = "") -> int | None:
    """The id of the first element of ``role`` (named ``name``, its line holding
    ``has``), or None when the screen shows none."""
    for eid, r, n, rest in elements(observation):
        if r == role and (name is None or n == name) and has in rest:
            return eid
    return None


def value_of(observation: str, eid: int) -> str | None:
    """The value="..." an element shows, or None."""
    for i, _, _, rest in elements(observation):
        if i == eid:
            m = re.search(r'value=("(?:[^"\\]|\\.)*")', rest)
            return json.loads(m[1]) if m else None
    return None
