"""A complete run configuration: one typed config per stage, each validated on
construction beside its owner (``<stage>/config.py``), composed here with the checks
that span stages. Invalid combinations raise ConfigError naming the field; variants
are made with ``dataclasses.replace`` or dotted overrides
(``agentworld.config.set_overrides``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from agentworld.agent.config import AgentConfig
from agentworld.collect.config import CollectConfig
from agentworld.config import ConfigError
from agentworld.data.config import DataConfig
from agentworld.evaluate.config import EvaluateConfig
from agentworld.model.config import ModelConfig
from agentworld.rl.config import RLConfig
from agentworld.scoring.config import DistillConfig
from agentworld.sim.config import ServeConfig
from agentworld.train.config import ClusterConfig, TrainConfig


@dataclass(frozen=True, kw_only=True)
class Recipe:
    """A complete, named run configuration."""

    name: str
    model: ModelConfig = field(default_factory=ModelConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    collect: CollectConfig = field(default_factory=CollectConfig)
    """The collect stage: domains, episodes, seed and the sandbox limits of recording."""
    data: DataConfig = field(default_factory=DataConfig)
    """The prepare stage: validation, dedup, decontamination, tokenization, packing."""
    evaluate: EvaluateConfig = field(default_factory=EvaluateConfig)
    """The evaluate stage: model inference (vLLM or endpoint) and the rubric judge."""
    rl: RLConfig = field(default_factory=RLConfig)
    """The RL stage: GRPO settings, rewards, rollout engines and learner group."""
    serve: ServeConfig = field(default_factory=ServeConfig)
    """The serve stage: engine, simulator limits and where team API keys come from."""
    agent: AgentConfig = field(default_factory=AgentConfig)
    """The agent stage: tasks, episode limits, the simulator, the agent's GRPO workers."""
    distill: DistillConfig = field(default_factory=DistillConfig)
    """Reasoning distillation: the teacher endpoint and how it is asked."""

    def __post_init__(self) -> None:
        ep = self.train.expert_parallel_size
        if self.model.num_experts % ep:
            raise ConfigError(
                "train.expert_parallel_size",
                f"num_experts {self.model.num_experts} is not divisible by expert_parallel_size {ep}",
            )
        if self.cluster.num_workers % ep:
            raise ConfigError(
                "train.expert_parallel_size",
                f"{ep} does not divide the world size (cluster.num_workers {self.cluster.num_workers})",
            )
        if self.model.num_experts % self.rl.learner.expert_parallel_size:
            raise ConfigError(
                "rl.learner.expert_parallel_size",
                f"num_experts {self.model.num_experts} is not divisible by "
                f"{self.rl.learner.expert_parallel_size}",
            )
        if self.train.precision == "bf16" and not self.cluster.use_gpu:
            raise ConfigError("train.precision", "bf16 needs GPUs here; use fp32 on CPU")
        if self.train.attn_implementation == "flash_attention_2" and not self.cluster.use_gpu:
            raise ConfigError(
                "train.attn_implementation", "flash_attention_2 needs GPUs; use sdpa on CPU"
            )
        if self.train.seq_len > self.model.max_position_embeddings:
            raise ConfigError(
                "train.seq_len",
                f"{self.train.seq_len} exceeds model.max_position_embeddings {self.model.max_position_embeddings}",
            )
