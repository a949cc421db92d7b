"""Group-normalized advantages (GRPO). Plain torch, no Ray."""

from __future__ import annotations

import torch


def group_advantages(
    rewards: torch.Tensor, valid: torch.Tensor, *, scale_by_std: bool = True, eps: float = 1e-6
) -> torch.Tensor:
    """Advantages of G predictions per context, normalized within each group.

    rewards: (N, G) float; valid: (N, G) bool, False for predictions left out (a failed
    judgment). A = (r - mean) / (std + eps) over the group's valid members (std with
    Bessel's correction, as GRPO); Dr. GRPO's ``scale_by_std=False`` keeps r - mean.
    Invalid members, and groups with fewer than two valid members, get 0. Returns (N, G).
    """
    if rewards.shape != valid.shape or rewards.dim() != 2:
        raise ValueError(
            f"rewards {tuple(rewards.shape)} and valid {tuple(valid.shape)} must be (N, G)"
        )
    w = valid.to(rewards.dtype)
    n = w.sum(dim=1, keepdim=True)  # (N, 1)
    mean = (rewards * w).sum(dim=1, keepdim=True) / n.clamp(min=1)
    centered = (rewards - mean) * w
    adv = centered
    if scale_by_std:
        var = (centered**2).sum(dim=1, keepdim=True) / (n - 1).clamp(min=1)
        adv = centered / (var.sqrt() + eps)
    return torch.where(n >= 2, adv, torch.zeros_like(adv)) * w
