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


def load_balance_loss(router_logits, valid, *, num_experts: int, top_k: int):
    """The Switch Transformer load-balancing loss over every MoE layer's router logits
    ((B*T, E) each, in the order the model's output holds them), pad tokens (``valid``
    (B, T) False) left out: ``E * sum_e f_e * P_e``, with f_e the share of top-k picks and
    P_e the mean router probability of expert e, both over all layers' valid tokens.
    None when the model reported no router logits (a dense model)."""
    import torch

    if not router_logits:
        return None
    device = router_logits[0].device
    weight = valid.reshape(-1).to(device=device, dtype=torch.float32)  # (B*T,)
    picks = torch.zeros(num_experts, dtype=torch.float32, device=device)
    probs = torch.zeros(num_experts, dtype=torch.float32, device=device)
    for logits in router_logits:
        p = torch.softmax(logits.float(), dim=-1)  # (B*T, E)
        chosen = torch.topk(p, top_k, dim=-1).indices  # (B*T, k)
        picks = picks.scatter_add(0, chosen.reshape(-1), weight.repeat_interleave(top_k))
        probs = probs + (p * weight[:, None]).sum(dim=0)
    rows = weight.sum().clamp(min=1.0) * len(router_logits)
    return num_experts * torch.sum((picks / rows) * (probs / rows))


@dataclass(frozen=True)
class RouterShape:
    """What the load-balancing loss needs from the model's config (0 experts: dense)."""

    num_experts: int = 0
    top_k: int = 0

    @classmethod
    def of(cls, config) -> RouterShape:
        experts = int(getattr(config, "num_experts", 0) or 0)
        return cls(experts, int(getattr(config, "num_experts_per_tok", 0) or 0) if experts else 0)


def forward_losses(
    model, batch: PackedBatch, *, aux_coef: float, router: RouterShape, documents: bool = False
) -> Losses:
    """Run ``model`` (a causal LM of the family, possibly wrapped by DeepSpeed) on
    ``batch``; the router logits come from the model's own output.

    Packed rows: no 2D attention mask is passed; transformers reads the document
    boundaries from ``position_ids`` and masks attention block-diagonally (see
    agentworld.train.batch). ``documents``: the model has recurrent (linear-attention)
    layers, which carry a state along the row whatever the positions say, so each
    document becomes its own right-padded row (``PackedBatch.per_document``) with a 2D
    padding mask.
    """
    if documents:
        batch = batch.per_document()
    moe = router.num_experts > 0
    kwargs = {"output_router_logits": True} if moe else {}
    if documents:
        kwargs["attention_mask"] = batch.valid.long()
    out = model(
        input_ids=batch.input_ids, position_ids=batch.position_ids, use_cache=False, **kwargs
    )
    lm, n = lm_loss(out.logits, batch)
    lb = None
    if moe:
        lb = load_balance_loss(
            out.router_logits, batch.valid, num_experts=router.num_experts, top_k=router.top_k
        )
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
