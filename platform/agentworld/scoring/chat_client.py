"""An OpenAI-compatible chat client with bounded concurrency, a per-request timeout and
retries with exponential backoff, on the real ``openai`` client. Used by the judge
(``judge_client``) and by evaluate's ``infer`` (the model under evaluation).

The client belongs to one event loop: create it inside ``async with`` in the loop that
uses it (``run_sync`` does that for synchronous callers).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from agentworld.schema import join_reasoning
from agentworld.scoring.config import EndpointConfig, SamplingConfig

T = TypeVar("T")
# Statuses worth another attempt: timeouts, conflicts, rate limits, server errors.
_RETRY_STATUSES = {408, 409, 429}


class EndpointError(RuntimeError):
    """A request failed for good: a non-retryable status or retries exhausted."""

    def __init__(self, message: str, *, attempts: int) -> None:
        super().__init__(message)
        self.attempts = attempts


@dataclass(frozen=True, kw_only=True)
class Completion:
    text: str
    finish_reason: str | None
    attempts: int
    completion_tokens: int | None = None


class ChatClient:
    """``async with ChatClient(cfg) as c: await c.complete(messages, sampling)``."""

    def __init__(self, cfg: EndpointConfig) -> None:
        self.cfg = cfg
        self._client: Any = None
        self._sem: asyncio.Semaphore | None = None
        self.model: str | None = cfg.model

    async def __aenter__(self) -> ChatClient:
        from openai import AsyncOpenAI

        self._client = AsyncOpenAI(
            base_url=self.cfg.base_url,
            api_key=os.environ.get(self.cfg.api_key_env) or "EMPTY",
            timeout=self.cfg.timeout_s,
            max_retries=0,  # retries are ours: the same policy for every failure kind
        )
        self._sem = asyncio.Semaphore(self.cfg.concurrency)
        if self.model is None:
            try:
                self.model = await self._first_model()
            except BaseException:
                await self._client.close()
                raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._client.close()

    async def _first_model(self) -> str:
        try:
            models = await self._call_with_retries(lambda: self._client.models.list())
        except EndpointError as e:
            raise EndpointError(
                f"cannot list the models at {self.cfg.base_url}: {e}", attempts=e.attempts
            ) from e
        if not models.data:
            raise EndpointError(f"{self.cfg.base_url} serves no models", attempts=1)
        return models.data[0].id

    async def complete(
        self, messages: list[dict[str, str]], sampling: SamplingConfig
    ) -> Completion:
        """One chat completion; raises EndpointError when every attempt failed."""
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "max_tokens": sampling.max_tokens,
        }
        if sampling.seed is not None:
            kwargs["seed"] = sampling.seed
        if sampling.frequency_penalty:
            kwargs["frequency_penalty"] = sampling.frequency_penalty
        if sampling.repetition_penalty != 1.0:  # vLLM's, outside OpenAI's parameters
            kwargs["extra_body"] = {"repetition_penalty": sampling.repetition_penalty}
        attempts = 0

        async def call() -> Any:
            nonlocal attempts
            attempts += 1
            return await self._client.chat.completions.create(**kwargs)

        async with self._sem:
            resp = await self._call_with_retries(call)
        if not resp.choices:
            raise EndpointError("the endpoint answered with no choices", attempts=attempts)
        choice = resp.choices[0]
        usage = getattr(resp, "usage", None)
        return Completion(
            text=join_reasoning(choice.message.content, _reasoning_of(choice.message)),
            finish_reason=choice.finish_reason,
            attempts=attempts,
            completion_tokens=getattr(usage, "completion_tokens", None),
        )

    async def _call_with_retries(self, call: Callable[[], Awaitable[T]]) -> T:
        import openai

        delay = self.cfg.backoff_s
        for attempt in range(self.cfg.max_retries + 1):
            try:
                return await call()
            except (openai.APIConnectionError, openai.APIStatusError) as e:
                last = attempt == self.cfg.max_retries
                if last or not _retryable(e):
                    raise EndpointError(_describe(e), attempts=attempt + 1) from e
            await asyncio.sleep(delay)
            delay *= 2
        raise AssertionError("unreachable")


def _reasoning_of(message: Any) -> str | None:
    """The think block a reasoning endpoint returned apart: OpenAI-style
    ``reasoning_content`` (DeepSeek, this project's simulator) or vLLM's ``reasoning``."""
    for name in ("reasoning_content", "reasoning"):
        value = getattr(message, name, None)
        if isinstance(value, str) and value:
            return value
    return None


def _retryable(e: Exception) -> bool:
    status = getattr(e, "status_code", None)
    return status is None or status >= 500 or status in _RETRY_STATUSES


def _describe(e: Exception) -> str:
    import openai

    if isinstance(e, openai.APITimeoutError):
        return "request timed out"
    if isinstance(e, openai.APIStatusError):
        return f"HTTP {e.status_code}: {str(e)[:300]}"
    return f"{type(e).__name__}: {str(e)[:300]}"


def run_sync(cfg: EndpointConfig, work: Callable[[ChatClient], Awaitable[T]]) -> T:
    """Run ``await work(client)`` with a fresh client, from synchronous code (no running
    event loop in this thread)."""

    async def main() -> T:
        async with ChatClient(cfg) as client:
            return await work(client)

    return asyncio.run(main())
