"""The serve stage's driver: the simulator application of a Serve config file, on the
cluster ``RAY_ADDRESS`` names or a local one started here. It serves until SIGTERM or
SIGINT, or, as a smoke run, checks every route once, writes the manifest and stops.
``jobs/serve.py`` is its command line; the Serve calls are ``agentworld.sim.placement``'s.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import signal
import time
from dataclasses import dataclass, field
from typing import Any

import yaml

from agentworld.cluster import local_ray
from agentworld.config import set_overrides
from agentworld.console import say
from agentworld.io import is_complete, read_manifest, write_manifest
from agentworld.model.engine import check_engine_can_run
from agentworld.sim.config import ServeConfig
from agentworld.sim.keys import parse_keys
from agentworld.sim.placement.app import delete, deploy, shutdown
from agentworld.sim.smoke import smoke_check

STOP_TIMEOUT_S = 60
"""Past this many seconds after SIGTERM/SIGINT, the process exits without waiting on Serve."""


@dataclass(frozen=True, kw_only=True)
class ServeJob:
    """One run of the simulator application."""

    config: ServeConfig
    name: str = "agentworld-sim"
    """The Serve application's name."""
    http: dict[str, Any] = field(default_factory=dict)
    """Serve's ``http_options`` (host, port)."""
    smoke: bool = False
    """Check every route once and stop, instead of serving until a signal."""
    out: str | None = None
    """With ``smoke``: where manifest.json goes."""
    key: str | None = None
    """An API key to call the routes with (a smoke run needs one)."""

    @property
    def base_url(self) -> str:
        return f"http://{self.http.get('host', '127.0.0.1')}:{self.http.get('port', 8000)}"


def load_job(
    config_file: str,
    *,
    model: str | None = None,
    api_keys: str | None = None,
    host: str | None = None,
    port: int | None = None,
    smoke: bool = False,
    out: str | None = None,
    overrides: list[str] | tuple[str, ...] = (),
) -> ServeJob:
    """The job of a Serve config file's first application with the command line's
    overrides (``overrides``: dotted ``FIELD=VALUE`` items of its ServeConfig); raises
    before anything starts when the config or the model is wrong."""

    with open(config_file, encoding="utf-8") as f:
        data = yaml.safe_load(f)
    app = data["applications"][0]
    raw = app.get("args") or {}
    if model:
        raw = {**raw, "model": model}
    cfg = set_overrides(ServeConfig.from_dict(raw), list(overrides), owner="serve")
    path = cfg.model.removeprefix("file://")
    if "://" not in path and not os.path.isdir(path):
        raise SystemExit(
            f"[serve] no checkpoint directory at {path}: run `make demo` first or pass --model PATH"
        )
    check_engine_can_run(cfg.engine, cfg.model)
    http = {**data.get("http_options", {})}
    http.update({k: v for k, v in (("host", host), ("port", port)) if v is not None})
    cfg, key = with_keys(cfg, api_keys, smoke=smoke)
    return ServeJob(config=cfg, name=app["name"], http=http, smoke=smoke, out=out, key=key)


def with_keys(
    cfg: ServeConfig, api_keys: str | None, *, smoke: bool
) -> tuple[ServeConfig, str | None]:
    """(config, a key to call with). Keys from ``api_keys`` (``team=key,...``), or
    generated for a smoke run without keys, go into the config itself so that replicas
    on an already running cluster get them too; keys in the environment variable stay
    there (a local cluster started here inherits it, a remote one has its own, e.g. from
    a Kubernetes secret)."""

    keys = api_keys
    if not keys and smoke and not os.environ.get(cfg.auth.api_keys_env or ""):
        keys = f"smoke=sk-{secrets.token_hex(12)}"
    if keys:
        pairs = parse_keys(keys, source="--api-keys")
        auth = dataclasses.replace(cfg.auth, api_keys={**cfg.auth.api_keys, **dict(pairs)})
        cfg = dataclasses.replace(cfg, auth=auth)
    elif cfg.auth.api_keys_env and os.environ.get(cfg.auth.api_keys_env):
        pairs = parse_keys(os.environ[cfg.auth.api_keys_env], source=f"${cfg.auth.api_keys_env}")
    else:
        pairs = list(cfg.auth.api_keys.items())
    return cfg, (pairs[0][1] if pairs else None)


def run(job: ServeJob, *, num_cpus: int = 4) -> dict[str, Any] | None:
    """Deploy ``job`` and serve until a signal (returns None), or run the smoke check
    (returns its manifest, written when ``job.out`` is set). A local cluster started
    here has ``num_cpus`` logical CPUs and the keys' environment variable."""

    if job.smoke and job.out and is_complete(job.out):
        print(f"[serve] {job.out} is complete; nothing to do (delete it to rerun)")
        return read_manifest(job.out)
    if job.smoke and job.key is None:
        raise SystemExit("[serve] --smoke needs a key it can call with: pass --api-keys")
    auth = job.config.auth
    env = {}
    if auth.api_keys_env and os.environ.get(auth.api_keys_env):
        env[auth.api_keys_env] = os.environ[auth.api_keys_env]
    with local_ray(num_cpus=num_cpus, env_vars=env):
        return _serve(job)


def _serve(job: ServeJob) -> dict[str, Any] | None:
    cfg, base = job.config, job.base_url
    t0 = time.time()
    deploy(cfg, name=job.name, http=job.http)
    say(f"[serve] ready in {time.time() - t0:.0f}s at {base} (model {cfg.model_id!r})")
    say(
        f"[serve] try: curl -H 'Authorization: Bearer <key>' {base}/v1/sessions -d '{{\"domain\": \"terminal\"}}'"
    )
    if not job.smoke:
        _block()
        return None
    manifest = _smoke(job)
    delete(job.name)
    return manifest


def _smoke(job: ServeJob) -> dict[str, Any]:
    cfg = job.config
    result = smoke_check(job.base_url, job.key, cfg.model_id)
    latency = ", ".join(f"{k} {v:.0f}" for k, v in result["latency_ms"].items())
    say(f"[serve] smoke passed: every route answered (ms: {latency})")
    counts = {k: v for k, v in result.items() if isinstance(v, int)}
    counts["latency_ms"] = result["latency_ms"]
    if not job.out:
        return {"stage": "serve", "counts": counts}
    return write_manifest(
        job.out, stage="serve", inputs=[cfg.model], config=cfg.redacted(), counts=counts
    )


def _block() -> None:
    """Serve until SIGTERM or SIGINT, then shut Serve down (Ray stops when ``run``'s
    ``local_ray`` block ends). A shutdown that hangs is cut off after STOP_TIMEOUT_S by
    an alarm, so that a stop always ends the process."""

    signal.signal(signal.SIGTERM, signal.default_int_handler)  # both arrive as KeyboardInterrupt
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        say("[serve] stopping: shutting Serve down")
        signal.signal(signal.SIGALRM, lambda *_: os._exit(0))
        signal.alarm(STOP_TIMEOUT_S)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second signal must not cut the shutdown
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        shutdown()
    say("[serve] stopped")
