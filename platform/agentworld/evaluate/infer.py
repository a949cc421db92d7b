"""``infer``: a prediction per item, from a local checkpoint (vLLM on Ray Data, see
``placement``) or any OpenAI-compatible endpoint, resumable.

Finished predictions are written as atomic parts under ``<out>/parts/`` as they come
in; a rerun skips the keys already there, so nothing is redone or duplicated. Items the
endpoint failed for good go to ``<out>/failed.jsonl`` (rewritten each run) and are
retried by the next run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from agentworld.console import Progress
from agentworld.evaluate.config import InferConfig
from agentworld.evaluate.items import EvalItem, failure_row, prediction_row
from agentworld.evaluate.placement import infer_vllm
from agentworld.evaluate.store import PartWriter, merge, read_parts
from agentworld.io import join, write_jsonl
from agentworld.scoring.chat_client import ChatClient, EndpointError


@dataclass(frozen=True, kw_only=True)
class InferCounts:
    items: int
    """Items asked for in this run (after ``max_items``)."""
    resumed: int
    """Already predicted by an earlier run: kept, not redone."""
    predicted: int
    """Predicted by this run."""
    failed: int
    """Failed for good in this run (retried by the next)."""


def run_infer(
    items: list[EvalItem],
    cfg: InferConfig,
    out_url: str,
    *,
    model_url: str | None = None,
    **storage_options: Any,
) -> InferCounts:
    """Predict every item not yet predicted under ``out_url``; writes
    ``predictions.jsonl`` (input order) and ``failed.jsonl``."""
    if cfg.max_items is not None:
        items = items[: cfg.max_items]
    parts_url = join(out_url, "parts")
    done = read_parts(parts_url, **storage_options)
    todo = [i for i in items if i.key not in done]
    finished = [len(items) - len(todo)]
    progress = Progress("evaluate", len(items), "items")
    with PartWriter(parts_url, flush_every=cfg.flush_every, **storage_options) as writer:

        def emit(row: dict[str, Any]) -> None:
            writer.add(row)
            finished[0] += 1
            progress.update(finished[0])

        if not todo:
            failures: list[dict[str, Any]] = []
        elif cfg.backend == "endpoint":
            failures = asyncio.run(infer_endpoint(todo, cfg, emit))
        else:
            if model_url is None:
                raise ValueError("model_url: the vllm backend needs a checkpoint URL")

            failures = infer_vllm(todo, cfg, model_url, emit)
    rows = read_parts(parts_url, **storage_options)
    merge(rows, [i.key for i in items], join(out_url, "predictions.jsonl"), **storage_options)
    write_jsonl(join(out_url, "failed.jsonl"), failures, **storage_options)
    return InferCounts(
        items=len(items),
        resumed=len(items) - len(todo),
        predicted=writer.written,
        failed=len(failures),
    )


async def infer_endpoint(
    items: list[EvalItem], cfg: InferConfig, emit: Callable[[dict[str, Any]], None]
) -> list[dict[str, Any]]:
    """Ask the endpoint for every item with ``endpoint.concurrency`` requests in flight;
    ``emit`` gets each finished prediction row as soon as it arrives."""
    failures: list[dict[str, Any]] = []
    async with ChatClient(cfg.endpoint) as client:

        async def one(item: EvalItem) -> None:
            try:
                c = await client.complete(item.messages, cfg.sampling)
            except EndpointError as e:
                failures.append(failure_row(item, str(e), e.attempts))
                return
            emit(prediction_row(item, c.text, c.finish_reason))

        await bounded_map(one, items, limit=cfg.endpoint.concurrency)
    return failures


async def bounded_map(
    fn: Callable[[Any], Awaitable[None]], items: Iterable[Any], *, limit: int
) -> None:
    """``await fn(item)`` for every item with at most ``limit`` running at once; items
    are pulled lazily, so a million items are never a million pending coroutines."""
    it = iter(items)

    async def worker() -> None:
        for item in it:  # one iterator shared by every worker: each item is taken once
            await fn(item)

    await asyncio.gather(*(worker() for _ in range(limit)))
