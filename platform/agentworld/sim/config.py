"""Typed configuration of the serve stage: the checkpoint and its vLLM engine
(``agentworld.model.engine.EngineConfig``), the simulator's limits and the team keys.
Free of heavy imports: ``agentworld.recipes`` imports it. Invalid values raise
ConfigError naming the field; ``ServeConfig.from_dict`` (what a Serve config's ``args``
hold) also rejects unknown keys by name."""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Literal

from agentworld.config import (
    ConfigError,
    check_non_negative,
    check_positive,
    check_prompt_style,
)
from agentworld.model.engine import EngineConfig

_TEAM_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$")
EngineRouting = Literal["session", "load", "round_robin"]
ENGINE_ROUTINGS = typing.get_args(EngineRouting)
"""The values of ``ServeConfig.engine_routing``."""


@dataclass(frozen=True, kw_only=True)
class LimitsConfig:
    """What one team may ask of the simulator."""

    max_request_bytes: int = 64 * 1024
    """Larger request bodies are refused with 413 before they are parsed."""
    request_timeout_s: float = 60.0
    """Budget for one model call; past it the request fails with 504 and nothing is stored."""
    max_turns: int = 64
    """Steps a session may take; the next one is refused with 409."""
    max_session_chars: int = 64 * 1024
    """Characters a session may hold (system text, actions, observations)."""
    max_sessions_per_team: int = 256
    """Live sessions per team; creating one more is refused with 429."""
    session_ttl_s: float = 3600.0
    """A session unused for this long is deleted."""
    max_environments_per_team: int = 64
    """Registered environments (simulated MCP servers) per team; one more is refused with 429."""
    rate_per_minute: float = 600.0
    """Requests per team per minute (token bucket), all routes together."""
    burst: int = 60
    """Requests a team may make at once before the rate applies."""
    team_rate_per_minute: dict[str, float] = field(default_factory=dict)
    """Per-team overrides of ``rate_per_minute``."""
    max_tokens: int = 512
    """Ceiling on tokens generated per step; requests may ask for fewer."""
    default_max_tokens: int = 256
    """Tokens generated per step when a request does not say."""

    def __post_init__(self) -> None:
        check_positive(
            "limits",
            max_request_bytes=self.max_request_bytes,
            request_timeout_s=self.request_timeout_s,
            max_turns=self.max_turns,
            max_session_chars=self.max_session_chars,
            max_sessions_per_team=self.max_sessions_per_team,
            session_ttl_s=self.session_ttl_s,
            max_environments_per_team=self.max_environments_per_team,
            rate_per_minute=self.rate_per_minute,
            burst=self.burst,
            max_tokens=self.max_tokens,
            default_max_tokens=self.default_max_tokens,
        )
        for team, rate in self.team_rate_per_minute.items():
            check_positive("limits.team_rate_per_minute", **{team: rate})
        if self.default_max_tokens > self.max_tokens:
            raise ConfigError(
                "limits.default_max_tokens",
                f"{self.default_max_tokens} exceeds limits.max_tokens {self.max_tokens}",
            )

    def rate_for(self, team: str) -> float:
        return self.team_rate_per_minute.get(team, self.rate_per_minute)


@dataclass(frozen=True, kw_only=True)
class AuthConfig:
    """Where the per-team API keys come from. Keys from all sources are merged; a team
    may hold several keys, a key belongs to one team. Secrets belong in the environment
    variable or the file (a mounted Kubernetes secret), not in a Serve config."""

    api_keys: dict[str, str] = field(default_factory=dict)
    """Inline ``{team: key}`` (local development and tests)."""
    api_keys_env: str | None = "AGENTWORLD_SIM_API_KEYS"
    """Environment variable with ``{"team": "key", ...}`` as JSON or ``team=key,team=key``."""
    api_keys_file: str | None = None
    """File with the same formats (one ``team=key`` per line also works)."""

    def __post_init__(self) -> None:
        for team, key in self.api_keys.items():
            check_team_key(team, key, where="auth.api_keys")
        if self.api_keys_env is not None and not re.match(
            r"^[A-Za-z_][A-Za-z0-9_]*$", self.api_keys_env
        ):
            raise ConfigError("auth.api_keys_env", f"{self.api_keys_env!r} is not a variable name")
        if not (self.api_keys or self.api_keys_env or self.api_keys_file):
            raise ConfigError("auth", "name at least one source of API keys")


