"""Model and DeepSpeed engine for one training rank (called inside Ray Train workers;
nothing here knows about Ray)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from agentworld.model import build_model as build_fresh
from agentworld.model import load_model, load_tokenizer
from agentworld.model.config import ModelConfig
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

    tokenizer = load_tokenizer(source.tokenizer_url)
    if source.init_url:
        model = load_model(source.init_url, dtype=torch.float32)
    else:
        model = build_fresh(shape, tokenizer, seed=train.seed)
    model.set_attn_implementation(train.attn_implementation)
    model.config.use_cache = False
    return model, tokenizer


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
        config=deepspeed_config(train, cluster, world_size),
        lr_scheduler=lambda optimizer: LambdaLR(optimizer, schedule),
    )
    return engine


def moe_layers(module) -> list[tuple[str, Any]]:
    """(name, layer) for every MoE block: DeepSpeed AutoEP layers (expert parallel) or
    transformers' own sparse blocks (every rank holds all experts)."""
    from deepspeed.module_inject.auto_ep_layer import AutoEPMoELayer
    from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeSparseMoeBlock

    kinds = (AutoEPMoELayer, Qwen3MoeSparseMoeBlock)
    return [(name, m) for name, m in module.named_modules() if isinstance(m, kinds)]


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
