"""The web task family: questions and form work on the web collector's applications
(Datasette over a generated SQLite database, the helpdesk app), done in real Chromium
through the element ids the page shows (``click('12')``, ``fill('31', 'text')``).

Each task keeps the application's initial state (the collector's site: databases or the
helpdesk's tickets) and checks that read the application's REAL state after the
episode (``agentworld.agent.checkers.check_web``):

- ``{"sql": QUERY, "db": NAME}``: the answer must equal the query's value, run on the
  database file Datasette served (Datasette questions);
- ``{"ticket_field": FIELD, "id": N}``: the answer must equal that field of ticket N as
  the helpdesk holds it (helpdesk questions);
- ``{"ticket": {FIELD: VALUE, ...}}``: a ticket the helpdesk actually stored has these
  values (filing a ticket, changing a status; the answer itself is not scored).

Oracle solutions name elements as ``@role:name@``; ``resolve_refs`` turns each into the
element id the page last showed, when an oracle is replayed (never for an agent).
"""

from __future__ import annotations

import random
import re
from typing import Any

from agentworld.agent.tasks import ANSWER_PREFIX, Task
from agentworld.collect.web import sites
from agentworld.collect.web.env import DATASETTE_URL, HELPDESK_URL
from agentworld.collect.web.playbooks import find

_REF = re.compile(r"@([a-z]+):([^@]*)@")
Made = tuple[str, dict[str, Any], tuple[dict[str, Any], ...], tuple[str, ...]]
"""What a kind's maker returns: the prompt, the initial state, the checks, the solution."""


def resolve_refs(action: str, page: str) -> str:
    """``fill(@textbox:Title@, 'x')`` -> ``fill('14', 'x')`` where the page's textbox
    "Title" has id 14; a reference the page does not show stays (the action fails)."""

    def bid(m: re.Match) -> str:
        found = find(page, m[1], m[2] or None)
        return repr(found) if found is not None else m[0]

    return _REF.sub(bid, action)


def oracle_action(task: Task, action: str, page: str) -> str:
    """``episodes.replay``'s resolver for oracle solutions: web ones get element ids."""
    return resolve_refs(action, page) if task.family == "web" else action


def _sql_text(value: Any) -> str:
    return "'" + str(value).replace("'", "''") + "'"


def _database_state(db: dict[str, Any]) -> dict[str, Any]:
    return {"app": "datasette", "databases": [db], "settings": {"default_page_size": 8}}


def _helpdesk_state(data: dict[str, Any]) -> dict[str, Any]:
    return {"app": "helpdesk", "helpdesk": data}


def _datasette_table(rng: random.Random) -> tuple[dict[str, Any], dict[str, Any]]:
    """A generated database and the table its questions are about (its last)."""
    db = sites.DATABASES[rng.choice(sorted(sites.DATABASES))](rng)
    return db, db["tables"][-1]


def _datasette_made(db, table, prompt: str, sql: str, query: str, answer: Any) -> Made:
    """A Datasette question: checked by ``sql`` on the served database; the oracle opens
    the table's page with ``query`` (Datasette's URL filters or sort) and answers."""
    url = f"{DATASETTE_URL}/{db['name']}/{table['name']}?{query}"
    check = {"sql": sql, "db": db["name"]}
    return prompt, _database_state(db), (check,), (f"goto({url!r})", f"{ANSWER_PREFIX} {answer}")


def count_task(rng: random.Random) -> Made:
    db, table = _datasette_table(rng)
    cols = [c for c, t in table["columns"] if t == "text" and c not in ("name", "title", "day")]
    col = rng.choice(cols or [table["columns"][1][0]])
    idx = [c for c, _ in table["columns"]].index(col)
    value = rng.choice([r[idx] for r in table["rows"]])
    sql = f"select count(*) from {table['name']} where {col} = {_sql_text(value)}"
    count = sum(1 for r in table["rows"] if r[idx] == value)
    prompt = (
        f"In the {db['name']} database, how many rows of the {table['name']} table have "
        f"{col} = {value}? Answer with the number."
    )
    return _datasette_made(db, table, prompt, sql, f"{col}={value}", count)


