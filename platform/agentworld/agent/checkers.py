"""Checkers: a task, the agent's final answer (and, in the real environment, its end
state) -> a score. Plain functions; the real sandbox is reached only through the
``run_command`` callable that the real environment passes in."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from agentworld.agent.table_metrics import norm_cell, score_table
from agentworld.agent.tasks import Task
from agentworld.evaluate.checks.search import result_ids

_DOC_ID = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_HHMM = re.compile(r"\b(\d{1,2}):(\d{2})\b")
_RESULT_NUMBER = re.compile(r"\[?#?(\d{1,2})\]?\.?")


@dataclass(frozen=True, kw_only=True)
class Score:
    reward: float
    """In [0, 1]: what GRPO optimizes (item F1 for tables, else success)."""
    success: bool
    item_f1: float | None = None
    row_f1: float | None = None
    detail: str = ""

    def to_dict(self) -> dict:
        return {
            "reward": self.reward,
            "success": self.success,
            "item_f1": self.item_f1,
            "row_f1": self.row_f1,
            "detail": self.detail,
        }


def doc_id_of(answer: str) -> str:
    """The first dotted identifier of an answer: '`json.loads()` does it' -> 'json.loads'."""
    m = _DOC_ID.search(answer.replace("`", " "))
    return m.group(0) if m else ""


def shown_results(history: Sequence[tuple[str, str]]) -> list[str]:
    """The document ids of the last result list (or opened document) the environment
    showed, in their numbered order."""
    for _, observation in reversed(history):
        ids = result_ids(observation or "")
        if ids:
            return ids
    return []


def resolve_result_number(
    task: Task, answer: str | None, history: Sequence[tuple[str, str]]
) -> str | None:
    """A search answer given as a result number ("2", "[2]", "#2") -> the id of that
    result in the last list the environment showed the agent, as a person picks a
    result by its number. Out of range, or no list shown: the answer stays as given
    (and fails the id check); other families and answers are unchanged."""
    if task.family != "search" or answer is None:
        return answer
    m = _RESULT_NUMBER.fullmatch(answer.strip())
    if not m:
        return answer
    ids, n = shown_results(history), int(m.group(1))
    return ids[n - 1] if 1 <= n <= len(ids) else answer


def _binary(ok: bool, detail: str) -> Score:
    return Score(reward=1.0 if ok else 0.0, success=ok, detail=detail)


def normalize_answer(task: Task, answer: str) -> str:
    if task.state.get("answer_kind") == "time":
        m = _HHMM.search(answer)
        return f"{int(m.group(1)):02d}:{m.group(2)}" if m else ""
    return norm_cell(answer.strip().strip("'\""))


def check_answer(task: Task, answer: str | None) -> Score:
    """Score the final answer alone (tasks without end-state checks)."""
    if answer is None:
        return Score(reward=0.0, success=False, detail="no answer", **_f1s(task, 0.0))
    if task.family == "search":
        got = doc_id_of(answer)
        return _binary(got == task.answer, f"answered {got!r}, target {task.answer!r}")
    if task.family == "table":
        s = score_table(answer, task.table)
        return Score(
            reward=s.item_f1,
            success=s.success,
            item_f1=s.item_f1,
            row_f1=s.row_f1,
            detail=s.message,
        )
    got, want = normalize_answer(task, answer), normalize_answer(task, task.answer or "")
    return _binary(bool(want) and got == want, f"answered {got!r}, expected {want!r}")


def _f1s(task: Task, value: float) -> dict[str, float | None]:
    return {"item_f1": value, "row_f1": value} if task.family == "table" else {}


class WebState(Protocol):
    """The web applications' real state after an episode (``RealEnv`` gives it)."""

    def sql(self, db: str, query: str) -> list[tuple]: ...

    def tickets(self) -> list[dict[str, Any]]: ...


def _same(got: str | None, want: Any) -> bool:
    return got is not None and bool(norm_cell(str(want))) and norm_cell(got) == norm_cell(str(want))


def check_web(task: Task, answer: str | None, state: WebState) -> Score:
    """Every check against the application's state as it is now: a question's answer
    against the served database (or the ticket the helpdesk holds), form work against
    the tickets the helpdesk actually stored."""
    got = None if answer is None else answer.strip().strip("'\"").rstrip(".")
    for check in task.checks:
        if "sql" in check:
            rows = state.sql(check["db"], check["sql"])
            want = rows[0][0] if rows else None
            if want is None or not _same(got, want):
                return _binary(False, f"answered {got!r}; the database says {want!r}")
        elif "ticket_field" in check:
            held = {t["id"]: t for t in state.tickets()}.get(check["id"], {})
            want = held.get(check["ticket_field"])
            if not _same(got, want):
                return _binary(False, f"answered {got!r}; the helpdesk holds {want!r}")
        else:
            fields = check["ticket"]
            if not any(all(t.get(k) == v for k, v in fields.items()) for t in state.tickets()):
                return _binary(False, f"the helpdesk holds no ticket with {fields}")
    return _binary(True, "the application's state matches")


def check_real(
    task: Task,
    answer: str | None,
    run_command: Callable[[str], str] | None = None,
    web: WebState | None = None,
) -> Score:
    """Score as the real environment does: terminal tasks by their end state (each
    check's command output, from the episode's own sandbox or its simulator through
    ``run_command``, must equal its expectation), web tasks by the applications' state
    (``check_web``); the others by their answer, which the real tools made checkable."""
    if task.family == "web":
        if web is None:
            raise ValueError(f"task {task.id}: web checks need the episode's applications")
        return check_web(task, answer, web)
    if task.family != "terminal" or not task.checks:
        return check_answer(task, answer)
    if run_command is None:
        raise ValueError(f"task {task.id}: terminal checks need the episode's sandbox")
    for check in task.checks:
        out = run_command(check["command"]).strip()
        if out != check["expect"].strip():
            return _binary(
                False, f"{check['command']!r} printed {out[:80]!r}, expected {check['expect']!r}"
            )
    return _binary(True, "end state matches")
