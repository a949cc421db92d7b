"""Typed configuration of the collect stage. Free of heavy imports: recipes import it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from agentworld.collect.domains import DOMAINS
from agentworld.config import ConfigError

CollectDomain = Literal["terminal", "mcp", "swe", "search", "web", "os"]
"""The rows of collect.domains.DOMAINS, spelled out for type checkers."""
RECORDED_DOMAINS: tuple[str, ...] = tuple(DOMAINS)
DEFAULT_DOMAINS: tuple[str, ...] = ("terminal", "mcp", "swe", "search")
"""Recorded by default: web needs a Chromium and os a desktop (Xvfb and applications) on
the machine, so they are asked for by name."""
MCP_SERVERS: tuple[str, ...] = ("time", "git")


@dataclass(frozen=True, kw_only=True)
class CollectConfig:
    """What to record, how many episodes, and the limits each episode runs under."""

    domains: tuple[CollectDomain, ...] = DEFAULT_DOMAINS
    """Domains to record; episode i goes to domains[i % len(domains)]."""
    episodes: int = 24
    """Episodes to run (successful ones become trajectories, failed ones are reported)."""
    seed: int = 0
    """Seed of every random choice of the playbooks: a seed fixes the actions taken."""
    episodes_per_task: int = 6
    """Episodes one Ray task runs in sequence (one shard per task)."""
    max_parallel: int = 2
    """Ray tasks in flight at once (parallel workers)."""
    cpus_per_task: float = 1.0
    """Logical CPUs each Ray task reserves."""
    max_turns: int = 10
    """Turns an episode may take before it is cut off."""
    command_timeout_s: float = 5.0
    """Time limit of one command, tool call or test run; the command is interrupted after it."""
    interrupt_grace_s: float = 5.0
    """Time an interrupted shell command (Ctrl-C) has to give the prompt back before the
    session is killed. On a loaded machine bash took over 2 s to print its prompt after a
    plain `sleep` was interrupted, and the session was killed for it."""
    output_cap_bytes: int = 8192
    """Bytes of one observation kept; the rest is dropped and the observation says so."""
    web_observation_cap: int = 2000
    """Characters of one web observation kept (URL, title, on-screen accessibility tree),
    cut at a line and marked: a page must fit the recipe's sequence with the environment
    text (2000 characters: about 700 tokens with a tokenizer trained on the corpus)."""
    os_observation_cap: int = 2000
    """Characters of one os observation kept (window title and on-screen accessibility
    tree), cut at a line and marked, as web_observation_cap for the same reason."""
    max_file_bytes: int = 16 * 1024 * 1024
    """Largest file a sandboxed process may write."""
    mcp_servers: tuple[str, ...] = MCP_SERVERS
    """MCP servers (installed from PyPI) the mcp domain speaks to: 'time', 'git'."""
    agent_endpoint: str | None = None
    """OpenAI-compatible base URL (e.g. http://host:8000/v1); when set, an agent served
    there chooses every action instead of the scripted playbooks."""
    agent_model: str | None = None
    """Model name at the endpoint; None takes the first one the endpoint lists."""
    agent_api_key_env: str = "OPENAI_API_KEY"
    """Environment variable holding the endpoint's API key (read in the driver only)."""
    agent_temperature: float = 0.0
    agent_max_tokens: int = 256
    agent_timeout_s: float = 60.0
    """Time limit of one request to the agent endpoint."""

    def __post_init__(self) -> None:
        _check_domains(self.domains)
        for name in self.mcp_servers:
            if name not in MCP_SERVERS:
                raise ConfigError(
                    "collect.mcp_servers",
                    f"unknown server {name!r}; known: {', '.join(MCP_SERVERS)}",
                )
        if "mcp" in self.domains and not self.mcp_servers:
            raise ConfigError("collect.mcp_servers", "the mcp domain needs at least one server")
        for name in ("episodes", "episodes_per_task", "max_parallel", "max_turns"):
            if getattr(self, name) < 1:
                raise ConfigError(f"collect.{name}", f"must be >= 1, got {getattr(self, name)}")
        for name in (
            "command_timeout_s",
            "interrupt_grace_s",
            "output_cap_bytes",
            "web_observation_cap",
            "os_observation_cap",
            "max_file_bytes",
            "agent_timeout_s",
        ):
            if getattr(self, name) <= 0:
                raise ConfigError(f"collect.{name}", f"must be > 0, got {getattr(self, name)}")
        if self.cpus_per_task <= 0:
            raise ConfigError("collect.cpus_per_task", f"must be > 0, got {self.cpus_per_task}")
        if self.agent_endpoint is not None and not self.agent_endpoint.startswith(
            ("http://", "https://")
        ):
            raise ConfigError(
                "collect.agent_endpoint", f"must be an http(s) URL, got {self.agent_endpoint!r}"
            )


def _check_domains(domains: tuple[str, ...]) -> None:
    if not domains:
        raise ConfigError("collect.domains", "must name at least one domain")
    for d in domains:
        if d not in RECORDED_DOMAINS:
            raise ConfigError(
                "collect.domains",
                f"{d!r} is not recorded here; recorded: {', '.join(RECORDED_DOMAINS)} "
                "(android is ingested through adapters)",
            )
    if len(set(domains)) != len(domains):
        raise ConfigError("collect.domains", f"repeated domain in {list(domains)}")
