"""End-state checks of os tasks, read from what the applications left behind: files in
the episode's home (a saved document, a spreadsheet's cells, a renamed or moved file,
a setting in the GSettings key file) or the application's state on screen (the
calculator's display). Each check is a dict with a ``kind``; ``run_checks`` turns a
task's list into the episode's Outcome."""

from __future__ import annotations

import configparser
import gzip
import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from typing import Any

from agentworld.collect.os.tree_text import elements
from agentworld.schema import Outcome

SETTINGS_FILE = ".config/glib-2.0/settings/keyfile"


def _inside(home: str, relative: str) -> str | None:
    """The host path of ``relative`` when it really is inside the home (an application
    may have left a link pointing out of it), else None."""
    root = os.path.realpath(home)
    path = os.path.realpath(os.path.join(root, relative))
    return path if path.startswith(root + os.sep) else None


def _read(home: str, relative: str) -> str | None:
    path = _inside(home, relative)
    if path is None or not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def file_has(check: dict[str, Any], home: str, _: str) -> str | None:
    """``path`` exists and holds ``content`` (a final newline aside)."""
    got = _read(home, check["path"])
    if got is None:
        return f"{check['path']} does not exist"
    if got.rstrip("\n") != check["content"].rstrip("\n"):
        return f"{check['path']} holds {got[:80]!r}, not {check['content'][:80]!r}"
    return None


def absent(check: dict[str, Any], home: str, _: str) -> str | None:
    """``path`` no longer exists (a file that was moved or renamed)."""
    path = _inside(home, check["path"])
    return f"{check['path']} still exists" if path and os.path.lexists(path) else None


def display(check: dict[str, Any], _: str, observation: str) -> str | None:
    """The application's display (its first text element) shows ``value``."""
    shown = next(
        (re.search(r'value="([^"]*)"', rest) for _, role, _, rest in elements(observation)
         if role == "text"),
        None,
    )  # fmt: skip
    value = shown[1] if shown else None
    if value != check["value"]:
        return f"the display shows {value!r}, not {check['value']!r}"
    return None


def setting(check: dict[str, Any], home: str, _: str) -> str | None:
    """GSettings key ``key`` of ``group`` holds ``value`` in the key file backend."""
    text = _read(home, SETTINGS_FILE)
    if text is None:
        return "no setting was saved"
    parser = configparser.ConfigParser(interpolation=None)
    parser.read_string(text)
    got = parser.get(check["group"], check["key"], fallback=None)
    if got != check["value"]:
        return f"{check['group']} {check['key']} is {got!r}, not {check['value']!r}"
    return None


def sheet_cells(check: dict[str, Any], home: str, _: str) -> str | None:
    """A Gnumeric file ``path`` whose first sheet holds ``cells`` (A1 -> text as typed)."""
    path = _inside(home, check["path"])
    if path is None or not os.path.isfile(path):
        return f"{check['path']} does not exist"
    try:
        with gzip.open(path) as f:
            root = ET.parse(f).getroot()
    except (OSError, ET.ParseError) as e:
        return f"{check['path']} is not a Gnumeric file: {e}"
    cells = {}
    for cell in root.iter("{http://www.gnumeric.org/v10.dtd}Cell"):
        col, row = int(cell.get("Col", 0)), int(cell.get("Row", 0))
        cells[f"{chr(ord('A') + col)}{row + 1}"] = cell.text or ""
    for ref, want in check["cells"].items():
        got = cells.get(ref)
        if want.startswith("=") and got is not None:  # Gnumeric writes =sum(...)
            got, want = got.upper(), want.upper()
        if got != want:
            return f"cell {ref} holds {cells.get(ref)!r}, not {want!r}"
    return None


CHECKS: dict[str, Callable[[dict[str, Any], str, str], str | None]] = {
    "file": file_has,
    "absent": absent,
    "display": display,
    "setting": setting,
    "sheet": sheet_cells,
}


def run_checks(checks: list[dict[str, Any]], home: str, observation: str) -> Outcome:
    """All checks pass: success; the reward is the share that passed; the note names
    the first failure."""
    failures = [f for f in (CHECKS[c["kind"]](c, home, observation) for c in checks) if f]
    passed = len(checks) - len(failures)
    note = failures[0] if failures else f"all {len(checks)} checks passed"
    return Outcome(success=not failures, reward=round(passed / len(checks), 4), note=note)
