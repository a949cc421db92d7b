"""What closed-loop rollouts ask for observations: the model under evaluation as a
simulator, three ways.

- ``ChatSimulator``: any OpenAI-compatible endpoint (the simulator's own
  ``/v1/chat/completions`` included), through the client ``infer`` uses, with its
  concurrency, timeout and retries;
- ``EngineSimulator``: an in-process vLLM engine (``infer``'s ``VLLMPredictor``: the
  same prompt fitting and sampling); the steps of every episode in flight that wait at
  the same moment go to the engine as one batch;
- ``SessionSimulator``: the simulator's session API: one session per episode, stepped
  with the real actions, so the server keeps the history; the teacher-forced answers
  come from its stateless ``/v1/simulate`` with the real history. The client is passed
  in (``agentworld.sim.client.SimClient`` or anything with its methods): the evaluate
  stage sits below ``sim`` and does not import it.

Each answers ``closed_loop`` (the episode's own history) and ``teacher_forced`` (the
real history) for a turn; a failure raises ``StepFailed``.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict, dataclass
from typing import Any

from agentworld.evaluate.config import InferConfig
from agentworld.evaluate.episodes import Episode, Message
from agentworld.evaluate.placement import VLLMPredictor
from agentworld.schema import parse_output
from agentworld.scoring.chat_client import ChatClient, EndpointError


@dataclass(frozen=True, kw_only=True)
class Reply:
    output: str
    """The raw text (reasoning and wrappers included)."""
    observation: str
    """The observation parsed from it: what the next closed-loop prompt shows."""
    finish_reason: str | None = None


class StepFailed(RuntimeError):
    """A turn could not be answered (endpoint failure, prompt too long, API error)."""


class Simulator:
    """Chat-style simulators answer both kinds of turn from the prompt alone;
    subclasses implement ``ask``. Used as ``async with``."""

    async def __aenter__(self) -> Simulator:
        return self

    async def __aexit__(self, *exc: object) -> None:
        pass

    async def start(self, episode: Episode) -> Any:
        """A handle on the episode's simulated world (a session), or None."""
        return None

    async def finish(self, handle: Any) -> None:
        pass

    async def closed_loop(
        self, handle: Any, episode: Episode, k: int, messages: list[Message]
    ) -> Reply:
        return await self.ask(messages)

    async def teacher_forced(self, episode: Episode, k: int, messages: list[Message]) -> Reply:
        return await self.ask(messages)

    async def ask(self, messages: list[Message]) -> Reply:
        raise NotImplementedError


def _reply(text: str, finish_reason: str | None) -> Reply:
    return Reply(
        output=text, observation=parse_output(text).observation, finish_reason=finish_reason
    )


class ChatSimulator(Simulator):
    """An OpenAI-compatible endpoint (``cfg.endpoint``, ``cfg.sampling``)."""

    def __init__(self, cfg: InferConfig) -> None:
        self.cfg = cfg
        self.client = ChatClient(cfg.endpoint)

    async def __aenter__(self) -> ChatSimulator:
        await self.client.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.client.__aexit__(*exc)

    async def ask(self, messages: list[Message]) -> Reply:
        try:
            c = await self.client.complete(messages, self.cfg.sampling)
        except EndpointError as e:
            raise StepFailed(f"{e} (after {e.attempts} attempts)") from e
        return _reply(c.text, c.finish_reason)


class EngineSimulator(Simulator):
    """An in-process vLLM engine behind ``infer``'s predictor; requests that wait at the
    same moment are generated as one batch, in a worker thread."""

    def __init__(self, predictor: Any) -> None:
        self.predictor = predictor
        self.batches: list[int] = []
        """The size of every batch generated (what batching achieved)."""
        self._queue: list[tuple[list[Message], asyncio.Future]] = []
        self._task: asyncio.Task | None = None

    @classmethod
    def start_engine(cls, cfg: InferConfig, model_url: str) -> EngineSimulator:
        return cls(VLLMPredictor(model_url, cfg.vllm.engine, asdict(cfg.sampling)))

    async def ask(self, messages: list[Message]) -> Reply:
        fut = asyncio.get_running_loop().create_future()
        self._queue.append((messages, fut))
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._drain())
        return await fut

    async def _drain(self) -> None:
        while self._queue:
            # Let every episode woken by the last batch ask before this one is cut: a
            # few quiet turns of the event loop in a row.
            quiet, size = 0, -1
            while quiet < 3:
                quiet = quiet + 1 if size == len(self._queue) else 0
                size = len(self._queue)
                await asyncio.sleep(0)
            batch, self._queue = self._queue, []
            self.batches.append(len(batch))
            try:
                outs = await asyncio.to_thread(self._generate, [m for m, _ in batch])
            except Exception as e:  # noqa: BLE001 - every waiting step gets the error
                outs = [StepFailed(f"engine: {type(e).__name__}: {e}")] * len(batch)
            for (_, fut), out in zip(batch, outs, strict=True):
                if isinstance(out, Exception):
                    fut.set_exception(out)
                else:
                    fut.set_result(out)

    def _generate(self, conversations: list[list[Message]]) -> list[Reply | StepFailed]:
        got = self.predictor(
            {
                "key": [str(i) for i in range(len(conversations))],
                "messages_json": [json.dumps(m) for m in conversations],
            }
        )
        return [
            StepFailed(err) if err else _reply(text, reason)
            for text, reason, err in zip(
                got["output"], got["finish_reason"], got["error"], strict=True
            )
        ]


class SessionSimulator(Simulator):
    """The simulator's session API through ``client`` (``create_session``, ``step``,
    ``simulate``, ``delete_session``). Its calls block: they run in worker threads."""

    def __init__(self, client: Any, cfg: InferConfig) -> None:
        self.client = client
        s = cfg.sampling
        self.sampling = {
            "temperature": s.temperature,
            "top_p": s.top_p,
            "max_tokens": s.max_tokens,
            "seed": s.seed,
        }

    async def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return await asyncio.to_thread(fn, *args, **kwargs)
        except Exception as e:  # noqa: BLE001 - the client's own error type is sim's
            raise StepFailed(f"session API: {e}") from e

    async def start(self, episode: Episode) -> str:
        session = await self._call(
            self.client.create_session,
            episode.domain,
            environment=episode.system,
            sampling=self.sampling,
        )
        return session["id"]

    async def finish(self, handle: Any) -> None:
        if handle is not None:
            try:
                await self._call(self.client.delete_session, handle)
            except StepFailed:
                pass  # the session expires on its own; the rollout is already recorded

    async def closed_loop(
        self, handle: Any, episode: Episode, k: int, messages: list[Message]
    ) -> Reply:
        out = await self._call(self.client.step, handle, episode.actions[k - 1])
        return Reply(
            output=out["observation"],
            observation=out["observation"],
            finish_reason=out.get("finish_reason"),
        )

    async def teacher_forced(self, episode: Episode, k: int, messages: list[Message]) -> Reply:
        history = [
            {"action": a, "observation": o}
            for a, o in zip(episode.actions[: k - 1], episode.references[: k - 1], strict=True)
        ]
        out = await self._call(
            self.client.simulate,
            episode.domain,
            episode.actions[k - 1],
            environment=episode.system,
            history=history,
            sampling=self.sampling,
        )
        return Reply(
            output=out["observation"],
            observation=out["observation"],
            finish_reason=out.get("finish_reason"),
        )
