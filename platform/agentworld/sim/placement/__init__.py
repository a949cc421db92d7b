"""All of the serve stage's Ray code; the rest of ``agentworld.sim`` is plain Python.

This module: the vLLM engine deployment's ``ray.serve.llm.LLMConfig``, the detached
actor that holds the sessions, and the Serve metrics the Guard records. Beside it:
``app`` (the Serve application: ``build_app`` is the import path Serve configs name,
and the deploy/stop calls of ``agentworld.sim.run``), ``ingress`` (``SimIngress``, the
Serve deployment class of the simulator routes) and ``ray_llm_adapter`` (the two
private Ray Serve LLM names the app needs, in one place).
"""

from __future__ import annotations

import os
from typing import Any

from agentworld.sim.config import ServeConfig
from agentworld.sim.store import SessionStore

_REMOTE = ("s3://", "gs://", "abfss://", "azure://")
_LATENCY_BOUNDARIES = [0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0]


def llm_config(cfg: ServeConfig, *, base_dir: str | None = None):
    """The ``ray.serve.llm.LLMConfig`` of the engine. On CPU each replica gets one bundle
    of ``cpus_per_replica`` CPUs; on GPU one bundle per tensor-parallel rank."""
    from ray.serve.llm import LLMConfig

    # not at the top: it imports Ray Serve LLM's internals, as LLMConfig above
    from agentworld.sim.placement.ray_llm_adapter import LocalModelCallback

    engine = cfg.engine
    if engine.gpus_per_replica:
        bundle = {"CPU": engine.cpus_per_replica, "GPU": 1}
        bundles = [bundle] * engine.tensor_parallel_size
    else:
        bundles = [{"CPU": engine.cpus_per_replica}]
    env = _job_env_vars()
    if cfg.cpu_kv_cache_gib is not None and not engine.gpus_per_replica:
        env["VLLM_CPU_KVCACHE_SPACE"] = str(cfg.cpu_kv_cache_gib)
    source = model_source(cfg.model, base_dir)
    return LLMConfig(
        model_loading_config={"model_id": cfg.model_id, "model_source": source},
        callback_config={"callback_class": LocalModelCallback},
        engine_kwargs={**engine.vllm_kwargs(), **_ENGINE_FRONTEND},
        placement_group_config={"bundles": bundles},
        deployment_config={
            "num_replicas": engine.replicas,
            "ray_actor_options": {"num_cpus": cfg.engine_server_cpus},
            **_routing(cfg.engine_routing),
        },
        runtime_env={"env_vars": env} if env else None,
    )


# vLLM's OpenAI front end: report each answer's cached prompt tokens (usage) and its
# time to first token (metrics), which the simulator stores with every turn.
_ENGINE_FRONTEND = {"enable_prompt_tokens_details": True, "enable_per_request_metrics": True}
SESSION_ROUTER = "ray.serve.experimental.consistent_hash_router.ConsistentHashRouter"
ROUND_ROBIN_ROUTER = "ray.serve.experimental.round_robin_router.RoundRobinRouter"


def _routing(routing: str) -> dict[str, Any]:
    """The engine deployment's request router. ``session``: Ray Serve's consistent-hash
    router keyed by the ``session_id`` the ingress sets on its engine calls; one fallback
    replica takes a session whose own replica is full (backpressure). ``round_robin``:
    the replicas in turn. ``load``: Serve's default (power of two choices)."""
    if routing == "load":
        return {}
    if routing == "round_robin":
        return {"request_router_config": {"request_router_class": ROUND_ROBIN_ROUTER}}
    return {
        "request_router_config": {
            "request_router_class": SESSION_ROUTER,
            "request_router_kwargs": {"num_fallback_replicas": 1},
        }
    }


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


def request_metrics():
    """(requests counter, latency histogram) of ``agentworld.sim.guard.Guard``, in Ray
    Serve's Prometheus metrics; raises outside a Ray worker."""
    import ray
    from ray.serve import metrics

    if not ray.is_initialized():
        raise RuntimeError("metrics need a Ray worker")  # e.g. the app under a test client

    requests = metrics.Counter(
        "agentworld_sim_requests",
        description="Simulator and model requests by route, team and HTTP status.",
        tag_keys=("route", "team", "status"),
    )
    latency = metrics.Histogram(
        "agentworld_sim_request_latency_s",
        description="Time to answer a request, by route.",
        boundaries=_LATENCY_BOUNDARIES,
        tag_keys=("route",),
    )
    return requests, latency
