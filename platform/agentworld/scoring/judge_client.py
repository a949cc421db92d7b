"""The rubric judge: prompt building, verdict parsing and a client for any
OpenAI-compatible judge endpoint (async, with a synchronous wrapper).

A verdict is strengths, weaknesses and five integer scores in 1..5 (``DIMENSIONS``).
A judgment fails, and is counted as failed, when the endpoint fails for good or when no
answer (after ``parse_retries`` extra asks) holds a well-formed verdict.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agentworld.schema.parse import split_reasoning
from agentworld.scoring.chat_client import ChatClient, EndpointError
from agentworld.scoring.config import JudgeConfig
from agentworld.scoring.rubrics import DIMENSIONS, judge_instructions

Message = dict[str, str]


class VerdictError(ValueError):
    """A judge answer holds no well-formed verdict; the message says why."""


@dataclass(frozen=True, kw_only=True)
class Verdict:
    strengths: str
    weaknesses: str
    scores: dict[str, int]
    """One integer in 1..5 per name in DIMENSIONS."""

    @property
    def total(self) -> float:
        """Mean of the five raw scores (1..5)."""
        return sum(self.scores[d] for d in DIMENSIONS) / len(DIMENSIONS)


@dataclass(frozen=True, kw_only=True)
class JudgeRequest:
    domain: str
    context: list[Message]
    """The "predict turn k" messages the model saw: system, (user, assistant)*, user."""
    reference: str
    """The real observation."""
    prediction: str
    """The predicted observation (already extracted from the raw output)."""
    key: str = ""


@dataclass(frozen=True, kw_only=True)
class JudgeResult:
    key: str
    domain: str
    verdict: Verdict | None
    error: str | None
    attempts: int
    raw: str = ""
    """The judge's last answer."""

    @property
    def ok(self) -> bool:
        return self.verdict is not None

    def to_dict(self) -> dict[str, Any]:
        v = self.verdict
        return {
            "key": self.key,
            "domain": self.domain,
            "ok": self.ok,
            "scores": dict(v.scores) if v else None,
            "total": v.total if v else None,
            "strengths": v.strengths if v else None,
            "weaknesses": v.weaknesses if v else None,
            "error": self.error,
            "attempts": self.attempts,
            "raw": self.raw,
        }


# ---- prompt ----------------------------------------------------------------------------


def build_judge_messages(req: JudgeRequest, *, max_context_chars: int = 24000) -> list[Message]:
    """System: our instructions for the domain. User: the context (environment text and
    the most recent turns that fit ``max_context_chars``), the action, both observations."""
    if not req.context or req.context[0].get("role") != "system":
        raise ValueError("context must start with the system message (the environment)")
    environment = _clip(req.context[0]["content"], max_context_chars // 2)
    pairs = [
        (req.context[i]["content"], req.context[i + 1]["content"])
        for i in range(1, len(req.context) - 1, 2)
    ]
    history = _recent_turns(pairs, max_context_chars - len(environment))
    parts = [f"## Domain\n{req.domain}", f"## Environment\n{environment}", history]
    parts += [
        f"## Current action\n{req.context[-1]['content']}",
        f"## Real observation\n{req.reference}",
        f"## Predicted observation\n{req.prediction}",
    ]
    return [
        {"role": "system", "content": judge_instructions(req.domain)},
        {"role": "user", "content": "\n\n".join(parts)},
    ]


def _clip(text: str, budget: int) -> str:
    if len(text) <= budget:
        return text
    return text[:budget] + f"\n[... {len(text) - budget} characters omitted]"


def _recent_turns(pairs: list[tuple[str, str]], budget: int) -> str:
    """The latest turns that fit the budget, numbered as in the session."""
    kept: list[str] = []
    used = 0
    for n in range(len(pairs), 0, -1):
        action, observation = pairs[n - 1]
        block = f"### Turn {n} action\n{action}\n### Turn {n} observation\n{observation}"
        if kept and used + len(block) > budget:
            break
        kept.append(_clip(block, max(budget, 0)) if not kept else block)
        used += len(block)
    omitted = len(pairs) - len(kept)
    head = "## Interaction so far" + (f" ({omitted} earlier turns omitted)" if omitted else "")
    return "\n".join([head, *reversed(kept)] if kept else [head, "(none: this is turn 1)"])


# ---- verdict parsing -------------------------------------------------------------------

_SCORES_RE = re.compile(r"<scores>(.*?)(?:</scores>|$)", re.DOTALL | re.IGNORECASE)
_FENCE_RE = re.compile(r"^```[a-zA-Z]*\s*|\s*```$")
_PAIR_RE = re.compile(
    r"[\"']?(" + "|".join(DIMENSIONS) + r")[\"']?\s*[:=]\s*[\"']?(-?\d+(?:\.\d+)?)",
    re.IGNORECASE,
)
_JSON_OBJ_RE = re.compile(r"\{[^{}]*\}", re.DOTALL)


def parse_verdict(text: str) -> Verdict:
    """Parse a judge answer; raises VerdictError saying what is wrong.

    Tolerated: reasoning in <think> blocks, code fences, an unclosed <scores> tag,
    ``name: N`` lines instead of JSON, integral floats and numeric strings, and a bare
    JSON object with the five names when the <scores> tag is missing.
    """

    _, body, _ = split_reasoning(text or "")
    blocks = _SCORES_RE.findall(body)
    if blocks:
        raw_scores = _read_scores(blocks[-1])
    else:
        raw_scores = _bare_scores(body)
    return Verdict(
        strengths=_tag(body, "strengths"),
        weaknesses=_tag(body, "weaknesses"),
        scores={d: _score(d, raw_scores) for d in DIMENSIONS},
    )


def _tag(body: str, name: str) -> str:
    found = re.findall(rf"<{name}>(.*?)</{name}>", body, re.DOTALL | re.IGNORECASE)
    return found[-1].strip() if found else ""


def _read_scores(block: str) -> dict[str, Any]:
    block = _FENCE_RE.sub("", block.strip())
    try:
        value = json.loads(block)
        if isinstance(value, dict):
            return {str(k).lower(): v for k, v in value.items()}
    except ValueError:
        pass
    pairs = {name.lower(): num for name, num in _PAIR_RE.findall(block)}
    if not pairs:
        raise VerdictError(f"the <scores> block holds no scores: {block[:120]!r}")
    return pairs


def _bare_scores(body: str) -> dict[str, Any]:
    for candidate in reversed(_JSON_OBJ_RE.findall(body)):
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, dict) and all(d in value for d in DIMENSIONS):
            return value
    raise VerdictError("no <scores> block and no JSON object with the five scores")


