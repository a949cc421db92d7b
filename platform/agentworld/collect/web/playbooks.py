"""Web playbooks: tasks on Datasette (filter rows, sort, facet, open a row and follow
its foreign key, full-text search, browse from the index) and on the helpdesk (search
tickets, file a ticket through a validated form, comment and change a status). The
scripted user reads each page (the bids of the tree it was shown), sometimes arrives
by following links rather than typing the URL, and makes first attempts that fail
(a typo in a filter, an empty comment, a form with a bad email) before correcting them.
"""

from __future__ import annotations

import collections
import json
import random
import re
from collections.abc import Callable
from typing import Any

from agentworld.collect.env import Action, Script, Task
from agentworld.collect.web import sites
from agentworld.collect.web.env import DATASETTE_SETTINGS, DATASETTE_URL, HELPDESK_URL, web_action
from agentworld.schema import Turn

_LINE = re.compile(r'^\s*\[(\w+)\] ([A-Za-z]+)(?: ("(?:[^"\\]|\\.)*"))?(.*)$')


def elements(observation: str) -> list[tuple[str, str, str, str]]:
    """(bid, role, name, rest of the line) of every element line of an observation."""
    out = []
    for line in observation.splitlines():
        m = _LINE.match(line)
        if m:
            out.append((m[1], m[2], json.loads(m[3]) if m[3] else "", m[4]))
    return out


def find(observation: str, role: str, name: str | None = None, *, has: str = "") -> str | None:
    """The bid of the first element of ``role`` (named ``name``, its line holding
    ``has``), or None when the page shows none."""
    for bid, r, n, rest in elements(observation):
        if r == role and (name is None or n == name) and has in rest:
            return bid
    return None


def _answer_count(observation: str) -> str:
    m = re.search(r'heading "(\d[\d,]*) rows?', observation)
    return f"{m[1]} rows" if m else "I could not find the row count."


def _row_link(observation: str, pk: str, label: str) -> str | None:
    """The bid of the ``label`` link in the table row whose key link is ``pk``."""
    found = False
    for bid, role, name, _ in elements(observation):
        if role == "link" and name == pk:
            found = True
        elif found and role == "link" and name == label:
            return bid
        elif found and role == "row":
            return None
    return None


def _cell_after(observation: str, header: str) -> str:
    """The cell under column ``header`` in the first data row of a row page."""
    headers = [n for _, r, n, _ in elements(observation) if r == "columnheader"]
    cells = [n for _, r, n, _ in elements(observation) if r == "cell"]
    if header in headers and len(cells) > headers.index(header):
        return cells[headers.index(header)]
    return "not found"


def _typo(rng: random.Random, word: str) -> str:
    i = rng.randrange(len(word))
    return word[:i] + word[i + 1 :] if len(word) > 3 else word + "x"


def _db(rng: random.Random, shapes: tuple[str, ...] = tuple(sites.DATABASES)) -> dict[str, Any]:
    return sites.DATABASES[rng.choice(shapes)](rng)


def _state(db: dict[str, Any], rng: random.Random, **extra: Any) -> dict[str, Any]:
    return {
        "app": "datasette",
        "databases": [db],
        "settings": {"default_page_size": rng.choice([4, 5, 6, 8])},
        **extra,
    }


def _main_table(db: dict[str, Any]) -> dict[str, Any]:
    return db["tables"][-1]


def _column(table: dict[str, Any], kind: str) -> list[str]:
    return [c for c, t in table["columns"] if c != "id" and not c.endswith("_id") and t == kind]


def _open_table(rng: random.Random, db: dict[str, Any], table: str) -> Script:
    """Reach the table page: typed URL, or index -> database -> table by links."""
    if rng.random() < 0.6:
        yield web_action("goto", url=f"{DATASETTE_URL}/{db['name']}/{table}")
        return
    page: Turn = yield web_action("goto", url=f"{DATASETTE_URL}/")
    bid = find(page.observation, "link", db["name"])
    if bid:
        page = yield web_action("click", bid=bid)
    bid = find(page.observation, "link", table)
    yield (
        web_action("click", bid=bid)
        if bid
        else web_action("goto", url=f"{DATASETTE_URL}/{db['name']}/{table}")
    )