def top_task(rng: random.Random) -> Made:
    db, table = _datasette_table(rng)
    names = [c for c, _ in table["columns"]]
    numeric = [c for c, t in table["columns"] if t in ("real", "integer") and c != "id"]
    numeric = [c for c in numeric if not c.endswith("_id")]
    col, label = rng.choice(numeric), names[1]
    sql = f"select {label} from {table['name']} order by {col} desc, id asc limit 1"
    i, j = names.index(col), names.index(label)
    top = max(table["rows"], key=lambda r: (r[i], -r[0]))
    prompt = (
        f"In the {db['name']} database, which row of {table['name']} has the highest {col}? "
        f"Answer with its {label}."
    )
    return _datasette_made(db, table, prompt, sql, f"_sort_desc={col}", top[j])


def status_task(rng: random.Random) -> Made:
    data = sites.helpdesk(rng)
    t = rng.choice(data["tickets"])
    prompt = f"What is the status of helpdesk ticket #{t['id']}? Answer open, pending or closed."
    check = {"ticket_field": "status", "id": t["id"]}
    url = f"{HELPDESK_URL}/tickets/{t['id']}"
    solution = (f"goto({url!r})", f"{ANSWER_PREFIX} {t['status']}")
    return prompt, _helpdesk_state(data), (check,), solution


def new_ticket_task(rng: random.Random) -> Made:
    data = sites.helpdesk(rng)
    req = sites.ticket_request(rng, data)
    email, title, category, priority = (req[k] for k in ("email", "title", "category", "priority"))
    description = f"{title}. Please help."
    prompt = (
        f"File a new {category} helpdesk ticket of {priority} priority titled {title!r} for {email} "
        f"with the description {description!r}."
    )
    check = {
        "ticket": {"title": title, "requester": email, "category": category, "priority": priority}
    }
    solution = (
        f"goto({HELPDESK_URL + '/tickets/new'!r})",
        f"fill(@textbox:Title@, {title!r})",
        f"fill(@textbox:Your email@, {email!r})",
        f"select_option(@combobox:Category@, {category!r})",
        f"check(@radio:{priority}@)",
        f"fill(@textbox:Description@, {description!r})",
        "click(@button:Create ticket@)",
        f"{ANSWER_PREFIX} done",
    )
    return prompt, _helpdesk_state(data), (check,), solution


def set_status_task(rng: random.Random) -> Made:
    data = sites.helpdesk(rng)
    t = rng.choice(data["tickets"])
    status = rng.choice([s for s in ("open", "pending", "closed") if s != t["status"]])
    prompt = f"Set helpdesk ticket #{t['id']} to {status}."
    check = {"ticket": {"id": t["id"], "status": status}}
    solution = (
        f"goto({HELPDESK_URL + '/tickets/' + str(t['id'])!r})",
        f"select_option(@combobox:Change status@, {status!r})",
        "click(@button:Update@)",
        f"{ANSWER_PREFIX} done",
    )
    return prompt, _helpdesk_state(data), (check,), solution


MAKERS = {
    "count": count_task,
    "top": top_task,
    "status": status_task,
    "new_ticket": new_ticket_task,
    "set_status": set_status_task,
}
KINDS = tuple(MAKERS)


def web_task(rng: random.Random, index: int, seed: int) -> Task:
    kind = rng.choice(KINDS)
    prompt, state, checks, solution = MAKERS[kind](rng)
    # The reference facts a controlled simulator gets: what the application holds.
    facts = (f"The application's initial state: {_facts(state)}",)
    return Task(
        id=f"web-s{seed}-{index:04d}",
        family="web",
        prompt=prompt,
        answer=solution[-1].removeprefix(ANSWER_PREFIX).strip(),
        checks=checks,
        facts=facts,
        state={**state, "kind": kind},
        solution=solution,
    )


def _facts(state: dict[str, Any]) -> str:
    if state["app"] == "datasette":
        parts = []
        for db in state["databases"]:
            for t in db["tables"]:
                head = ",".join(c for c, _ in t["columns"])
                rows = "; ".join(",".join(str(v) for v in r) for r in t["rows"])
                parts.append(f"database {db['name']}, table {t['name']} ({head}): {rows}")
        return " | ".join(parts)
    tickets = state["helpdesk"]["tickets"]
    return "; ".join(f"#{t['id']} {t['title']!r} {t['status']} {t['priority']}" for t in tickets)
