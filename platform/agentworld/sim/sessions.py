"""What the simulator's routes do with sessions, free of HTTP and of Ray: open one from an
environment, step it (read, predict, append only if it has not moved), fork it. The
session API (``agentworld.sim.placement.ingress``) and the simulated MCP servers
(``agentworld.sim.mcp_server``) share it, so a step means the same on both.

``call`` reaches the session store (``SessionStore``'s methods by name; in a Serve
replica, the shared store actor) and ``predict`` computes the next turn (the model, or
a prescribed tool error).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from agentworld.sim.prompt import action_text, resolve_domain, system_text
from agentworld.sim.protocol import Action, Control, EnvironmentSpec, Sampling

StoreCall = Callable[..., Awaitable[Any]]
"""``await call(method, *args, **kwargs)``: a ``SessionStore`` method's result; its
SimErrors are raised as they were."""
Predict = Callable[[str, list[dict], Action, Control | None, Sampling, str], Awaitable[dict]]
"""``await predict(system, turns, action, control, sampling, domain, affinity=key)``: the
next turn (action, observation, reasoning, injected, finish_reason and, from the model,
what the engine reports of it). Calls with one ``affinity`` key (a session and its forks)
go to the engine replica that holds its history."""


def new_session(
    spec: EnvironmentSpec, *, metadata: dict[str, str] | None = None, environment: str | None = None
) -> dict[str, Any]:
    """The store's record of a new session of ``spec``; ``environment`` names the
    registered environment it belongs to (an MCP session)."""
    record = {
        "domain": resolve_domain(spec.domain),
        "system": system_text(spec),
        "control": spec.control.model_dump() if spec.control else None,
        "sampling": spec.sampling.model_dump() if spec.sampling else None,
        "metadata": metadata or {},
        # As given, so that a session can be reproduced (the playground's copy as code).
        "spec": spec.model_dump(include=set(EnvironmentSpec.model_fields), exclude_none=True),
    }
    if environment is not None:
        record["environment"] = environment
    return record


class Sessions:
    """Session operations over a store and a predictor."""

    def __init__(self, call: StoreCall, predict: Predict, *, max_turns: int) -> None:
        self.call = call
        self.predict = predict
        self.max_turns = max_turns

    async def open(self, team: str, session: dict[str, Any]) -> dict[str, Any]:
        """Store ``session`` (from :func:`new_session`); returns the record with its id."""
        return await self.call("create", team, session)

    async def step(
        self, team: str, session_id: str, action: Action, sampling: Sampling | None = None
    ) -> dict[str, Any]:
        """One step: computed from the session as read, appended only if the session has
        not moved meanwhile (409 otherwise); a failed step stores nothing."""
        record = await self.call("check_step", team, session_id, action_text(action))
        control = Control.model_validate(record["control"]) if record["control"] else None
        sampling = sampling or Sampling.model_validate(record["sampling"] or {})
        done = len(record["turns"])
        turn = await self.predict(
            record["system"],
            record["turns"],
            action,
            control,
            sampling,
            record["domain"],
            affinity=record.get("affinity") or session_id,
        )
        await self.call("append_turn", team, session_id, expected_turns=done, turn=turn)
        turns_left = self.max_turns - done - 1
        return {"session_id": session_id, "turn": done + 1, "turns_left": turns_left, **turn}
