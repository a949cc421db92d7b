"""Training objective and learning-rate schedule: plain functions, no Ray."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from agentworld.train.batch import PackedBatch


@dataclass(frozen=True)
class Losses:
    """One micro-batch's losses (scalar tensors)."""

    total: Any
    """lm + aux_coef * load_balance: what is backpropagated."""
    lm: Any
    """Mean next-token cross-entropy over the target tokens."""
    load_balance: Any
    """The router's load-balancing loss (Switch Transformer form), pad excluded."""
    num_targets: int


def lm_loss(logits, batch: PackedBatch):
    """Mean cross-entropy of position t predicting token t+1, over target tokens.
    logits: (B, T, V). Returns (loss, number of targets)."""
    import torch.nn.functional as F

    mask = batch.target_mask()  # (B, T-1)
    n = int(mask.sum())
    pred = logits[:, :-1].float()[mask]  # (N, V)
    target = batch.input_ids[:, 1:][mask]  # (N,)
    if n == 0:  # a batch of pad only still has to join the collectives: zero loss
        return logits.sum() * 0.0, 0
    return F.cross_entropy(pred, target), n


def load_balance_loss(router_logits, batch: PackedBatch, *, num_experts: int, top_k: int):
    """Load-balancing loss over every MoE layer's router logits ((B*T, E) each), with
    pad tokens left out."""
    from transformers.models.qwen3_moe.modeling_qwen3_moe import load_balancing_loss_func

    if not router_logits:
        return None
    return load_balancing_loss_func(
        tuple(router_logits),
        num_experts,
        top_k,
        attention_mask=batch.valid.to(router_logits[0].device),
    )


def forward_losses(
    model, batch: PackedBatch, *, aux_coef: float, num_experts: int, top_k: int
) -> Losses:
    """Run ``model`` (a Qwen3-MoE causal LM, possibly wrapped by DeepSpeed) on ``batch``.

    No 2D attention mask is passed: transformers reads the document boundaries from
    ``position_ids`` and masks attention block-diagonally (see agentworld.train.batch).
    """
    out = model(
        input_ids=batch.input_ids,
        position_ids=batch.position_ids,
        output_router_logits=True,
        use_cache=False,
    )
    lm, n = lm_loss(out.logits, batch)
    lb = load_balance_loss(out.router_logits, batch, num_experts=num_experts, top_k=top_k)
    if lb is None:
        lb = lm.detach() * 0.0
    return Losses(total=lm + aux_coef * lb, lm=lm, load_balance=lb, num_targets=n)


def warmup_cosine(step: int, *, warmup_steps: int, max_steps: int, min_lr_ratio: float) -> float:
    """Learning-rate multiplier for optimizer step ``step`` (0-based): linear warm-up to
    1 over ``warmup_steps`` steps, then cosine decay to ``min_lr_ratio`` at ``max_steps``."""
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    span = max(1, max_steps - warmup_steps - 1)
    progress = min(1.0, (step - warmup_steps) / span)
    return min_lr_ratio + (1.0 - min_lr_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))