def check_team_key(team: str, key: str, *, where: str) -> None:
    if not isinstance(team, str) or not _TEAM_RE.match(team):
        raise ConfigError(
            where, f"team name {team!r} is invalid (1-64 letters, digits, '_', '.', '-')"
        )
    if not isinstance(key, str) or len(key) < 8 or any(c.isspace() for c in key):
        raise ConfigError(f"{where}.{team}", "a key must be at least 8 characters without spaces")


@dataclass(frozen=True, kw_only=True)
class ServeConfig:
    """The serve stage: one Ray Serve application with the OpenAI-compatible routes of
    the model and the simulator API on top."""

    model: str = "runs/demo/model"
    """HF-format checkpoint behind ``/v1/chat/completions``: a local path (relative paths
    resolve against the directory the app is built from) or a model id / URL that vLLM
    loads."""
    model_id: str = "agentworld"
    """Name clients pass as ``model``."""
    engine: EngineConfig = field(default_factory=lambda: EngineConfig(dtype="float32"))
    """The vLLM engine replicas (``ray.serve.llm``); float32 on CPU, bfloat16 on GPU. On
    GPU each replica gets one bundle of one GPU per tensor-parallel rank."""
    engine_server_cpus: float = 0.0
    """CPUs reserved for each engine's Serve replica process on top of its bundle (it
    only relays requests); 0 lets the whole app fit a 2-CPU Ray cluster."""
    cpu_kv_cache_gib: int | None = 1
    """VLLM_CPU_KVCACHE_SPACE for the engine (CPU build); None leaves vLLM's default."""
    limits: LimitsConfig = field(default_factory=LimitsConfig)
    auth: AuthConfig = field(default_factory=AuthConfig)
    custom_domains: dict[str, str] = field(default_factory=dict)
    """Domains beyond the seven built-in ones: ``{name: description}``."""
    prompt_style: Literal["native", "awb"] = "native"
    """How a session is rendered for the model. ``native``: this project's format (its
    own models). ``awb``: the reference's format, in which its released model was
    trained (the domain's system prompt from ``prompts_dir``, then ``### Turn N`` /
    ``**Action:**`` user turns and ``**Environment Observation:**`` answers)."""
    prompts_dir: str | None = None
    """The reference's ``prompts/`` folder, one ``<domain>/system_prompt.txt`` per
    domain; required by ``awb``, refused with ``native``. A session of a domain without
    its file fails with 422 naming the file."""
    store_name: str = "agentworld-sim-sessions"
    """Name of the detached Ray actor that holds the sessions, outside every replica."""
    store_namespace: str = "agentworld"
    storage_url: str | None = None
    """Where the store also writes each session (any fsspec URL), so that sessions
    survive a restart of the store itself; None keeps them in the actor only."""
    engine_routing: EngineRouting = "session"
    """Which engine replica a model call goes to. ``session``: every turn of a session
    (and of its forks) to the replica that holds its history in its prefix cache, by
    consistent hashing of the session (Ray Serve's ``ConsistentHashRouter``); when that
    replica is gone or full the session moves to the next one and its history is sent
    again. ``load``: the less loaded of two replicas drawn at random (Serve's default;
    with two replicas and sessions stepping together it kept 86-98% of a session's
    turns on one replica in ``bench_serve.py``). ``round_robin``: the replicas in turn,
    whatever the session (Ray Serve's ``RoundRobinRouter``)."""
    ingress_replicas: int = 1
    """Simulator (HTTP ingress) replicas; they share the session store."""
    ingress_cpus: float = 0.25
    """Ray CPUs reserved per ingress replica (it mostly waits on the engine)."""

    def __post_init__(self) -> None:
        if not self.model:
            raise ConfigError("serve.model", "must name a checkpoint")
        if not re.match(r"^[A-Za-z0-9][A-Za-z0-9_.:/\-]*$", self.model_id):
            raise ConfigError("serve.model_id", f"{self.model_id!r} is not a valid model name")
        check_positive(
            "serve", ingress_replicas=self.ingress_replicas, cpu_kv_cache_gib=self.cpu_kv_cache_gib
        )
        check_non_negative("serve", engine_server_cpus=self.engine_server_cpus)
        en = self.engine
        if en.gpus_per_replica != int(en.gpus_per_replica):
            # Serve LLM places whole GPUs: one bundle of one GPU per tensor-parallel rank.
            raise ConfigError(
                "engine.gpus_per_replica", f"must be a whole number, got {en.gpus_per_replica}"
            )
        if en.tensor_parallel_size > 1 and en.gpus_per_replica < en.tensor_parallel_size:
            raise ConfigError(
                "engine.tensor_parallel_size",
                f"{en.tensor_parallel_size} needs gpus_per_replica >= it, got {en.gpus_per_replica}",
            )
        if self.ingress_cpus < 0:
            raise ConfigError("serve.ingress_cpus", f"must be >= 0, got {self.ingress_cpus}")
        _check_type(self.engine_routing, EngineRouting, "serve.engine_routing")
        if not self.store_name:
            raise ConfigError("serve.store_name", "must not be empty")
        for name in self.custom_domains:
            if not re.match(r"^[a-z][a-z0-9_\-]{0,63}$", name):
                raise ConfigError("serve.custom_domains", f"domain name {name!r} is invalid")
        check_prompt_style("serve", self.prompt_style, self.prompts_dir)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> ServeConfig:
        """Build from plain data (a Serve config's ``args``); unknown keys raise."""
        return _from_dict(cls, data or {}, "serve")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def redacted(self) -> ServeConfig:
        """This config with inline keys masked, for manifests and logs."""
        masked = {team: "********" for team in self.auth.api_keys}
        return dataclasses.replace(self, auth=dataclasses.replace(self.auth, api_keys=masked))


