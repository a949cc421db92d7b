"""Typed run configuration. Each part is a keyword-only dataclass validated on
construction; invalid combinations raise ConfigError naming the field, they are never
silently rewritten. Variants are made with ``dataclasses.replace``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from agentworld.agent.config import AgentConfig
from agentworld.collect.config import CollectConfig
from agentworld.data.config import DataConfig
from agentworld.evaluate.config import EvaluateConfig
from agentworld.rl.config import RLConfig
from agentworld.sim.config import ServeConfig


class ConfigError(ValueError):
    """A configuration value or combination is invalid; ``field`` names it."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


def apply_overrides(config, items, *, owner: str):
    """A copy of the dataclass ``config`` with ``FIELD=VALUE`` items applied (values
    read as Python literals, else kept as strings), validated again; an unknown field
    raises ConfigError naming ``owner.FIELD``. For command-line overrides."""
    import ast
    import dataclasses

    names = {f.name for f in dataclasses.fields(config)}
    changes = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or key not in names:
            raise ConfigError(f"{owner}.{key}", f"unknown field in override {item!r}")
        try:
            changes[key] = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            changes[key] = raw
    return dataclasses.replace(config, **changes)


def _positive(owner: str, **values: float) -> None:
    for name, value in values.items():
        if value <= 0:
            raise ConfigError(f"{owner}.{name}", f"must be > 0, got {value}")


@dataclass(frozen=True, kw_only=True)
class ModelConfig:
    """Shape of a Qwen3-MoE causal LM, or a pretrained checkpoint to start from."""

    pretrained: str | None = None
    """URL or path of an HF checkpoint; when set, the shape fields below are ignored."""
    vocab_size: int = 2048
    """Size of the byte-level BPE trained on the corpus (tiny models only)."""
    hidden_size: int = 128
    intermediate_size: int = 256
    """Width of dense MLPs (unused when every layer is sparse)."""
    moe_intermediate_size: int = 128
    """Width of each expert's MLP."""
    num_layers: int = 2
    num_attention_heads: int = 2
    num_kv_heads: int = 1
    head_dim: int = 64
    """64: vLLM's CPU attention rejects smaller heads."""
    num_experts: int = 4
    experts_per_token: int = 2
    """Top-k routing."""
    router_aux_loss_coef: float = 0.01
    """Weight of the load-balancing loss added to the LM loss."""
    max_position_embeddings: int = 4096

    def __post_init__(self) -> None:
        _positive(
            "model",
            vocab_size=self.vocab_size,
            hidden_size=self.hidden_size,
            num_layers=self.num_layers,
            num_attention_heads=self.num_attention_heads,
            num_kv_heads=self.num_kv_heads,
            head_dim=self.head_dim,
            num_experts=self.num_experts,
            experts_per_token=self.experts_per_token,
            moe_intermediate_size=self.moe_intermediate_size,
        )
        if self.num_attention_heads % self.num_kv_heads:
            raise ConfigError(
                "model.num_kv_heads",
                f"{self.num_kv_heads} does not divide num_attention_heads {self.num_attention_heads}",
            )
        if self.experts_per_token > self.num_experts:
            raise ConfigError(
                "model.experts_per_token",
                f"{self.experts_per_token} exceeds num_experts {self.num_experts}",
            )


@dataclass(frozen=True, kw_only=True)
class ClusterConfig:
    """Where a run's workers go."""

    num_workers: int = 2
    """Ray Train workers (data-parallel ranks)."""
    use_gpu: bool = False
    cpus_per_worker: int = 1
    gpus_per_worker: int = 0

    def __post_init__(self) -> None:
        _positive("cluster", num_workers=self.num_workers, cpus_per_worker=self.cpus_per_worker)
        if self.use_gpu and self.gpus_per_worker < 1:
            raise ConfigError("cluster.gpus_per_worker", "must be >= 1 when use_gpu is true")
        if not self.use_gpu and self.gpus_per_worker:
            raise ConfigError("cluster.gpus_per_worker", "must be 0 when use_gpu is false")


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """Optimization for CPT and SFT (DeepSpeed)."""

    zero_stage: Literal[0, 1, 2, 3] = 2
    precision: Literal["fp32", "bf16"] = "fp32"
    """fp32 on CPU; bf16 on GPU."""
    expert_parallel_size: int = 1
    """Ranks that split each MoE layer's experts between them (1 = every rank holds all)."""
    seq_len: int = 512
    """Packed sequence length."""
    micro_batch_size: int = 4
    grad_accum_steps: int = 1
    learning_rate: float = 1e-3
    min_lr_ratio: float = 0.1
    warmup_steps: int = 5
    max_steps: int = 40
    weight_decay: float = 0.0
    grad_clip: float = 1.0
    eval_every: int = 10
    checkpoint_every: int = 10
    keep_checkpoints: int = 2
    seed: int = 0
    log_every: int = 1
    """Steps between progress reports (the driver's progress line, wandb)."""
    max_failures: int = 2
    """Worker-group failures Ray Train recovers from (FailureConfig): the group is
    replaced and resumes from the newest checkpoint."""
    attn_implementation: Literal["sdpa", "eager", "flash_attention_2"] = "sdpa"
    """Attention kernel. Packed documents never attend to each other: sdpa and eager get
    a block-diagonal causal mask built from the rows' position ids, flash_attention_2
    (GPU only) runs variable-length attention on them."""
    wandb_project: str = "agentworld"
    wandb_mode: Literal["offline", "online", "disabled"] = "offline"
    """wandb logging: offline by default (files under the run directory's wandb/)."""

    def __post_init__(self) -> None:
        if self.max_failures < 0:
            raise ConfigError("train.max_failures", f"must be >= 0, got {self.max_failures}")
        _positive(
            "train",
            log_every=self.log_every,
            expert_parallel_size=self.expert_parallel_size,
            seq_len=self.seq_len,
            micro_batch_size=self.micro_batch_size,
            grad_accum_steps=self.grad_accum_steps,
            learning_rate=self.learning_rate,
            max_steps=self.max_steps,
            eval_every=self.eval_every,
            checkpoint_every=self.checkpoint_every,
            keep_checkpoints=self.keep_checkpoints,
        )
        if self.warmup_steps >= self.max_steps:
            raise ConfigError(
                "train.warmup_steps",
                f"{self.warmup_steps} must be below max_steps {self.max_steps}",
            )


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
