"""Where the serve stage's pieces run on Ray: the vLLM engine deployment
(``ray.serve.llm``) and the detached actor that holds the sessions."""

from __future__ import annotations

import os
from typing import Any

from agentworld.sim.config import EngineConfig, ServeConfig

_REMOTE = ("s3://", "gs://", "abfss://", "azure://")


def llm_config(engine: EngineConfig, *, base_dir: str | None = None):
    """The ``ray.serve.llm.LLMConfig`` of the engine. On CPU the engine gets one bundle of
    ``cpus_per_replica`` CPUs; on GPU one bundle per tensor-parallel rank."""
    from ray.serve.llm import LLMConfig

    if engine.gpus_per_replica:
        bundle = {"CPU": engine.cpus_per_replica, "GPU": 1}
        bundles = [bundle] * engine.tensor_parallel_size
    else:
        bundles = [{"CPU": engine.cpus_per_replica}]
    env = _job_env_vars()
    if engine.cpu_kv_cache_gib is not None and not engine.gpus_per_replica:
        env["VLLM_CPU_KVCACHE_SPACE"] = str(engine.cpu_kv_cache_gib)
    return LLMConfig(
        model_loading_config={
            "model_id": engine.model_id,
            "model_source": model_source(engine.model, base_dir),
        },
        engine_kwargs={
            "dtype": engine.dtype,
            "enforce_eager": engine.enforce_eager,
            "gpu_memory_utilization": engine.gpu_memory_utilization,
            "max_model_len": engine.max_model_len,
            "tensor_parallel_size": engine.tensor_parallel_size,
        },
        placement_group_config={"bundles": bundles},
        deployment_config={
            "num_replicas": engine.num_replicas,
            "ray_actor_options": {"num_cpus": engine.server_cpus},
        },
        runtime_env={"env_vars": env} if env else None,
    )


def _job_env_vars() -> dict[str, str]:
    # Ray Serve LLM replaces the job's env_vars with the LLMConfig's: carry them over.
    import ray

    if not ray.is_initialized():
        return {}
    return dict((ray.get_runtime_context().runtime_env or {}).get("env_vars") or {})


def model_source(model: str, base_dir: str | None) -> Any:
    """Object-store checkpoints are mirrored by Ray Serve LLM; a relative local path is
    made absolute, because replicas do not run in the directory the app was built from."""
    if model.startswith(_REMOTE):
        return {"bucket_uri": model}
    path = model.removeprefix("file://")
    candidate = os.path.join(base_dir or os.getcwd(), path)
    if not os.path.isabs(path) and os.path.isdir(candidate):
        return os.path.abspath(candidate)
    return path


def session_store(cfg: ServeConfig):
    """The shared session store: a detached, named actor, created by whichever replica
    comes first and found by the others. It outlives the replicas (a restarted replica
    finds its sessions again); Ray restarts it if it dies, and with ``storage_url`` it
    reloads the sessions it had written."""
    import ray

    from agentworld.sim.store import SessionStore

    actor = ray.remote(SessionStore).options(
        name=cfg.store_name,
        namespace=cfg.store_namespace,
        lifetime="detached",
        get_if_exists=True,
        max_restarts=-1,
        num_cpus=0,
    )
    store = actor.remote(cfg.limits, storage_url=cfg.storage_url)
    # A store made by an earlier deployment keeps running: give it this config's limits.
    # Calls from one caller run in order, so no need to wait for this one.
    store.configure.remote(cfg.limits)
    return store
