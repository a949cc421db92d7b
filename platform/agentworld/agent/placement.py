"""Ray for the agent stage, and only here: the local cluster when the job runs outside
one, and the agent's workers, which are ``agentworld.rl``'s (one placement group with
the vLLM rollout engines and the DeepSpeed learner ranks, and the weight sync between
them) built from the agent's own ``RLConfig``."""

from __future__ import annotations

from typing import Any

from agentworld.agent.config import AgentConfig
from agentworld.cluster import local_ray
from agentworld.rl.placement import RLWorkers
from agentworld.train.config import TrainConfig


def cluster(num_cpus: int = 4):
    """The job's Ray cluster (``agentworld.cluster.local_ray``): the one RAY_ADDRESS
    names, else a local one with ``num_cpus`` logical CPUs (the rollout engine and the
    learner rank take one each; the driver's simulator engine runs outside Ray)."""

    return local_ray(num_cpus=num_cpus)


def start_workers(cfg: AgentConfig, train: TrainConfig, init_dir: str) -> Any:
    """``RLWorkers`` holding ``init_dir``'s weights, sized by ``cfg.rl``; ``train``: the
    learner's model settings. It returns once the learner is up: the demonstration fit
    runs while the rollout engine starts, which the first weight sync waits for."""
    return RLWorkers(cfg.rl, train, init_dir, engines_later=True)
