"""Closed-loop rollouts: each held-out real episode is replayed against the simulator,
action by real action, with the simulator's own earlier observations as the history
(as ``agentworld.agent``'s ``SimEnv`` serves an agent), and every turn is also asked
teacher-forced (the real history, as ``infer`` asks it), so that each turn's two scores
sit side by side. Where the two prompts are the same (turn 1, or every earlier
prediction was exactly the real observation) one answer serves both.

Episodes run concurrently (``episodes_in_flight``); an episode's rows are written when
it finishes, in atomically written parts, so a stopped run keeps its finished episodes
and a rerun rolls out only the others. An episode whose turn failed for good goes to
``failed.jsonl`` and is retried by the next run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agentworld.console import Progress
from agentworld.evaluate.config import ClosedLoopConfig
from agentworld.evaluate.episodes import Episode, with_system_prompts
from agentworld.evaluate.infer import bounded_map
from agentworld.evaluate.simulators import Reply, Simulator, StepFailed
from agentworld.evaluate.store import PartWriter, merge, read_parts
from agentworld.io import join, write_jsonl

MODES = ("teacher_forced", "closed_loop")


@dataclass(frozen=True, kw_only=True)
class ClosedLoopCounts:
    episodes: int
    """Episodes asked for in this run (after ``max_episodes``)."""
    resumed: int
    """Rolled out by an earlier run: kept, not redone."""
    rolled_out: int
    failed: int
    """Episodes with a turn that failed for good (retried by the next run)."""
    turns: int
    """Turns of the finished episodes (each scored closed-loop and teacher-forced)."""
    shared: int
    """Turns whose two prompts were the same, answered once."""


def row_key(episode_id: str, k: int, mode: str) -> str:
    return f"{episode_id}#{k}@{mode}"


def turn_row(ep: Episode, k: int, mode: str, reply: Reply) -> dict[str, Any]:
    """A prediction row (as ``infer`` writes them, scored the same way) for one turn."""
    return {
        "key": row_key(ep.id, k, mode),
        "id": ep.id,
        "task": ep.task,
        "domain": ep.domain,
        "turn_idx": k,
        "total_turns": ep.turns,
        "mode": mode,
        "output": reply.output,
        "prediction": reply.observation,
        "reference": ep.references[k - 1],
        "finish_reason": reply.finish_reason,
    }


async def roll_out(sim: Simulator, ep: Episode) -> tuple[list[dict[str, Any]], int]:
    """Both kinds of turn for every turn of ``ep``; (rows, turns answered once)."""
    own: list[str] = []
    rows, shared = [], 0
    handle = await sim.start(ep)
    try:
        for k in range(1, ep.turns + 1):
            closed = ep.messages(k, own)
            forced = ep.messages(k, ep.references)
            if closed == forced:
                cl = tf = await sim.closed_loop(handle, ep, k, closed)
                shared += 1
            else:
                cl, tf = await asyncio.gather(
                    sim.closed_loop(handle, ep, k, closed), sim.teacher_forced(ep, k, forced)
                )
            own.append(cl.observation)
            rows += [turn_row(ep, k, "teacher_forced", tf), turn_row(ep, k, "closed_loop", cl)]
    finally:
        await sim.finish(handle)
    return rows, shared


def run_closed_loop(
    episodes: list[Episode],
    make_simulator: Callable[[], Simulator],
    cfg: ClosedLoopConfig,
    out_url: str,
    **storage_options: Any,
) -> ClosedLoopCounts:
    """Roll out every episode not yet rolled out under ``out_url``; writes ``rows.jsonl``
    (episode order, turn order, teacher-forced before closed-loop) and ``failed.jsonl``."""
    if cfg.max_episodes is not None:
        episodes = episodes[: cfg.max_episodes]
    if cfg.prompt_style == "awb":
        episodes = with_system_prompts(episodes, cfg.prompts_dir)
    parts_url = join(out_url, "parts")
    done = {row["id"] for row in read_parts(parts_url, **storage_options).values()}
    todo = [e for e in episodes if e.id not in done]
    failures: list[dict[str, Any]] = []
    totals = {"turns": 0, "shared": 0, "finished": 0}
    progress = Progress("closed-loop", len(episodes), "episodes")
    # Flushed by hand, between episodes: a part never holds half an episode.
    with PartWriter(parts_url, flush_every=10**9, **storage_options) as writer:

        def finished(ep: Episode, rows: list[dict[str, Any]], shared: int) -> None:
            for row in rows:
                writer.add(row)
            totals["turns"] += ep.turns
            totals["shared"] += shared
            totals["finished"] += 1
            progress.update(len(episodes) - len(todo) + totals["finished"])
            if totals["finished"] % cfg.flush_every == 0:
                writer.flush()

        if todo:
            asyncio.run(
                _roll_out_all(todo, make_simulator, cfg.episodes_in_flight, finished, failures)
            )
    rows = read_parts(parts_url, **storage_options)
    order = [row_key(e.id, k, m) for e in episodes for k in range(1, e.turns + 1) for m in MODES]
    merge(rows, order, join(out_url, "rows.jsonl"), **storage_options)
    write_jsonl(join(out_url, "failed.jsonl"), failures, **storage_options)
    return ClosedLoopCounts(
        episodes=len(episodes),
        resumed=len(episodes) - len(todo),
        rolled_out=totals["finished"],
        failed=len(failures),
        turns=totals["turns"],
        shared=totals["shared"],
    )


async def _roll_out_all(
    episodes: list[Episode],
    make_simulator: Callable[[], Simulator],
    limit: int,
    finished: Callable[[Episode, list[dict[str, Any]], int], None],
    failures: list[dict[str, Any]],
) -> None:
    """Every episode, ``limit`` at a time, on one simulator (made inside the loop that
    uses it: its clients belong to that loop)."""
    async with make_simulator() as sim:

        async def one(ep: Episode) -> None:
            try:
                rows, shared = await roll_out(sim, ep)
            except StepFailed as e:
                failures.append({"id": ep.id, "domain": ep.domain, "error": str(e)})
                return
            finished(ep, rows, shared)

        await bounded_map(one, episodes, limit=limit)
