"""The private Ray Serve LLM names the simulator app needs
(``agentworld.sim.placement.ray_llm_adapter``): a Ray release that moves or changes
them fails here, naming them, instead of inside a Serve replica."""

from __future__ import annotations


def test_private_ray_llm_names_still_work():
    from fastapi import FastAPI
    from ray.serve.llm import LLMConfig

    from agentworld.sim.placement.ray_llm_adapter import model_card, openai_fastapi_app

    llm = LLMConfig(model_loading_config={"model_id": "agentworld", "model_source": "/tmp/m"})
    card = model_card(llm)
    assert card.id == "agentworld" and card.metadata["model_id"] == "agentworld"
    app = openai_fastapi_app()
    assert isinstance(app, FastAPI)
    assert app.user_middleware, "Ray Serve LLM's app came without its middleware"


def test_the_app_imports_only_public_ray_names_outside_the_adapter():
    import pathlib

    import agentworld.sim

    root = pathlib.Path(agentworld.sim.__file__).parent
    for path in root.rglob("*.py"):
        if path.name != "ray_llm_adapter.py":
            assert "_internal" not in path.read_text(), path


def test_a_local_model_skips_the_per_node_mirroring_task():
    """The engine replica's per-node task only mirrors object-store models: for a local
    path it is skipped (it would start a worker process that imports vLLM to return the
    path it was given); a bucket is still mirrored on every node."""
    import asyncio

    from agentworld.sim.config import ServeConfig
    from agentworld.sim.placement import llm_config

    def runs_init_node(model: str) -> bool:
        llm = llm_config(ServeConfig(model=model))
        callback = llm.callback_config.callback_class(llm)  # as the replica makes it
        asyncio.run(callback.run_callback("on_before_node_init"))
        return callback.ctx.run_init_node

    assert runs_init_node("/srv/models/agentworld") is False
    assert runs_init_node("s3://bucket/agentworld") is True


def test_every_engine_routing_names_a_router_this_ray_has():
    """``serve.engine_routing``: ``load`` leaves Serve's default router; the others name
    Ray Serve request routers by import path, which a Ray release may move."""
    import importlib

    import pytest
    from ray.serve.request_router import RequestRouter

    from agentworld.config import ConfigError
    from agentworld.sim.config import ENGINE_ROUTINGS, ServeConfig
    from agentworld.sim.placement import llm_config

    def import_attr(path: str):
        module, _, name = path.rpartition(".")
        return getattr(importlib.import_module(module), name)

    routers = {}
    for routing in ENGINE_ROUTINGS:
        deployment = llm_config(ServeConfig(model="/m", engine_routing=routing)).deployment_config
        path = (deployment.get("request_router_config") or {}).get("request_router_class")
        routers[routing] = path and import_attr(path).__name__
        assert path is None or issubclass(import_attr(path), RequestRouter), path
    assert routers == {
        "session": "ConsistentHashRouter",
        "load": None,
        "round_robin": "RoundRobinRouter",
    }
    with pytest.raises(ConfigError, match="serve.engine_routing"):
        ServeConfig(model="/m", engine_routing="random")
