"""The page as the agent reads it: Chrome's accessibility tree (CDP
``Accessibility.getFullAXTree``) rendered one node a line, ``[bid] role "name"`` with its
states and field value, indented by depth, as the reference's web domain shows pages.

Element ids (bids) are attributes the driver writes on the page's elements before each
snapshot (``BID_SCRIPT``): an element keeps its bid while the page lives, so an agent can
act on what it read, and the same page gets the same bids in every run.

Standard library only: this module runs inside the sandbox, in the browser driver.
"""

from __future__ import annotations

import json
from typing import Any

BID_ATTR = "bid"
# Numbered in document order, continuing after the largest bid already on the page, so
# elements that appear later (a script's menu, a new row) get fresh ids. Returns the
# bids of elements outside the viewport (the agent sees the screen, as in WebArena's
# viewport-only trees; scroll shows the rest) and the page's scroll position.
# A select's options have no box of their own: they count where their select is.
BID_SCRIPT = """() => {
  let n = window.__awBid || 0;
  const hidden = [];
  const H = window.innerHeight, W = window.innerWidth;
  for (const el of document.querySelectorAll('body, body *')) {
    if (!el.hasAttribute('bid')) el.setAttribute('bid', String(++n));
    const box = el.closest('select') || el;
    const r = box.getBoundingClientRect();
    if (r.bottom <= 0 || r.top >= H || r.right <= 0 || r.left >= W) hidden.push(el.getAttribute('bid'));
  }
  window.__awBid = n;
  const root = document.scrollingElement || document.documentElement;
  return {hidden, scrollY: Math.round(window.scrollY), height: root.scrollHeight, viewport: H};
}"""

# Roles that carry no content of their own: their children are shown in their place.
_TRANSPARENT = {"none", "generic", "presentation", "LineBreak", "MenuListPopup"}
_NEVER = {"InlineTextBox", "ListMarker"}
_COLLAPSIBLE = {
    "cell",
    "gridcell",
    "columnheader",
    "rowheader",
    "paragraph",
    "LabelText",
    "listitem",
    "emphasis",
    "strong",
    "DescriptionListTerm",
    "DescriptionListDetail",
    "group",
}
_BOOL_STATES = ("focused", "selected", "disabled", "required", "expanded")
_MAX_NAME = 120


def dom_bids(document: dict[str, Any]) -> dict[int, str]:
    """backendNodeId -> bid for every element of a CDP ``DOM.getDocument`` tree."""
    out: dict[int, str] = {}
    stack = [document]
    while stack:
        node = stack.pop()
        attrs = node.get("attributes") or []
        for name, value in zip(attrs[::2], attrs[1::2], strict=True):
            if name == BID_ATTR:
                out[node["backendNodeId"]] = value
        stack.extend(node.get("children") or [])
        if node.get("contentDocument"):
            stack.append(node["contentDocument"])
    return out


def _value(field: dict[str, Any] | None) -> Any:
    return None if not field else field.get("value")


def _norm(text: Any) -> str:
    return " ".join(str(text or "").split())


def _quote(text: str) -> str:
    text = _norm(text)
    if len(text) > _MAX_NAME:
        text = text[: _MAX_NAME - 3] + "..."
    return json.dumps(text, ensure_ascii=False)


class _Tree:
    """The CDP node list as a tree, with what the renderer asks of it."""

    def __init__(self, nodes: list[dict[str, Any]], bids: dict[int, str], hidden: set[str]):
        self.by_id = {n["nodeId"]: n for n in nodes}
        self.bids, self.hidden = bids, hidden
        self._text: dict[str, str] = {}

    def children(self, node: dict[str, Any]) -> list[dict[str, Any]]:
        return [self.by_id[c] for c in node.get("childIds", []) if c in self.by_id]

    def bid(self, node: dict[str, Any]) -> str | None:
        return self.bids.get(node.get("backendDOMNodeId", -1))

    def text(self, node: dict[str, Any]) -> str:
        """The node's visible text: its static texts, in order."""
        key = node["nodeId"]
        if key not in self._text:
            if _value(node.get("role")) == "StaticText":
                self._text[key] = _norm(_value(node.get("name")))
            else:
                self._text[key] = _norm(" ".join(self.text(c) for c in self.children(node)))
        return self._text[key]


