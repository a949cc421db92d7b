"""Desktop playbooks: write and save a document in Mousepad (into a folder picked in the
save dialog, over an existing file when one is in the way), append to an open file,
compute in galculator (typed or clicked on its buttons), fill cells and a formula in
Gnumeric and save the workbook, rename and move files in PCManFM (by cut and paste or
by dragging), and change settings in Mousepad's preferences dialog.

The scripted user reads each screen (the ids of the tree it was shown) and makes the
mistakes people make: a misspelt word taken back with ctrl+backspace, a wrong key on
the calculator, a wrong cell value corrected through the cell box, a misspelt file name
renamed again, the wrong menu opened first, a field typed into before it is enabled.
Every task ends in a state that is checked on disk or on screen (checks.py).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from agentworld.collect.env import Script, Task
from agentworld.collect.os.env import SCREENS, os_action
from agentworld.collect.os.tree_text import find, window_title
from agentworld.collect.playbook import WORDS, words
from agentworld.schema import Turn

FOLDERS = ("Documents", "Pictures", "Music", "Downloads")
STEMS = ("notes", "todo", "draft", "ideas", "plan", "minutes", "letter", "list")


def _typo(rng: random.Random, word: str) -> str:
    i = rng.randrange(len(word) - 1)
    return word[:i] + word[i + 1] + word[i] + word[i + 2 :]


def _sentence(rng: random.Random) -> str:
    return " ".join(words(rng, rng.randint(3, 6))).capitalize() + rng.choice([".", "", "!"])


def _state(rng: random.Random, app: str, **extra: Any) -> dict[str, Any]:
    return {"app": app, "screen": list(rng.choice(SCREENS)), "folders": list(FOLDERS), **extra}


def _window(page: Turn) -> str:
    """The focused window's title an observation shows ("" when none)."""
    return window_title(page.observation) or ""


def _click(observation: str, role: str, name: str | None = None, **kw: Any):
    eid = find(observation, role, name, **kw)
    return os_action("click", id=eid) if eid is not None else None


def editor_write(rng: random.Random) -> Task:
    name = f"{rng.choice(STEMS)}-{rng.randint(1, 99)}.txt"
    folder = rng.choice(["", "", "Documents"])
    path = f"{folder}/{name}" if folder else name
    lines = [_sentence(rng) for _ in range(rng.randint(1, 3))]
    text = "\n".join(lines)
    misspelt = rng.random() < 0.4
    clash = rng.random() < 0.3  # an older file of that name: the dialog asks to replace it
    files = {path: "old version\n"} if clash else {}

    def gen() -> Script:
        if misspelt:
            last = lines[-1].rstrip(".!").split()[-1]
            yield os_action("type", text=text[: text.rfind(last)] + _typo(rng, last + "xx"))
            yield os_action("hotkey", keys=["ctrl", "backspace"])
            yield os_action("type", text=text[text.rfind(last) :])
        else:
            yield os_action("type", text=text)
        page: Turn = yield os_action("hotkey", keys=["ctrl", "s"])
        if folder:
            cell = find(page.observation, "table-cell", folder)
            if cell is not None:
                yield os_action("double_click", id=cell)
                box = find(page.observation, "text", "Name:")
                yield os_action("click", id=box) if box else os_action("wait", seconds=0.5)
        page = yield os_action("type", text=name + "\n")
        if _window(page).startswith("Save"):  # still saving: give it a moment
            page = yield os_action("wait", seconds=1)
        replace = _click(page.observation, "push-button", "Replace")
        if replace:
            yield replace

    return Task(
        playbook="os/editor-write",
        text=f"In the text editor, write {text!r} and save it as ~/{path}.",
        script=gen,
        state=_state(
            rng, "mousepad", files=files, checks=[{"kind": "file", "path": path, "content": text}]
        ),
    )


def editor_append(rng: random.Random) -> Task:
    name = f"{rng.choice(STEMS)}.txt"
    old = "\n".join(_sentence(rng) for _ in range(rng.randint(3, 40))) + "\n"
    new = _sentence(rng)

    def gen() -> Script:
        if old.count("\n") > 20 and rng.random() < 0.6:
            yield os_action("scroll", clicks=-rng.randint(3, 10))  # reading it first
        yield os_action("hotkey", keys=["ctrl", "end"])
        yield os_action("type", text=new + "\n")
        if rng.random() < 0.3:
            yield os_action("hotkey", keys=["ctrl", "z"])  # second thoughts, then again
            yield os_action("hotkey", keys=["ctrl", "shift", "z"])
        yield os_action("hotkey", keys=["ctrl", "s"])

    return Task(
        playbook="os/editor-append",
        text=f"Add the line {new!r} at the end of ~/{name} and save it.",
        script=gen,
        state=_state(
            rng,
            "mousepad",
            files={name: old},
            args=[f"~/{name}"],
            checks=[{"kind": "file", "path": name, "content": old + new + "\n"}],
        ),
    )


