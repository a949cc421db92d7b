"""Per-team API keys: loaded from the config, an environment variable or a file (a
mounted secret), kept only as SHA-256 digests and compared in constant time."""

from __future__ import annotations

import hashlib
import hmac
import json
import os

from agentworld.sim.config import AuthConfig, check_team_key


class KeyRing:
    """Maps a presented key to its team."""

    def __init__(self, pairs: list[tuple[str, str]]) -> None:
        """``pairs``: (team, key); a team may hold several keys (rotation)."""
        # Several teams sharing one key would make isolation meaningless.
        owners: dict[bytes, str] = {}
        for team, key in pairs:
            digest = _digest(key)
            if digest in owners and owners[digest] != team:
                raise ValueError(f"teams {owners[digest]!r} and {team!r} share an API key")
            owners[digest] = team
        self._owners = owners

    def __len__(self) -> int:
        return len(self._owners)

    @property
    def teams(self) -> set[str]:
        return set(self._owners.values())

    def team_for(self, key: str | None) -> str | None:
        """The team holding ``key``, or None. Every stored digest is compared so that the
        time taken does not depend on which key matched."""
        if not key:
            return None
        presented = _digest(key)
        found = None
        for digest, team in self._owners.items():
            if hmac.compare_digest(digest, presented):
                found = team
        return found


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8")).digest()


def load_keys(cfg: AuthConfig, environ: dict[str, str] | None = None) -> KeyRing:
    """Collect keys from every configured source; raises ValueError naming the source
    when one is malformed or when no key is found at all."""
    environ = os.environ if environ is None else environ
    pairs: list[tuple[str, str]] = list(cfg.api_keys.items())
    if cfg.api_keys_env and environ.get(cfg.api_keys_env):
        pairs += parse_keys(environ[cfg.api_keys_env], source=f"${cfg.api_keys_env}")
    if cfg.api_keys_file:
        with open(cfg.api_keys_file, encoding="utf-8") as f:
            pairs += parse_keys(f.read(), source=cfg.api_keys_file)
    if not pairs:
        raise ValueError(
            "no API keys configured: set auth.api_keys, the environment variable "
            f"{cfg.api_keys_env or '(none)'} or auth.api_keys_file"
        )
    return KeyRing(pairs)


def parse_keys(text: str, *, source: str) -> list[tuple[str, str]]:
    """``{"team": "key"}`` as JSON, or ``team=key`` entries separated by commas or lines."""
    text = text.strip()
    if text.startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"{source}: not valid JSON ({e.msg})") from None
        pairs = list(data.items())
    else:
        pairs = []
        for n, entry in enumerate(text.replace(",", "\n").splitlines(), 1):
            entry = entry.strip()
            if not entry or entry.startswith("#"):
                continue
            if "=" not in entry:
                raise ValueError(f"{source}: entry {n} is not team=key")
            team, key = entry.split("=", 1)
            pairs.append((team.strip(), key.strip()))
    for team, key in pairs:
        try:
            check_team_key(team, key, where=source)
        except ValueError as e:
            raise ValueError(str(e)) from None
    return pairs