def filter_rows(rng: random.Random) -> Task:
    db = _db(rng)
    table = _main_table(db)
    col = rng.choice(_column(table, "text")[1:] or _column(table, "text"))
    idx = [c for c, _ in table["columns"]].index(col)
    value = rng.choice([r[idx] for r in table["rows"]])
    count = sum(1 for r in table["rows"] if r[idx] == value)
    wrong_first = rng.random() < 0.3

    def gen() -> Script:
        page: Turn = yield from _last(_open_table(rng, db, table["name"]))
        for attempt in ([_typo(rng, value)] if wrong_first else []) + [value]:
            column = find(page.observation, "combobox", has="- column -") or find(
                page.observation, "combobox"
            )
            if column:
                yield web_action("select_option", bid=column, value=col)
            box = find(page.observation, "textbox")
            if box is None:
                break
            yield web_action("fill", bid=box, value=attempt)
            apply = find(page.observation, "button", "Apply")
            page = yield (
                web_action("click", bid=apply)
                if apply
                else web_action("keyboard_press", key="Enter")
            )
        yield web_action("send_msg_to_user", text=_answer_count(page.observation))

    return Task(
        playbook="web/datasette-filter",
        text=f"In the {db['name']} database, how many {table['name']} have {col} = {value}?",
        script=gen,
        state=_state(db, rng, answer=f"{count} row"),
    )


def _last(script: Script) -> Script:
    """Run a sub-script and return the Turn its last action produced."""
    last: Turn | None = None
    try:
        action = next(script)
        while True:
            last = yield action
            action = script.send(last)
    except StopIteration:
        pass
    return last


def sort_rows(rng: random.Random) -> Task:
    db = _db(rng)
    table = _main_table(db)
    col = rng.choice(_column(table, "real") + _column(table, "integer"))
    cols = [c for c, _ in table["columns"]]
    idx, label = cols.index(col), cols[1]
    top = max(table["rows"], key=lambda r: (r[idx], -r[0]))

    def gen() -> Script:
        page: Turn = yield from _last(_open_table(rng, db, table["name"]))
        for _ in range(2):  # ascending first, then descending
            # Datasette marks the sorted column: "price ▼" ascending, "price ▲" descending.
            bid = find(page.observation, "link", col) or find(page.observation, "link", f"{col} ▼")
            if bid is None:
                break
            page = yield web_action("click", bid=bid)
        if rng.random() < 0.4:
            page = yield web_action("scroll", delta_x=0, delta_y=rng.choice([300, 500]))
            page = yield web_action("scroll", delta_x=0, delta_y=-1000)
        cells = [n for _, r, n, _ in elements(page.observation) if r == "cell"]
        yield web_action("send_msg_to_user", text=cells[0] if cells else "not found")

    return Task(
        playbook="web/datasette-sort",
        text=f"In {db['name']}/{table['name']}, which row has the highest {col}? Give its {label}.",
        script=gen,
        state=_state(db, rng, answer=str(top[1])),
    )


def facet(rng: random.Random) -> Task:
    db = _db(rng)
    table = _main_table(db)
    col = rng.choice(_column(table, "text")[1:] or _column(table, "text"))
    idx = [c for c, _ in table["columns"]].index(col)
    counts = collections.Counter(r[idx] for r in table["rows"])
    # Datasette lists the most frequent values first, DATASETTE_SETTINGS' facet size of them.
    shown = sorted(counts, key=lambda v: (-counts[v], v))[
        : DATASETTE_SETTINGS["default_facet_size"]
    ]
    value = rng.choice(shown)
    count = counts[value]

    def gen() -> Script:
        page: Turn = yield from _last(_open_table(rng, db, table["name"]))
        bid = find(page.observation, "link", col)  # a suggested facet, or the header
        url = f"{DATASETTE_URL}/{db['name']}/{table['name']}?_facet={col}"
        page = (
            yield web_action("goto", url=url)
            if rng.random() < 0.5 or not bid
            else (web_action("click", bid=bid))
        )
        if "_facet" not in page.observation.split("\n", 3)[0] + page.observation[:300]:
            page = yield web_action("goto", url=url)
        bid = find(page.observation, "link", value)
        if bid is None:
            page = yield web_action("scroll", delta_x=0, delta_y=400)
            bid = find(page.observation, "link", value)
        if bid:
            page = yield web_action("click", bid=bid)
        if rng.random() < 0.3:
            yield web_action("go_back")
            page = yield web_action("go_forward")
        yield web_action("send_msg_to_user", text=_answer_count(page.observation))

    return Task(
        playbook="web/datasette-facet",
        text=f"Facet {db['name']}/{table['name']} by {col}: how many rows have {col} {value}?",
        script=gen,
        state=_state(db, rng, answer=f"{count} row"),
    )


