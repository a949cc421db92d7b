"""Typed configuration of CPT and SFT: the optimization (DeepSpeed) and where the
Ray Train workers go."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from agentworld.config import ConfigError, check_positive


@dataclass(frozen=True, kw_only=True)
class ClusterConfig:
    """Where a run's workers go."""

    num_workers: int = 2
    """Ray Train workers (data-parallel ranks)."""
    use_gpu: bool = False
    cpus_per_worker: int = 1
    gpus_per_worker: int = 0

    def __post_init__(self) -> None:
        check_positive(
            "cluster", num_workers=self.num_workers, cpus_per_worker=self.cpus_per_worker
        )
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
    sft_max_steps: int | None = None
    """SFT's own step count (None: ``max_steps``). SFT fits far fewer tokens than CPT
    and needs more passes over them: the demo's held-out SFT loss still fell at 40."""
    sft_learning_rate: float | None = None
    """SFT's own peak learning rate (None: ``learning_rate``)."""
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
        check_positive(
            "train",
            log_every=self.log_every,
            expert_parallel_size=self.expert_parallel_size,
            seq_len=self.seq_len,
            micro_batch_size=self.micro_batch_size,
            grad_accum_steps=self.grad_accum_steps,
            learning_rate=self.learning_rate,
            max_steps=self.max_steps,
            sft_max_steps=self.sft_max_steps,
            sft_learning_rate=self.sft_learning_rate,
            eval_every=self.eval_every,
            checkpoint_every=self.checkpoint_every,
            keep_checkpoints=self.keep_checkpoints,
        )
        for name in ("max_steps", "sft_max_steps"):
            steps = getattr(self, name)
            if steps is not None and self.warmup_steps >= steps:
                raise ConfigError(
                    "train.warmup_steps", f"{self.warmup_steps} must be below {name} {steps}"
                )

    def for_stage(self, stage: str) -> TrainConfig:
        """The settings a ``stage`` run trains with: SFT's own steps and learning rate
        where the recipe sets them."""
        if stage != "sft":
            return self
        return dataclasses.replace(
            self,
            max_steps=self.sft_max_steps or self.max_steps,
            learning_rate=self.sft_learning_rate or self.learning_rate,
        )
