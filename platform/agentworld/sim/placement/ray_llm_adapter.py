"""The three pieces of Ray Serve LLM that the simulator app needs and Ray (2.60) exports
only from ``ray.llm._internal``. They are imported here and nowhere else, at this
module's top, so that a Ray release that moves them fails on import of this module,
naming it (``tests/test_sim_ray_llm_adapter.py`` imports and calls each), rather than
somewhere inside a Serve replica.

- ``model_card``: the ``/v1/models`` entry of a model. The public ``OpenAiIngress`` takes
  ``model_cards`` in its constructor, but the function that makes one
  (``to_model_metadata``) is private; Ray's own docstring of ``OpenAiIngress`` imports it
  from ``ray.llm._internal`` too. ``build_openai_app`` (public) makes the cards itself,
  but it binds Ray's default routes only, not the simulator's.
- ``openai_fastapi_app``: Ray Serve LLM's FastAPI app (its OpenAI error handling, CORS,
  HTTP metrics and request ids). The public ``make_fastapi_ingress`` builds one when given
  no app, but keeps it: the simulator's error handlers and the Guard middleware must be
  added before Serve freezes the app.
- ``LocalModelCallback``: an engine-start callback (``LLMConfig.callback_config``; the
  base class is private). Before starting vLLM each engine replica runs a task on every
  node of its placement group to mirror the model from object storage; for a model on a
  local path that task only returns the path, yet it starts a fresh worker process that
  imports vLLM (10 to 20 s of a 2-core machine per replica start). The callback skips it
  for local paths; object-store models are mirrored as before.
"""

from __future__ import annotations

from typing import Any

from ray.llm._internal.common.callbacks.base import CallbackBase
from ray.llm._internal.serve.core.configs.openai_api_models import to_model_metadata
from ray.llm._internal.serve.core.ingress.ingress import init as _init_fastapi_app


def model_card(llm_config: Any) -> Any:
    """The OpenAI model card of ``llm_config`` (a ``ray.serve.llm.LLMConfig``)."""
    return to_model_metadata(llm_config.model_id, llm_config)


def openai_fastapi_app() -> Any:
    """A new FastAPI app with Ray Serve LLM's middleware and exception handling."""
    return _init_fastapi_app()


class LocalModelCallback(CallbackBase):
    """Skips the per-node mirroring task when the model source is a local path (a
    string; an object-store source is a ``{"bucket_uri": ...}`` mirror config)."""

    async def on_before_node_init(self) -> None:
        source = self.llm_config.model_loading_config.model_source
        if isinstance(source, str):
            self.ctx.run_init_node = False
