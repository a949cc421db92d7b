"""One Ray task's work: a run of episodes in one workspace, each either a validated
trajectory or a reported failure. Plain functions; placement lives in placement.py."""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass, field
from typing import Any

from agentworld.collect.agent import AgentPolicy
from agentworld.collect.config import CollectConfig
from agentworld.collect.domains import lookup
from agentworld.collect.env import Workspace
from agentworld.collect.episode import EpisodeSpec, run_episode


@dataclass(kw_only=True)
class ChunkResult:
    records: list[str] = field(default_factory=list)
    """Trajectories in their JSON form, in episode order."""
    files: dict[str, bytes] = field(default_factory=dict)
    """Files the records name (screenshots), by path under the run's output folder."""
    failed: list[dict[str, Any]] = field(default_factory=list)
    """One entry per failed episode: id, domain, index, error."""
    seconds: float = 0.0

    @classmethod
    def all_failed(cls, specs: list[EpisodeSpec], error: str) -> ChunkResult:
        return cls(failed=[failure(s, error) for s in specs])


def failure(spec: EpisodeSpec, error: str) -> dict[str, Any]:
    return {"id": spec.id, "domain": spec.domain, "episode": spec.index, "error": error}


def describe(e: BaseException) -> str:
    """One line per root cause (task groups wrap the real errors in a group)."""
    if isinstance(e, BaseExceptionGroup):
        return "; ".join(describe(x) for x in e.exceptions)[:2000]
    return traceback.format_exception_only(type(e), e)[-1].strip()[:2000]


def run_chunk(
    specs: list[EpisodeSpec], config: CollectConfig, api_key: str | None = None
) -> ChunkResult:
    """Record ``specs`` in sequence, sharing one workspace (and its MCP servers)."""

    t0 = time.monotonic()
    result = ChunkResult()
    policy = _policy(config, api_key)
    with Workspace(config) as ws:
        for spec in specs:
            try:
                traj = run_episode(spec, ws, policy)
            except Exception as e:  # noqa: BLE001 - any failure is reported, never dropped
                result.failed.append(failure(spec, describe(e)))
                _forget_broken_resources(ws, spec.domain)
                ws.take_artifacts()  # a failed episode's screenshots go with it
                continue
            result.records.append(traj.to_json())
            result.files.update(ws.take_artifacts())
    result.seconds = round(time.monotonic() - t0, 3)
    return result


def _policy(config: CollectConfig, api_key: str | None) -> object | None:
    if config.agent_endpoint is None:
        return None

    return AgentPolicy(config, api_key=api_key)


def _forget_broken_resources(ws, domain: str) -> None:
    """After a failed episode, restart the resources its domain names (mcp: its servers)
    for the next one."""
    prefix = lookup(domain).restart_after_failure
    if prefix:
        ws.drop(prefix)
