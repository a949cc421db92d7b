"""The engine deployment's class: Ray Serve LLM's ``LLMServer`` that names its replica in
every chat answer, so that the simulator records which engine replica (and so which
prefix cache) served each turn of a session. Serve routes by session
(``agentworld.sim.placement.SESSION_ROUTER``); this is how a session's history is seen
to stay on one replica, and to move when that replica dies.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

from ray import serve
from ray.serve.llm.deployment import LLMServer

REPLICA_FIELD = "engine_replica"
"""The extra field of a chat completion that names the engine replica that made it."""


class SimLLMServer(LLMServer):
    """``LLMServer`` with ``engine_replica`` on every non-streamed chat completion."""

    async def chat(self, request: Any, raw_request_info: Any = None) -> AsyncGenerator[Any, None]:
        stream = await super().chat(request, raw_request_info)
        return _named(stream, serve.get_replica_context().replica_id.unique_id)


async def _named(stream: AsyncGenerator[Any, None], replica: str) -> AsyncGenerator[Any, None]:
    # A streamed answer comes as lists of server-sent-event strings: left as they are.
    async for item in stream:
        if hasattr(item, "choices"):
            setattr(item, REPLICA_FIELD, replica)
        yield item
