"""``judge``: a rubric verdict for every prediction of a run, resumable like ``infer``.
One judgment is ``agentworld.scoring.judge_client``'s; this module runs it over a run's
predictions with stored parts, so a rerun judges only what is missing.

A judgment whose answers held no well-formed verdict is a final result (``ok: false``,
counted as failed by ``score``). A judgment the endpoint failed for good goes to
``failed.jsonl`` instead: ``score`` counts it as failed and the next run retries it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from agentworld.evaluate.infer import bounded_map
from agentworld.evaluate.store import PartWriter, merge, read_parts
from agentworld.io import join, write_jsonl
from agentworld.scoring.config import JudgeConfig
from agentworld.scoring.judge_client import JudgeClient, JudgeRequest, JudgeResult


@dataclass(frozen=True, kw_only=True)
class JudgeCounts:
    items: int
    resumed: int
    judged: int
    """Judged by this run with a valid verdict."""
    invalid: int
    """Judged by this run without a valid verdict (final, counted as failed)."""
    endpoint_failed: int
    """Not judged because the endpoint failed for good (retried by the next run)."""


def request_for(row: dict[str, Any]) -> JudgeRequest:
    """The judge request for one prediction row (as ``infer`` writes them)."""
    return JudgeRequest(
        key=row["key"],
        domain=row["domain"],
        context=row["messages"],
        reference=row["reference"],
        prediction=row["prediction"],
    )


def run_judge(
    predictions: list[dict[str, Any]], cfg: JudgeConfig, out_url: str, **storage_options: Any
) -> JudgeCounts:
    """Judge every prediction not judged yet under ``out_url``; writes
    ``judgments.jsonl`` (prediction order) and ``failed.jsonl``."""
    parts_url = join(out_url, "parts")
    done = read_parts(parts_url, **storage_options)
    todo = [p for p in predictions if p["key"] not in done]
    results: list[JudgeResult] = []
    with PartWriter(parts_url, flush_every=cfg.flush_every, **storage_options) as writer:

        def keep(result: JudgeResult) -> None:
            results.append(result)
            if result.ok or result.error.startswith("verdict:"):
                writer.add(result.to_dict())

        if todo:
            asyncio.run(_judge_all(todo, cfg, keep))
    failed = [r.to_dict() for r in results if not r.ok and not r.error.startswith("verdict:")]
    merge(
        read_parts(parts_url, **storage_options),
        [p["key"] for p in predictions],
        join(out_url, "judgments.jsonl"),
        **storage_options,
    )
    write_jsonl(join(out_url, "failed.jsonl"), failed, **storage_options)
    return JudgeCounts(
        items=len(predictions),
        resumed=len(predictions) - len(todo),
        judged=sum(r.ok for r in results),
        invalid=sum(not r.ok for r in results) - len(failed),
        endpoint_failed=len(failed),
    )


async def _judge_all(rows: list[dict[str, Any]], cfg: JudgeConfig, keep) -> None:
    async with JudgeClient(cfg) as judge:

        async def one(row: dict[str, Any]) -> None:
            keep(await judge.judge(request_for(row)))

        await bounded_map(one, rows, limit=cfg.endpoint.concurrency)
