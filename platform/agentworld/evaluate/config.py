"""Typed configuration of the evaluate stage (infer, judge). Free of heavy imports: the
recipes module imports it. Invalid values raise ConfigError naming the field."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from agentworld.config import ConfigError, check_positive


@dataclass(frozen=True, kw_only=True)
class SamplingConfig:
    """How a model is asked to generate."""

    temperature: float = 0.0
    """0 is greedy: evaluation runs are reproducible."""
    top_p: float = 1.0
    max_tokens: int = 512
    """Generated tokens per answer (reasoning included)."""
    seed: int | None = 0
    """Sampling seed passed to the engine; None leaves it to the engine."""

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise ConfigError("sampling.temperature", f"must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ConfigError("sampling.top_p", f"must be in (0, 1], got {self.top_p}")
        check_positive("sampling", max_tokens=self.max_tokens)


@dataclass(frozen=True, kw_only=True)
class EndpointConfig:
    """An OpenAI-compatible chat-completions endpoint and how hard to push it."""

    base_url: str = "http://127.0.0.1:8000/v1"
    model: str | None = None
    """Served model name; None takes the endpoint's first model (GET /v1/models)."""
    api_key_env: str = "OPENAI_API_KEY"
    """Environment variable holding the API key; unset means the key ``EMPTY``."""
    concurrency: int = 8
    """Requests in flight at once."""
    max_retries: int = 3
    """Extra attempts after a timeout, connection error, 429 or 5xx."""
    timeout_s: float = 120.0
    """Per-request timeout."""
    backoff_s: float = 0.5
    """First retry delay; doubled after each failed attempt."""

    def __post_init__(self) -> None:
        if not self.base_url.startswith(("http://", "https://")):
            raise ConfigError("endpoint.base_url", f"must be an http(s) URL, got {self.base_url!r}")
        check_positive("endpoint", concurrency=self.concurrency, timeout_s=self.timeout_s)
        if self.max_retries < 0:
            raise ConfigError("endpoint.max_retries", f"must be >= 0, got {self.max_retries}")
        if self.backoff_s < 0:
            raise ConfigError("endpoint.backoff_s", f"must be >= 0, got {self.backoff_s}")


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
            raise ConfigError("infer.backend", f"must be 'vllm' or 'endpoint', got {self.backend!r}")
        check_positive("infer", flush_every=self.flush_every, max_items=self.max_items)


@dataclass(frozen=True, kw_only=True)
class JudgeConfig:
    """The rubric judge: any OpenAI-compatible endpoint."""

    endpoint: EndpointConfig = field(default_factory=EndpointConfig)
    sampling: SamplingConfig = field(
        default_factory=lambda: SamplingConfig(temperature=0.0, max_tokens=1024)
    )
    parse_retries: int = 1
    """Extra asks when the judge's answer has no parseable verdict."""
    max_context_chars: int = 24000
    """Budget for environment text and history in a judge prompt; older turns go first."""
    flush_every: int = 32
    """Finished judgments per atomically written part."""

    def __post_init__(self) -> None:
        if self.parse_retries < 0:
            raise ConfigError("judge.parse_retries", f"must be >= 0, got {self.parse_retries}")
        check_positive(
            "judge", max_context_chars=self.max_context_chars, flush_every=self.flush_every
        )


@dataclass(frozen=True, kw_only=True)
class EvaluateConfig:
    """The evaluate stage of a recipe."""

    infer: InferConfig = field(default_factory=InferConfig)
    judge: JudgeConfig = field(default_factory=JudgeConfig)
