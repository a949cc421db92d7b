"""Web state checks, on the page as ``agentworld.collect.web`` renders it: an
``Error:`` line when the browser failed, ``URL:`` and ``Title:`` lines, then the
accessibility tree one node a line (``[bid] role "name", states``, two spaces of
indent per level).

- ``axtree_wellformed``: the predicted tree parses: every line a node with a known role
  (ARIA, or Chrome's own capitalized names such as ``StaticText``), each level at most
  one deeper than the line before, every bid unique;
- ``url_title``: the URL and title lines of the real page.
"""

from __future__ import annotations

import re

ARIA_ROLES = frozenset(
    """alert alertdialog application article banner blockquote button caption cell
    checkbox code columnheader combobox comment complementary contentinfo definition
    deletion dialog directory document emphasis feed figure form generic grid gridcell
    group heading img image insertion link list listbox listitem log main mark marquee
    math menu menubar menuitem menuitemcheckbox menuitemradio meter navigation none note
    option paragraph presentation progressbar radio radiogroup region row rowgroup
    rowheader scrollbar search searchbox separator slider spinbutton status strong
    subscript superscript switch tab table tablist tabpanel term textbox time timer
    toolbar tooltip tree treegrid treeitem""".split()
)
"""WAI-ARIA 1.2 roles, with the names Chrome gives images (``image``) and the
inline roles it reports (``strong``, ``emphasis``, ``code``, ...)."""

_NODE = re.compile(
    r"^(?P<indent>(?:  )*)(?:\[(?P<bid>[^\]\s]+)\] )?(?P<role>[A-Za-z]+)"
    r'(?: "(?:[^"\\]|\\.)*")?(?:, .*)?$'
)
_HEAD = re.compile(r"^(?:Error: .*|URL: .*|Title: .*|Scroll: .*|\[observation truncated.*\])?$")


def _role_ok(role: str) -> bool:
    return role in ARIA_ROLES or role[0].isupper()  # Chrome's own: StaticText, LabelText


def tree_lines(text: str) -> list[str]:
    """The page's tree lines (the header lines left out)."""
    return [line for line in text.split("\n") if not _HEAD.match(line)]


def has_tree(text: str) -> bool:
    return bool(re.search(r"^URL: ", text, re.M)) and bool(tree_lines(text))


def wellformed(text: str) -> bool:
    """Whether every tree line is a node of a known role, nested one level at a time,
    with unique bids."""
    depth, bids = -1, set()
    for line in tree_lines(text):
        m = _NODE.match(line)
        if m is None or not _role_ok(m.group("role")):
            return False
        level = len(m.group("indent")) // 2
        if level > depth + 1:
            return False
        depth = level
        bid = m.group("bid")
        if bid is not None:
            if bid in bids:
                return False
            bids.add(bid)
    return depth >= 0


def axtree_wellformed(predicted: str, real: str) -> bool | None:
    """The predicted page's tree parses; None when the real page shows no tree."""
    if not has_tree(real):
        return None
    return wellformed(predicted)


def head_value(text: str, name: str) -> str | None:
    """The value of a ``Name: value`` header line of an observation, or None."""
    m = re.search(rf"^{name}: (.*)$", text, re.M)
    return m.group(1).strip() if m else None


def url_title(predicted: str, real: str) -> bool | None:
    """The real page's URL and title lines; None when the real text has no URL line."""
    if head_value(real, "URL") is None:
        return None
    return all(head_value(predicted, k) == head_value(real, k) for k in ("URL", "Title"))
