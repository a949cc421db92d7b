"""HF export of a trained engine: every rank takes part in gathering the weights
(ZeRO-3 partitions, expert-parallel slices), rank 0 writes a plain transformers
Qwen3-MoE checkpoint (safetensors + tokenizer + chat template) that vLLM loads."""

from __future__ import annotations

import contextlib
from typing import Any

from agentworld.model import save_pretrained
from agentworld.train.engine import moe_layers


def _gathered(params: list) -> contextlib.AbstractContextManager:
    """ZeRO-3 partitions parameters across ranks; gather them for reading (collective)."""
    if not any(hasattr(p, "ds_id") for p in params):
        return contextlib.nullcontext()
    import deepspeed

    return deepspeed.zero.GatheredParameters(params, modifier_rank=None)


def _all_experts(tensor, group):
    """Concatenate this rank's expert slice (E_local, ...) with the other EP ranks'."""
    import torch
    import torch.distributed as dist

    parts = [torch.empty_like(tensor) for _ in range(dist.get_world_size(group))]
    dist.all_gather(parts, tensor.contiguous(), group=group)
    return torch.cat(parts)


def _moe_state(prefix: str, layer) -> dict[str, Any]:
    """HF names for one AutoEP layer: router weight and the fused 3D expert tensors
    (gate_up_proj = [gate; up] on dim 1, down_proj)."""
    import torch

    params = [layer.router.gate.weight, layer.experts.w1, layer.experts.w2, layer.experts.w3]
    with _gathered(params):
        w1, w2, w3 = (_all_experts(w.detach(), layer.ep_group) for w in params[1:])
        gate = params[0].detach().clone()
    return {
        f"{prefix}.gate.weight": gate,
        f"{prefix}.experts.gate_up_proj": torch.cat([w1, w3], dim=1),
        f"{prefix}.experts.down_proj": w2,
    }


def full_state_dict(module) -> dict[str, Any]:
    """The model's weights under transformers' Qwen3-MoE names (collective: call on
    every rank; each gets the full dict)."""
    ep_prefixes = [name for name, m in moe_layers(module) if hasattr(m, "ep_group")]
    state: dict[str, Any] = {}
    for prefix in ep_prefixes:
        state.update(_moe_state(prefix, module.get_submodule(prefix)))
    for name, param in module.named_parameters():
        if any(name.startswith(p + ".") for p in ep_prefixes):
            continue
        with _gathered([param]):
            state[name] = param.detach().clone()
    return state


def export_hf(module, tokenizer, url: str, *, rank: int) -> str | None:
    """Gather the weights (collective) and write the HF checkpoint to ``url`` from rank 0."""
    import torch
    from transformers import AutoModelForCausalLM

    state = full_state_dict(module)
    if rank != 0:
        return None
    config = module.config.__class__.from_dict(module.config.to_dict())
    config.use_cache = True
    config.output_router_logits = False
    with torch.device("meta"):
        hf = AutoModelForCausalLM.from_config(config, dtype=next(iter(state.values())).dtype)
    hf.load_state_dict(state, strict=True, assign=True)
    return save_pretrained(hf, tokenizer, url)
