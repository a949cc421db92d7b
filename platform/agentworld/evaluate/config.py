"""Typed configuration of the evaluate stage (infer, judge, closed loop, ranking). Free of heavy imports: the
recipes module imports it. Invalid values raise ConfigError naming the field. The
endpoint, sampling and judge settings are scoring's (``agentworld.scoring.config``),
shared with rl."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from agentworld.config import ConfigError, check_positive, check_prompt_style
from agentworld.model.engine import EngineConfig
from agentworld.scoring.config import EndpointConfig, JudgeConfig, SamplingConfig


@dataclass(frozen=True, kw_only=True)
class VLLMConfig:
    """Local batch inference: vLLM engines as a Ray Data actor pool."""

    engine: EngineConfig = field(default_factory=EngineConfig)
    """The engine actors; prompts longer than ``max_model_len`` minus the answer's
    tokens are cut from the left of the history."""
    batch_size: int = 16
    """Items handed to an engine at once."""

    def __post_init__(self) -> None:
        check_positive("vllm", batch_size=self.batch_size)


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
class ClosedLoopConfig:
    """Closed-loop rollouts: held-out real episodes replayed against the simulator with
    its own earlier observations as the history. The model, sampling and endpoint are
    ``infer``'s."""

    max_turns: int | None = None
    """Turns rolled out per episode (the first N); None means every turn."""
    max_episodes: int | None = None
    """Roll out only the first N episodes (smoke runs); None means all."""
    episodes_in_flight: int = 16
    """Episodes stepped at once: their requests are in flight together (one batch for
    the in-process engine)."""
    flush_every: int = 8
    """Finished episodes per atomically written part: what an interruption can lose."""
    session_api_key_env: str = "AGENTWORLD_API_KEY"
    """Where the simulator session API's key is read from (``--simulator``)."""
    prompt_style: Literal["native", "awb"] = "native"
    """How an episode's turns are rendered for the model: ``native`` (this project's
    format) or ``awb`` (the reference's, for its released model: the domain's system
    prompt from ``prompts_dir`` before the episode's environment text, ``### Turn N`` /
    ``**Action:**`` turns, ``**Environment Observation:**`` answers). With
    ``--simulator`` the closed-loop turns are the served app's: give it the same style."""
    prompts_dir: str | None = None
    """The reference's ``prompts/`` folder (``<domain>/system_prompt.txt``); ``awb`` only.
    A domain without its file stops the run before any episode, naming the file."""

    def __post_init__(self) -> None:
        check_positive(
            "closed_loop",
            max_turns=self.max_turns,
            max_episodes=self.max_episodes,
            episodes_in_flight=self.episodes_in_flight,
            flush_every=self.flush_every,
        )
        check_prompt_style("closed_loop", self.prompt_style, self.prompts_dir)


@dataclass(frozen=True, kw_only=True)
class RankingConfig:
    """Ranking agreement: a ladder of scripted agents of known quality run on the same
    tasks in the real environments and in the simulator (``agentworld.agent.ranking``;
    the tasks, limits and simulator are the recipe's ``agent`` section)."""

    shares: tuple[float, ...] = (0.25, 0.5, 0.75)
    """Rungs between the oracle and the random agent: the share of the oracle's
    actions replaced by a random valid action."""
    seeds: int = 2
    """Draws of each rung's random actions per task."""
    split: Literal["eval", "all"] = "eval"
    """The tasks: the held-out split, or every task (the agents are scripted: no task
    was trained on)."""
    sim_modes: tuple[Literal["sim", "sim_uncontrolled"], ...] = ("sim", "sim_uncontrolled")
    """Simulations compared with reality: controlled (the task's facts as control) and
    uncontrolled."""
    bootstrap: int = 2000
    """Resamples of the tasks behind tau's interval."""
    seed: int = 0

    def __post_init__(self) -> None:
        if not all(0 < s < 1 for s in self.shares) or list(self.shares) != sorted(set(self.shares)):
            raise ConfigError(
                "ranking.shares", f"must rise strictly inside (0, 1), got {self.shares}"
            )
        if self.split not in ("eval", "all"):
            raise ConfigError("ranking.split", f"must be 'eval' or 'all', got {self.split!r}")
        if not self.sim_modes or not set(self.sim_modes) <= {"sim", "sim_uncontrolled"}:
            raise ConfigError(
                "ranking.sim_modes", f"must name sim and/or sim_uncontrolled, got {self.sim_modes}"
            )
        check_positive("ranking", seeds=self.seeds, bootstrap=self.bootstrap)


@dataclass(frozen=True, kw_only=True)
class EvaluateConfig:
    """The evaluate stage of a recipe."""

    infer: InferConfig = field(default_factory=InferConfig)
    judge: JudgeConfig = field(default_factory=JudgeConfig)
    closed_loop: ClosedLoopConfig = field(default_factory=ClosedLoopConfig)
    ranking: RankingConfig = field(default_factory=RankingConfig)
