"""The simulator's Guard without Serve: oversized headers are refused with a JSON 431
before the app runs, and a metrics pipeline that fails is counted and logged once,
never silent and never failing the request."""

from __future__ import annotations

import logging
import subprocess
import sys

from fastapi import FastAPI, Request
from fastapi.testclient import TestClient

from agentworld.sim.config import AuthConfig
from agentworld.sim.guard import MAX_HEADER_BYTES, Guard

KEY = {"Authorization": "Bearer aaaaaaaa"}


def _guarded() -> tuple[Guard, list[str]]:
    app, reached = FastAPI(), []

    @app.get("/v1/echo")
    async def echo(request: Request):
        reached.append(request.state.team)
        return {"ok": True}

    guard = Guard(app, auth=AuthConfig(api_keys={"team-a": "aaaaaaaa"}), max_request_bytes=100)
    return guard, reached


def test_oversized_headers_get_a_json_431_before_the_app():
    guard, reached = _guarded()
    client = TestClient(guard)
    assert client.get("/v1/echo", headers=KEY).json() == {"ok": True}
    big = client.get("/v1/echo", headers={**KEY, "X-Junk": "j" * MAX_HEADER_BYTES})
    assert big.status_code == 431 and big.json()["error"]["code"] == "headers_too_large"
    many = {f"X-H{i}": "v" * 100 for i in range(MAX_HEADER_BYTES // 100)}
    assert client.get("/v1/echo", headers={**KEY, **many}).status_code == 431
    assert reached == ["team-a"]


def test_metrics_failures_are_counted_and_logged_once(caplog):
    """Outside a Ray worker the metrics cannot be built: each request still answers,
    each miss is counted, and one warning (with the cause) is logged, not one per call.
    Where this session has started Ray (earlier test files), the metrics would work, so
    the test runs itself again in a fresh process without Ray."""
    import ray

    if ray.is_initialized():
        here = f"{__file__}::test_metrics_failures_are_counted_and_logged_once"
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", here],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout[-3000:]
        return
    guard, _ = _guarded()
    client = TestClient(guard)
    with caplog.at_level(logging.WARNING, logger="agentworld.sim.guard"):
        codes = [client.get("/v1/echo", headers=KEY).status_code for _ in range(3)]
        codes.append(client.get("/v1/echo").status_code)  # a 401 is counted too
    assert codes == [200, 200, 200, 401]
    assert guard.metric_errors == 4
    warnings = [r for r in caplog.records if "metrics are not recorded" in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].exc_info is not None


def test_a_route_prefix_is_guarded_like_the_root():
    """Serve mounts an app under its route prefix as the scope's root_path: the key is
    checked there too (a Serve config may give the simulator any prefix)."""
    guard, reached = _guarded()
    client = TestClient(guard, root_path="/sim")
    assert client.get("/sim/v1/echo").status_code == 401
    assert client.get("/sim/v1/echo", headers=KEY).json() == {"ok": True}
    assert reached == ["team-a"]
