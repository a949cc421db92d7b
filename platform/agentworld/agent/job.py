"""What one agent-stage run is asked to do (light to import: the job command line and
the recipes build it before anything heavy loads)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from agentworld.agent.config import AgentConfig
from agentworld.train.config import TrainConfig


@dataclass(frozen=True, kw_only=True)
class AgentJob:
    """One agent-stage run: train agents (or evaluate given ones) against the world model."""

    command: Literal["train", "evaluate"]
    out: str
    world_model: str
    """HF checkpoint of the world model: the simulator, and the warm start."""
    cfg: AgentConfig
    train: TrainConfig
    """The learner's model settings (the agent's RL settings replace its own)."""
    config: dict[str, Any] = field(default_factory=dict)
    """The whole run configuration, recorded in the manifest."""
    data: str | None = None
    """Collected trajectories (record shards) used as demonstrations."""
    agents: dict[str, str] = field(default_factory=dict)
    """evaluate: agent name -> HF checkpoint."""