def calculator(rng: random.Random) -> Task:
    a, b, c = rng.randint(2, 99), rng.randint(2, 99), rng.randint(2, 20)
    op1, op2 = rng.choice("+-*"), rng.choice("+-*")
    expr = f"{a}{op1}{b}{op2}{c}"
    value = str(eval(expr))  # noqa: S307 - digits and + - * only, as galculator reads them
    clicked = rng.random() < 0.6
    slip = rng.random() < 0.35

    def gen() -> Script:
        page: Turn = yield os_action("type", text=str(a))
        for op, n in ((op1, b), (op2, c)):
            button = _click(page.observation, "toggle-button", op) if clicked else None
            page = yield button or os_action("type", text=op)
            if slip and n == c:  # a wrong key, taken back with the calculator's <-
                page = yield os_action("type", text=str((c + 3) % 10))
                back = _click(page.observation, "toggle-button", "<-")
                page = yield back or os_action("press", key="backspace")
            page = yield os_action("type", text=str(n))
        equals = _click(page.observation, "toggle-button", "=") if clicked else None
        yield equals or os_action("press", key="enter")

    return Task(
        playbook="os/calculator",
        text=f"Compute {a} {op1} {b} {op2} {c} with the calculator.",
        script=gen,
        state=_state(rng, "galculator", checks=[{"kind": "display", "value": value}]),
    )


def spreadsheet(rng: random.Random) -> Task:
    numbers = [rng.randint(1, 500) for _ in range(rng.randint(3, 5))]
    header = rng.random() < 0.5
    title = rng.choice(["Amount", "Cost", "Hours", "Units"])
    first = 2 if header else 1
    last = first + len(numbers) - 1
    func = rng.choice(["SUM", "SUM", "MAX", "AVERAGE"])
    formula = f"={func}(A{first}:A{last})"
    name = f"{rng.choice(['budget', 'sales', 'hours', 'stock'])}-{rng.randint(1, 9)}"
    wrong = rng.randrange(len(numbers)) if rng.random() < 0.35 else None
    cells = {f"A{first + i}": str(n) for i, n in enumerate(numbers)}
    cells[f"A{last + 1}"] = formula
    if header:
        cells["A1"] = title

    def gen() -> Script:
        typed = [str(n + 10 if i == wrong else n) for i, n in enumerate(numbers)]
        page: Turn = yield os_action(
            "type", text="\n".join(([title] if header else []) + typed) + "\n"
        )
        if wrong is not None:  # back to the wrong cell through the cell box
            box = find(page.observation, "text", has=f'value="A{last + 1}"')
            if box is not None:
                yield os_action("click", id=box)
            yield os_action("hotkey", keys=["ctrl", "a"])  # the box keeps its text
            yield os_action("type", text=f"A{first + wrong}\n")
            yield os_action("type", text=f"{numbers[wrong]}\n")
            yield os_action("type", text="\n" * (len(numbers) - wrong - 1) + formula + "\n")
        else:
            yield os_action("type", text=formula + "\n")
        yield os_action("hotkey", keys=["ctrl", "s"])
        page = yield os_action("type", text=name + "\n")
        if _window(page).startswith("Save"):  # still saving: give it a moment
            yield os_action("wait", seconds=1)

    return Task(
        playbook="os/spreadsheet",
        text=f"In a new workbook, enter {numbers} in column A"
        + (f" under the header {title!r}" if header else "")
        + f", put {formula} below them and save it as ~/{name}.gnumeric.",
        script=gen,
        state=_state(
            rng, "gnumeric", checks=[{"kind": "sheet", "path": f"{name}.gnumeric", "cells": cells}]
        ),
    )


