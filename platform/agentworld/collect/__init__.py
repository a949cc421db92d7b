"""Recorders of real environments: terminal (a sandboxed bash on a pty), mcp (MCP
servers from PyPI over stdio), swe (a generated repository with real test runs),
search (BM25 over Python's standard-library documentation) and web (web applications
in a headless Chromium).

  run.py        the driver: plan episodes, record chunks, write shards and manifest
  placement.py  the Ray code: chunks of episodes as Ray tasks
  domains.py    the registry: one row per domain (environment, playbooks)
  <domain>/     one folder per domain: env.py (the recorder), playbooks.py (its tasks)
  episode.py, chunk.py, env.py, playbook.py, shell_env.py, shell.py, sandbox.py,
  variety.py, agent.py: the pieces the domains share

This module stays light (recipes import the config); the recorders load on use.
"""

from __future__ import annotations

import importlib
from typing import Any

from agentworld.collect.config import RECORDED_DOMAINS, CollectConfig

_LAZY = {
    "collect": "agentworld.collect.run",
    "run_episode": "agentworld.collect.episode",
    "EpisodeSpec": "agentworld.collect.episode",
    "plan_episodes": "agentworld.collect.episode",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'agentworld.collect' has no attribute {name!r}")


__all__ = ["RECORDED_DOMAINS", "CollectConfig", *_LAZY]