def _score(name: str, scores: dict[str, Any]) -> int:
    if name not in scores:
        raise VerdictError(f"score {name!r} is missing")
    value = scores[name]
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            raise VerdictError(f"score {name!r} is not a number: {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise VerdictError(f"score {name!r} is not a number: {value!r}")
    if value != int(value):
        raise VerdictError(f"score {name!r} is not an integer: {value}")
    if not 1 <= value <= 5:
        raise VerdictError(f"score {name!r} is {value:g}, outside 1..5")
    return int(value)


# ---- client ----------------------------------------------------------------------------


@dataclass
class JudgeClient:
    """``async with JudgeClient(cfg) as judge: results = await judge.judge_many(reqs)``."""

    cfg: JudgeConfig
    _chat: ChatClient | None = field(default=None, init=False, repr=False)

    async def __aenter__(self) -> JudgeClient:
        self._chat = await ChatClient(self.cfg.endpoint).__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._chat.__aexit__(*exc)

    async def judge(self, req: JudgeRequest) -> JudgeResult:
        """One judgment; never raises for endpoint or verdict failures (see ``error``)."""
        messages = build_judge_messages(req, max_context_chars=self.cfg.max_context_chars)
        attempts, raw, error = 0, "", "not judged"
        for _ in range(self.cfg.parse_retries + 1):
            try:
                completion = await self._chat.complete(messages, self.cfg.sampling)
            except EndpointError as e:
                attempts += e.attempts
                return self._result(req, None, f"endpoint: {e}", attempts, raw)
            attempts += completion.attempts
            raw = completion.text
            try:
                return self._result(req, parse_verdict(raw), None, attempts, raw)
            except VerdictError as e:
                error = f"verdict: {e}"
        return self._result(req, None, error, attempts, raw)

    async def judge_many(self, reqs: Sequence[JudgeRequest]) -> list[JudgeResult]:
        """All judgments, in order; concurrency is bounded by ``endpoint.concurrency``."""
        return list(await asyncio.gather(*(self.judge(r) for r in reqs)))

    @staticmethod
    def _result(req, verdict, error, attempts, raw) -> JudgeResult:
        return JudgeResult(
            key=req.key, domain=req.domain, verdict=verdict, error=error, attempts=attempts, raw=raw
        )


def judge_sync(cfg: JudgeConfig, reqs: Sequence[JudgeRequest]) -> list[JudgeResult]:
    """Judge from synchronous code (no running event loop in this thread)."""

    async def main() -> list[JudgeResult]:
        async with JudgeClient(cfg) as judge:
            return await judge.judge_many(reqs)

    return asyncio.run(main())
