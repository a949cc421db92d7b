"""The ASGI layer in front of every ``/v1`` route (the simulated MCP servers' included):
oversized headers get a 431, the API key names the team (401 otherwise), the body is
read up to the size limit (413 past it, before any parsing), and each request is
counted in Prometheus metrics (Ray Serve's, made by
``agentworld.sim.placement.request_metrics``)."""

from __future__ import annotations

import json
import logging
import re
import time
from typing import Any

from agentworld.sim.config import AuthConfig
from agentworld.sim.errors import SimError
from agentworld.sim.keys import load_keys

_ROUTES = (
    (re.compile(r"^/v1/sessions/[^/]+/step$"), "/v1/sessions/{id}/step"),
    (re.compile(r"^/v1/sessions/[^/]+/fork$"), "/v1/sessions/{id}/fork"),
    (re.compile(r"^/v1/environments/[^/]+$"), "/v1/environments/{name}"),
    (re.compile(r"^/v1/mcp/[^/]+$"), "/v1/mcp/{environment}"),
    (re.compile(r"^/v1/sessions/[^/]+$"), "/v1/sessions/{id}"),
    (re.compile(r"^/v1/models/.+$"), "/v1/models/{model}"),
)
MAX_HEADER_BYTES = 32 * 1024
log = logging.getLogger(__name__)


class Guard:
    """Pure ASGI middleware (no BaseHTTPMiddleware: it must not buffer responses)."""

    def __init__(self, app: Any, *, auth: AuthConfig, max_request_bytes: int) -> None:
        self.app = app
        self.auth = auth
        self.max_request_bytes = max_request_bytes
        self._ring = None
        self._metrics = None
        self.metric_errors = 0
        """Requests whose metrics could not be recorded (the first one is logged)."""

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        # Under a Serve route prefix the path starts with it (the scope's root_path).
        path = scope.get("path", "").removeprefix(scope.get("root_path") or "")
        if scope["type"] != "http" or not path.startswith("/v1/"):
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = {"code": 500}

        async def send_and_record(message: dict) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        team = "-"
        try:
            self._check_headers(scope)
            team = self._team(scope)
            body = await self._read_body(scope, receive)
        except SimError as e:
            await _send_error(send_and_record, e)
        else:
            scope.setdefault("state", {})["team"] = team
            if body:
                _force_json(scope)
            await self.app(scope, _replay(body, receive), send_and_record)
        finally:
            self._record(path, team, status["code"], time.perf_counter() - started)

    def _team(self, scope: dict) -> str:
        if self._ring is None:
            self._ring = load_keys(self.auth)
        team = self._ring.team_for(_presented_key(scope))
        if team is None:
            raise SimError(
                401,
                "invalid_api_key",
                "missing or unknown API key; send 'Authorization: Bearer <key>'",
            )
        return team

    def _check_headers(self, scope: dict) -> None:
        """The HTTP server in front takes headers of any size (200 KB went through),
        which every replica would then hold: refuse them past MAX_HEADER_BYTES."""
        size = sum(len(k) + len(v) for k, v in scope.get("headers", []))
        if size > MAX_HEADER_BYTES:
            message = f"the request headers exceed {MAX_HEADER_BYTES} bytes"
            raise SimError(431, "headers_too_large", message)

    async def _read_body(self, scope: dict, receive: Any) -> bytes:
        declared = _header(scope, b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_request_bytes:
            raise _too_large(self.max_request_bytes)
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_request_bytes:
                raise _too_large(self.max_request_bytes)
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(chunks)

    def _record(self, path: str, team: str, code: int, seconds: float) -> None:
        try:
            if self._metrics is None:
                # not at the top: it brings ray into this light module
                from agentworld.sim.placement import request_metrics

                self._metrics = request_metrics()
            requests, latency = self._metrics
            route = route_label(path)
            requests.inc(tags={"route": route, "team": team, "status": str(code)})
            latency.observe(seconds, tags={"route": route})
        except Exception:  # noqa: BLE001 - metrics must never fail a request...
            # ...but a broken metrics pipeline must not pass unseen: count every miss,
            # log the first with its traceback (not each request: that would flood).
            self.metric_errors += 1
            if self.metric_errors == 1:
                log.warning("request metrics are not recorded", exc_info=True)


def route_label(path: str) -> str:
    """The route template of a path: session ids would make unbounded label values."""
    for pattern, label in _ROUTES:
        if pattern.match(path):
            return label
    return path


def _too_large(limit: int) -> SimError:
    return SimError(413, "request_too_large", f"the request body exceeds {limit} bytes")


def _header(scope: dict, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def _force_json(scope: dict) -> None:
    """Every route takes JSON. Ray Serve LLM's router answers a JSON body under another
    content type (``curl -d`` sends a form type) with a 500, so the type is set here."""
    headers = [(k, v) for k, v in scope.get("headers", []) if k.lower() != b"content-type"]
    scope["headers"] = [*headers, (b"content-type", b"application/json")]


def _presented_key(scope: dict) -> str | None:
    auth = _header(scope, b"authorization")
    if auth and auth[:7].lower() == "bearer ":
        return auth[7:].strip()
    return _header(scope, b"x-api-key")


def _replay(body: bytes, receive: Any):
    """Hand the buffered body to the app once, then the client's own channel (which
    reports a disconnect when it happens)."""
    sent = False

    async def replay() -> dict:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


async def _send_error(send: Any, error: SimError) -> None:
    payload = json.dumps(error.body()).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(payload)).encode()),
    ]
    if error.status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": error.status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})
