"""Python client of the simulator API, standard library only.

``SimEnv`` wraps one session in the Gymnasium calling convention:

    env = SimEnv("http://127.0.0.1:8000", api_key, domain="terminal",
                 environment="bash 5.2 in an empty directory /home/user")
    observation, info = env.reset()
    observation, reward, terminated, truncated, info = env.step("ls -la")
    env.close()

A world model predicts observations, it does not score them: ``reward`` is 0.0 and
``terminated`` is False; ``truncated`` turns True when the session's turn cap is reached.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any


class SimAPIError(Exception):
    """The simulator answered with an error (or could not be reached: status 0)."""

    def __init__(self, status: int, code: str, message: str, field: str | None = None) -> None:
        super().__init__(f"HTTP {status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.field = field


class SimClient:
    """One call per API route; every method returns the decoded JSON body."""

    def __init__(self, base_url: str, api_key: str, *, timeout_s: float = 120.0) -> None:
        self.base_url = base_url.rstrip("/").removesuffix("/v1")
        self.api_key = api_key
        self.timeout_s = timeout_s

    def create_session(self, domain: str, **spec: Any) -> dict[str, Any]:
        return self.request("POST", "/v1/sessions", {"domain": domain, **_present(spec)})

    def step(self, session_id: str, action: str | dict[str, Any], **options: Any) -> dict[str, Any]:
        return self.request(
            "POST", f"/v1/sessions/{session_id}/step", {"action": action, **_present(options)}
        )

    def get_session(self, session_id: str) -> dict[str, Any]:
        return self.request("GET", f"/v1/sessions/{session_id}")

    def list_sessions(self) -> list[dict[str, Any]]:
        return self.request("GET", "/v1/sessions")["sessions"]

    def delete_session(self, session_id: str) -> dict[str, Any]:
        return self.request("DELETE", f"/v1/sessions/{session_id}")

    def simulate(self, domain: str, action: str | dict[str, Any], **spec: Any) -> dict[str, Any]:
        return self.request(
            "POST", "/v1/simulate", {"domain": domain, "action": action, **_present(spec)}
        )

    def health(self) -> dict[str, Any]:
        return self.request("GET", "/healthz")

    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base_url + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {self.api_key}")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as e:
            raise _api_error(e.code, e.read()) from None
        except (urllib.error.URLError, TimeoutError, ConnectionError) as e:
            raise SimAPIError(0, "unreachable", f"{self.base_url}: {e}") from None


def _present(options: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in options.items() if v is not None}


def _api_error(status: int, raw: bytes) -> SimAPIError:
    try:
        error = json.loads(raw)["error"]
        if isinstance(error, dict):
            return SimAPIError(
                status, error.get("code", "error"), error.get("message", ""), error.get("field")
            )
    except (ValueError, KeyError, TypeError):
        pass
    return SimAPIError(status, "error", raw[:500].decode("utf-8", "replace"))


class SimEnv:
    """One simulated environment; ``reset`` opens a fresh session (closing the last)."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        domain: str,
        *,
        environment: str | None = None,
        tools: list[dict[str, Any]] | None = None,
        initial_state: Any = None,
        control: dict[str, Any] | None = None,
        sampling: dict[str, Any] | None = None,
        metadata: dict[str, str] | None = None,
        timeout_s: float = 120.0,
    ) -> None:
        self.client = SimClient(base_url, api_key, timeout_s=timeout_s)
        self.spec = {
            "environment": environment,
            "tools": tools,
            "initial_state": initial_state,
            "control": control,
            "sampling": sampling,
            "metadata": metadata,
        }
        self.domain = domain
        self.session_id: str | None = None

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Open a session. The first observation is the environment's system text;
        ``seed`` sets the sampling seed, ``options`` override constructor arguments."""
        self.close()
        spec = {**self.spec, **(options or {})}
        if seed is not None:
            spec["sampling"] = {**(spec.get("sampling") or {}), "seed": seed}
        session = self.client.create_session(self.domain, **spec)
        self.session_id = session["id"]
        info = {"session_id": self.session_id, "turn": 0, "max_turns": session["max_turns"]}
        return session["system"], info

    def step(self, action: str | dict[str, Any]) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self.session_id is None:
            raise RuntimeError("call reset() before step()")
        out = self.client.step(self.session_id, action)
        info = {
            k: out[k]
            for k in ("session_id", "turn", "turns_left", "reasoning", "injected", "finish_reason")
        }
        # The engine's report (replica, cached prompt tokens, time to first token).
        info["engine"] = out.get("engine")
        return out["observation"], 0.0, False, out["turns_left"] <= 0, info

    def history(self) -> list[dict[str, Any]]:
        if self.session_id is None:
            return []
        return self.client.get_session(self.session_id)["turns"]

    def close(self) -> None:
        if self.session_id is not None:
            try:
                self.client.delete_session(self.session_id)
            except SimAPIError as e:
                if e.status != 404:  # already expired or deleted: nothing to close
                    raise
            self.session_id = None

    def __enter__(self) -> SimEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
