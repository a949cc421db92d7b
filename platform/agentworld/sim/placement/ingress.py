"""The simulator's HTTP ingress: Ray Serve LLM's OpenAI-compatible router
(``/v1/chat/completions``, ``/v1/models``) extended with the simulator API, the
simulated MCP servers of registered environments (``agentworld.sim.placement.mcp_routes``)
and the playground page.

Replicas hold no session state: sessions live in the shared store actor
(``agentworld.sim.placement.session_store``), so any replica serves any session and a
restarted replica carries on where the old one stopped. A step is computed from the
session as read, then appended only if the session has not moved meanwhile; a failed
step (model error, timeout, bad request) stores nothing.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from fastapi import Request
from ray import serve
from ray.exceptions import RayActorError, RayTaskError
from ray.serve.llm.ingress import OpenAiIngress
from ray.serve.llm.openai_api_models import ChatCompletionRequest, CompletionRequest
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse

from agentworld.schema import join_reasoning, register_domain
from agentworld.sim.config import ServeConfig
from agentworld.sim.errors import SimError
from agentworld.sim.keys import load_keys
from agentworld.sim.mcp_server import McpFront
from agentworld.sim.openai_reasoning import sse_with_reasoning_content, with_reasoning_content
from agentworld.sim.placement import session_store
from agentworld.sim.placement.engine_server import REPLICA_FIELD
from agentworld.sim.placement.mcp_routes import McpRoutes
from agentworld.sim.playground import playground_page
from agentworld.sim.prompt import (
    PromptStyle,
    action_text,
    injected_error,
    read_prediction,
    resolve_domain,
    step_messages,
    system_text,
)
from agentworld.sim.protocol import (
    Action,
    Control,
    CreateSession,
    ForkRequest,
    Sampling,
    SimulateRequest,
    StepRequest,
    parse_body,
)
from agentworld.sim.sessions import Sessions, new_session

_STORE_TIMEOUT_S = 10.0
_PRIVATE = ("team", "chars", "affinity")
_ENGINE_TRIES = 2
"""A model call that finds its engine replica dead is sent once more: Serve has dropped
the replica by then, and the session's history goes to the next one."""


class PromptTooLong(SimError):
    """The engine refused a prompt longer than its context."""


def _over_context(error: Any) -> bool:
    # vLLM names the prompt's length as the parameter it refused (input_tokens, or
    # input_text when it refuses on characters before tokenizing).
    said = f"{getattr(error, 'param', None)} {getattr(error, 'message', '')}"
    return any(p in said for p in ("input_tokens", "input_text"))


def within_context(body: Any, max_model_len: int) -> Any:
    """The request with its token limit cut to the engine's context. Clients ask for
    more than a small simulator holds: AgentWorldBench's eval script sends max_tokens
    32768 and counts a refused request as an empty observation. The engine already
    stops at the context's end; only a limit above the whole context is refused."""
    for name in ("max_tokens", "max_completion_tokens"):
        value = getattr(body, name, None)
        if value is not None and value > max_model_len:
            body = body.model_copy(update={name: max_model_len})
    return body


