"""One episode, start to end: draw the task, set up the environment, let the policy
act, and return a validated Trajectory. Plain functions, no Ray."""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass

from agentworld.collect.config import CollectConfig
from agentworld.collect.domains import lookup
from agentworld.collect.env import Action, Environment, Task, Workspace
from agentworld.collect.playbook import pick_task
from agentworld.schema import Trajectory, Turn


@dataclass(frozen=True, kw_only=True)
class EpisodeSpec:
    index: int
    """Position in the run; with the seed it fixes the task and every scripted action."""
    domain: str
    seed: int

    @property
    def id(self) -> str:
        return f"{self.domain}-s{self.seed}-{self.index:06d}"

    def rng(self) -> random.Random:
        # A string seed is hashed the same way by every Python process (unlike hash()).
        return random.Random(f"agentworld-collect:{self.seed}:{self.domain}:{self.index}")


def plan_episodes(config: CollectConfig) -> list[EpisodeSpec]:
    """Episode i records domains[i % len(domains)]: every domain gets its share."""
    return [
        EpisodeSpec(index=i, domain=config.domains[i % len(config.domains)], seed=config.seed)
        for i in range(config.episodes)
    ]


def make_environment(domain: str, workspace: Workspace) -> Environment:
    """The recorder of ``domain`` (its row in collect.domains), set up in ``workspace``."""
    return lookup(domain).environment_class()(workspace)


def draw_task(spec: EpisodeSpec, config: CollectConfig) -> Task:
    return pick_task(spec.domain, spec.rng(), mcp_servers=config.mcp_servers)


def run_episode(
    spec: EpisodeSpec, workspace: Workspace, policy: object | None = None
) -> Trajectory:
    """Record one episode. ``policy`` is None for the task's scripted playbook, or an
    object with ``next_action(env, environment_text, turns) -> Action | None``."""
    config = workspace.config
    task = draw_task(spec, config)
    env = make_environment(spec.domain, workspace)
    env.episode_id = spec.id
    try:
        environment = env.reset(task)
        turns = _act(env, environment, task, policy, config.max_turns)
        outcome = env.outcome()
    finally:
        env.close()
    traj = Trajectory(
        id=spec.id,
        domain=spec.domain,
        source=env.source if policy is None else f"{env.source}+agent",
        environment=environment,
        turns=tuple(turns),
        outcome=outcome,
        metadata={"playbook": task.playbook, "seed": spec.seed, "episode": spec.index},
    )
    # Validate the form that will be written, not just the object: a record that does
    # not survive its own JSON round trip is a failed episode, never a written one.
    return Trajectory.from_json(traj.to_json())


def _act(env: Environment, environment: str, task: Task, policy, max_turns: int) -> list[Turn]:
    turns: list[Turn] = []
    script = task.script() if policy is None else None
    last: Turn | None = None
    while len(turns) < max_turns and not env.ended:
        if script is not None:
            try:
                action = next(script) if last is None else script.send(last)
            except StopIteration:
                break
        else:
            action = policy.next_action(env, environment, turns)
        if action is None:
            break
        last = env.step(action)
        turns.append(last)
    return turns


def episode_digest(traj: Trajectory) -> str:
    """A short hash of a trajectory's actions: equal for equal seeds."""
    h = hashlib.sha256()
    for t in traj.turns:
        h.update(t.action.encode() + b"\0")
    return h.hexdigest()[:16]


__all__ = ["Action", "EpisodeSpec", "episode_digest", "plan_episodes", "run_episode"]
