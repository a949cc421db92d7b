"""A short end-to-end check of a running simulator: the OpenAI-compatible route through
the real ``openai`` client, one session's life cycle through ``SimEnv``, one stateless
simulation, and the refusal of a wrong key. Used by ``jobs/serve.py --smoke``."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from agentworld.sim.client import SimAPIError, SimClient, SimEnv

T = TypeVar("T")


def smoke_check(
    base_url: str, api_key: str, model_id: str, *, max_tokens: int = 16
) -> dict[str, Any]:
    """Raises AssertionError (or SimAPIError) naming the first check that failed. The
    result holds counts, the observations, and each call's latency in ms."""
    import openai

    latency: dict[str, float] = {}

    def timed(name: str, call: Callable[[], T]) -> T:
        t0 = time.perf_counter()
        out = call()
        latency[name] = round(1000 * (time.perf_counter() - t0), 1)
        return out

    client = openai.OpenAI(base_url=f"{base_url}/v1", api_key=api_key, max_retries=0)
    models = [m.id for m in timed("models", client.models.list).data]
    assert model_id in models, f"/v1/models lists {models}, not {model_id!r}"
    chat = timed(
        "chat_completion",
        lambda: client.chat.completions.create(
            model=model_id, messages=[{"role": "user", "content": "ls"}], max_tokens=max_tokens
        ),
    )
    env = SimEnv(
        base_url,
        api_key,
        "terminal",
        environment="bash 5.2 in an empty directory /home/user",
        control={"world_facts": ["The machine's hostname is quelmar-7"]},
        sampling={"max_tokens": max_tokens},
    )
    with env:
        timed("session_create", env.reset)
        observations = [
            timed(f"step_{i}", lambda a=action: env.step(a))[0]
            for i, action in enumerate(("touch notes.txt", "ls"), start=1)
        ]
        history = timed("session_read", env.history)
        assert [t["action"] for t in history] == ["touch notes.txt", "ls"], history
    simulated = timed(
        "simulate",
        lambda: SimClient(base_url, api_key).simulate(
            "terminal", "pwd", environment="bash", sampling={"max_tokens": max_tokens}
        ),
    )
    try:
        SimClient(base_url, "sk-wrong-key").list_sessions()
        raise AssertionError("a wrong API key was accepted")
    except SimAPIError as e:
        assert e.status == 401, e
    return {
        "chat_completion_tokens": chat.usage.completion_tokens,
        "session_turns": len(history),
        "observations": observations,
        "simulate_turn": simulated["turn"],
        "latency_ms": latency,
    }