def _from_dict(cls: type, data: Any, where: str, base: Any = None) -> Any:
    """``cls`` from ``data``; a nested section starts from its owner's default (``base``),
    so that a stage's own defaults (the engine's dtype) hold for the keys not given."""
    if not isinstance(data, dict):
        raise ConfigError(where, f"expected a mapping, got {type(data).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(
            f"{where}.{unknown[0]}", f"unknown field; known: {', '.join(sorted(fields))}"
        )
    hints = typing.get_type_hints(cls)
    values = {}
    for name, value in data.items():
        sub = hints[name]
        if dataclasses.is_dataclass(sub):
            value = _from_dict(sub, value, f"{where}.{name}", _default(fields[name]))
        else:
            _check_type(value, sub, f"{where}.{name}")
        values[name] = value
    return dataclasses.replace(base, **values) if base is not None else cls(**values)


def _default(f: dataclasses.Field) -> Any:
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None if f.default is dataclasses.MISSING else f.default


def _check_type(value: Any, hint: Any, where: str) -> None:
    """Shallow type check of plain config values (YAML gives ints where floats are meant)."""
    origin = typing.get_origin(hint)
    if origin is Literal:
        if value not in typing.get_args(hint):
            raise ConfigError(where, f"must be one of {typing.get_args(hint)}, got {value!r}")
        return
    if origin in (types.UnionType, typing.Union):
        if value is None and type(None) in typing.get_args(hint):
            return
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
        origin = typing.get_origin(hint)
    expected = {float: (int, float), int: (int,), str: (str,), bool: (bool,), dict: (dict,)}
    base = origin or hint
    ok = expected.get(base, (object,))
    if not isinstance(value, ok) or (base in (int, float) and isinstance(value, bool)):
        raise ConfigError(
            where, f"expected {getattr(base, '__name__', base)}, got {type(value).__name__}"
        )
