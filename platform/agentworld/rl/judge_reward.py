"""The rubric reward: the shared LLM judge (``agentworld.scoring.judge_client``) on the
five dimensions through any OpenAI-compatible endpoint, with its retries, timeout and verdict
parsing. A judgment that fails for good is ``Failed`` (left out of the update and
counted), never a zero."""

from __future__ import annotations

from collections.abc import Sequence

from agentworld.rl.rewards import Failed, Prediction, Score
from agentworld.scoring.config import JudgeConfig


def verdict_reward(scores: dict[str, int]) -> float:
    """The five 1..5 scores as one reward in [0, 1]: the mean of (s - 1) / 4."""
    return sum((s - 1) / 4 for s in scores.values()) / len(scores)


def judge_reward(cfg: JudgeConfig, preds: Sequence[Prediction]) -> list[Score]:
    """Judge every prediction concurrently (bounded by ``cfg.endpoint.concurrency``)."""
    from agentworld.schema import extract_observation
    from agentworld.scoring.judge_client import JudgeRequest, judge_sync

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
