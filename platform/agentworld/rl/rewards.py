"""Rewards: named, pluggable functions over a batch of predictions, combined with the
recipe's weights and gates. Plain functions, no Ray.

A reward function takes the predictions of one step and returns, per prediction, a
float in [0, 1], ``None`` where the reward does not apply (``json`` when the real
observation is not JSON), or ``Failed(reason)`` where it could not be computed (a judge
that gave no verdict). A failed prediction is left out of the update and counted, never
scored as zero. Rule rewards use the shared metrics of ``agentworld.scoring.metrics``.

Combination: the weighted mean of the rewards that apply, multiplied by every gate
reward that applies (``format`` by default). Added rather than multiplied, a format
reward is earned by a short, well-formed answer that says nothing: in the demo's RL run
the policy learned to answer "." and its fidelity fell from char F1 55 to 1.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

from agentworld.schema import extract_observation
from agentworld.scoring import metrics
from agentworld.scoring.config import JudgeConfig
from agentworld.scoring.judge_client import JudgeRequest, judge_sync


@dataclass(frozen=True, kw_only=True)
class Prediction:
    """One generated answer for one context."""

    domain: str
    messages: list[dict[str, str]]
    """The "predict turn k" messages: system, (user action, assistant observation)*, user."""
    reference: str
    """The real next observation."""
    raw: str
    """The generated text (reasoning and tags included, end-of-turn token removed)."""
    finished: bool
    """True when generation ended by itself, False when cut at max_new_tokens."""


@dataclass(frozen=True)
class Failed:
    reason: str


Score = float | None | Failed
RewardFn = Callable[[Sequence[Prediction]], list[Score]]
RewardFactory = Callable[[Any], RewardFn]
"""Builds a reward function from the RLConfig (rule rewards ignore it)."""

_REGISTRY: dict[str, RewardFactory] = {}


def register_reward(name: str, factory: RewardFactory) -> None:
    """Make ``name`` usable in ``RLConfig.rewards``."""
    if name in _REGISTRY:
        raise ValueError(f"reward {name!r} is already registered")
    _REGISTRY[name] = factory


def known_rewards() -> list[str]:
    return sorted(_REGISTRY)


def build_rewards(rl_cfg: Any) -> dict[str, RewardFn]:
    """The configured reward functions, by name, in the recipe's order."""
    return {spec.name: _REGISTRY[spec.name](rl_cfg) for spec in rl_cfg.rewards}


def per_prediction(fn: Callable[[Prediction], Score]) -> RewardFactory:
    """A factory for a reward computed one prediction at a time."""
    return lambda _cfg: lambda preds: [fn(p) for p in preds]


# ---- rule rewards ----------------------------------------------------------------------

_OBS_OPEN = "<predicted_observation>"


def format_reward(p: Prediction) -> float:
    """1.0 for exactly one parseable observation: generation ended by itself, reasoning
    closed, at most one <predicted_observation> block, non-empty, no stray tags."""
    if not p.finished or p.raw.count(_OBS_OPEN) > 1:
        return 0.0
    return metrics.format_valid(p.raw)


def _observation(p: Prediction) -> str:
    return extract_observation(p.raw)


def json_reward(p: Prediction) -> float | None:
    """Where the real observation is JSON (a tool result): 0 for invalid JSON, else 0.5
    plus 0.5 x the Jaccard similarity of the two documents' key paths and types."""
    ok_ref, ref = metrics.parse_json(p.reference)
    if not ok_ref:
        return None
    ok, pred = metrics.parse_json(_observation(p))
    if not ok:
        return 0.0
    a, b = _shape(pred), _shape(ref)
    return 0.5 + 0.5 * (len(a & b) / len(a | b) if a | b else 1.0)


def _shape(value: Any, path: str = "$") -> set[str]:
    """Key paths with value types; list items share one path."""
    here = {f"{path}:{type(value).__name__}"}
    if isinstance(value, dict):
        for k, v in value.items():
            here |= _shape(v, f"{path}.{k}")
    elif isinstance(value, list):
        for v in value:
            here |= _shape(v, f"{path}[]")
    return here


def exact_match_reward(p: Prediction) -> float:
    return metrics.exact_match(_observation(p), p.reference)


def fixed_lines_reward(p: Prediction) -> float | None:
    """Exact match of the deterministic content: the share of the real observation's
    lines that the session already fixes (they appear verbatim in the context: echoed
    actions, earlier output) which the prediction reproduces. None when there are none."""
    context_lines = {
        line.strip() for m in p.messages for line in m["content"].splitlines() if line.strip()
    }
    fixed = [s for s in (line.strip() for line in p.reference.splitlines()) if s in context_lines]
    if not fixed:
        return None
    predicted = {line.strip() for line in _observation(p).splitlines()}
    return sum(s in predicted for s in fixed) / len(fixed)