def open_row(rng: random.Random) -> Task:
    db = _db(rng, ("library", "weather"))
    table = _main_table(db)
    row = rng.choice(table["rows"])
    fk_col = next(iter(table["foreign_keys"]))
    parent = db["tables"][0]
    parent_row = parent["rows"][row[[c for c, _ in table["columns"]].index(fk_col)] - 1]

    def gen() -> Script:
        page: Turn = yield from _last(_open_table(rng, db, table["name"]))
        if rng.random() < 0.25:  # a guess at a bid before reading the page
            page = yield web_action("click", bid=str(rng.randint(400, 900)))
        if find(page.observation, "link", str(row[0])) is None and rng.random() < 0.5:
            page = yield web_action("scroll", delta_x=0, delta_y=rng.choice([400, 800]))
        bid = find(page.observation, "link", str(row[0]))
        url = f"{DATASETTE_URL}/{db['name']}/{table['name']}/{row[0]}"
        page = yield web_action("click", bid=bid) if bid else web_action("goto", url=url)
        # The row page shows the key's value; its label links from the table page.
        page = yield web_action("go_back")
        link = _row_link(page.observation, str(row[0]), str(parent_row[1]))
        if link:
            page = yield web_action("click", bid=link)
        else:
            page = yield web_action(
                "goto", url=f"{DATASETTE_URL}/{db['name']}/{parent['name']}/{parent_row[0]}"
            )
        yield web_action("send_msg_to_user", text=_cell_after(page.observation, "name"))

    return Task(
        playbook="web/datasette-row",
        text=f"Open {table['name']} row {row[0]} in {db['name']} and follow its {fk_col} link.",
        script=gen,
        state=_state(db, rng, answer=str(parent_row[1])),
    )


def search_rows(rng: random.Random) -> Task:
    db = _db(rng, ("library", "staff"))
    table = _main_table(db)
    col = table["fts"][rng.randrange(len(table["fts"]))]
    idx = [c for c, _ in table["columns"]].index(col)
    word = rng.choice(str(rng.choice(table["rows"])[idx]).split())

    def gen() -> Script:
        page: Turn = yield from _last(_open_table(rng, db, table["name"]))
        box = find(page.observation, "searchbox")
        if box is None:
            return
        if rng.random() < 0.5:
            yield web_action("fill", bid=box, value=word)
            page = yield web_action("keyboard_press", key="Enter")
        else:
            yield web_action("click", bid=box)
            yield web_action("keyboard_type", text=word)
            page = yield web_action("press", bid=box, key="Enter")
        yield web_action("send_msg_to_user", text=_answer_count(page.observation))

    return Task(
        playbook="web/datasette-search",
        text=f"Search {db['name']}/{table['name']} for {word!r}: how many rows match?",
        script=gen,
        state=_state(db, rng),
    )


def _helpdesk_state(data: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"app": "helpdesk", "helpdesk": data, **extra}


def tickets_search(rng: random.Random) -> Task:
    data = sites.helpdesk(rng)
    target = rng.choice(data["tickets"])
    word = rng.choice([w for w in target["title"].split() if len(w) > 3] or [target["title"]])
    status = target["status"] if rng.random() < 0.6 else ""

    def gen() -> Script:
        if rng.random() < 0.5:
            page: Turn = yield web_action("goto", url=f"{HELPDESK_URL}/tickets")
        else:
            page = yield web_action("goto", url=f"{HELPDESK_URL}/")
            page = yield web_action("click", bid=find(page.observation, "link", "Tickets") or "1")
        box = find(page.observation, "textbox", "Search")
        if box:
            yield web_action("fill", bid=box, value=word)
        sel = find(page.observation, "combobox", "Status")
        if sel and status:
            yield web_action("select_option", bid=sel, value=status)
        button = find(page.observation, "button", "Search")
        page = yield web_action("click", bid=button or "0")
        link = find(page.observation, "link", target["title"])
        if link:
            page = yield web_action("click", bid=link)
            if rng.random() < 0.5:
                page = yield web_action("go_back")
        yield web_action("send_msg_to_user", text=f"#{target['id']} is {target['status']}")

    return Task(
        playbook="web/helpdesk-search",
        text=f"Find the ticket about {target['title']!r} and tell its status.",
        script=gen,
        state=_helpdesk_state(data, answer=target["status"]),
    )


