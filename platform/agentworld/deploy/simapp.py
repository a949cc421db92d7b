"""The simulator application's ``args`` in a RayService: parsed by the app's own config
(``agentworld.sim.config.ServeConfig``, what ``build_app`` does first) and its vLLM
engines fitted to the RayService's GPU groups. Building the app itself would start Ray."""

from __future__ import annotations

from typing import Any

from agentworld.config import ConfigError
from agentworld.deploy.kuberay import gpus_of
from agentworld.deploy.problems import Problem
from agentworld.sim.config import ServeConfig

SIM_IMPORT_PATHS = (
    "agentworld.sim.placement.app:build_app",
    "agentworld.sim.placement.app.build_app",
)


def check_sim_args(args: dict[str, Any], cluster: dict[str, Any], field: str) -> list[Problem]:
    try:
        cfg = ServeConfig.from_dict(args)
    except ConfigError as e:
        # ServeConfig names its fields from the root ("serve.limits.x") or the part ("engine.x").
        return [
            Problem(
                f"{field}.{e.field.removeprefix('serve.')}", str(e).removeprefix(f"{e.field}: ")
            )
        ]
    engine = cfg.engine
    if not engine.gpus_per_replica:
        return []
    # One bundle with one GPU per tensor-parallel rank, packed on one pod.
    per_replica = engine.tensor_parallel_size
    groups = cluster.get("workerGroupSpecs") or []
    pods = [
        (g["maxReplicas"] * g.get("numOfHosts", 1), gpus_of(g["template"]["spec"]["containers"][0]))
        for g in groups
    ]
    fits = sum(n * (gpus // per_replica) for n, gpus in pods)
    if fits < engine.replicas:
        return [
            Problem(
                f"{field}.engine.replicas",
                f"{engine.replicas} engines of {per_replica} GPU(s) each do not fit the worker groups "
                f"(room for {fits} at maxReplicas)",
            )
        ]
    return []
