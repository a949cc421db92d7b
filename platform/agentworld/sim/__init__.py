"""The serve stage: the trained world model behind an OpenAI-compatible endpoint
(``ray.serve.llm`` on vLLM) and a simulator API on top (sessions, stateless
simulation, per-team keys and limits), plus ``SimEnv``, a Gymnasium-style client.

Modules: ``config`` (ServeConfig; the engine is ``agentworld.model.engine.EngineConfig``),
``run`` (the driver ``jobs/serve.py`` calls), ``placement`` (all of the stage's Ray code:
the Serve app, its ingress deployment, the engine's LLMConfig, the session-store actor,
metrics), ``protocol`` (request bodies), ``prompt`` (session -> messages via the shared
renderer, model text -> observation), ``store`` (sessions and rate limits, plain
Python), ``guard`` (keys, size limits, metrics), ``keys``, ``errors``, ``client``,
``smoke``. This module imports nothing heavy, so that ``agentworld.recipes`` can import
its config.
"""

from agentworld.sim.client import SimAPIError, SimClient, SimEnv
from agentworld.sim.config import AuthConfig, LimitsConfig, ServeConfig

__all__ = [
    "AuthConfig",
    "LimitsConfig",
    "ServeConfig",
    "SimAPIError",
    "SimClient",
    "SimEnv",
]
