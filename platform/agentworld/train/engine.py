"""Model and DeepSpeed engine for one training rank (called inside Ray Train workers;
nothing here knows about Ray)."""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import Any

from agentworld.model import build_model as build_fresh
from agentworld.model import load_model, load_tokenizer
from agentworld.model.config import ModelConfig
from agentworld.model.family import KERNEL_FALLBACK_TEXT, MOE_BLOCKS, family_of
from agentworld.train.config import ClusterConfig, TrainConfig
from agentworld.train.ds_config import deepspeed_config
from agentworld.train.loss import warmup_cosine


@dataclass(frozen=True, kw_only=True)
class ModelSource:
    """Where a run's starting weights and tokenizer come from."""

    tokenizer_url: str
    """HF tokenizer directory (the prepare output's ``tokenizer/`` or the init export)."""
    init_url: str | None = None
    """HF checkpoint to start from (SFT: the CPT export; CPT: ``model.pretrained``);
    None builds a fresh model from the recipe's shape."""


def build_model(shape: ModelConfig, train: TrainConfig, source: ModelSource):
    """(model, tokenizer): fp32 weights (DeepSpeed casts for bf16 runs); a fresh model
    of ``shape`` unless the source has a checkpoint."""
    import torch

    quiet_kernel_fallbacks()
    tokenizer = load_tokenizer(source.tokenizer_url)
    if source.init_url:
        model = load_model(source.init_url, dtype=torch.float32)
    else:
        model = build_fresh(shape, tokenizer, seed=train.seed)
    model.set_attn_implementation(train.attn_implementation)
    model.config.use_cache = False
    return model, tokenizer


class _DropKernelFallbacks(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return KERNEL_FALLBACK_TEXT not in record.getMessage()


def quiet_kernel_fallbacks() -> None:
    """Drop transformers' per-process notes on kernel fallbacks (flash-linear-attention,
    causal-conv1d): every rank and every restarted worker would print them; the driver
    says once per run which fallback runs (agentworld.train.run)."""
    hub = logging.getLogger("transformers.integrations.hub_kernels")
    if not any(isinstance(f, _DropKernelFallbacks) for f in hub.filters):
        hub.addFilter(_DropKernelFallbacks())


def build_engine(model, train: TrainConfig, cluster: ClusterConfig, world_size: int):
    """deepspeed.initialize with the run's ZeRO stage, precision, expert parallelism,
    AdamW and the warm-up + cosine schedule (stepped once per optimizer step)."""
    import deepspeed
    from torch.optim.lr_scheduler import LambdaLR

    schedule = functools.partial(
        warmup_cosine,
        warmup_steps=train.warmup_steps,
        max_steps=train.max_steps,
        min_lr_ratio=train.min_lr_ratio,
    )
    engine, *_ = deepspeed.initialize(
        model=model,
        model_parameters=[p for p in model.parameters() if p.requires_grad],
        config=deepspeed_config(
            train, cluster, world_size, ep_preset=family_of(model.config).ep_preset
        ),
        lr_scheduler=lambda optimizer: LambdaLR(optimizer, schedule),
    )
    return engine


def moe_layers(module) -> list[tuple[str, Any]]:
    """(name, layer) for every MoE block: DeepSpeed AutoEP layers (expert parallel) or
    transformers' own sparse blocks of the family (every rank holds all experts); none
    in a dense model."""
    from deepspeed.module_inject.auto_ep_layer import AutoEPMoELayer

    return [
        (name, m)
        for name, m in module.named_modules()
        if isinstance(m, AutoEPMoELayer) or type(m).__name__ in MOE_BLOCKS
    ]


def local_experts(layer) -> list[int]:
    """Global ids of the experts this rank holds in ``layer``."""
    from deepspeed.checkpoint.autoep_affine import autoep_experts_for_rank

    if hasattr(layer, "expert_placement_descriptor"):
        return [
            int(e)
            for e in autoep_experts_for_rank(layer.expert_placement_descriptor, layer.ep_rank)
        ]
    return list(range(layer.experts.num_experts))


def expert_placement(module) -> dict[str, Any]:
    """What this rank holds: expert ids of the first MoE layer, expert parameters
    (all layers) and all parameters."""
    layers = moe_layers(module)
    expert_params = sum(p.numel() for _, m in layers for p in m.experts.parameters())
    return {
        "experts": local_experts(layers[0][1]) if layers else [],
        "expert_params": int(expert_params),
        "params": int(sum(p.numel() for p in module.parameters())),
        "moe_layers": len(layers),
    }
