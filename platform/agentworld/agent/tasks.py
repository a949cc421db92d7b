"""The task record and its JSONL file format.

One task per line::

    {"id": "search-0003", "family": "search", "split": "eval",
     "prompt": "Find the standard-library object for: ...",
     "answer": "json.loads",                  # search, terminal, mcp
     "table": {"columns": [...], "unique": [...], "rows": [[...]],
               "metrics": {"col": {"metric": "number", "tolerance": 0.0}}},   # table
     "checks": [{"command": "cat answer.txt", "expect": "7"}],               # terminal
     "checks": [{"sql": "select ...", "db": "shop"}, {"ticket": {...}}],     # web
     "facts": ["..."],                  # reference facts: the simulator's world_facts
     "perturbations": {"tool_errors": [...], "paginate": {"page_size": 2}, "hide_fields": [...]},
     "state": {...},                    # the real environment's initial state
     "solution": ["<action>", ..., "ANSWER: ..."]}   # an oracle episode (demonstrations)

``read_tasks`` rejects a bad line with an error naming the line and the field.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from agentworld.agent.config import FAMILIES, PERTURBATIONS
from agentworld.io import read_bytes, write_bytes

DOMAIN_OF = {
    "search": "search",
    "table": "search",
    "terminal": "terminal",
    "mcp": "mcp",
    "web": "web",
}
ANSWER_PREFIX = "ANSWER:"
CELL_METRICS = ("exact", "number")


class TaskError(ValueError):
    """A task (or a task file line) is invalid; names the field."""

    def __init__(self, where: str, field_name: str, message: str) -> None:
        self.field = field_name
        super().__init__(f"{where}: field {field_name!r}: {message}")


@dataclass(frozen=True, kw_only=True)
class Table:
    """A gold table: rows aligned on ``unique`` columns, a cell metric per column."""

    columns: tuple[str, ...]
    unique: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    metrics: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Column -> {"metric": "exact" | "number", "tolerance": relative tolerance}."""


@dataclass(frozen=True, kw_only=True)
class Task:
    id: str
    family: str
    prompt: str
    split: str = "train"
    answer: str | None = None
    table: Table | None = None
    checks: tuple[dict[str, Any], ...] = ()
    """Checks of the real end state: terminal ``{command, expect}``; web ones are
    ``agentworld.agent.webtasks``'s (a query on the served database, a stored ticket)."""
    facts: tuple[str, ...] = ()
    perturbations: dict[str, Any] = field(default_factory=dict)
    state: dict[str, Any] = field(default_factory=dict)
    solution: tuple[str, ...] = ()

    @property
    def domain(self) -> str:
        return DOMAIN_OF[self.family]

    def secrets(self) -> list[str]:
        """Reference values an observation must not reveal unless earned: the answer,
        or the first column of the gold table (its key, e.g. the members' names)."""
        if self.answer is not None:
            return [self.answer]
        if self.table is None:
            return []
        return [r[0] for r in self.table.rows if len(r[0]) > 2]

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        return {k: v for k, v in d.items() if v not in (None, (), [], {})}

    @classmethod
    def from_dict(cls, d: dict[str, Any], *, where: str = "task") -> Task:
        return _parse(d, where)


def _need(d: dict[str, Any], key: str, typ: type, where: str, *, default: Any = ...) -> Any:
    if key not in d:
        if default is ...:
            raise TaskError(where, key, "is required")
        return default
    value = d[key]
    if not isinstance(value, typ):
        raise TaskError(where, key, f"must be {typ.__name__}, got {type(value).__name__}")
    return value


def _parse(d: Any, where: str) -> Task:
    if not isinstance(d, dict):
        raise TaskError(where, "<line>", "must be a JSON object")
    known = {f for f in Task.__dataclass_fields__}
    for key in d:
        if key not in known:
            raise TaskError(where, key, "unknown field")
    family = _need(d, "family", str, where)
    if family not in FAMILIES:
        raise TaskError(where, "family", f"unknown family {family!r}; known: {FAMILIES}")
    split = _need(d, "split", str, where, default="train")
    if split not in ("train", "eval"):
        raise TaskError(where, "split", f"must be 'train' or 'eval', got {split!r}")
    table = _parse_table(d["table"], where) if "table" in d else None
    answer = _need(d, "answer", str, where, default=None)
    if family == "table" and table is None:
        raise TaskError(where, "table", "a table task needs its gold table")
    if family != "table" and answer is None:
        raise TaskError(where, "answer", f"a {family} task needs its answer")
    task = Task(
        id=_need(d, "id", str, where),
        family=family,
        prompt=_need(d, "prompt", str, where),
        split=split,
        answer=answer,
        table=table,
        checks=tuple(_parse_checks(d.get("checks", []), where)),
        facts=tuple(str(f) for f in _need(d, "facts", list, where, default=[])),
        perturbations=_parse_perturbations(d.get("perturbations", {}), where),
        state=_need(d, "state", dict, where, default={}),
        solution=tuple(str(a) for a in _need(d, "solution", list, where, default=[])),
    )
    if not task.id or not task.prompt:
        raise TaskError(where, "id" if not task.id else "prompt", "must not be empty")
    return task


