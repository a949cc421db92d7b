"""Parameter-free baselines that every fidelity figure is read against, scored exactly
as a model's predictions are (the same rows, the same rule metrics):

- ``copy_previous``: the last observation in the context (empty at turn 1). Shell
  prompts, repeated listings and unchanged tool results make this strong: a world model
  that does not beat it has learned little beyond "nothing changes".
- ``retrieval``: the observation that followed the most similar environment + action of
  the training split (BM25 over their words). It stands for memorizing the corpus: a
  model that does not beat it has not generalized past lookup.

Plain functions over message lists: no Ray, no model.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import bm25s

Message = dict[str, str]
BASELINES = ("copy_previous", "retrieval")


def copy_previous(messages: Sequence[Message]) -> str:
    """The content of the last assistant message (the previous observation), or ""."""
    for m in reversed(messages):
        if m["role"] == "assistant":
            return m["content"]
    return ""


class Retrieval:
    """BM25 over (environment + action) of training examples; predicts the observation
    that followed the best match, or "" when no word of the query is in the index."""

    def __init__(self, examples: Iterable[tuple[Sequence[Message], str]]) -> None:
        pairs = [(query_text(m), obs) for m, obs in examples]
        self._observations = [obs for _, obs in pairs]
        self._retriever = bm25s.BM25() if pairs else None
        if self._retriever is not None:
            self._retriever.index(_tokens([q for q, _ in pairs]), show_progress=False)

    def __len__(self) -> int:
        return len(self._observations)

    def predict(self, contexts: Sequence[Sequence[Message]]) -> list[str]:
        """One prediction per context, in order."""
        if self._retriever is None or not contexts:
            return ["" for _ in contexts]
        queries = _tokens([query_text(m) for m in contexts])
        ids, scores = self._retriever.retrieve(queries, k=1, show_progress=False)
        return [
            self._observations[int(i[0])] if s[0] > 0 else ""
            for i, s in zip(ids, scores, strict=True)
        ]


def query_text(messages: Sequence[Message]) -> str:
    """What a context is matched on: its system text (the environment) and its action."""
    if not messages:
        return ""
    system = messages[0]["content"] if messages[0]["role"] == "system" else ""
    return f"{system}\n{messages[-1]['content']}"


def _tokens(texts: list[str]) -> list[list[str]]:
    return bm25s.tokenize(texts, stopwords=None, show_progress=False, return_ids=False)


def baseline_rows(
    rows: Sequence[dict[str, Any]], retrieval: Retrieval | None
) -> dict[str, list[dict[str, Any]]]:
    """Prediction rows per baseline for prediction rows (or items as dicts) that carry
    ``key``, ``domain``, ``messages`` and ``reference``. Retrieval is left out without a
    training split to retrieve from."""

    def row(r: dict[str, Any], output: str) -> dict[str, Any]:
        keep = ("key", "id", "domain", "turn_idx", "reference")
        return {**{k: r.get(k) for k in keep}, "output": output, "prediction": output}

    out = {"copy_previous": [row(r, copy_previous(r["messages"])) for r in rows]}
    if retrieval is not None and len(retrieval):
        guesses = retrieval.predict([r["messages"] for r in rows])
        out["retrieval"] = [row(r, g) for r, g in zip(rows, guesses, strict=True)]
    return out
