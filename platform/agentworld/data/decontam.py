"""Decontamination: word n-grams of the evaluation sets' turns, and the share of a
training record's turn n-grams found among them (plain numpy, no Ray).

Only actions and observations are compared, never the environment text: many
trajectories share one system prompt or tool list, and sharing it is not leakage.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from agentworld.data.text import ngram_hashes, turn_text, words
from agentworld.schema import Trajectory


@dataclass(frozen=True)
class EvalIndex:
    """Sorted n-gram hashes of the evaluation sets and, for each, the eval record it
    first came from."""

    ngram: int
    hashes: np.ndarray  # (G,) uint64, sorted unique
    owners: np.ndarray  # (G,) int32 index into ids
    ids: tuple[str, ...]

    @property
    def empty(self) -> bool:
        return self.hashes.size == 0

    def match(self, grams: np.ndarray) -> tuple[float, str | None]:
        """(share of ``grams`` found in the index, the eval id most of them came from)."""
        if grams.size == 0 or self.empty:
            return 0.0, None
        pos = np.minimum(np.searchsorted(self.hashes, grams), self.hashes.size - 1)
        hit = self.hashes[pos] == grams
        if not hit.any():
            return 0.0, None
        owner = np.bincount(self.owners[pos[hit]]).argmax()
        return float(hit.mean()), self.ids[owner]


def build_eval_index(trajs: list[Trajectory], ngram: int) -> EvalIndex:
    chunks, owners, ids = [], [], []
    for i, traj in enumerate(trajs):
        grams = ngram_hashes(words(turn_text(traj.to_dict())), ngram)
        chunks.append(grams)
        owners.append(np.full(grams.size, i, dtype=np.int32))
        ids.append(traj.id)
    if not chunks:
        return EvalIndex(ngram, np.empty(0, np.uint64), np.empty(0, np.int32), ())
    hashes, first = np.unique(np.concatenate(chunks), return_index=True)
    return EvalIndex(ngram, hashes, np.concatenate(owners)[first], tuple(ids))
