"""The episode's web content, drawn from a seeded RNG: SQLite databases of several
shapes for Datasette (one table or two joined by a foreign key, text/number/date
columns, full-text search on some) and the helpdesk's tickets. Plain data (JSON-able
dicts) in the task state; ``write_site`` turns it into files for the driver."""

from __future__ import annotations

import json
import os
import random
import sqlite3
from typing import Any

from agentworld.collect.web.helpdesk import PRIORITIES, STATUSES

FIRST = "Ada Ben Cleo Dara Emil Farah Gus Hana Ivo Jun Kai Lena Milo Nia Omar Pia Ravi Sana Tomas Uma Vik Wen Yara Zeno".split()
LAST = "Abe Brandt Costa Diaz Eng Fox Gill Haas Ito Jansen Kahn Lund Moreau Novak Ortiz Park Quinn Rossi Sato Tran Ueda Varga Wolfe Young".split()
CITIES = "Lisbon Oslo Quito Lagos Hanoi Perth Tunis Lima Riga Porto Accra Cusco".split()
NOUNS = "lamp kettle chair atlas drill ladder blanket compass lantern mug rake stool teapot vase".split()
ADJ = "amber brisk cobalt dusty early faint golden hollow ivory jade keen lunar misty noble".split()
GENRES = "mystery poetry history travel science fantasy biography cooking".split()
REGIONS = "north south east west coast highlands".split()


def person(rng: random.Random) -> str:
    return f"{rng.choice(FIRST)} {rng.choice(LAST)}"


def _date(rng: random.Random, year: int) -> str:
    return f"{year}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"


def _unique(rng: random.Random, make, n: int) -> list[str]:
    out: dict[str, None] = {}
    while len(out) < n:
        out[make()] = None
    return list(out)


def shop(rng: random.Random) -> dict[str, Any]:
    cats = rng.sample(
        ["garden", "kitchen", "tools", "toys", "office", "outdoor"], rng.randint(3, 4)
    )
    n = rng.randint(14, 30)
    names = _unique(rng, lambda: f"{rng.choice(ADJ)} {rng.choice(NOUNS)}", n)
    rows = [
        [i + 1, names[i], rng.choice(cats), round(rng.uniform(2, 90), 2), rng.randint(0, 40)]
        for i in range(n)
    ]
    table = {
        "name": "products",
        "columns": [
            ["id", "integer"],
            ["name", "text"],
            ["category", "text"],
            ["price", "real"],
            ["stock", "integer"],
        ],
        "rows": rows,
    }
    return {"name": rng.choice(["shop", "store", "inventory"]), "tables": [table]}


def library(rng: random.Random) -> dict[str, Any]:
    authors = _unique(rng, lambda: person(rng), rng.randint(4, 7))
    a_rows = [[i + 1, a, rng.choice(CITIES)] for i, a in enumerate(authors)]
    n = rng.randint(12, 26)
    titles = _unique(rng, lambda: f"The {rng.choice(ADJ).title()} {rng.choice(NOUNS).title()}", n)
    b_rows = [
        [
            i + 1,
            titles[i],
            rng.randint(1, len(authors)),
            rng.choice(GENRES),
            rng.randint(1950, 2024),
        ]
        for i in range(n)
    ]
    return {
        "name": rng.choice(["library", "books", "catalog"]),
        "tables": [
            {
                "name": "authors",
                "columns": [["id", "integer"], ["name", "text"], ["city", "text"]],
                "rows": a_rows,
            },
            {
                "name": "books",
                "columns": [
                    ["id", "integer"],
                    ["title", "text"],
                    ["author_id", "integer"],
                    ["genre", "text"],
                    ["year", "integer"],
                ],
                "rows": b_rows,
                "foreign_keys": {"author_id": "authors"},
                "fts": ["title", "genre"],
            },
        ],
    }


def weather(rng: random.Random) -> dict[str, Any]:
    stations = _unique(
        rng,
        lambda: f"{rng.choice(CITIES)} {rng.choice(['airport', 'harbor', 'hill', 'park'])}",
        rng.randint(3, 5),
    )
    s_rows = [[i + 1, s, rng.choice(REGIONS)] for i, s in enumerate(stations)]
    n = rng.randint(15, 30)
    r_rows = [
        [
            i + 1,
            rng.randint(1, len(stations)),
            _date(rng, 2025),
            round(rng.uniform(-5, 34), 1),
            round(rng.choice([0, 0, rng.uniform(0, 30)]), 1),
        ]
        for i in range(n)
    ]
    return {
        "name": rng.choice(["weather", "climate"]),
        "tables": [
            {
                "name": "stations",
                "columns": [["id", "integer"], ["name", "text"], ["region", "text"]],
                "rows": s_rows,
            },
            {
                "name": "readings",
                "columns": [
                    ["id", "integer"],
                    ["station_id", "integer"],
                    ["day", "text"],
                    ["temp_c", "real"],
                    ["rain_mm", "real"],
                ],
                "rows": r_rows,
                "foreign_keys": {"station_id": "stations"},
            },
        ],
    }


