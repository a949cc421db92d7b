"""WideSearch-style table scoring: item F1 and row F1 of a markdown table answer.

The definitions follow WideSearch's evaluation:
- column names are normalized (case, spaces, markdown emphasis); a table whose columns
  are not exactly the required set scores 0;
- duplicate rows (same unique-column values) are dropped on both sides, first kept;
- predicted rows are aligned with gold rows on the unique columns (after cell
  normalization); unaligned rows score 0;
- each aligned row scores every cell: unique columns 1, others by the column's metric
  (``exact`` after normalization, ``number`` within a relative tolerance);
- a row's score is the minimum over its cells; rows TP = sum of row scores, items TP =
  sum of cell scores;
- precision divides by the predicted count, recall by the gold count (rows, or rows x
  columns for items); F1 is their harmonic mean, 0 when both are 0.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from agentworld.agent.tasks import Table

_EMPHASIS = re.compile(r"[*`]+")
_SPACES = re.compile(r"\s+")
_SEPARATORS = re.compile(r"[\s_]+")
_NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?|[-+]?\.\d+")


def norm_column(name: str) -> str:
    """'  Doc **ID** ' -> 'doc_id' (spaces and underscores alike)."""
    return _SEPARATORS.sub("_", _EMPHASIS.sub("", name).strip().lower())


def norm_cell(value: str) -> str:
    return _SPACES.sub(" ", _EMPHASIS.sub("", value).strip().lower()).rstrip(".")


def parse_markdown_table(text: str) -> tuple[list[str], list[list[str]]] | None:
    """(header, rows) of the first markdown table in ``text`` (pipe rows; the ---
    separator skipped); None when there is none."""
    lines = [ln.strip() for ln in text.splitlines()]
    rows = [ln for ln in lines if ln.startswith("|") or ln.count("|") >= 2]
    if not rows:
        return None
    cells = [[c.strip() for c in ln.strip().strip("|").split("|")] for ln in rows]
    cells = [r for r in cells if not all(re.fullmatch(r":?-{2,}:?", c) for c in r if c)]
    if not cells:
        return None
    return cells[0], cells[1:]


def _number(value: str) -> float | None:
    m = _NUMBER.search(value)
    return float(m.group(0).replace(",", "")) if m else None


def cell_score(pred: str, gold: str, spec: dict[str, Any]) -> float:
    if spec.get("metric", "exact") == "number":
        p, g = _number(pred), _number(gold)
        if p is None or g is None:
            return 0.0
        tol = float(spec.get("tolerance", 0.0))
        return 1.0 if abs(p - g) <= tol * max(abs(g), 1e-12) + 1e-9 else 0.0
    return 1.0 if norm_cell(pred) == norm_cell(gold) else 0.0


@dataclass(frozen=True, kw_only=True)
class TableScore:
    row_precision: float = 0.0
    row_recall: float = 0.0
    row_f1: float = 0.0
    item_precision: float = 0.0
    item_recall: float = 0.0
    item_f1: float = 0.0
    success: bool = False
    """Every item and row matches (WideSearch's table score 1)."""
    message: str = ""


def _f1(p: float, r: float) -> float:
    return 2 * p * r / (p + r) if p + r > 1e-9 else 0.0


def _dedup(rows: list[dict[str, str]], unique: tuple[str, ...]) -> dict[tuple, dict[str, str]]:
    out: dict[tuple, dict[str, str]] = {}
    for r in rows:
        key = tuple(norm_cell(r[c]) for c in unique)
        out.setdefault(key, r)
    return out


def score_table(answer: str, gold: Table) -> TableScore:
    """Item and row precision/recall/F1 of the markdown table in ``answer``."""
    parsed = parse_markdown_table(answer)
    if parsed is None:
        return TableScore(message="no markdown table in the answer")
    header, body = parsed
    columns = [norm_column(c) for c in header]
    required = [norm_column(c) for c in gold.columns]
    if set(columns) != set(required) or len(columns) != len(set(columns)):
        return TableScore(message=f"columns {columns} are not the required {required}")
    unique = tuple(norm_column(c) for c in gold.unique)
    metrics = {norm_column(c): s for c, s in gold.metrics.items()}
    pred_rows = [dict(zip(columns, r, strict=False)) for r in body if len(r) == len(columns)]
    gold_rows = [dict(zip(required, r, strict=True)) for r in gold.rows]
    pred, ref = _dedup(pred_rows, unique), _dedup(gold_rows, unique)
    tp_rows = tp_items = 0.0
    for key, g in ref.items():
        p = pred.get(key)
        if p is None:
            continue
        scores = [
            1.0 if c in unique else cell_score(p[c], g[c], metrics.get(c, {})) for c in required
        ]
        tp_rows += min(scores)
        tp_items += sum(scores)
    n_pred, n_gold, n_cols = len(pred), len(ref), len(required)
    rp = tp_rows / n_pred if n_pred else 0.0
    rr = tp_rows / n_gold if n_gold else 0.0
    ip = tp_items / (n_pred * n_cols) if n_pred else 0.0
    ir = tp_items / (n_gold * n_cols) if n_gold else 0.0
    return TableScore(
        row_precision=rp,
        row_recall=rr,
        row_f1=_f1(rp, rr),
        item_precision=ip,
        item_recall=ir,
        item_f1=_f1(ip, ir),
        success=rp == rr == ip == ir == 1.0,
        message=f"{n_pred} predicted rows, {n_gold} gold rows, {tp_rows:g} row TP",
    )
