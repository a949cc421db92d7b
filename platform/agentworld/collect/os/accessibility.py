"""The accessibility tree of the episode's desktop, read over its own AT-SPI bus.

Runs inside the sandbox, in the driver, with the system Python and Debian's AT-SPI
bindings (python3-gi, gir1.2-atspi-2.0): they come from apt with the applications, where
PyGObject in the virtual environment would have to be compiled against
libgirepository at set-up.

Each element an episode has seen keeps its id while it lives (``Ids``): an agent acts
on what it read, and the same screen gets the same ids in every run.
"""

from __future__ import annotations

from typing import Any

import gi

gi.require_version("Atspi", "2.0")
from gi.repository import Atspi, GLib  # noqa: E402

WINDOW_ROLES = {"frame", "dialog", "window", "alert", "file chooser", "color chooser"}
LABELLED = {"text", "entry", "password text", "spin button", "combo box", "slider"}
"""Fields that take their name from the label next to them when they have none."""
MAX_CHILDREN = 400
"""Children read per element: a list of thousands of rows shows its first ones."""
MAX_DEPTH = 40
CALL_TIMEOUT_MS = 2000
"""A hung application answers an AT-SPI call with an error after this, not 25 s."""


def init() -> None:
    Atspi.init()
    Atspi.set_timeout(CALL_TIMEOUT_MS, 15000)


class Ids:
    """Element ids of one episode, given in the order elements are first shown."""

    def __init__(self) -> None:
        self._ids: dict[tuple[str, str], int] = {}
        self.elements: dict[int, Any] = {}

    def of(self, acc: Any, key: tuple[str, str]) -> int:
        if key not in self._ids:
            self._ids[key] = len(self._ids) + 1
        eid = self._ids[key]
        self.elements[eid] = acc
        return eid


def _states(acc: Any) -> list[str]:
    return [s.value_nick for s in acc.get_state_set().get_states()]


def _box(acc: Any) -> tuple[int, int, int, int]:
    box = acc.get_extents(Atspi.CoordType.SCREEN)
    return box.x, box.y, box.x + box.width, box.y + box.height


def _shown(acc: Any, states: list[str], parent: Any) -> bool:
    """On screen: "showing", or (an item some widgets add without updating its state:
    GTK 2's icon view, for a renamed file) "visible" with an area inside its parent's.
    Not a closed menu's items, which are visible without a place on screen."""
    if "showing" in states:
        return "visible" in states
    if "visible" not in states or parent is None or parent.get_role_name() == "menu":
        return False
    x0, y0, x1, y1 = _box(acc)
    px0, py0, px1, py1 = _box(parent)
    return x1 - x0 > 1 and y1 - y0 > 1 and px0 <= x0 and py0 <= y0 and x1 <= px1 and y1 <= py1


def _read(acc: Any, app: str, depth: int, parent: Any = None) -> dict[str, Any] | None:
    """The element as a dict (its accessible object under "acc", its identity under
    "key"), or None when it is not on screen (a closed menu, a hidden tab) or went away
    while being read."""
    if acc is None:  # a child that went away between the count and the read
        return None
    try:
        states = _states(acc)
        if not _shown(acc, states, parent):
            return None
        node: dict[str, Any] = {
            "acc": acc,
            "key": (app, acc.path),
            "role": acc.get_role_name(),
            "name": acc.get_name() or "",
            "states": states,
        }
        if not node["name"] and node["role"] in LABELLED:
            node["name"] = _label(acc)
        interfaces = set(acc.get_interfaces())
        if "Text" in interfaces:
            node["text"] = Atspi.Text.get_text(acc, 0, -1)
        if "Value" in interfaces:
            node["value"] = Atspi.Value.get_current_value(acc)
        count = min(acc.get_child_count(), MAX_CHILDREN) if depth < MAX_DEPTH else 0
        kids = (_read(acc.get_child_at_index(i), app, depth + 1, acc) for i in range(count))
        node["children"] = [k for k in kids if k is not None]
        return node
    except GLib.Error:
        return None


def _label(acc: Any) -> str:
    for relation in acc.get_relation_set():
        if relation.get_relation_type() == Atspi.RelationType.LABELLED_BY:
            targets = (relation.get_target(i) for i in range(relation.get_n_targets()))
            return " ".join(t.get_name() or "" for t in targets).strip()
    return ""


def windows() -> list[dict[str, Any]]:
    """The windows on screen, application by application."""
    desktop = Atspi.get_desktop(0)
    out = []
    for i in range(desktop.get_child_count()):
        try:
            app = desktop.get_child_at_index(i)
            if app is None:
                continue
            name, count = f"{app.get_name()}:{app.get_process_id()}", app.get_child_count()
        except GLib.Error:
            continue
        for k in range(count):
            try:
                win = app.get_child_at_index(k)
                if win is None or win.get_role_name() not in WINDOW_ROLES:
                    continue
            except GLib.Error:
                continue
            node = _read(win, name, 0)
            if node is not None:
                out.append(node)
    return out


def numbered(windows: list[dict[str, Any]], ids: Ids | None = None) -> list[dict[str, Any]]:
    """The windows with an id on every element: the episode's (``ids``), or throw-away
    ones in reading order (to compare two reads of the screen)."""
    counter = iter(range(1, 1 << 30))

    def number(node: dict[str, Any]) -> dict[str, Any]:
        eid = ids.of(node["acc"], node["key"]) if ids is not None else next(counter)
        kids = [number(k) for k in node["children"]]
        return {**node, "id": eid, "children": kids}

    return [number(w) for w in windows]


def count(windows: list[dict[str, Any]]) -> int:
    return sum(1 + count(w["children"]) for w in windows)


def center(acc: Any) -> tuple[int, int]:
    """Screen coordinates of an element's centre; GLib.Error when it is gone."""
    box = acc.get_extents(Atspi.CoordType.SCREEN)
    if box.width <= 0 or box.height <= 0:
        raise ValueError("it has no area on screen")
    return box.x + box.width // 2, box.y + box.height // 2


def on_screen(acc: Any) -> bool:
    try:
        return _shown(acc, _states(acc), acc.get_parent())
    except GLib.Error:
        return False