class SimIngress(McpRoutes, OpenAiIngress):
    """OpenAI-compatible routes of the engine plus ``/v1/sessions``, ``/v1/simulate``,
    ``/healthz``, the registered environments and their MCP servers (``McpRoutes``)
    and ``/playground``. The team comes from ``agentworld.sim.guard.Guard``."""

    def __init__(
        self,
        llm_deployments: dict,
        model_cards: dict,
        *,
        lora_paths=None,
        sim_config: dict,
    ) -> None:
        super().__init__(llm_deployments, model_cards, lora_paths=lora_paths)
        self.cfg = ServeConfig.from_dict(sim_config)
        load_keys(self.cfg.auth)  # fail the replica at start, not on the first request
        for name, description in self.cfg.custom_domains.items():
            register_domain(name, description)
        self.store = session_store(self.cfg)
        self.replica = serve.get_replica_context().replica_id.unique_id
        self.style = PromptStyle(name=self.cfg.prompt_style, prompts_dir=self.cfg.prompts_dir)
        self.sessions = Sessions(self._call, self._predict, max_turns=self.cfg.limits.max_turns)
        self.mcp_front = McpFront(
            self.sessions, max_request_bytes=self.cfg.limits.max_request_bytes
        )
        self.page = playground_page()  # after the custom domains: the page lists them

    # -- OpenAI-compatible routes: the same rate limit as the simulator's ------------

    async def chat(self, body: ChatCompletionRequest, request: Request) -> Response:
        await self._call("admit", _team(request))
        response = await super().chat(within_context(body, self.cfg.engine.max_model_len), request)
        return _with_reasoning_content(response)

    async def completions(self, body: CompletionRequest, request: Request) -> Response:
        await self._call("admit", _team(request))
        return await super().completions(
            within_context(body, self.cfg.engine.max_model_len), request
        )

    # -- simulator routes --------------------------------------------------------------

    async def health(self) -> JSONResponse:
        try:
            stats = await self._call("stats")
        except SimError as e:
            return JSONResponse(e.body(), status_code=503)
        body = {"status": "ok", "model": self.cfg.model_id, "replica": self.replica, **stats}
        return JSONResponse(body)

    async def playground(self) -> HTMLResponse:
        return HTMLResponse(self.page, headers=_PAGE_HEADERS)

    async def create_session(self, request: Request) -> JSONResponse:
        team = await self._admit(request)
        spec = parse_body(CreateSession, await request.body())
        record = await self.sessions.open(team, new_session(spec, metadata=spec.metadata))
        return JSONResponse(self._view(record), status_code=201)

    async def fork_session(self, session_id: str, request: Request) -> JSONResponse:
        team = await self._admit(request)
        fork = parse_body(ForkRequest, await request.body())
        record = await self._call("fork", team, session_id, fork.turn)
        return JSONResponse(self._view(record), status_code=201)

    async def list_sessions(self, request: Request) -> JSONResponse:
        team = await self._admit(request)
        return JSONResponse({"sessions": await self._call("list", team)})

    async def get_session(self, session_id: str, request: Request) -> JSONResponse:
        team = await self._admit(request)
        return JSONResponse(self._view(await self._call("get", team, session_id)))

    async def delete_session(self, session_id: str, request: Request) -> JSONResponse:
        team = await self._admit(request)
        await self._call("delete", team, session_id)
        return JSONResponse({"id": session_id, "deleted": True})

    async def step_session(self, session_id: str, request: Request) -> JSONResponse:
        team = await self._admit(request)
        step = parse_body(StepRequest, await request.body())
        return JSONResponse(await self.sessions.step(team, session_id, step.action, step.sampling))

    async def simulate(self, request: Request) -> JSONResponse:
        await self._admit(request)
        spec = parse_body(SimulateRequest, await request.body())
        domain = resolve_domain(spec.domain)
        if len(spec.history) >= self.cfg.limits.max_turns:
            raise SimError(
                422,
                "turn_limit",
                f"history exceeds {self.cfg.limits.max_turns - 1} turns",
                field="history",
            )
        turns = [
            {"action": action_text(h.action), "observation": h.observation} for h in spec.history
        ]
        turn = await self._predict(
            system_text(spec),
            turns,
            spec.action,
            spec.control,
            spec.sampling or Sampling(),
            domain,
            affinity=None,
        )
        return JSONResponse({"turn": len(turns) + 1, **turn})

    # -- helpers -----------------------------------------------------------------------

    async def _predict(
        self,
        system: str,
        turns: list[dict],
        action: Action,
        control: Control | None,
        sampling: Sampling,
        domain: str,
        *,
        affinity: str | None,
    ) -> dict[str, Any]:
        """The next turn: a prescribed tool error, or the model's prediction. Calls with
        the same ``affinity`` (a session and its forks) go to the same engine replica
        while it lives; None spreads calls by load."""
        text = action_text(action)
        injected = injected_error(control, action, len(turns) + 1)
        if injected is not None:
            return {
                "action": text,
                "observation": injected,
                "reasoning": None,
                "injected": True,
                "finish_reason": "injected",
            }
        raw, finish, engine = await self._generate_within_context(
            system, turns, text, domain, sampling, affinity
        )
        pred = read_prediction(raw, control)
        return {
            "action": text,
            "observation": pred.observation,
            "reasoning": pred.reasoning,
            "injected": False,
            "finish_reason": finish,
            "engine": engine,
        }

    async def _generate_within_context(
        self,
        system: str,
        turns: list[dict],
        text: str,
        domain: str,
        sampling: Sampling,
        affinity: str | None,
    ) -> tuple[str, str | None, dict[str, Any]]:
        """``_generate`` on the step's prompt. A session grown past the engine's context
        is not refused: its prompt loses the older half of the turns it still sends, again
        while the engine refuses it, down to the environment and the action alone (the
        session keeps every turn). ``engine.history_dropped`` counts the turns left out."""
        kept = len(turns)
        while True:
            sent = turns[len(turns) - kept :]
            messages = step_messages(system, sent, text, domain=domain, style=self.style)
            try:
                raw, finish, engine = await self._generate(messages, sampling, affinity)
            except PromptTooLong:
                if kept == 0:
                    raise
                kept //= 2
                continue
            return raw, finish, {**engine, "history_dropped": len(turns) - kept}

    async def _generate(
        self, messages: list[dict[str, str]], sampling: Sampling, affinity: str | None
    ) -> tuple[str, str | None, dict[str, Any]]:
        """(text, finish reason, ``engine_facts``) of the engine's answer; sent once more
        where the replica was found dead."""
        for attempt in range(_ENGINE_TRIES):
            try:
                return await self._generate_once(messages, sampling, affinity)
            except RayActorError:
                if attempt == _ENGINE_TRIES - 1:
                    raise SimError(
                        503, "engine_unavailable", "no engine replica answered; try again"
                    ) from None
        raise AssertionError("unreachable")

    async def _generate_once(
        self, messages: list[dict[str, str]], sampling: Sampling, affinity: str | None
    ) -> tuple[str, str | None, dict[str, Any]]:
        limits = self.cfg.limits
        body = ChatCompletionRequest(
            model=self.cfg.model_id,
            messages=messages,
            max_tokens=min(sampling.max_tokens or limits.default_max_tokens, limits.max_tokens),
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            seed=sampling.seed,
            # <think> and the observation tags are special tokens: keep them for the parser.
            skip_special_tokens=False,
        )
        handle = self._get_configured_serve_handle(self.cfg.model_id)
        if affinity is not None:
            handle = handle.options(session_id=affinity)  # the session router's key
        stream = _answers(handle.chat.remote(body, None))
        try:
            async with asyncio.timeout(limits.request_timeout_s):
                first = await anext(stream)
        except TimeoutError:
            raise SimError(
                504, "timeout", f"the model did not answer within {limits.request_timeout_s}s"
            ) from None
        finally:
            await stream.aclose()
        first = first[0] if isinstance(first, list) else first
        error = getattr(first, "error", None)
        if error is not None:
            status = 422 if 400 <= int(error.code) < 500 else 502
            refusal = PromptTooLong if _over_context(error) else SimError
            raise refusal(status, "model_error", f"the model refused the request: {error.message}")
        choice = first.choices[0]
        # With a reasoning parser the engine hands the think block back apart.
        reasoning = getattr(choice.message, "reasoning", None)
        return (
            join_reasoning(choice.message.content, reasoning),
            choice.finish_reason,
            engine_facts(first),
        )

    @staticmethod
    def _team_of(request: Request) -> str:
        return _team(request)

    async def _admit(self, request: Request) -> str:
        team = _team(request)
        await self._call("admit", team)
        return team

    async def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Call the store; its SimErrors come back as they were raised."""
        try:
            ref = getattr(self.store, method).remote(*args, **kwargs)
            return await asyncio.wait_for(ref, _STORE_TIMEOUT_S)
        except RayTaskError as e:
            if isinstance(e.cause, SimError):
                raise e.cause from None
            raise
        except (RayActorError, TimeoutError) as e:
            raise SimError(
                503, "store_unavailable", f"the session store did not answer: {type(e).__name__}"
            ) from None

    def _view(self, record: dict[str, Any]) -> dict[str, Any]:
        view = {k: v for k, v in record.items() if k not in _PRIVATE}
        view["turn"] = len(record["turns"])
        view["max_turns"] = self.cfg.limits.max_turns
        return view


_PAGE_HEADERS = {
    # The page is self-contained: nothing but this origin, no framing, no key in a referrer.
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
        "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; "
        "frame-ancestors 'none'"
    ),
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
}


def _with_reasoning_content(response: Response) -> Response:
    """The engine's chat answer with OpenAI's ``reasoning_content`` beside vLLM's
    ``reasoning`` (agentworld.sim.openai_reasoning)."""
    if isinstance(response, StreamingResponse):
        response.body_iterator = _map_stream(response.body_iterator)
        return response
    if isinstance(response, JSONResponse):
        payload = with_reasoning_content(json.loads(response.body))
        return JSONResponse(payload, status_code=response.status_code)
    return response


async def _map_stream(packets):
    async for packet in packets:
        yield sse_with_reasoning_content(packet)


async def _answers(response: Any):
    # The engine's response generator as an async generator (closed when done with).
    async for item in response:
        yield item


def engine_facts(answer: Any) -> dict[str, Any]:
    """What the engine reports of one answer: its replica, the prompt's tokens and how
    many of them came from the prefix cache, and its times: waiting in the engine's
    queue, to the first token once scheduled, and from there to the last token."""
    usage = answer.usage
    details = getattr(usage, "prompt_tokens_details", None)
    metrics = getattr(answer, "metrics", None)
    return {
        "replica": getattr(answer, REPLICA_FIELD, None),
        "prompt_tokens": usage.prompt_tokens,
        "cached_tokens": getattr(details, "cached_tokens", None) or 0,
        "ttft_ms": getattr(metrics, "time_to_first_token_ms", None),
        "queue_ms": getattr(metrics, "queue_time_ms", None),
        "generation_ms": getattr(metrics, "generation_time_ms", None),
    }


def _team(request: Request) -> str:
    team = getattr(request.state, "team", None)
    if not team:
        # Only reachable if the app was built without the Guard in front.
        raise SimError(401, "invalid_api_key", "missing or unknown API key")
    return team
