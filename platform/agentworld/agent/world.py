"""The world model as an environment's engine: a simulate request (domain, environment
text, control, history, action) -> the observation.

- ``EngineWorld``: an in-process vLLM engine; prompts are rendered by
  ``agentworld.sim.prompt`` (the serve stage's code, which renders as training does:
  system = environment text then control instructions, earlier turns as (user action,
  assistant observation), the action as the last user message) and answers parsed by
  it; concurrent requests are batched into one ``generate`` call.
- ``ServeWorld``: the simulator API's stateless ``/v1/simulate`` (same rendering, on the
  server), through ``agentworld.sim.client``.
- ``ConsistentWorld``: group-consistent worlds, a cache keyed by (task, seed, action
  prefix) in front of either, so siblings that took the same actions see one world.
"""

from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from agentworld.agent.config import SimConfig
from agentworld.agent.policy import chat_ids
from agentworld.model import local_model_dir
from agentworld.model.engine import close_engine, start_llm
from agentworld.sim.client import SimClient
from agentworld.sim.prompt import (
    PromptStyle,
    injected_error,
    read_prediction,
    step_messages,
    system_text,
)
from agentworld.sim.protocol import EnvironmentSpec


@dataclass(frozen=True, kw_only=True)
class SimRequest:
    domain: str
    environment: str
    control: dict[str, Any] | None
    history: tuple[tuple[str, str], ...]
    """(action, observation) of the earlier turns."""
    action: str

    def spec(self) -> Any:
        return EnvironmentSpec(
            domain=self.domain, environment=self.environment, control=self.control
        )


@dataclass
class SimAnswer:
    observation: str
    injected: bool = False
    """True when a control rule (a tool error) answered without the model."""
    prompt: list[dict[str, str]] = field(default_factory=list)


class EngineWorld:
    """The world model on an in-process vLLM engine, with a batching thread."""

    def __init__(
        self, llm: Any, cfg: SimConfig, *, keep_prompts: int = 64, own: bool = False
    ) -> None:
        # ``own``: close() also shuts the engine down (start() made it here).
        self.llm, self.cfg, self.own = llm, cfg, own
        self.tokenizer = llm.get_tokenizer()
        self.prompts: list[list[dict[str, str]]] = []
        """The first ``keep_prompts`` rendered prompts (the report keeps them)."""
        self._keep = keep_prompts
        self._queue: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @classmethod
    def start(cls, model_dir: str, cfg: SimConfig, *, seed: int = 0) -> EngineWorld:
        llm = start_llm(local_model_dir(model_dir), cfg.engine, seed=seed)
        return cls(llm, cfg, own=True)

    def render(self, req: SimRequest) -> list[dict[str, str]]:
        system = system_text(req.spec())
        turns = [{"action": a, "observation": o} for a, o in req.history]
        style = PromptStyle(name=self.cfg.prompt_style, prompts_dir=self.cfg.prompts_dir)
        return step_messages(system, turns, req.action, domain=req.domain, style=style)

    def simulate(self, req: SimRequest) -> SimAnswer:
        spec = req.spec()
        error = injected_error(spec.control, req.action, len(req.history) + 1)
        if error is not None:
            return SimAnswer(observation=error, injected=True)
        messages = self.render(req)
        fut: Future = Future()
        self._queue.put((messages, fut))
        text = fut.result()

        return SimAnswer(
            observation=read_prediction(text, spec.control).observation, prompt=messages
        )

    def _serve(self) -> None:
        while True:
            batch = [self._queue.get()]
            if batch[0] is None:
                return
            time.sleep(self.cfg.batch_wait_s)  # let concurrent steps join this batch
            while not self._queue.empty():
                item = self._queue.get()
                if item is None:
                    self._queue.put(None)
                    break
                batch.append(item)
            try:
                texts = self._generate([m for m, _ in batch])
                for (_, fut), text in zip(batch, texts, strict=True):
                    fut.set_result(text)
            except BaseException as e:  # noqa: BLE001 - every waiting step gets the error
                for _, fut in batch:
                    fut.set_exception(e)

    def _generate(self, conversations: list[list[dict[str, str]]]) -> list[str]:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        for m in conversations:
            if len(self.prompts) < self._keep:
                self.prompts.append(m)
        # A shared engine may have a shorter window than the config says: take the smaller.
        window = min(self.cfg.engine.max_model_len, self.llm.llm_engine.model_config.max_model_len)
        limit = window - self.cfg.max_new_tokens
        prompts = []
        for m in conversations:
            ids = chat_ids(self.tokenizer, m)
            # The environment text must stay: cut the oldest history instead (keep the head).
            prompts.append(
                TokensPrompt(
                    prompt_token_ids=ids
                    if len(ids) <= limit
                    else ids[: limit // 2] + ids[-limit // 2 :]
                )
            )
        params = SamplingParams(
            temperature=self.cfg.temperature,
            max_tokens=self.cfg.max_new_tokens,
            skip_special_tokens=False,
        )
        outs = self.llm.generate(prompts, params, use_tqdm=False)
        return [o.outputs[0].text for o in outs]

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=10)
        if self.own:
            close_engine(self.llm, self.cfg.engine)


class ServeWorld:
    """The simulator API (``POST /v1/simulate``) as the world."""

    def __init__(self, base_url: str, api_key: str, *, timeout_s: float = 120.0) -> None:
        self.client = SimClient(base_url, api_key, timeout_s=timeout_s)
        self.prompts: list[list[dict[str, str]]] = []

    def simulate(self, req: SimRequest) -> SimAnswer:
        out = self.client.simulate(
            req.domain,
            req.action,
            environment=req.environment,
            control=req.control,
            history=[{"action": a, "observation": o} for a, o in req.history],
        )
        return SimAnswer(observation=out["observation"], injected=bool(out.get("injected")))

    def close(self) -> None:
        pass


class ConsistentWorld:
    """Caches observations by (task id, seed, actions so far): a sibling that repeats
    another's action prefix gets that sibling's observation, including one still being
    generated (the second caller waits on the first one's future)."""

    def __init__(self, world: Any) -> None:
        self.world = world
        self._cache: dict[tuple, Future] = {}
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @property
    def prompts(self) -> list[list[dict[str, str]]]:
        return self.world.prompts

    def simulate(self, req: SimRequest, *, key: tuple) -> SimAnswer:
        with self._lock:
            fut = self._cache.get(key)
            owner = fut is None
            if owner:
                fut = self._cache[key] = Future()
                self.misses += 1
            else:
                self.hits += 1
        if owner:
            try:
                fut.set_result(self.world.simulate(req))
            except BaseException as e:  # noqa: BLE001 - waiting siblings get the error too
                fut.set_exception(e)
        return fut.result()

    def clear(self) -> None:
        with self._lock:
            self._cache.clear()

    def close(self) -> None:
        self.world.close()
