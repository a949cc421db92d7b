"""Typed configuration of the evaluate stage (infer, judge). Free of heavy imports: the
recipes module imports it. Invalid values raise ConfigError naming the field. The
endpoint, sampling and judge settings are scoring's (``agentworld.scoring.config``),
shared with rl."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from agentworld.config import ConfigError, check_positive
from agentworld.scoring.config import EndpointConfig, JudgeConfig, SamplingConfig


@dataclass(frozen=True, kw_only=True)
class VLLMConfig:
    """Local batch inference: vLLM engines as a Ray Data actor pool."""

    replicas: int = 1
    """Engine actors (each holds one copy of the model)."""
    batch_size: int = 16
    """Items handed to an engine at once."""
    num_cpus: float = 1.0
    """Ray CPUs per engine actor."""
    num_gpus: float = 0.0
    """Ray GPUs per engine actor (0 on the vLLM CPU build)."""
    tensor_parallel_size: int = 1
    max_model_len: int = 2048
    """Prompt + answer tokens; longer prompts are cut from the left of the history."""
    gpu_memory_utilization: float = 0.2
    """On the CPU build: the share of RAM for the KV cache."""
    enforce_eager: bool = True
    """True on CPU (no CUDA graphs)."""
    dtype: str = "auto"

    def __post_init__(self) -> None:
        check_positive(
            "vllm",
            replicas=self.replicas,
            batch_size=self.batch_size,
            num_cpus=self.num_cpus,
            tensor_parallel_size=self.tensor_parallel_size,
            max_model_len=self.max_model_len,
        )
        if self.num_gpus < 0:
            raise ConfigError("vllm.num_gpus", f"must be >= 0, got {self.num_gpus}")
        if not 0 < self.gpu_memory_utilization <= 1:
            raise ConfigError(
                "vllm.gpu_memory_utilization",
                f"must be in (0, 1], got {self.gpu_memory_utilization}",
            )


@dataclass(frozen=True, kw_only=True)
class InferConfig:
    """The model under evaluation and how predictions are produced."""

    backend: Literal["vllm", "endpoint"] = "vllm"
    """``vllm``: a local checkpoint on Ray Data; ``endpoint``: an OpenAI-compatible server."""
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    endpoint: EndpointConfig = field(default_factory=EndpointConfig)
    vllm: VLLMConfig = field(default_factory=VLLMConfig)
    flush_every: int = 32
    """Finished items per atomically written part: what an interruption can lose."""
    max_items: int | None = None
    """Evaluate only the first N items (smoke runs); None means all."""

    def __post_init__(self) -> None:
        if self.backend not in ("vllm", "endpoint"):
            raise ConfigError(
                "infer.backend", f"must be 'vllm' or 'endpoint', got {self.backend!r}"
            )
        check_positive("infer", flush_every=self.flush_every, max_items=self.max_items)


@dataclass(frozen=True, kw_only=True)
class EvaluateConfig:
    """The evaluate stage of a recipe."""

    infer: InferConfig = field(default_factory=InferConfig)
    judge: JudgeConfig = field(default_factory=JudgeConfig)