def files(rng: random.Random) -> Task:
    names = sorted({f"{rng.choice(STEMS)}-{w}.txt" for w in words(rng, 4)})
    rename, move = rng.sample(names, 2)
    new_name = f"{rng.choice(WORDS)}-{rng.choice(STEMS)}.txt"
    folder = rng.choice(FOLDERS)
    content = {n: f"{_sentence(rng)}\n" for n in names}
    dragged = rng.random() < 0.5
    misspelt = dragged and rng.random() < 0.5

    def rename_to(page: Turn, current: str, target: str) -> Script:
        icon = find(page.observation, "icon", current)
        yield os_action("click", id=icon) if icon else os_action("press", key="home")
        yield os_action("press", key="f2")
        yield os_action("hotkey", keys=["ctrl", "a"])
        return (yield os_action("type", text=target + "\n"))

    def gen() -> Script:
        page: Turn = yield os_action("press", key="home")
        typo = _typo(rng, new_name.split(".")[0]) + ".txt"
        page = yield from rename_to(page, rename, typo if misspelt else new_name)
        if misspelt:
            page = yield from rename_to(page, typo, new_name)
        src, dst = find(page.observation, "icon", move), find(page.observation, "icon", folder)
        if src is None or dst is None:
            return
        if dragged:
            yield os_action("drag", id=src, to_id=dst)
        else:
            yield os_action("click", id=src)
            yield os_action("hotkey", keys=["ctrl", "x"])
            yield os_action("double_click", id=dst)
            yield os_action("hotkey", keys=["ctrl", "v"])

    checks = [
        {"kind": "absent", "path": rename},
        {"kind": "file", "path": new_name, "content": content[rename]},
        {"kind": "absent", "path": move},
        {"kind": "file", "path": f"{folder}/{move}", "content": content[move]},
    ]
    return Task(
        playbook="os/files",
        text=f"In the file manager, rename ~/{rename} to {new_name} and move ~/{move} into {folder}.",
        script=gen,
        state=_state(rng, "pcmanfm", files=content, args=["~"], checks=checks),
    )


TOGGLES = {
    "Show line numbers": "show-line-numbers",
    "Highlight current line": "highlight-current-line",
    "Wrap long lines": "word-wrap",
    "Display whitespace": "show-whitespace",
}
VIEW = "org/xfce/mousepad/preferences/view"


def settings(rng: random.Random) -> Task:
    margin = rng.choice([None, 72, 79, 100, 120])
    toggles = rng.sample(sorted(TOGGLES), 1 if margin else rng.randint(1, 2))
    wrong_menu = rng.random() < 0.3
    # clicks the margin field while it is disabled (nothing happens) before enabling it
    early = margin is not None and not wrong_menu and rng.random() < 0.4

    def gen() -> Script:
        if wrong_menu:
            yield os_action("hotkey", keys=["alt", "v"])
            yield os_action("press", key="escape")
        page: Turn = yield os_action("hotkey", keys=["alt", "e"])
        page = yield _click(page.observation, "menu-item", "Preferences...") or os_action(
            "press", key="escape"
        )
        for label in toggles:
            page = yield _click(page.observation, "check-box", label) or os_action("wait")
        if margin is None:
            yield os_action("press", key="escape")
            return
        spin = find(page.observation, "spin-button")
        if early and spin is not None:
            page = yield os_action("click", id=spin)
        page = yield _click(page.observation, "check-box", "Long line margin at column:") or (
            os_action("wait")
        )
        if spin is not None:
            # The middle of a spin button is its "-": the value drops by one, then the
            # whole field is selected and typed over.
            yield os_action("click", id=spin)
            yield os_action("hotkey", keys=["ctrl", "a"])
            yield os_action("type", text=f"{margin}\t")
        yield os_action("press", key="escape")

    checks = [
        {"kind": "setting", "group": VIEW, "key": TOGGLES[t], "value": "true"} for t in toggles
    ]
    if margin is not None:
        checks += [
            {"kind": "setting", "group": VIEW, "key": "show-right-margin", "value": "true"},
            {
                "kind": "setting",
                "group": VIEW,
                "key": "right-margin-position",
                "value": str(margin),
            },
        ]
    wanted = ", ".join(toggles) + (f" and a long line margin at column {margin}" if margin else "")
    return Task(
        playbook="os/settings",
        text=f"In the text editor's preferences, turn on {wanted}.",
        script=gen,
        state=_state(rng, "mousepad", checks=checks),
    )


PLAYBOOKS: dict[str, Callable[[random.Random], Task]] = {
    "editor-write": editor_write,
    "editor-append": editor_append,
    "calculator": calculator,
    "spreadsheet": spreadsheet,
    "files": files,
    "settings": settings,
}
