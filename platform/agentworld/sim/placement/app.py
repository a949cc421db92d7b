"""The Ray Serve application: a vLLM engine deployment (``ray.serve.llm``) and the
simulator ingress in front of it. ``build_app`` is the import path Serve configs name
(``import_path: agentworld.sim.placement.app:build_app``); its ``args`` are a
ServeConfig as data. ``deploy``, ``delete`` and ``shutdown`` are the Serve calls of
``agentworld.sim.run``. Built from Ray's public API (``ray.serve``, ``ray.serve.llm``)
but for the two names ``ray_llm_adapter`` holds.
"""

from __future__ import annotations

import os
from typing import Any

from agentworld.sim import protocol
from agentworld.sim.config import ServeConfig
from agentworld.sim.errors import SimError
from agentworld.sim.guard import Guard
from agentworld.sim.placement import llm_config

INGRESS_NAME = "SimIngress"


def _body(model: str) -> dict[str, Any]:
    """The route's request body in its OpenAPI schema: the simulator reads raw bodies
    (to name the bad field itself), so FastAPI would otherwise publish none."""

    schema = _inline(getattr(protocol, model).model_json_schema())
    content = {"application/json": {"schema": schema}}
    return {"openapi_extra": {"requestBody": {"required": True, "content": content}}}


def _inline(schema: dict[str, Any]) -> dict[str, Any]:
    """Pydantic's schema with its local ``$defs`` references resolved in place."""
    defs = schema.pop("$defs", {})

    def resolve(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref", "")
            if ref.startswith("#/$defs/"):
                return resolve(defs[ref.removeprefix("#/$defs/")])
            return {k: resolve(v) for k, v in node.items()}
        return [resolve(v) for v in node] if isinstance(node, list) else node

    return resolve(schema)


# Route of each ingress method. The OpenAI ones are the routes Ray Serve LLM's own
# router serves; the rest is the simulator API.
ROUTES: dict[str, tuple[str, str, dict[str, Any]]] = {
    "models": ("get", "/v1/models", {}),
    "model_data": ("get", "/v1/models/{model:path}", {}),
    "chat": ("post", "/v1/chat/completions", {}),
    "completions": ("post", "/v1/completions", {}),
    "health": ("get", "/healthz", {}),
    "create_session": ("post", "/v1/sessions", {"status_code": 201, **_body("CreateSession")}),
    "list_sessions": ("get", "/v1/sessions", {}),
    "get_session": ("get", "/v1/sessions/{session_id}", {}),
    "delete_session": ("delete", "/v1/sessions/{session_id}", {}),
    "step_session": ("post", "/v1/sessions/{session_id}/step", _body("StepRequest")),
    "fork_session": (
        "post",
        "/v1/sessions/{session_id}/fork",
        {"status_code": 201, **_body("ForkRequest")},
    ),
    "simulate": ("post", "/v1/simulate", _body("SimulateRequest")),
    "list_environments": ("get", "/v1/environments", {}),
    "put_environment": ("put", "/v1/environments/{name}", _body("RegisterEnvironment")),
    "get_environment": ("get", "/v1/environments/{name}", {}),
    "delete_environment": ("delete", "/v1/environments/{name}", {}),
    # MCP's streamable HTTP: POST messages, DELETE ends the session, GET is refused (405).
    "mcp": (
        "api_route",
        "/v1/mcp/{environment}",
        {"methods": ["GET", "POST", "DELETE"], "include_in_schema": False},
    ),
    "playground": ("get", "/playground", {"include_in_schema": False}),
}


def build_app(args: dict[str, Any] | None = None):
    """Serve's application builder. A bad config raises ConfigError naming the field
    before anything is deployed."""
    return build_sim_app(ServeConfig.from_dict(args))


def build_sim_app(cfg: ServeConfig, *, base_dir: str | None = None):
    """The application for ``cfg``; relative model paths resolve against ``base_dir``
    (default: the current directory)."""
    from ray import serve
    from ray.serve.llm import build_llm_deployment
    from ray.serve.llm.ingress import make_fastapi_ingress

    # not at the top: it brings ray into this light module
    from agentworld.sim.placement.engine_server import SimLLMServer

    # not at the top: it brings fastapi, ray, starlette into this light module
    from agentworld.sim.placement.ingress import SimIngress

    # not at the top: it brings ray into this light module
    from agentworld.sim.placement.ray_llm_adapter import model_card

    llm = llm_config(cfg, base_dir=base_dir or os.getcwd())
    # The usual deployment name (LLMServer:<model id>), with the class that names its replica.
    engine = build_llm_deployment(llm, name_prefix="LLMServer:", deployment_cls=SimLLMServer)
    ingress = make_fastapi_ingress(SimIngress, endpoint_map=_endpoint_map(), app=_fastapi_app(cfg))
    deployment = serve.deployment(
        ingress,
        name=INGRESS_NAME,
        num_replicas=cfg.ingress_replicas,
        # Sessions wait on the engine, not on this process: let many be in flight.
        max_ongoing_requests=1024,
        ray_actor_options={"num_cpus": cfg.ingress_cpus},
    )
    return deployment.bind(
        llm_deployments={llm.model_id: engine},
        model_cards={llm.model_id: model_card(llm)},
        sim_config=cfg.to_dict(),
    )


def deploy(cfg: ServeConfig, *, name: str, http: dict[str, Any]) -> None:
    """Start Serve (``http``: its ``http_options``) and run the application ``name`` at
    ``/``; returns once the engine and the ingress are ready."""
    from ray import serve

    serve.start(http_options=http)
    serve.run(build_sim_app(cfg), name=name, route_prefix="/")


def delete(name: str) -> None:
    from ray import serve

    serve.delete(name)


def shutdown() -> None:
    from ray import serve

    serve.shutdown()


def _endpoint_map() -> dict[str, Any]:
    def route(method: str, path: str, kwargs: dict[str, Any]):
        return lambda app: getattr(app, method)(path, **kwargs)

    return {name: route(*spec) for name, spec in ROUTES.items()}


def _fastapi_app(cfg: ServeConfig):
    # Ray Serve LLM's own FastAPI app (its error handling and HTTP metrics for the
    # OpenAI routes), with the simulator's error bodies and the Guard in front.
    from starlette.exceptions import HTTPException

    # not at the top: it brings ray into this light module
    from agentworld.sim.placement.ray_llm_adapter import openai_fastapi_app

    app = openai_fastapi_app()
    app.add_exception_handler(SimError, _error_response)
    # Routing's own refusals (no such path, method not allowed) in the same JSON shape
    # as every other error, not FastAPI's {"detail": ...}.
    app.add_exception_handler(HTTPException, _http_error_response)
    app.add_middleware(Guard, auth=cfg.auth, max_request_bytes=cfg.limits.max_request_bytes)
    return app


async def _error_response(request, error):
    from starlette.responses import JSONResponse

    headers = {}
    if error.retry_after_s is not None:
        headers["Retry-After"] = str(max(1, round(error.retry_after_s)))
    return JSONResponse(error.body(), status_code=error.status, headers=headers)


async def _http_error_response(request, error):
    code = {404: "not_found", 405: "method_not_allowed"}.get(error.status_code, "bad_request")
    return await _error_response(request, SimError(error.status_code, code, str(error.detail)))