def _states(node: dict[str, Any]) -> list[str]:
    props = {p["name"]: _value(p.get("value")) for p in node.get("properties") or []}
    out = [s for s in _BOOL_STATES if props.get(s) is True]
    if props.get("checked") in ("true", "mixed", True):
        out.append("checked" if props["checked"] in ("true", True) else "checked=mixed")
    value = _value(node.get("value"))
    if value not in (None, ""):
        out.append(f"value={_quote(value)}")
    return out


def render_axtree(
    nodes: list[dict[str, Any]], bids: dict[int, str], hidden: set[str] | frozenset = frozenset()
) -> str:
    """The tree under the root (the root is the page, whose title is shown apart).

    Compacted the way readers of these trees expect: wrappers without a name, ignored
    nodes and unnamed images give way to their children; a text that repeats its
    parent's name or a sibling control's, or holds no letter or digit, is left out; a
    container named only by its children's text (a cell holding a link) is not named
    twice, and when it then holds a single element it gives way to it; a select's
    options are listed on its line. Elements whose bid is in ``hidden`` (outside the
    viewport) are left out, and so is the text inside them.
    """
    if not nodes:
        return ""
    tree = _Tree(nodes, bids, set(hidden))
    lines: list[tuple[int, str]] = []
    names = _child_names(tree, nodes[0])
    for child in tree.children(nodes[0]):
        lines += _render(tree, child, "", names, False)
    return "\n".join("  " * depth + text for depth, text in lines)


def _child_names(tree: _Tree, node: dict[str, Any]) -> frozenset[str]:
    # A label's text beside the control it names (a checkbox and "download file").
    return frozenset(
        _norm(_value(k.get("name")))
        for k in tree.children(node)
        if _value(k.get("role")) != "StaticText"
    )


def _render(
    tree: _Tree, node: dict[str, Any], parent_name: str, siblings: frozenset[str], hidden: bool
) -> list[tuple[int, str]]:
    """(depth, text) lines of a subtree, depths relative to it."""
    role = str(_value(node.get("role")) or "")
    bid = tree.bid(node)
    hidden = bid in tree.hidden if bid is not None else hidden
    shown = None if hidden else _line(tree, node, role, parent_name, siblings)
    if shown is not None and role == "combobox":
        return [(0, shown[0])]  # its options are on its line
    inner_parent = shown[1] if shown else parent_name
    names = _child_names(tree, node)
    body: list[tuple[int, str]] = []
    for child in tree.children(node):
        body += _render(tree, child, inner_parent, names, hidden)
    if shown is None:
        return body
    text, name = shown
    single = sum(1 for depth, _ in body if depth == 0) == 1
    if not name and role in _COLLAPSIBLE and single:
        return body  # a nameless cell or paragraph around one element: the element
    return [(0, text)] + [(depth + 1, t) for depth, t in body]


def _line(
    tree: _Tree, node: dict[str, Any], role: str, parent_name: str, siblings: frozenset[str]
) -> tuple[str, str] | None:
    """(the node's line, the name it shows), or None when the node is not shown."""
    name = _norm(_value(node.get("name")))
    if node.get("ignored") or role in _NEVER or (role in _TRANSPARENT and not name):
        return None
    if role in ("image", "img") and not name:
        return None  # decoration: nothing to read, nothing an agent could aim at
    if role == "StaticText":
        if name == parent_name or not any(ch.isalnum() for ch in name) or name in siblings:
            return None
        return f"StaticText {_quote(name)}", name
    kids = tree.children(node)
    if (
        name
        and name == tree.text(node)
        and any(_value(k.get("role")) != "StaticText" for k in kids)
    ):
        name = ""  # the children say it
    bid = tree.bid(node)
    head = f"[{bid}] {role}" if bid is not None else role
    parts = [head + (f" {_quote(name)}" if name else "")] + _states(node)
    if role == "combobox":
        options = [_norm(_value(o.get("name"))) for o in _options(tree, node)]
        parts.append("options=" + json.dumps(options, ensure_ascii=False))
    return ", ".join(parts), name


def _options(tree: _Tree, node: dict[str, Any]) -> list[dict[str, Any]]:
    out, stack = [], list(reversed(tree.children(node)))
    while stack:
        n = stack.pop()
        if _value(n.get("role")) == "option":
            out.append(n)
        else:
            stack.extend(reversed(tree.children(n)))
    return out
