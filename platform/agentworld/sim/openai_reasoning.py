"""The world model's reasoning on the OpenAI-compatible routes. With a reasoning parser
(``engine.reasoning_parser``, ``qwen3`` for the Qwen3 family) vLLM answers a chat
completion with the think block apart from the observation, under its own name
``reasoning``; OpenAI-style clients read ``reasoning_content``. The simulator returns it
under both names, in whole answers and in streamed chunks (a session step puts the
parts back together with ``agentworld.schema.parse.join_reasoning``)."""

from __future__ import annotations

import json
from typing import Any

VLLM_FIELD = "reasoning"
OPENAI_FIELD = "reasoning_content"


def with_reasoning_content(payload: dict[str, Any]) -> dict[str, Any]:
    """A chat completion (``message``) or a streamed chunk (``delta``) with
    ``reasoning_content`` beside every choice's ``reasoning``; changed in place."""
    for choice in payload.get("choices") or ():
        for key in ("message", "delta"):
            part = choice.get(key)
            if isinstance(part, dict) and part.get(VLLM_FIELD) is not None:
                part.setdefault(OPENAI_FIELD, part[VLLM_FIELD])
    return payload


def sse_with_reasoning_content(packet: str | bytes) -> str | bytes:
    """One packet of a streamed chat completion (one or more ``data: {json}`` events)
    with ``reasoning_content`` added to each chunk that carries reasoning."""
    text = packet.decode() if isinstance(packet, bytes) else packet
    if f'"{VLLM_FIELD}"' not in text:
        return packet
    events = []
    for event in text.split("\n\n"):
        if event.startswith("data: {"):
            chunk = with_reasoning_content(json.loads(event.removeprefix("data: ")))
            event = "data: " + json.dumps(chunk, ensure_ascii=False)
        events.append(event)
    out = "\n\n".join(events)
    return out.encode() if isinstance(packet, bytes) else out
