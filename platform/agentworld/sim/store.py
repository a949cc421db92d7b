"""Session state and per-team rate limits, as plain Python: ``agentworld.sim.placement``
runs one ``SessionStore`` as a detached Ray actor that every simulator replica shares.

A session is a JSON-serializable dict; the store enforces ownership (another team's
session does not exist for you), the idle TTL, the caps on turns and size, and
optimistic concurrency (a step names the turn count it was computed from, so two
simultaneous steps on one session cannot both land). It also holds the environments
teams register (the simulated MCP servers), by team and name. With ``storage_url``
every change is also written to ``<storage_url>/<session id>.json`` (an environment to
``env-<digest>.json``) and reloaded when the store starts.
"""

from __future__ import annotations

import copy
import hashlib
import json
import time
import uuid
from collections.abc import Callable
from typing import Any

from agentworld.io import get_fs, join, write_bytes
from agentworld.io.storage import remove
from agentworld.sim.config import LimitsConfig
from agentworld.sim.errors import SimError, environment_not_found, not_found


class RateLimiter:
    """A token bucket per team: ``burst`` requests at once, refilled at a per-minute rate."""

    def __init__(self) -> None:
        self._buckets: dict[str, tuple[float, float]] = {}

    def admit(self, team: str, *, rate_per_minute: float, burst: int, now: float) -> float:
        """0 when the request may proceed, else the seconds until it could."""
        tokens, last = self._buckets.get(team, (float(burst), now))
        tokens = min(float(burst), tokens + (now - last) * rate_per_minute / 60.0)
        if tokens >= 1.0:
            self._buckets[team] = (tokens - 1.0, now)
            return 0.0
        self._buckets[team] = (tokens, now)
        return (1.0 - tokens) * 60.0 / rate_per_minute