def char_f1_reward(p: Prediction) -> float:
    return metrics.char_f1(_observation(p), p.reference)


def rouge_l_reward(p: Prediction) -> float:
    return metrics.rouge_l(_observation(p), p.reference)


# The rubric reward: the shared LLM judge (``agentworld.scoring.judge_client``) on the
# five dimensions through any OpenAI-compatible endpoint, with its retries, timeout and
# verdict parsing. A judgment that fails for good is ``Failed`` (left out of the update
# and counted), never a zero.


def verdict_reward(scores: dict[str, int]) -> float:
    """The five 1..5 scores as one reward in [0, 1]: the mean of (s - 1) / 4."""
    return sum((s - 1) / 4 for s in scores.values()) / len(scores)


def judge_reward(cfg: JudgeConfig, preds: Sequence[Prediction]) -> list[Score]:
    """Judge every prediction concurrently (bounded by ``cfg.endpoint.concurrency``)."""

    reqs = [
        JudgeRequest(
            key=str(i),
            domain=p.domain,
            context=p.messages,
            reference=p.reference,
            prediction=extract_observation(p.raw),
        )
        for i, p in enumerate(preds)
    ]
    results = judge_sync(cfg, reqs) if reqs else []
    return [
        verdict_reward(r.verdict.scores) if r.ok else Failed(r.error or "no verdict")
        for r in results
    ]


def _judge_factory(rl_cfg: Any) -> RewardFn:
    return lambda preds: judge_reward(rl_cfg.judge, preds)


register_reward("format", per_prediction(format_reward))
register_reward("json", per_prediction(json_reward))
register_reward("exact_match", per_prediction(exact_match_reward))
register_reward("fixed_lines", per_prediction(fixed_lines_reward))
register_reward("char_f1", per_prediction(char_f1_reward))
register_reward("rouge_l", per_prediction(rouge_l_reward))
register_reward("judge", _judge_factory)


# ---- combination -----------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class RewardBatch:
    total: list[float]
    """``combine`` of the rewards that apply; 0.0 where ``valid`` is False."""
    valid: list[bool]
    """False where some reward failed: the prediction is left out of the update."""
    components: dict[str, list[Score]]
    failures: dict[str, list[str]]
    """Per reward, the reasons of its failures in this batch."""


def score(
    preds: Sequence[Prediction],
    fns: dict[str, RewardFn],
    weights: dict[str, float],
    gates: Collection[str] = (),
) -> RewardBatch:
    """Run every reward on the batch and combine them per prediction."""
    components = {name: _checked(name, fn(preds), len(preds)) for name, fn in fns.items()}
    total, valid = [], []
    for i in range(len(preds)):
        scores = {name: comp[i] for name, comp in components.items()}
        ok = not any(isinstance(s, Failed) for s in scores.values())
        valid.append(ok)
        total.append(combine(scores, weights, gates) if ok else 0.0)
    failures = {
        name: [s.reason for s in comp if isinstance(s, Failed)] for name, comp in components.items()
    }
    return RewardBatch(total=total, valid=valid, components=components, failures=failures)


def _checked(name: str, scores: list[Score], n: int) -> list[Score]:
    if len(scores) != n:
        raise ValueError(f"reward {name!r} returned {len(scores)} scores for {n} predictions")
    for s in scores:
        if isinstance(s, (int, float)) and not 0.0 <= s <= 1.0:
            raise ValueError(f"reward {name!r} returned {s}, outside [0, 1]")
    return scores


def combine(
    scores: dict[str, Score], weights: dict[str, float], gates: Collection[str] = ()
) -> float:
    """The weighted mean of the non-gate scores that are numbers (rewards that apply and
    did not fail), times each gate score that is a number. With no non-gate score the
    product of the gates is the total."""
    applied = {n: float(s) for n, s in scores.items() if isinstance(s, (int, float))}
    gate = math.prod(s for n, s in applied.items() if n in gates)
    rest = {n: s for n, s in applied.items() if n not in gates}
    if not rest:
        return gate if applied else 0.0
    denom = sum(weights[n] for n in rest)
    return gate * (sum(weights[n] * s for n, s in rest.items()) / denom if denom else 0.0)


def component_means(batch: RewardBatch) -> dict[str, float]:
    """Per reward, the mean over predictions where it applied (metrics)."""
    out = {}
    for name, comp in batch.components.items():
        vals = [s for s in comp if isinstance(s, (int, float))]
        if vals:
            out[name] = sum(vals) / len(vals)
    return out
