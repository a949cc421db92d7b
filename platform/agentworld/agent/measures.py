"""What the report measures besides the agents' scores: per-family summaries of
episodes, WM2Real (the actions of successful simulated episodes replayed in the real
environment), and environment steps per second at a fixed concurrency."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from agentworld.agent.envs import AgentEnv
from agentworld.agent.episodes import Episode, replay
from agentworld.agent.tasks import Task
from agentworld.agent.webtasks import oracle_action


def summarize(episodes: Sequence[Episode]) -> dict[str, dict[str, Any]]:
    """family (and "all") -> n, success rate, mean reward, item F1 and row F1 (table
    tasks), end reasons."""
    groups: dict[str, list[Episode]] = {}
    for e in episodes:
        groups.setdefault(e.task.family, []).append(e)
        groups.setdefault("all", []).append(e)
    out = {}
    for name, eps in sorted(groups.items()):
        tables = [e for e in eps if e.task.family == "table"]
        reasons: dict[str, int] = {}
        for e in eps:
            key = e.end_reason.split(":")[0]
            reasons[key] = reasons.get(key, 0) + 1
        out[name] = {
            "n": len(eps),
            "success_rate": sum(e.success for e in eps) / len(eps),
            "reward": sum(e.reward for e in eps) / len(eps),
            "item_f1": _mean([e.score.get("item_f1") or 0.0 for e in tables]),
            "row_f1": _mean([e.score.get("row_f1") or 0.0 for e in tables]),
            "end_reasons": reasons,
        }
    return out


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def wm2real(
    sim_episodes: Sequence[Episode],
    make_real: Callable[[], AgentEnv],
    *,
    pool: ThreadPoolExecutor,
    limit: int = 32,
) -> dict[str, Any]:
    """Replay the actions of successful simulated episodes in the real environment."""
    wins = [e for e in sim_episodes if e.success][:limit]

    def one(ep: Episode) -> bool:
        env = make_real()
        try:
            return replay(env, ep.task, ep.actions, seed=ep.seed).success
        finally:
            env.close()

    real = list(pool.map(one, wins))
    return {
        "sim_episodes": len(sim_episodes),
        "sim_successes": len(wins),
        "still_succeeding": sum(real),
        "share": sum(real) / len(real) if real else None,
    }


def steps_per_second(
    tasks: Sequence[Task], envs: Sequence[AgentEnv], *, steps: int, pool: ThreadPoolExecutor
) -> dict[str, float]:
    """Replay the oracle solutions' environment actions (not the final answers) on
    ``len(envs)`` episodes at once until ``steps`` steps are done. A wave of concurrent
    episodes counts the stepping time of its slowest episode (resets excluded)."""
    actions = [(t, [a for a in t.solution if not a.upper().startswith("ANSWER:")]) for t in tasks]
    actions = [(t, a) for t, a in actions if a]
    if not actions:
        raise ValueError("no task has environment actions in its solution to replay")
    work: list[tuple[Task, list[str]]] = []
    while sum(len(a) for _, a in work) < steps:
        work.append(actions[len(work) % len(actions)])
    done = 0
    env_s = 0.0
    t0 = time.perf_counter()
    for i in range(0, len(work), len(envs)):
        chunk = work[i : i + len(envs)]
        eps = list(
            pool.map(
                lambda je: replay(je[1], je[0][0], je[0][1], resolve=oracle_action),
                zip(chunk, envs, strict=False),
            )
        )
        done += sum(e.steps for e in eps)
        env_s += max(e.env_s for e in eps)
    return {
        "steps": done,
        "concurrency": len(envs),
        "steps_per_s": done / env_s if env_s else 0.0,
        "wall_s": time.perf_counter() - t0,
    }
