"""HF export of a trained engine: every rank takes part in gathering the weights
(ZeRO-3 partitions, expert-parallel slices), rank 0 writes a plain transformers
checkpoint (safetensors + tokenizer + chat template) of the architecture it started
from: a fresh or Qwen3(-MoE) model as itself; a released Qwen3.5-MoE checkpoint
(``...ForConditionalGeneration``, vision config, language weights only) with that same
declaration and weight names, so that it is loaded and served as the original is."""

from __future__ import annotations

import contextlib
import json
from typing import Any

from agentworld.io import exists, join, read_bytes, write_bytes
from agentworld.model import save_pretrained
from agentworld.model.family import architecture_of
from agentworld.train.engine import moe_layers

# AutoEP keeps a block's shared expert and its gate as attributes of its own names.
_SHARED = {"shared_experts": "shared_expert", "shared_experts_gate": "shared_expert_gate"}
# What a released checkpoint carries beside the weights that the export keeps as it was.
_KEPT_FILES = ("preprocessor_config.json", "video_preprocessor_config.json")


GATHER_BUCKET_BYTES = 1 << 30
"""Full-size bytes of ZeRO-3 partitions gathered at once: the whole model in one
collective where it is smaller, a bounded extra peak on every rank where it is larger."""


def _gathered(params: list) -> contextlib.AbstractContextManager:
    """ZeRO-3 partitions parameters across ranks; gather them for reading (collective:
    one coalesced all-gather for the whole list)."""
    if not any(hasattr(p, "ds_id") for p in params):
        return contextlib.nullcontext()
    import deepspeed

    return deepspeed.zero.GatheredParameters(params, modifier_rank=None)


def _full_bytes(param) -> int:
    # A ZeRO-3 partition's numel() is its local share; ds_numel is the whole tensor's.
    return getattr(param, "ds_numel", param.numel()) * param.element_size()


def _buckets(named: list[tuple[str, Any]], max_bytes: int) -> list[list[tuple[str, Any]]]:
    """Consecutive runs of ``named`` parameters of at most ``max_bytes`` in all (a larger
    parameter alone)."""
    buckets: list[list[tuple[str, Any]]] = []
    size = max_bytes
    for name, param in named:
        n = _full_bytes(param)
        if size + n > max_bytes:
            buckets.append([])
            size = 0
        buckets[-1].append((name, param))
        size += n
    return buckets


def _all_experts(tensors: list, group) -> list:
    """Each of ``tensors`` (E_local, ...) joined with the other EP ranks' slices along
    dim 0, in rank order: one all_gather of their flat concatenation, not one per tensor."""
    import torch
    import torch.distributed as dist

    world = dist.get_world_size(group)
    if world == 1:
        return [t.detach().clone() for t in tensors]
    flat = torch.cat([t.detach().reshape(-1) for t in tensors])
    parts = [torch.empty_like(flat) for _ in range(world)]
    dist.all_gather(parts, flat, group=group)
    out, start = [], 0
    for t in tensors:
        out.append(torch.cat([p[start : start + t.numel()].view(t.shape) for p in parts]))
        start += t.numel()
    return out


def _moe_state(prefix: str, layer) -> dict[str, Any]:
    """HF names for one AutoEP layer: router weight, the fused 3D expert tensors
    (gate_up_proj = [gate; up] on dim 1, down_proj) and, where the family has one, the
    shared expert and its gate (replicated on every rank)."""
    import torch

    experts = [layer.experts.w1, layer.experts.w2, layer.experts.w3]
    shared = [
        (f"{prefix}.{hf_name}.{name}", param)
        for attr, hf_name in _SHARED.items()
        if getattr(layer, attr, None) is not None
        for name, param in getattr(layer, attr).named_parameters()
    ]
    with _gathered([layer.router.gate.weight, *experts, *(p for _, p in shared)]):
        w1, w2, w3 = _all_experts(experts, layer.ep_group)
        state = {
            f"{prefix}.gate.weight": layer.router.gate.weight.detach().clone(),
            f"{prefix}.experts.gate_up_proj": torch.cat([w1, w3], dim=1),
            f"{prefix}.experts.down_proj": w2,
        }
        state.update((name, param.detach().clone()) for name, param in shared)
    return state


def full_state_dict(module, *, bucket_bytes: int = GATHER_BUCKET_BYTES) -> dict[str, Any]:
    """The model's weights under transformers' Qwen3-MoE names (collective: call on
    every rank; each gets the full dict). ZeRO-3 partitions are gathered a bucket of
    ``bucket_bytes`` at a time, an AutoEP layer's experts in one all_gather."""
    ep_prefixes = [name for name, m in moe_layers(module) if hasattr(m, "ep_group")]
    state: dict[str, Any] = {}
    for prefix in ep_prefixes:
        state.update(_moe_state(prefix, module.get_submodule(prefix)))
    rest = [
        (name, param)
        for name, param in module.named_parameters()
        if not any(name.startswith(p + ".") for p in ep_prefixes)
    ]
    for bucket in _buckets(rest, bucket_bytes):
        with _gathered([param for _, param in bucket]):
            state.update((name, param.detach().clone()) for name, param in bucket)
    return state


def export_hf(
    module, tokenizer, url: str, *, rank: int, source_url: str | None = None
) -> str | None:
    """Gather the weights (collective) and write the HF checkpoint to ``url`` from rank 0,
    declared as the checkpoint at ``source_url`` (the run's starting point) was."""
    import torch
    from transformers import AutoModelForCausalLM

    state = full_state_dict(module)
    if rank != 0:
        return None
    config = module.config.__class__.from_dict(module.config.to_dict())
    config.use_cache = True
    if hasattr(config, "output_router_logits"):  # MoE only: a dense config keeps its keys
        config.output_router_logits = False
    with torch.device("meta"):
        hf = AutoModelForCausalLM.from_config(config, dtype=next(iter(state.values())).dtype)
    hf.load_state_dict(state, strict=True, assign=True)
    # transformers saves a model under the weight names it was loaded from only when it
    # knows them (a released Qwen3.5-MoE's model.language_model.*): hand them over.
    conversions = getattr(module, "_weight_conversions", None)
    if conversions is not None:
        hf._weight_conversions = conversions
    save_pretrained(hf, tokenizer, url)
    if source_url:
        keep_declaration(source_url, url)
    return url


def keep_declaration(source_url: str, url: str) -> None:
    """Where the starting checkpoint wraps the text model (``...ForConditionalGeneration``
    with a vision config), write its config.json (and processor files) over the text
    model's, so the export declares the same architecture."""
    source_config = read_bytes(join(source_url, "config.json"))
    if not architecture_of(json.loads(source_config)).wrapped:
        return
    write_bytes(join(url, "config.json"), source_config)
    for name in _KEPT_FILES:
        if exists(join(source_url, name)):
            write_bytes(join(url, name), read_bytes(join(source_url, name)))
