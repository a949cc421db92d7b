"""Copy rows: synthetic documents, drawn fresh at every micro-batch, that teach a
model to repeat a span it has just read (issue 14).

A search observation begins by repeating the action (the query, the opened id), and
its page repeats a sentence the result list showed earlier in the prompt: most of a
search turn is copying. A small model trained on the corpus alone does not learn it
(``bench/search_copy_check.py``), and neither did copy documents written once by
prepare (``data.copy_share``: a fixed set, seen again every epoch, that the model
partly memorized). The probe that raised copying (``bench/copy_warmup_probe.py``) used
many short spans that were always new: so these rows are drawn at training time.

A document is ``a m span b m span``: ``a`` and ``b`` are windows of the micro-batch's real
text (CONTEXT and GAP tokens), ``m`` a marker and ``span`` COPY_SPAN tokens, both drawn
from that text's ordinary tokens (so with the corpus's frequencies, in an order no
corpus holds: it cannot be recalled, only copied); the loss is on the repeated span
only (its first token included: after the second ``m`` the model must find the first
one). The real text around the span, of random length, asks the model to copy by
content, as a search observation must: with bare ``<sep> span <sep> span`` documents it
learned to copy by position from the document's start, and copied nothing of a span
inside real text. With these documents ``small_cpu`` learned no copying either over
800 CPT steps (its copy loss stayed at the level of a guess; README, fidelity): the
rows are off by default, there for larger models.

Rows are packed with documents back to back, like the prepare stage's rows, so the
usual block-diagonal attention applies. The draw is a function of (seed, rank, step,
micro-batch) and the micro-batch: a resumed run draws the same rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from agentworld.train.batch import PackedBatch

COPY_SPAN = (4, 12)
"""Smallest and largest span, in tokens (the probe's, which learned in ~250 steps)."""
CONTEXT = (0, 32)
"""Real tokens before the span: smallest and largest."""
GAP = (4, 48)
"""Real tokens between the span and its repeat: smallest and largest."""
MIN_ROW_LEN = 2 * (COPY_SPAN[1] + 1) + GAP[0]
"""The shortest row that holds a document of the longest span."""


@dataclass(frozen=True)
class CopyRows:
    """Draws a worker's copy rows: ``rows`` rows of ``row_len`` tokens per micro-batch."""

    ordinary: np.ndarray
    """Every id but the special tokens: spans and markers are drawn from the text's
    tokens among them (from all of them when the text has none)."""
    rows: int
    row_len: int
    seed: int = 0
    rank: int = 0

    def documents(
        self, rng: np.random.Generator, text: np.ndarray, pool: np.ndarray
    ) -> list[tuple[np.ndarray, int]]:
        """One row's documents, as many as fit in ``row_len``: (ids, where the repeated
        span starts). Windows come from ``text``, markers and spans from ``pool``."""
        docs, left = [], self.row_len
        while True:
            n = int(rng.integers(COPY_SPAN[0], COPY_SPAN[1] + 1))
            room = left - 2 * (n + 1)
            if room < GAP[0]:
                return docs
            gap = int(rng.integers(GAP[0], min(GAP[1], room) + 1))
            before = int(rng.integers(CONTEXT[0], min(CONTEXT[1], room - gap) + 1))
            marker, span = rng.choice(pool, size=1), rng.choice(pool, size=n)
            a, b = _window(text, before, rng), _window(text, gap, rng)
            doc = np.concatenate([a, marker, span, b, marker, span])
            docs.append((doc, len(doc) - n))
            left -= len(doc)

    def _pool(self, text: np.ndarray) -> np.ndarray:
        """What spans and markers are drawn from: the text's ordinary tokens (their
        frequencies the corpus's), or every ordinary id when it has none."""
        pool = text[np.isin(text, self.ordinary)]
        return pool if pool.size else self.ordinary

    def batch(self, step: int, micro: int, text: np.ndarray) -> PackedBatch:
        """The copy rows of optimizer step ``step``'s micro-batch ``micro``, their real
        text drawn from ``text`` (that micro-batch's tokens)."""
        import torch

        rng = np.random.default_rng([self.seed, self.rank, step, micro])
        shape = (self.rows, self.row_len)
        ids, pos = np.zeros(shape, np.int64), np.zeros(shape, np.int64)
        mask, valid = np.zeros(shape, bool), np.zeros(shape, bool)
        pool = self._pool(text)
        for r in range(self.rows):
            at = 0
            for doc, repeat in self.documents(rng, text, pool):
                n = len(doc)
                ids[r, at : at + n] = doc
                pos[r, at : at + n] = np.arange(n)
                mask[r, at + repeat : at + n] = True
                valid[r, at : at + n] = True
                at += n
        return PackedBatch(*(torch.from_numpy(x) for x in (ids, mask, pos, valid)))


def _window(text: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` consecutive tokens of ``text`` from a random place (repeated if too short)."""
    if n == 0:
        return text[:0]
    if len(text) < n:
        text = np.resize(text, n)
    at = int(rng.integers(0, len(text) - n + 1))
    return text[at : at + n]
