"""The agent-endpoint policy: any OpenAI-compatible chat endpoint chooses each action.

The model sees the environment text as the system message, then its own earlier
actions (assistant) and the observations (user). Its reply is parsed by the
environment (a command line, or a JSON tool call); a reply of DONE ends the episode.
"""

from __future__ import annotations

import re
from typing import Any

from agentworld.collect.config import CollectConfig
from agentworld.collect.domains import lookup
from agentworld.collect.env import Action, Environment
from agentworld.schema import Turn

_THINK = re.compile(r"<think>.*?</think>", re.S)


class AgentPolicy:
    """Asks ``config.agent_endpoint`` for the next action (greedy by default)."""

    def __init__(self, config: CollectConfig, *, api_key: str | None = None) -> None:
        from openai import OpenAI

        self.config = config
        # No retries: an unreachable endpoint fails the episode at once, and it is reported.
        self.client = OpenAI(
            base_url=config.agent_endpoint,
            api_key=api_key or "EMPTY",
            timeout=config.agent_timeout_s,
            max_retries=0,
        )
        self._model = config.agent_model

    @property
    def model(self) -> str:
        if self._model is None:
            models = self.client.models.list().data
            if not models:
                raise RuntimeError(f"the endpoint {self.config.agent_endpoint} serves no model")
            self._model = models[0].id
        return self._model

    def next_action(self, env: Environment, environment: str, turns: list[Turn]) -> Action | None:
        messages = build_messages(env.domain, environment, turns)
        reply = self.client.chat.completions.create(
            model=self.model,
            messages=messages,
            temperature=self.config.agent_temperature,
            max_tokens=self.config.agent_max_tokens,
            seed=self.config.seed,
        )
        text = _THINK.sub("", reply.choices[0].message.content or "").strip()
        if text.upper().rstrip(".") == "DONE":
            return None
        return env.parse_agent_action(text or "(empty reply)")


def build_messages(domain: str, environment: str, turns: list[Turn]) -> list[dict[str, Any]]:
    system = f"{environment}\n\n{lookup(domain).instruction} Reply DONE when the task is complete."
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
    messages.append({"role": "user", "content": "Begin."})
    for t in turns:
        messages.append({"role": "assistant", "content": t.action})
        messages.append({"role": "user", "content": t.observation or "(no output)"})
    return messages
