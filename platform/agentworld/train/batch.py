"""Packed rows -> model inputs. Pure tensor code: no Ray, no DeepSpeed.

A packed row (the prepare stage's contract) holds several documents back to back:
``input_ids`` (T,), ``loss_mask`` (T,), ``position_ids`` (T,) restarting at 0 at each
document start, and ``doc_lens`` (the documents' lengths; the tail beyond their sum is
pad). Attention must never cross a document boundary: the model gets the position ids
and no 2D padding mask, from which transformers builds a block-diagonal causal mask
(sdpa, eager) or variable-length attention (flash-attention); it does so only without a
KV cache, hence ``use_cache=False`` in training. ``collate`` checks that the position ids
restart exactly where ``doc_lens`` says, so the two can never disagree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class PackedBatch:
    """A micro-batch of packed rows as torch tensors."""

    input_ids: Any
    """(B, T) int64."""
    loss_mask: Any
    """(B, T) bool: token t is a prediction target."""
    position_ids: Any
    """(B, T) int64, restarting at 0 at each document."""
    valid: Any
    """(B, T) bool: False on the pad tail."""

    def target_mask(self):
        """(B, T-1) bool: position t predicts token t+1. A document's first token is
        never a target: nothing before it is visible."""
        return self.loss_mask[:, 1:] & (self.position_ids[:, 1:] != 0) & self.valid[:, 1:]

    def to(self, device) -> PackedBatch:
        """The same batch on ``device``: collate builds it on the CPU, where a GPU rank's
        model would refuse it."""
        return PackedBatch(
            input_ids=self.input_ids.to(device),
            loss_mask=self.loss_mask.to(device),
            position_ids=self.position_ids.to(device),
            valid=self.valid.to(device),
        )

    def per_document(self) -> PackedBatch:
        """The same documents, one per row, right-padded to the longest: (D, L). For
        models whose recurrent layers would carry a state from one packed document into
        the next; the targets, and so the loss, are those of the packed batch."""
        import torch

        starts = (self.position_ids == 0) & self.valid  # (B, T) document starts
        spans = []
        for b in range(self.input_ids.shape[0]):
            first = starts[b].nonzero().flatten().tolist()
            end = int(self.valid[b].sum())
            spans += [(b, s, e) for s, e in zip(first, [*first[1:], end], strict=True)]
        length = max((e - s for _, s, e in spans), default=1)
        shape = (max(len(spans), 1), length)
        ids = torch.zeros(shape, dtype=self.input_ids.dtype, device=self.input_ids.device)
        loss = torch.zeros(shape, dtype=torch.bool, device=ids.device)
        valid = torch.zeros(shape, dtype=torch.bool, device=ids.device)
        for row, (b, s, e) in enumerate(spans):
            ids[row, : e - s] = self.input_ids[b, s:e]
            loss[row, : e - s] = self.loss_mask[b, s:e]
            valid[row, : e - s] = True
        positions = torch.arange(length, device=ids.device).expand(shape).clone()
        return PackedBatch(input_ids=ids, loss_mask=loss, position_ids=positions, valid=valid)

    @property
    def num_tokens(self) -> int:
        """Real (non-pad) tokens in the batch."""
        return int(self.valid.sum())


def _stack(column: Sequence[Any], dtype) -> np.ndarray:
    return np.stack([np.asarray(x, dtype=dtype) for x in column])


def check_positions(position_ids: np.ndarray, doc_lens: Sequence[Sequence[int]]) -> np.ndarray:
    """(B, T) bool mask of real tokens; raises ValueError naming the row when the
    position ids do not restart at the documents given by ``doc_lens``."""
    batch, seq_len = position_ids.shape
    valid = np.zeros((batch, seq_len), dtype=bool)
    for i, lens in enumerate(doc_lens):
        lens = [int(n) for n in lens]
        used = sum(lens)
        if used > seq_len or any(n <= 0 for n in lens):
            raise ValueError(f"row {i}: doc_lens {lens} do not fit seq_len {seq_len}")
        expected = np.concatenate([np.arange(n) for n in lens]) if lens else np.zeros(0)
        if not np.array_equal(position_ids[i, :used], expected):
            raise ValueError(f"row {i}: position_ids do not restart at the documents in doc_lens")
        valid[i, :used] = True
    return valid


def collate(rows: Mapping[str, Sequence[Any]]) -> PackedBatch:
    """Columns of packed rows (as Ray Data hands them over) -> a PackedBatch."""
    import torch

    position_ids = _stack(rows["position_ids"], np.int64)
    valid = check_positions(position_ids, rows["doc_lens"])
    return PackedBatch(
        input_ids=torch.from_numpy(_stack(rows["input_ids"], np.int64)),
        loss_mask=torch.from_numpy(_stack(rows["loss_mask"], np.int8) != 0),
        position_ids=torch.from_numpy(position_ids),
        valid=torch.from_numpy(valid),
    )
