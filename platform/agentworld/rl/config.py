"""Typed configuration of the RL stage (GRPO family). Free of heavy imports: the recipes
module imports it. Invalid values raise ConfigError naming the field, before any work."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from agentworld.config import ConfigError, check_positive
from agentworld.model.engine import EngineConfig
from agentworld.scoring.config import JudgeConfig


@dataclass(frozen=True, kw_only=True)
class RewardSpec:
    """One named reward function and its weight in the total, or a gate on it."""

    name: str
    """A name registered in ``agentworld.rl.rewards`` (format, json, exact_match,
    fixed_lines, char_f1, rouge_l, judge, or one added with ``register_reward``)."""
    weight: float = 1.0
    """Weight in the total; the total is the weighted mean over the rewards that apply
    to a sample (``json`` applies only where the real observation is JSON)."""
    gate: bool = False
    """Multiply the total by this reward instead of averaging it in (``weight`` is then
    unused): an answer that fails the gate earns nothing however close its content, and
    passing it earns nothing by itself. ``format`` is a gate by default; as an added
    term it paid the policy for short, well-formed answers that said nothing."""

    def __post_init__(self) -> None:
        if self.weight < 0:
            raise ConfigError(f"rl.rewards[{self.name}].weight", f"must be >= 0, got {self.weight}")


@dataclass(frozen=True, kw_only=True)
class RolloutConfig:
    """The vLLM rollout engines (one Ray actor each) and how they sample."""

    engine: EngineConfig = field(
        default_factory=lambda: EngineConfig(max_model_len=1024, dtype="float32")
    )
    """float32 on CPU so that engine and learner log-probabilities agree."""
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 48
    max_prompt_tokens: int = 768
    """Contexts whose prompt is longer are left out (and counted) when the data loads."""
    weight_sync: Literal["object_store", "nccl"] = "object_store"
    """How new weights reach the engines: ``object_store``, a safetensors blob through
    Ray's object store that each engine reloads from a file (anywhere); ``nccl``, a
    broadcast from learner rank 0's GPU into the engines' GPUs (``agentworld.rl.nccl_sync``;
    GPU engines and learners only)."""

    def __post_init__(self) -> None:
        check_positive(
            "rl.rollout",
            temperature=self.temperature,
            max_new_tokens=self.max_new_tokens,
            max_prompt_tokens=self.max_prompt_tokens,
        )
        if not 0 < self.top_p <= 1:
            raise ConfigError("rl.rollout.top_p", f"must be in (0, 1], got {self.top_p}")
        if self.max_prompt_tokens + self.max_new_tokens > self.engine.max_model_len:
            raise ConfigError(
                "rl.rollout.max_prompt_tokens",
                f"{self.max_prompt_tokens} + max_new_tokens {self.max_new_tokens} exceeds "
                f"engine.max_model_len {self.engine.max_model_len}",
            )


@dataclass(frozen=True, kw_only=True)
class LearnerConfig:
    """The DeepSpeed learner group (one Ray actor per data-parallel rank). ZeRO stage,
    precision, gradient clipping and weight decay come from the recipe's ``train``."""

    num_learners: int = 1
    cpus_per_learner: float = 1.0
    gpus_per_learner: float = 0.0
    learning_rate: float = 1e-4
    """On the demo's SFT model, 12 steps at 1e-4 kept greedy fidelity (char F1 50.8 vs
    55.4 before RL, 18 held-out turns); at 3e-4 and 1e-3 greedy decoding collapsed."""
    epochs: int = 1
    """Passes over each rollout batch; > 1 makes the clipped ratio matter."""
    mini_batches: int = 1
    """Optimizer steps per pass: the batch is split into this many mini-batches."""
    expert_parallel_size: int = 1
    """Learner ranks that split each MoE layer's experts (DeepSpeed AutoEP, as in
    training); must divide num_learners."""

    def __post_init__(self) -> None:
        check_positive(
            "rl.learner",
            expert_parallel_size=self.expert_parallel_size,
            num_learners=self.num_learners,
            cpus_per_learner=self.cpus_per_learner,
            learning_rate=self.learning_rate,
            epochs=self.epochs,
            mini_batches=self.mini_batches,
        )
        if self.gpus_per_learner < 0:
            raise ConfigError(
                "rl.learner.gpus_per_learner", f"must be >= 0, got {self.gpus_per_learner}"
            )
        if self.num_learners % self.expert_parallel_size:
            raise ConfigError(
                "rl.learner.expert_parallel_size",
                f"{self.expert_parallel_size} does not divide num_learners {self.num_learners}",
            )


DEFAULT_REWARDS = (
    RewardSpec(name="format", gate=True),
    RewardSpec(name="json", weight=0.2),
    RewardSpec(name="fixed_lines", weight=0.2),
    RewardSpec(name="char_f1", weight=0.6),
)


