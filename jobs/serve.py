"""Serve a world-model checkpoint as the simulator endpoint (Ray Serve + vLLM): the
OpenAI-compatible routes (/v1/chat/completions, /v1/models) and the simulator API
(/v1/sessions, /v1/simulate, /healthz). The first answer comes about 80 s after start
on a 2-core CPU machine.

Run:
  python jobs/serve.py --model runs/demo/sft/hf                       (or `make serve`)
  python jobs/serve.py --model runs/demo/sft/hf --smoke --out runs/demo/serve
      start, check every route once (openai client, a SimEnv session, /v1/simulate,
      a wrong key), write manifest.json, stop
or through Ray: ray job submit --working-dir . -- python jobs/serve.py --config serve/sim_cpu.yaml
The Serve CLI runs the same application: PYTHONPATH=platform serve run serve/sim_cpu.yaml

API keys: --api-keys 'team=key,team2=key2', and the variable named in the config's
auth.api_keys_env (AGENTWORLD_SIM_API_KEYS); --smoke without either generates one.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import secrets
import signal
import sys
import time

from agentworld.cli import run_job, url

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
STOP_TIMEOUT_S = 60
"""Past this many seconds after SIGTERM/SIGINT, the process exits without waiting on Serve."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--config", default=os.path.join(ROOT, "serve", "sim_cpu.yaml"), help="Serve config (YAML)"
    )
    p.add_argument("--model", type=url, help="checkpoint path or URL (overrides engine.model)")
    p.add_argument("--api-keys", help="team=key pairs, comma separated")
    p.add_argument("--host", default=None, help="HTTP host (default: the config's)")
    p.add_argument("--port", type=int, default=None, help="HTTP port (default: the config's)")
    p.add_argument(
        "--num-cpus", type=int, default=4, help="logical CPUs of a local Ray cluster (>= 4)"
    )
    p.add_argument("--smoke", action="store_true", help="check every route once, then stop")
    p.add_argument("--out", type=url, help="with --smoke: where manifest.json goes")
    return p.parse_args(argv)


def load_config(args: argparse.Namespace):
    """(app name, ServeConfig, http options) from the YAML and the overrides; raises
    before anything starts when the config or the model is wrong."""
    import yaml

    from agentworld.sim.config import ServeConfig

    with open(args.config, encoding="utf-8") as f:
        data = yaml.safe_load(f)
    app = data["applications"][0]
    raw = app.get("args") or {}
    if args.model:
        raw = {**raw, "engine": {**raw.get("engine", {}), "model": args.model}}
    cfg = ServeConfig.from_dict(raw)
    model = cfg.engine.model.removeprefix("file://")
    if "://" not in model and not os.path.isdir(model):
        sys.exit(
            f"[serve] no checkpoint directory at {model}: run `make demo` first or pass --model PATH"
        )
    http = {**data.get("http_options", {})}
    http.update({k: v for k, v in (("host", args.host), ("port", args.port)) if v is not None})
    return app["name"], cfg, http


def resolve_keys(args: argparse.Namespace, cfg):
    """(config, a key to call with). Keys from --api-keys, or generated for a smoke run
    without keys, go into the config itself so that replicas on an already running
    cluster get them too; keys in the environment variable stay there (a local cluster
    started here inherits it, a remote one has its own, e.g. from a Kubernetes secret)."""
    from agentworld.sim.keys import parse_keys

    keys = args.api_keys
    if not keys and args.smoke and not os.environ.get(cfg.auth.api_keys_env or ""):
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


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    name, cfg, http = load_config(args)
    from agentworld.io import is_complete

    if args.smoke and args.out and is_complete(args.out):
        print(f"[serve] {args.out} is complete; nothing to do (delete it to rerun)")
        return 0
    cfg, key = resolve_keys(args, cfg)
    if args.smoke and key is None:
        sys.exit("[serve] --smoke needs a key it can call with: pass --api-keys")
    from agentworld.cluster import local_ray

    env = {}
    if cfg.auth.api_keys_env and os.environ.get(cfg.auth.api_keys_env):
        env[cfg.auth.api_keys_env] = os.environ[cfg.auth.api_keys_env]
    with local_ray(num_cpus=args.num_cpus, env_vars=env):
        return _serve(args, name, cfg, http, key)


def _serve(args: argparse.Namespace, name: str, cfg, http: dict, key: str | None) -> int:
    from ray import serve

    from agentworld.console import say
    from agentworld.io import write_manifest
    from agentworld.sim.app import build_sim_app

    t0 = time.time()
    serve.start(http_options=http)
    serve.run(build_sim_app(cfg), name=name, route_prefix="/")
    base = f"http://{http.get('host', '127.0.0.1')}:{http.get('port', 8000)}"
    say(f"[serve] ready in {time.time() - t0:.0f}s at {base} (model {cfg.engine.model_id!r})")
    say(
        f"[serve] try: curl -H 'Authorization: Bearer <key>' {base}/v1/sessions -d '{{\"domain\": \"terminal\"}}'"
    )
    if not args.smoke:
        return _block(name)
    from agentworld.sim.smoke import smoke_check

    result = smoke_check(base, key, cfg.engine.model_id)
    latency = ", ".join(f"{k} {v:.0f}" for k, v in result["latency_ms"].items())
    say(f"[serve] smoke passed: every route answered (ms: {latency})")
    if args.out:
        counts = {k: v for k, v in result.items() if isinstance(v, int)}
        counts["latency_ms"] = result["latency_ms"]
        write_manifest(
            args.out, stage="serve", inputs=[cfg.engine.model], config=cfg.redacted(), counts=counts
        )
    serve.delete(name)
    return 0


def _block(name: str) -> int:
    """Serve until SIGTERM or SIGINT, then shut Serve down (Ray stops when the caller's
    ``local_ray`` block ends); exit 0. A shutdown that hangs is cut off after
    STOP_TIMEOUT_S by an alarm, so that a stop always ends the process."""
    from ray import serve

    from agentworld.console import say

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
        serve.shutdown()
    say("[serve] stopped")
    return 0


if __name__ == "__main__":
    sys.exit(run_job("serve", main))
