"""What one RL run is asked to do (light to import: the job command line and the
recipes build it before anything heavy loads)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentworld.rl.config import RLConfig
from agentworld.train.config import TrainConfig


@dataclass(frozen=True, kw_only=True)
class RLJob:
    """One RL run."""

    data: str
    """prepare's run directory, or its per-turn samples (``samples/sft``)."""
    init: str
    """HF checkpoint to start from (the SFT stage's ``<out>/hf``)."""
    out: str
    """Run directory: metrics.jsonl, checkpoints/, hf/, quarantine/, manifest.json."""
    rl: RLConfig
    train: TrainConfig
    """The learner's model settings (RL's learning rate and expert parallelism replace
    its own)."""
    config: dict[str, Any] = field(default_factory=dict)
    """The whole run configuration, recorded in the manifest and in wandb."""