@dataclass(frozen=True, kw_only=True)
class RLConfig:
    """GRPO-family training of the world model against the real next observation."""

    contexts_per_step: int = 4
    """Contexts (history + action) sampled per step."""
    group_size: int = 4
    """G: predictions per context; advantages are normalized within each group."""
    max_steps: int = 12
    seed: int = 0
    """Seeds context sampling (per step, so a resumed run samples what it would have)."""
    scale_by_std: bool = True
    """GRPO divides by the group's std; False gives Dr. GRPO's unscaled advantages."""
    ratio_level: Literal["token", "sequence"] = "token"
    """``token``: PPO/GRPO per-token ratios, loss averaged over all response tokens of
    the batch; ``sequence``: GSPO, one length-normalized ratio per sequence, loss
    averaged over sequences."""
    clip_low: float = 0.2
    """Ratio clipped below at 1 - clip_low."""
    clip_high: float = 0.28
    """Ratio clipped above at 1 + clip_high (DAPO's clip-higher when > clip_low)."""
    kl_coef: float = 0.0
    """Weight of the k3 KL estimate to the frozen reference policy; 0 keeps no reference."""
    kl_reference: Literal["start", "frozen"] = "start"
    """The KL term's reference: ``start``, the weights the learner loaded; ``frozen``,
    the weights at the learner's ``freeze_reference()`` call and no KL term before it
    (the agent stage freezes its agent after the demonstration fit, so RL is held near
    the agent it starts from rather than the world model it was loaded from)."""
    rewards: tuple[RewardSpec, ...] = DEFAULT_REWARDS
    judge: JudgeConfig | None = None
    """Endpoint and settings of the rubric judge; needed when a reward is ``judge``."""
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    learner: LearnerConfig = field(default_factory=LearnerConfig)
    placement_strategy: Literal["PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"] = "PACK"
    """Ray placement-group strategy for the engine and learner bundles together."""
    checkpoint_every: int = 4
    keep_checkpoints: int = 2
    weight_sync_timeout_s: float = 300.0
    """A rollout engine that has not reported the new weight version by then fails the run."""
    call_timeout_s: float = 1800.0
    """Longest wait for any other call to the engines or learner ranks (start-up, a batch
    of rollouts, a train step, a checkpoint); past it the run fails naming the call
    rather than waiting forever on a stuck actor."""
    wandb: bool = True
    """Log metrics to wandb (offline unless WANDB_MODE says otherwise)."""

    def __post_init__(self) -> None:
        check_positive(
            "rl",
            contexts_per_step=self.contexts_per_step,
            max_steps=self.max_steps,
            checkpoint_every=self.checkpoint_every,
            keep_checkpoints=self.keep_checkpoints,
            weight_sync_timeout_s=self.weight_sync_timeout_s,
            call_timeout_s=self.call_timeout_s,
        )
        if self.group_size < 2:
            raise ConfigError(
                "rl.group_size", f"must be >= 2 to normalize within a group, got {self.group_size}"
            )
        if not 0 <= self.clip_low < 1:
            raise ConfigError("rl.clip_low", f"must be in [0, 1), got {self.clip_low}")
        if self.clip_high < 0:
            raise ConfigError("rl.clip_high", f"must be >= 0, got {self.clip_high}")
        if self.kl_coef < 0:
            raise ConfigError("rl.kl_coef", f"must be >= 0, got {self.kl_coef}")
        gpus = (self.rollout.engine.gpus_per_replica, self.learner.gpus_per_learner)
        if self.rollout.weight_sync == "nccl" and min(gpus) <= 0:
            raise ConfigError(
                "rl.rollout.weight_sync",
                "'nccl' needs GPU engines and learners (rl.rollout.engine.gpus_per_replica, "
                f"rl.learner.gpus_per_learner: {gpus[0]}, {gpus[1]}); 'object_store' runs anywhere",
            )
        self._check_rewards()
        self._check_batch_split()

    def _check_rewards(self) -> None:
        # not at the top: agentworld.rl imports this module (a cycle)
        from agentworld.rl.rewards import known_rewards

        if not self.rewards:
            raise ConfigError("rl.rewards", "needs at least one reward")
        names = [r.name for r in self.rewards]
        for name in names:
            if name not in known_rewards():
                raise ConfigError(
                    "rl.rewards", f"unknown reward {name!r}; known: {', '.join(known_rewards())}"
                )
        if len(set(names)) != len(names):
            raise ConfigError("rl.rewards", f"a reward is listed twice: {names}")
        if not any(r.weight > 0 and not r.gate for r in self.rewards):
            raise ConfigError("rl.rewards", "needs a reward that is not a gate, with a weight > 0")
        if "judge" in names and self.judge is None:
            raise ConfigError("rl.judge", "the 'judge' reward needs a judge endpoint (rl.judge)")

    def _check_batch_split(self) -> None:
        batch = self.contexts_per_step * self.group_size
        per_mini, rest = divmod(batch, self.learner.mini_batches)
        if rest or per_mini % self.learner.num_learners:
            raise ConfigError(
                "rl.learner.mini_batches",
                f"a batch of {batch} predictions (contexts_per_step x group_size) must split "
                f"into {self.learner.mini_batches} mini-batches, each divisible by "
                f"num_learners {self.learner.num_learners}",
            )