def new_ticket(rng: random.Random) -> Task:
    data = sites.helpdesk(rng)
    req = sites.ticket_request(rng, data)
    who, email, title = req["who"], req["email"], req["title"]
    category, priority = req["category"], req["priority"]
    mistakes = rng.sample(["email", "title", "category"], rng.choice([0, 1, 1]))
    new_id = len(data["tickets"]) + 1

    def fill_form(page: Turn, bad: set[str], only: set[str] | None = None) -> Script:
        """Fill the form (``only`` those fields: the server kept the others' values)."""
        obs = page.observation
        fields = {
            "title": ("Title", title[:3] if "title" in bad else title),
            "email": ("Your email", email.replace("@", " at ") if "email" in bad else email),
            "description": ("Description", f"{title}. Please help, {who}."),
        }
        for key, (label, value) in fields.items():
            bid = find(obs, "textbox", label)
            if bid and (only is None or key in only):
                yield web_action("fill", bid=bid, value=value)
        sel = find(obs, "combobox", "Category")
        if sel and "category" not in bad and (only is None or "category" in only):
            yield web_action("select_option", bid=sel, value=category)
        radio = find(obs, "radio", priority)
        if radio and only is None:
            yield web_action("check", bid=radio)
        button = find(obs, "button", "Create ticket")
        return (yield web_action("click", bid=button or "0"))

    def gen() -> Script:
        if mistakes or rng.random() < 0.5:  # (a wrong first try leaves no turn for links)
            page: Turn = yield web_action("goto", url=f"{HELPDESK_URL}/tickets/new")
        else:
            page = yield web_action("goto", url=f"{HELPDESK_URL}/")
            page = yield web_action(
                "click", bid=find(page.observation, "link", "New ticket") or "0"
            )
        if mistakes:
            page = yield from fill_form(page, set(mistakes))
            page = yield from fill_form(page, set(), set(mistakes))
        else:
            page = yield from fill_form(page, set())
        yield web_action("send_msg_to_user", text=f"Created ticket #{new_id}.")

    return Task(
        playbook="web/helpdesk-new",
        text=f"File a {priority} {category} ticket {title!r} for {email}.",
        script=gen,
        state=_helpdesk_state(data, answer=f"#{new_id}"),
    )


def comment(rng: random.Random) -> Task:
    data = sites.helpdesk(rng)
    target = rng.choice(data["tickets"])
    text = rng.choice(["Fixed after a restart.", "Waiting for the vendor.", "Please retry now."])
    status = rng.choice([s for s in ("open", "pending", "closed") if s != target["status"]])

    def gen() -> Script:
        page: Turn = yield web_action("goto", url=f"{HELPDESK_URL}/tickets/{target['id']}")
        if rng.random() < 0.35:  # posting before writing anything
            page = yield web_action(
                "click", bid=find(page.observation, "button", "Post comment") or "0"
            )
        box = find(page.observation, "textbox", "Comment")
        if box:
            yield web_action("fill", bid=box, value=text)
            page = yield web_action(
                "click", bid=find(page.observation, "button", "Post comment") or "0"
            )
        sel = find(page.observation, "combobox", "Change status")
        if sel is None:
            page = yield web_action("scroll", delta_x=0, delta_y=400)
            sel = find(page.observation, "combobox", "Change status")
        if sel:
            yield web_action("select_option", bid=sel, value=status)
            page = yield web_action("click", bid=find(page.observation, "button", "Update") or "0")
        yield web_action("send_msg_to_user", text=f"Commented and set #{target['id']} to {status}.")

    return Task(
        playbook="web/helpdesk-comment",
        text=f"Add the comment {text!r} to ticket #{target['id']} and set it to {status}.",
        script=gen,
        state=_helpdesk_state(data, answer=status),
    )


PLAYBOOKS: dict[str, Callable[[random.Random], Task]] = {
    "datasette-filter": filter_rows,
    "datasette-sort": sort_rows,
    "datasette-facet": facet,
    "datasette-row": open_row,
    "datasette-search": search_rows,
    "helpdesk-search": tickets_search,
    "helpdesk-new": new_ticket,
    "helpdesk-comment": comment,
}

__all__ = ["PLAYBOOKS", "Action", "elements", "find"]
