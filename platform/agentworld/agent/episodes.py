"""Running episodes: many at once in lockstep (one batched generation per turn for all
live episodes, the environments stepped concurrently in a thread pool), or a fixed list
of actions replayed in one environment. Plain Python; the policy and the environments
are passed in."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from agentworld.agent.envs import AgentEnv
from agentworld.agent.policy import Renderer, Transcript
from agentworld.agent.tasks import Task


@dataclass
class Episode:
    task: Task
    mode: str
    seed: int
    group: int = 0
    environment: str = ""
    """The environment text the episode started from."""
    actions: list[str] = field(default_factory=list)
    observations: list[str] = field(default_factory=list)
    injected: list[bool] = field(default_factory=list)
    end_reason: str = ""
    reward: float = 0.0
    score: dict[str, Any] = field(default_factory=dict)
    transcript: Transcript = field(default_factory=Transcript)
    env_s: float = 0.0
    """Seconds spent inside env.step (the steps/s figure)."""
    steps: int = 0
    """Environment steps (actions other than the final answer)."""

    @property
    def success(self) -> bool:
        return bool(self.score.get("success"))

    def to_dict(self) -> dict[str, Any]:
        return {
            "task": self.task.id,
            "family": self.task.family,
            "mode": self.mode,
            "seed": self.seed,
            "group": self.group,
            "turns": [
                {"action": a, "observation": o, "injected": i}
                for a, o, i in zip(self.actions, self.observations, self.injected, strict=False)
            ],
            "end_reason": self.end_reason,
            "reward": self.reward,
            "score": self.score,
            "tokens": len(self.transcript),
            "agent_tokens": sum(self.transcript.mask),
        }


@dataclass(frozen=True, kw_only=True)
class Slot:
    """One episode to run: its task, its seed and its GRPO group."""

    task: Task
    seed: int
    group: int = 0


def _record(ep: Episode, action: str, out: tuple, seconds: float) -> bool:
    observation, reward, terminated, truncated, info = out
    ep.env_s += seconds
    if action:
        ep.actions.append(action)
    if action and info.get("end_reason") != "answer":
        ep.steps += 1
        ep.observations.append(observation)
        ep.injected.append(bool(info.get("injected")))
    if terminated or truncated:
        ep.end_reason, ep.reward, ep.score = info["end_reason"], reward, info["score"]
        return True
    return False


def _timed_step(env: AgentEnv, action: str) -> tuple[tuple, float]:
    t0 = time.perf_counter()
    try:
        out = env.step(action)
    except Exception as e:  # noqa: BLE001 - a broken environment ends its episode, recorded
        reason = f"env_error: {type(e).__name__}: {e}"[:300]
        try:
            out = env.stop(reason)
        except Exception:  # noqa: BLE001 - nothing left to check in a broken environment
            env.done = True
            out = (
                "",
                0.0,
                False,
                True,
                {"end_reason": reason, "score": {"reward": 0.0, "success": False}},
            )
    return out, time.perf_counter() - t0


def run_episodes(
    slots: Sequence[Slot],
    envs: Sequence[AgentEnv],
    policy: Any,
    renderer: Renderer,
    *,
    max_context: int,
    pool: ThreadPoolExecutor,
) -> list[Episode]:
    """Run ``slots[i]`` in ``envs[i]``; each turn, one ``policy.generate`` for every live
    episode. ``max_context``: an episode whose transcript reaches it ends (max_tokens)
    before the engine would overflow."""
    resets = list(
        pool.map(lambda se: se[1].reset(se[0].task, se[0].seed), zip(slots, envs, strict=True))
    )
    eps = [
        Episode(task=s.task, mode=e.mode, seed=s.seed, group=s.group)
        for s, e in zip(slots, envs, strict=True)
    ]
    for ep, (text, _) in zip(eps, resets, strict=True):
        ep.environment = text
        ep.transcript = renderer.start(ep.task.domain, text)
    live = list(range(len(eps)))
    while live:
        for i in [i for i in live if len(eps[i].transcript) >= max_context]:
            _record(eps[i], "", envs[i].stop("max_tokens"), 0.0)
        live = [i for i in live if not eps[i].end_reason]
        if not live:
            break
        gens = policy.generate([eps[i].transcript.ids for i in live])
        actions = [renderer.text_of(g.token_ids).strip() for g in gens]
        outs = list(
            pool.map(lambda ia: _timed_step(envs[ia[0]], ia[1]), zip(live, actions, strict=True))
        )
        still = []
        for i, g, action, (out, seconds) in zip(live, gens, actions, outs, strict=True):
            renderer.add_action(eps[i].transcript, g.token_ids, finished=g.finished)
            if not _record(eps[i], action, out, seconds):
                renderer.add_observation(eps[i].transcript, out[0])
                still.append(i)
        live = still
    return eps


def replay(
    env: AgentEnv,
    task: Task,
    actions: Sequence[str],
    *,
    seed: int = 0,
    resolve: Callable[[Task, str, str], str] | None = None,
) -> Episode:
    """The given actions, in order, in ``env`` (no model): WM2Real, demonstrations, speed.
    ``resolve(task, action, page)``: an oracle's action made concrete against the page
    the environment last showed (``webtasks.oracle_action``: element ids)."""
    text, _ = env.reset(task, seed)
    ep = Episode(task=task, mode=env.mode, seed=seed, environment=text)
    for action in actions:
        if resolve is not None:
            action = resolve(task, action, ep.observations[-1] if ep.observations else text)
        out, seconds = _timed_step(env, action)
        if _record(ep, action, out, seconds):
            return ep
    _record(ep, "", env.stop("actions_exhausted"), 0.0)
    return ep


class EnvPool:
    """Environments made on demand and reused across steps (a real environment keeps
    its workspace and MCP servers between episodes)."""

    def __init__(self, make: Callable[[], AgentEnv]) -> None:
        self.make = make
        self.envs: list[AgentEnv] = []

    def take(self, n: int) -> list[AgentEnv]:
        while len(self.envs) < n:
            self.envs.append(self.make())
        return self.envs[:n]

    def close(self) -> None:
        for env in self.envs:
            env.close()
        self.envs = []
