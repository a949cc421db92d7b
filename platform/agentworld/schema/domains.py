"""The seven built-in domains and a registry for custom ones."""

from __future__ import annotations

import re
from dataclasses import dataclass

from agentworld.schema.errors import UnknownDomainError


@dataclass(frozen=True, kw_only=True)
class Domain:
    """A kind of environment a world model simulates."""

    name: str
    """Short lowercase identifier, e.g. ``terminal``."""
    description: str
    """One line on what the environment is and what its observations look like."""
    recorded: bool = False
    """True when ``agentworld.collect`` records it from a real local environment;
    False when it is ingested from existing data through adapters."""


BUILTIN_DOMAINS: tuple[Domain, ...] = (
    Domain(
        name="mcp",
        description="MCP tool servers: tool calls and their JSON/text results",
        recorded=True,
    ),
    Domain(
        name="search",
        description="A search engine: queries, result lists, opened documents",
        recorded=True,
    ),
    Domain(
        name="terminal",
        description="A shell session: commands and the screen output",
        recorded=True,
    ),
    Domain(
        name="swe",
        description="A code repository: file views, searches, edits, test runs",
        recorded=True,
    ),
    Domain(name="android", description="An Android UI: taps and typed text, accessibility trees"),
    Domain(
        name="web",
        description="A web browser: page actions and page/DOM observations",
        recorded=True,
    ),
    Domain(name="os", description="A desktop OS UI: mouse/keyboard actions, window trees"),
)

_NAME_RE = re.compile(r"^[a-z][a-z0-9_\-]{0,63}$")
_REGISTRY: dict[str, Domain] = {d.name: d for d in BUILTIN_DOMAINS}


def register_domain(name: str, description: str = "") -> Domain:
    """Register a custom domain (idempotent for the same name)."""
    if not _NAME_RE.match(name):
        raise ValueError(
            f"domain name {name!r} is invalid: use 1-64 lowercase letters, digits, '_' or '-', "
            "starting with a letter"
        )
    domain = _REGISTRY.get(name)
    if domain is None:
        domain = Domain(name=name, description=description or f"custom domain {name}")
        _REGISTRY[name] = domain
    return domain


def unregister_domain(name: str) -> None:
    """Remove a custom domain; built-in domains cannot be removed."""
    if any(d.name == name for d in BUILTIN_DOMAINS):
        raise ValueError(f"built-in domain {name!r} cannot be unregistered")
    _REGISTRY.pop(name, None)


def known_domains() -> list[str]:
    return sorted(_REGISTRY)


def get_domain(name: str, *, field: str = "domain") -> Domain:
    """Look a domain up by name; AgentWorldBench task names like ``prefix/terminal`` resolve
    to their last component."""
    key = normalize_domain(name)
    if key not in _REGISTRY:
        raise UnknownDomainError(
            f"unknown domain {name!r}; known: {', '.join(known_domains())} "
            "(register custom ones with agentworld.schema.register_domain)",
            field=field,
        )
    return _REGISTRY[key]


def normalize_domain(name: str) -> str:
    return name.strip().lower().rsplit("/", 1)[-1]
