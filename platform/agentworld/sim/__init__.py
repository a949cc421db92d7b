"""The serve stage: the trained world model behind an OpenAI-compatible endpoint
(``ray.serve.llm`` on vLLM) and a simulator API on top (sessions, stateless
simulation, per-team keys and limits), plus ``SimEnv``, a Gymnasium-style client.

Modules: ``config`` (ServeConfig), ``protocol`` (request bodies), ``prompt`` (session ->
messages via the shared renderer, model text -> observation), ``store`` (sessions and
rate limits, plain Python), ``placement`` (engine and store on Ray), ``guard`` (keys,
size limits, metrics), ``ingress`` (routes), ``app`` (the Serve builder), ``client``.
This module imports nothing heavy, so that ``agentworld.recipes`` can import its config.
"""

from agentworld.sim.client import SimAPIError, SimClient, SimEnv
from agentworld.sim.config import AuthConfig, EngineConfig, LimitsConfig, ServeConfig

__all__ = [
    "AuthConfig",
    "EngineConfig",
    "LimitsConfig",
    "ServeConfig",
    "SimAPIError",
    "SimClient",
    "SimEnv",
]
