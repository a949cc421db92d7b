"""The recorded domains, one row each: where the domain's environment and playbooks
live, and what the agent-endpoint policy is told to reply. A new domain is a folder
``collect/<name>/`` (its ``env.py`` and ``playbooks.py``) and one row here.

Rows name modules instead of importing them: the table stays light (the config reads
its keys), and a domain's dependencies load only when that domain is recorded.
"""

from __future__ import annotations

import importlib
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

_TOOL_CALL = 'Reply with exactly one tool call as JSON: {"name": ..., "arguments": {...}}.'


@dataclass(frozen=True, kw_only=True)
class Domain:
    """Where one domain's pieces are, by import path."""

    environment: str
    """Its Environment class, as ``module:Class``."""
    playbooks: str
    """The module whose ``PLAYBOOKS`` maps a family name to the function drawing a task."""
    instruction: str
    """How the agent-endpoint policy is told to reply (agentworld.collect.agent)."""
    per_server: bool = False
    """Family names start with an MCP server's name (``git-inspect``): only the families
    of the config's ``mcp_servers`` are drawn."""
    restart_after_failure: str = ""
    """Workspace resources (a key prefix) dropped after a failed episode: a server that
    broke mid-call must not fail the rest of the chunk."""

    def environment_class(self) -> type:
        """The ``agentworld.collect.env.Environment`` subclass (not annotated as one: the
        config reads this table, and env.py imports the config)."""
        module, _, name = self.environment.partition(":")
        return getattr(importlib.import_module(module), name)

    def playbook_table(self) -> dict[str, Callable[[random.Random], Any]]:
        """Family name -> the function drawing a ``Task`` from a seeded generator."""
        return importlib.import_module(self.playbooks).PLAYBOOKS


DOMAINS: dict[str, Domain] = {
    "terminal": Domain(
        environment="agentworld.collect.terminal.env:TerminalEnvironment",
        playbooks="agentworld.collect.terminal.playbooks",
        instruction="Reply with exactly one shell command, and nothing else.",
    ),
    "mcp": Domain(
        environment="agentworld.collect.mcp.env:McpEnvironment",
        playbooks="agentworld.collect.mcp.playbooks",
        instruction=_TOOL_CALL,
        per_server=True,
        restart_after_failure="mcp-server-",
    ),
    "swe": Domain(
        environment="agentworld.collect.swe.env:SweEnvironment",
        playbooks="agentworld.collect.swe.playbooks",
        instruction=_TOOL_CALL,
    ),
    "search": Domain(
        environment="agentworld.collect.search.env:SearchEnvironment",
        playbooks="agentworld.collect.search.playbooks",
        instruction=_TOOL_CALL,
    ),
    "web": Domain(
        environment="agentworld.collect.web.env:WebEnvironment",
        playbooks="agentworld.collect.web.playbooks",
        instruction="Reply with exactly one browser action, e.g. click('12'), and nothing else.",
    ),
    "os": Domain(
        environment="agentworld.collect.os.env:OsEnvironment",
        playbooks="agentworld.collect.os.playbooks",
        instruction='Reply with exactly one desktop action, e.g. click(12) or type("hi"), '
        "and nothing else.",
    ),
}
"""In the order the config lists them (``RECORDED_DOMAINS``)."""


def lookup(name: str) -> Domain:
    """The row of ``name``; ValueError when no recorder exists for it."""
    try:
        return DOMAINS[name]
    except KeyError:
        raise ValueError(f"no recorder for domain {name!r}") from None