def staff(rng: random.Random) -> dict[str, Any]:
    depts = rng.sample(
        ["sales", "support", "design", "finance", "research", "legal"], rng.randint(3, 4)
    )
    n = rng.randint(12, 28)
    names = _unique(rng, lambda: person(rng), n)
    rows = [
        [
            i + 1,
            names[i],
            rng.choice(depts),
            rng.choice(CITIES),
            rng.randrange(38, 140) * 1000,
            _date(rng, rng.randint(2012, 2025)),
        ]
        for i in range(n)
    ]
    table = {
        "name": "employees",
        "columns": [
            ["id", "integer"],
            ["name", "text"],
            ["department", "text"],
            ["city", "text"],
            ["salary", "integer"],
            ["hired", "text"],
        ],
        "rows": rows,
        "fts": ["name", "city"],
    }
    return {"name": rng.choice(["staff", "people", "hr"]), "tables": [table]}


DATABASES = {"shop": shop, "library": library, "weather": weather, "staff": staff}

TITLES = (
    "Printer offline on floor {n}",
    "Cannot log in to {app}",
    "{app} crashes on start",
    "Request a new {thing}",
    "VPN drops every hour",
    "Invoice {n} missing",
    "Email bounces from {app}",
    "{thing} is broken",
    "Password reset for {app}",
    "Slow {app} reports",
)
APPS = "Payroll Calendar Wiki Mailer Tracker Portal".split()
THINGS = "laptop monitor headset badge keyboard phone".split()


def helpdesk(rng: random.Random) -> dict[str, Any]:
    cats = rng.sample(["hardware", "software", "network", "billing", "access"], rng.randint(3, 5))
    tickets = []
    for i in range(rng.randint(8, 18)):
        title = rng.choice(TITLES).format(
            n=rng.randint(2, 9), app=rng.choice(APPS), thing=rng.choice(THINGS)
        )
        who = person(rng)
        tickets.append(
            {
                "id": i + 1,
                "title": title,
                "status": rng.choice(STATUSES),
                "priority": rng.choice(PRIORITIES),
                "category": rng.choice(cats),
                "requester": f"{who.split()[0].lower()}@{rng.choice(['acme', 'globex', 'initech'])}.com",
                "opened": _date(rng, 2026),
                "description": f"{title}. Reported by {who}; happens since {rng.choice(['Monday', 'yesterday', 'the update'])}.",
                "comments": [
                    {
                        "by": person(rng),
                        "text": rng.choice(
                            [
                                "Looking into it.",
                                "Can you send a screenshot?",
                                "Restarted the service.",
                            ]
                        ),
                    }
                    for _ in range(rng.randint(0, 2))
                ],
            }
        )
    return {
        "name": rng.choice(["Helpdesk", "IT Support", "Service Desk"]),
        "categories": cats,
        "tickets": tickets,
    }


def ticket_request(rng: random.Random, data: dict[str, Any]) -> dict[str, str]:
    """A new ticket someone asks for on the helpdesk ``data``: who, their email, the
    title, one of its categories and a priority."""
    who = person(rng)
    email = f"{who.split()[0].lower()}@{rng.choice(['acme', 'globex'])}.com"
    title = rng.choice(TITLES).format(
        n=rng.randint(2, 9), app=rng.choice(APPS), thing=rng.choice(THINGS)
    )
    category, priority = rng.choice(data["categories"]), rng.choice(["low", "high", "urgent"])
    return {"who": who, "email": email, "title": title, "category": category, "priority": priority}


def write_database(spec: dict[str, Any], path: str) -> None:
    con = sqlite3.connect(path)
    try:
        for t in spec["tables"]:
            fks = t.get("foreign_keys", {})
            cols = ", ".join(
                f"{c} {typ}{' primary key' if c == 'id' else ''}"
                + (f" references {fks[c]}(id)" if c in fks else "")
                for c, typ in t["columns"]
            )
            con.execute(f"create table {t['name']} ({cols})")
            marks = ", ".join("?" * len(t["columns"]))
            con.executemany(f"insert into {t['name']} values ({marks})", t["rows"])
            if t.get("fts"):
                fts = ", ".join(t["fts"])
                con.execute(
                    f'create virtual table {t["name"]}_fts using fts5({fts}, content="{t["name"]}", content_rowid=id)'
                )
                con.execute(
                    f"insert into {t['name']}_fts (rowid, {fts}) select id, {fts} from {t['name']}"
                )
        con.commit()
    finally:
        con.close()


def write_site(state: dict[str, Any], directory: str) -> dict[str, Any]:
    """Files for the driver's reset request, written under ``directory``; returns the
    request fields with paths relative to it."""
    os.makedirs(directory, exist_ok=True)
    out: dict[str, Any] = {"datasette": [], "helpdesk": None}
    for db in state.get("databases", []):
        write_database(db, os.path.join(directory, f"{db['name']}.db"))
        out["datasette"].append(f"{db['name']}.db")
    if state.get("helpdesk"):
        with open(os.path.join(directory, "helpdesk.json"), "w") as f:
            json.dump(state["helpdesk"], f)
        out["helpdesk"] = "helpdesk.json"
    return out