class SessionStore:
    """All sessions of all teams."""

    def __init__(
        self,
        limits: LimitsConfig,
        *,
        storage_url: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.limits = limits
        self.storage_url = storage_url
        self._clock = clock
        self._sessions: dict[str, dict[str, Any]] = {}
        self._environments: dict[tuple[str, str], dict[str, Any]] = {}
        self._rates = RateLimiter()
        if storage_url:
            self._load()

    def configure(self, limits: LimitsConfig) -> None:
        """Apply new limits (a redeployment) to the sessions already held."""
        self.limits = limits

    # -- requests ---------------------------------------------------------------------

    def admit(self, team: str) -> None:
        """Count one request against the team's rate; raises 429 past it."""
        wait = self._rates.admit(
            team,
            rate_per_minute=self.limits.rate_for(team),
            burst=self.limits.burst,
            now=self._clock(),
        )
        if wait > 0:
            raise SimError(
                429, "rate_limited", f"too many requests; retry in {wait:.1f}s", retry_after_s=wait
            )

    def create(self, team: str, session: dict[str, Any]) -> dict[str, Any]:
        """Store a new session (``system``, ``domain`` and options); returns it with its id."""
        now = self._clock()
        self._sweep(now)
        if (
            sum(1 for s in self._sessions.values() if s["team"] == team)
            >= self.limits.max_sessions_per_team
        ):
            raise SimError(
                429,
                "too_many_sessions",
                f"this team already holds {self.limits.max_sessions_per_team} sessions; delete some",
            )
        chars = len(session["system"])
        if chars > self.limits.max_session_chars:
            raise SimError(
                413,
                "session_too_large",
                f"the environment text is {chars} characters; the limit is {self.limits.max_session_chars}",
                field="environment",
            )
        sid = f"sess-{uuid.uuid4().hex}"
        record = {
            # The key that routes its model calls: a fork keeps its source's, whose
            # history it starts with and whose engine replica has that history cached.
            "affinity": sid,
            **session,
            "id": sid,
            "team": team,
            "turns": [],
            "chars": chars,
            "created_at": now,
            "updated_at": now,
            "expires_at": now + self.limits.session_ttl_s,
        }
        self._sessions[record["id"]] = record
        self._persist(record)
        return copy.deepcopy(record)

    def get(self, team: str, session_id: str) -> dict[str, Any]:
        return copy.deepcopy(self._owned(team, session_id))

    def list(self, team: str) -> list[dict[str, Any]]:
        self._sweep(self._clock())
        return [_summary(s) for s in self._sessions.values() if s["team"] == team]

    def check_step(self, team: str, session_id: str, action: str) -> dict[str, Any]:
        """The session, if one more step with ``action`` fits its caps (checked again
        when the turn is appended)."""
        record = self._owned(team, session_id)
        self._check_caps(record, len(action))
        return copy.deepcopy(record)

    def append_turn(
        self, team: str, session_id: str, *, expected_turns: int, turn: dict[str, Any]
    ) -> dict[str, Any]:
        """Append ``turn`` if the session still has ``expected_turns`` turns."""
        record = self._owned(team, session_id)
        if len(record["turns"]) != expected_turns:
            raise SimError(
                409,
                "concurrent_step",
                f"session {session_id!r} moved on to turn {len(record['turns'])} while this step ran; "
                "send steps of one session one at a time",
            )
        self._check_caps(record, len(turn["action"]))
        now = self._clock()
        record["turns"].append({**turn, "turn": expected_turns + 1, "created_at": now})
        record["chars"] += len(turn["action"]) + len(turn["observation"])
        record["updated_at"] = now
        record["expires_at"] = now + self.limits.session_ttl_s
        self._persist(record)
        return copy.deepcopy(record)

    def delete(self, team: str, session_id: str) -> None:
        self._owned(team, session_id)
        del self._sessions[session_id]
        self._unpersist(session_id)

    def fork(self, team: str, session_id: str, turn: int) -> dict[str, Any]:
        """A new session with the source's environment and its first ``turn`` turns."""
        source = self._owned(team, session_id)
        if turn > len(source["turns"]):
            raise SimError(
                422,
                "invalid_field",
                f"session {session_id!r} has {len(source['turns'])} turns; cannot fork at {turn}",
                field="turn",
            )
        kept = copy.deepcopy(source["turns"][:turn])
        labels = {**source["metadata"], "forked_from": session_id, "forked_at_turn": str(turn)}
        fields = {k: v for k, v in source.items() if k not in _OWN_FIELDS}
        record = self.create(team, {**copy.deepcopy(fields), "metadata": labels})
        stored = self._sessions[record["id"]]
        stored["turns"] = kept
        stored["chars"] += sum(len(t["action"]) + len(t["observation"]) for t in kept)
        self._persist(stored)
        return copy.deepcopy(stored)

    # -- registered environments ------------------------------------------------------

    def put_environment(self, team: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
        """Register (or replace) the team's environment ``name``."""
        now = self._clock()
        old = self._environments.get((team, name))
        if old is None and self._count_environments(team) >= self.limits.max_environments_per_team:
            raise SimError(
                429,
                "too_many_environments",
                f"this team already holds {self.limits.max_environments_per_team} environments; "
                "delete some",
            )
        record = {
            **spec,
            "name": name,
            "team": team,
            "created_at": old["created_at"] if old else now,
            "updated_at": now,
        }
        self._environments[(team, name)] = record
        if self.storage_url:
            write_bytes(self._environment_path(team, name), json.dumps(record).encode())
        return copy.deepcopy(record)

    def get_environment(self, team: str, name: str) -> dict[str, Any]:
        record = self._environments.get((team, name))
        if record is None:
            raise environment_not_found(name)
        return copy.deepcopy(record)

    def list_environments(self, team: str) -> list[dict[str, Any]]:
        return [
            _environment_summary(e)
            for (owner, _), e in sorted(self._environments.items())
            if owner == team
        ]

    def delete_environment(self, team: str, name: str) -> None:
        if self._environments.pop((team, name), None) is None:
            raise environment_not_found(name)
        if self.storage_url:
            remove(self._environment_path(team, name))

    def mcp_lookup(self, team: str, name: str, session_id: str | None) -> dict[str, Any]:
        """One MCP request's admission and context in one call: the team's rate, its
        environment ``name`` and, when the request names one, its session of that
        environment (404 for any other: another team's, another environment's, expired)."""
        self.admit(team)
        environment = self.get_environment(team, name)
        session = None
        if session_id is not None:
            session = self._owned(team, session_id)
            if session.get("environment") != name:
                raise not_found(session_id)
            session = _summary(session)
        return {"environment": environment, "session": session}

    def stats(self) -> dict[str, int]:
        teams: dict[str, int] = {}
        for s in self._sessions.values():
            teams[s["team"]] = teams.get(s["team"], 0) + 1
        return {"sessions": len(self._sessions), "teams": len(teams)}

    # -- internals --------------------------------------------------------------------

    def _owned(self, team: str, session_id: str) -> dict[str, Any]:
        record = self._sessions.get(session_id)
        if record is None or record["team"] != team:
            raise not_found(session_id)
        if record["expires_at"] <= self._clock():
            self._drop(session_id)
            raise not_found(session_id)
        return record

    def _check_caps(self, record: dict[str, Any], action_chars: int) -> None:
        if len(record["turns"]) >= self.limits.max_turns:
            raise SimError(
                409,
                "turn_limit",
                f"session {record['id']!r} reached its {self.limits.max_turns} turns",
            )
        if record["chars"] + action_chars > self.limits.max_session_chars:
            raise SimError(
                409,
                "session_full",
                f"session {record['id']!r} would exceed {self.limits.max_session_chars} characters",
            )

    def _sweep(self, now: float) -> None:
        for sid in [sid for sid, s in self._sessions.items() if s["expires_at"] <= now]:
            self._drop(sid)

    def _drop(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)
        self._unpersist(session_id)

    def _count_environments(self, team: str) -> int:
        return sum(1 for owner, _ in self._environments if owner == team)

    def _environment_path(self, team: str, name: str) -> str:
        # Team and name are both restricted to file-safe characters, but together they
        # would need a separator that neither may hold: a digest has none.
        digest = hashlib.sha256(f"{team}/{name}".encode()).hexdigest()[:24]
        return join(self.storage_url, f"env-{digest}.json")

    def _path(self, session_id: str) -> str:
        return join(self.storage_url, f"{session_id}.json")

    def _persist(self, record: dict[str, Any]) -> None:
        if self.storage_url:
            write_bytes(self._path(record["id"]), json.dumps(record, ensure_ascii=False).encode())

    def _unpersist(self, session_id: str) -> None:
        if self.storage_url:
            remove(self._path(session_id))

    def _load(self) -> None:
        fs, root = get_fs(self.storage_url)
        now = self._clock()
        for path in fs.glob(f"{root.rstrip('/')}/sess-*.json"):
            record = json.loads(fs.cat_file(path))
            if record["expires_at"] > now:
                self._sessions[record["id"]] = record
            else:
                fs.rm(path)
        for path in fs.glob(f"{root.rstrip('/')}/env-*.json"):
            record = json.loads(fs.cat_file(path))
            self._environments[(record["team"], record["name"])] = record


_OWN_FIELDS = {"id", "team", "turns", "chars", "created_at", "updated_at", "expires_at"}
"""Fields of a session record that belong to that session alone (a fork gets its own)."""


def _environment_summary(record: dict[str, Any]) -> dict[str, Any]:
    keys = ("name", "domain", "description", "created_at", "updated_at")
    tools = record.get("mcp_tools") or record.get("tools") or []
    return {**{k: record.get(k) for k in keys}, "tools": [t.get("name") for t in tools]}


def _summary(record: dict[str, Any]) -> dict[str, Any]:
    keys = ("id", "domain", "created_at", "updated_at", "expires_at", "metadata")
    return {**{k: record.get(k) for k in keys}, "turns": len(record["turns"])}
