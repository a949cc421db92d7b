"""Policy-gradient losses: clipped surrogate (PPO/GRPO per token, GSPO per sequence),
masked aggregation, k3 KL to a reference, entropy. Plain torch, no Ray.

Shapes: B sequences, T positions of the shifted sequence (position t holds the
log-probability of token t + 1); ``mask`` is 1 on response tokens the loss counts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch


def token_logprobs(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """log p(targets) under logits: (B, T, V), (B, T) -> (B, T)."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    return logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)


def entropy(logits: torch.Tensor) -> torch.Tensor:
    """Entropy of each position's distribution: (B, T, V) -> (B, T)."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    return -(logp.exp() * logp).sum(-1)


def masked_sum(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (x * mask).sum()


def kl_k3(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimate of KL(pi || ref) from samples of pi (Schulman): always >= 0,
    unbiased. (B, T) -> (B, T)."""
    delta = ref_logp - logp
    return torch.exp(delta) - delta - 1


@dataclass(frozen=True, kw_only=True)
class LossTerms:
    loss: torch.Tensor
    """Scalar to backpropagate: policy + kl_coef * kl."""
    policy: torch.Tensor
    kl: torch.Tensor
    clip_frac: torch.Tensor
    """Share of counted units (tokens or sequences) whose ratio was clipped."""


def policy_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip_low: float,
    clip_high: float,
    ratio_level: Literal["token", "sequence"] = "token",
    ref_logp: torch.Tensor | None = None,
    kl_coef: float = 0.0,
    n_units: float | None = None,
    n_tokens: float | None = None,
) -> LossTerms:
    """Clipped surrogate -min(r A, clip(r, 1 - clip_low, 1 + clip_high) A).

    ``token``: r per token, averaged over every counted token of the batch (token-mean:
    long answers weigh by their length). ``sequence`` (GSPO): r = exp(mean of the token
    log-ratios of the sequence), one term per sequence, averaged over sequences with at
    least one counted token. ``n_units`` (tokens or sequences) and ``n_tokens`` (for the
    KL term) override the local counts, so that a data-parallel shard divides by the
    global count (over the world size that gradients get averaged over).
    logp, old_logp, mask: (B, T); advantages: (B,).
    """
    mask = mask.to(logp.dtype)
    log_ratio = logp - old_logp
    if ratio_level == "token":
        units_mask, adv = mask, advantages.unsqueeze(1).expand_as(logp)
    else:
        lengths = mask.sum(1)
        log_ratio = masked_sum_rows(log_ratio, mask) / lengths.clamp(min=1)
        units_mask, adv = (lengths > 0).to(logp.dtype), advantages
    ratio = torch.exp(log_ratio)
    clipped = torch.clamp(ratio, 1 - clip_low, 1 + clip_high)
    per_unit = -torch.minimum(ratio * adv, clipped * adv)
    n_units = float(units_mask.sum()) if n_units is None else n_units
    n_tokens = float(mask.sum()) if n_tokens is None else n_tokens
    policy = masked_sum(per_unit, units_mask) / max(n_units, 1.0)
    was_clipped = ((ratio - clipped).abs() > 0).to(logp.dtype)
    clip_frac = masked_sum(was_clipped, units_mask) / max(float(units_mask.sum()), 1.0)
    kl = torch.zeros((), dtype=logp.dtype)
    if ref_logp is not None:
        kl = masked_sum(kl_k3(logp, ref_logp), mask) / max(n_tokens, 1.0)
    return LossTerms(loss=policy + kl_coef * kl, policy=policy, kl=kl, clip_frac=clip_frac)


def masked_sum_rows(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(B, T) -> (B,): per-row sum over counted positions."""
    return (x * mask).sum(1)