def _parse_table(t: Any, where: str) -> Table:
    if not isinstance(t, dict):
        raise TaskError(where, "table", "must be an object")
    columns = tuple(_need(t, "columns", list, where))
    unique = tuple(_need(t, "unique", list, where))
    if not columns or not unique or not set(unique) <= set(columns):
        raise TaskError(where, "table.unique", f"{list(unique)} must be columns of {list(columns)}")
    rows = tuple(tuple(str(c) for c in r) for r in _need(t, "rows", list, where))
    for i, r in enumerate(rows):
        if len(r) != len(columns):
            raise TaskError(
                where, f"table.rows[{i}]", f"has {len(r)} cells for {len(columns)} columns"
            )
    metrics = _need(t, "metrics", dict, where, default={})
    for col, spec in metrics.items():
        if col not in columns or not isinstance(spec, dict):
            raise TaskError(where, f"table.metrics.{col}", "must name a column and hold an object")
        if spec.get("metric", "exact") not in CELL_METRICS:
            raise TaskError(where, f"table.metrics.{col}.metric", f"must be one of {CELL_METRICS}")
    return Table(columns=columns, unique=unique, rows=rows, metrics=metrics)


def _parse_checks(checks: Any, where: str) -> list[dict[str, Any]]:
    if not isinstance(checks, list):
        raise TaskError(where, "checks", "must be a list")
    out = []
    for i, c in enumerate(checks):
        if isinstance(c, dict) and isinstance(c.get("command"), str) and "expect" in c:
            out.append({"command": c["command"], "expect": str(c["expect"])})
        elif _web_check(c):
            out.append(dict(c))
        else:
            raise TaskError(
                where,
                f"checks[{i}]",
                "must be {command: str, expect: str}, {sql: str, db: str}, "
                "{ticket_field: str, id: int} or {ticket: {field: value}}",
            )
    return out


def _web_check(c: Any) -> bool:
    if not isinstance(c, dict):
        return False
    if set(c) == {"sql", "db"}:
        return isinstance(c["sql"], str) and isinstance(c["db"], str)
    if set(c) == {"ticket_field", "id"}:
        return isinstance(c["ticket_field"], str) and isinstance(c["id"], int)
    return set(c) == {"ticket"} and isinstance(c["ticket"], dict) and bool(c["ticket"])


def _parse_perturbations(p: Any, where: str) -> dict[str, Any]:
    if not isinstance(p, dict):
        raise TaskError(where, "perturbations", "must be an object")
    for key in p:
        if key not in PERTURBATIONS:
            raise TaskError(where, f"perturbations.{key}", f"unknown; known: {PERTURBATIONS}")
    return p


def read_tasks(url: str) -> list[Task]:
    """Every task of a JSONL file; the first bad line raises, naming line and field."""

    tasks, seen = [], set()
    for n, line in enumerate(read_bytes(url).decode().splitlines(), 1):
        if not line.strip():
            continue
        where = f"{url} line {n}"
        try:
            d = json.loads(line)
        except json.JSONDecodeError as e:
            raise TaskError(where, "<line>", f"not JSON: {e}") from None
        task = Task.from_dict(d, where=where)
        if task.id in seen:
            raise TaskError(where, "id", f"duplicate task id {task.id!r}")
        seen.add(task.id)
        tasks.append(task)
    if not tasks:
        raise TaskError(url, "<file>", "holds no task")
    return tasks


def write_tasks(url: str, tasks: list[Task]) -> str:
    text = "".join(json.dumps(t.to_dict(), ensure_ascii=False) + "\n" for t in tasks)
    write_bytes(url, text.encode())
    return url
