"""Typed configuration of scoring, shared by rl and evaluate: an OpenAI-compatible
endpoint, how a model is asked to generate, and the rubric judge. Free of heavy imports:
the recipes module imports it. Invalid values raise ConfigError naming the field."""

from __future__ import annotations

from dataclasses import dataclass, field

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
    frequency_penalty: float = 0.0
    """Subtracted from a token's logit once per time it was already generated (OpenAI's
    meaning: the answer so far, not the prompt); breaks a greedy model's loops."""
    repetition_penalty: float = 1.0
    """vLLM's multiplicative penalty on tokens seen in the prompt or the answer so far
    (1 is none); a world model copies its prompt, so this one rarely helps."""

    def __post_init__(self) -> None:
        if not -2 <= self.frequency_penalty <= 2:
            raise ConfigError(
                "sampling.frequency_penalty", f"must be in [-2, 2], got {self.frequency_penalty}"
            )
        if self.repetition_penalty <= 0:
            raise ConfigError(
                "sampling.repetition_penalty", f"must be > 0, got {self.repetition_penalty}"
            )
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
class DistillConfig:
    """Distillation of a world model's reasoning: a teacher (any OpenAI-compatible
    endpoint) writes the reasoning that leads from a context to its recorded observation
    (jobs/distill.py)."""

    endpoint: EndpointConfig = field(default_factory=EndpointConfig)
    """The teacher; ``--teacher-url`` and ``--teacher-model`` set its address and model."""
    sampling: SamplingConfig = field(
        default_factory=lambda: SamplingConfig(temperature=0.6, max_tokens=1024)
    )
    """0.6: the temperature the reference evaluates its reasoning model at."""
    max_context_chars: int = 24000
    """Budget for environment text and history in a teacher prompt; older turns go first."""

    def __post_init__(self) -> None:
        check_positive("distill", max_context_chars=self.max_context_chars)
