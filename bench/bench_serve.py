"""The simulator endpoint under concurrent sessions vs sequential calls, same deployment.

Starts a local Ray cluster (4 logical CPUs) and the simulator app (serve/sim_cpu.yaml's
settings) on a tiny checkpoint built from the example trajectories (or --model), over
loopback only. Then the same work twice: S sessions x T steps
  sequential: one step at a time;
  concurrent: every session in its own thread, all at once.
And the same for a simulated MCP server (a registered environment at /v1/mcp/bench),
through the official ``mcp`` client: M MCP sessions x T ``tools/call``, one at a time,
then all M at once.
Prints the throughput ratios (concurrent / sequential steps or calls per second), p50/p99
latency of each phase, and the error count; writes bench/results/serve.json. Goals:
concurrent >= 5x sequential, MCP tools/call at concurrency M >= 4x one at a time,
0 errors (the exit code is 1 on any error).
Then history per session (--affinity-sessions 16 x --affinity-turns 8 on 2 engine
replicas): the same sessions with ``engine_routing: session`` (every turn to the replica
holding the session's prefix cache) and then ``load`` (Serve's default), time to first
token of each turn as the engine reports it. Goal: late turns' median TTFT with affinity
below the one without (ratio < 1; p25-p75 intervals beside it). ``--affinity-sessions 0``
leaves this part out.
Every request has a timeout and the run stops after --deadline-s.

Run:  python bench/bench_serve.py [--sessions 32 --mcp-sessions 16 --steps 3 --max-tokens 32] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import socket
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from _quick import parse_sized
from _results import goal, write_result

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "2")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

KEY = "sk-bench-000000"
# The start-up (Ray, Serve, vLLM) dominates a run, not the load phases (~20 s at full
# size); so --quick keeps the 32 sessions and answer length the goal is about, fewer steps.
QUICK = {"steps": 2, "affinity_turns": 6}
APP = "agentworld-sim-bench"
# A session's environment long enough that its history fills KV-cache blocks (only whole
# blocks are cached and reused).
DISK = " ".join(f"/srv/data/file{i:03d}.log" for i in range(12))


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--sessions", type=int, default=32)
    p.add_argument(
        "--mcp-sessions", type=int, default=16, help="MCP client sessions at once (MCP phase)"
    )
    p.add_argument("--steps", type=int, default=3, help="steps per session")
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument("--model", default=None, help="checkpoint (default: a tiny one built here)")
    p.add_argument(
        "--deadline-s", type=float, default=600.0, help="stop the load phases after this"
    )
    p.add_argument(
        "--affinity-sessions", type=int, default=16, help="sessions at once (affinity part)"
    )
    p.add_argument("--affinity-turns", type=int, default=8, help="turns per session (affinity)")
    return parse_sized(p, QUICK)


def tiny_model(directory: str) -> str:
    from agentworld.model import build_tiny_checkpoint
    from agentworld.schema.examples import example_trajectories

    texts = []
    for t in example_trajectories(copies=8):
        texts.append(t.environment)
        texts += [x for turn in t.turns for x in (turn.action, turn.observation)]
    return build_tiny_checkpoint(texts, os.path.join(directory, "model"))


def app_args(model: str, *, replicas: int = 1, routing: str = "session") -> dict:
    import yaml

    args = yaml.safe_load(open(os.path.join(ROOT, "serve", "sim_cpu.yaml")))["applications"][0][
        "args"
    ]
    args["model"] = model
    args["engine"].update(max_model_len=1024, replicas=replicas)
    args["engine_routing"] = routing
    args["auth"] = {"api_keys": {"bench": KEY}, "api_keys_env": None}
    args["limits"].update(rate_per_minute=1e6, burst=100_000, request_timeout_s=120)
    args["store_name"] = "agentworld-sim-bench"
    return args


def redeploy(args: dict) -> None:
    """Replace the app (a new engine deployment) with one built from ``args``."""
    from ray import serve

    from agentworld.sim.placement.app import build_app

    serve.delete(APP)
    serve.run(build_app(args), name=APP, route_prefix="/")


def start(model: str) -> str:
    import ray
    from ray import serve

    from agentworld.sim.placement.app import build_app

    args = app_args(model)
    ray.init(
        num_cpus=4,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": os.path.join(ROOT, "platform")}},
    )
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    serve.run(build_app(args), name=APP, route_prefix="/")
    return f"http://127.0.0.1:{port}"


def stop() -> None:
    import ray
    from ray import serve

    serve.shutdown()
    ray.shutdown()


def run_session(
    url: str, index: int, steps: int, max_tokens: int, deadline: float
) -> tuple[list[float], int]:
    """Latencies of one session's steps and its error count."""
    from agentworld.sim import SimAPIError, SimEnv

    latencies, errors = [], 0
    env = SimEnv(
        url,
        KEY,
        "terminal",
        environment=f"bash 5.2 in /home/user{index}",
        sampling={"max_tokens": max_tokens},
        timeout_s=120,
    )
    try:
        env.reset()
        for step in range(steps):
            if time.monotonic() > deadline:
                errors += steps - step
                break
            t = time.perf_counter()
            try:
                env.step(f"echo session-{index}-step-{step}")
                latencies.append(time.perf_counter() - t)
            except SimAPIError as e:
                print(f"[bench] session {index} step {step}: {e}", file=sys.stderr)
                errors += 1
    finally:
        env.close()
    return latencies, errors


def phase(url: str, a: argparse.Namespace, workers: int, deadline: float) -> dict:
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = list(
            pool.map(
                lambda i: run_session(url, i, a.steps, a.max_tokens, deadline), range(a.sessions)
            )
        )
    return _phase_figures(results, workers, time.perf_counter() - t0, "steps")


MCP_ENVIRONMENT = {
    "domain": "mcp",
    "environment": "An MCP server with one tool, echo, that answers its text.",
    "tools": [{"name": "echo", "inputSchema": {"type": "object"}}],
}


async def mcp_session(url: str, index: int, calls: int, max_tokens: int, deadline: float):
    """Latencies of one MCP client session's tools/call and its error count."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    # The client logs every HTTP request and reconnect at INFO: hundreds of lines a phase.
    for name in ("httpx2", "mcp.client.streamable_http"):
        logging.getLogger(name).setLevel(logging.WARNING)
    latencies, errors = [], 0
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {KEY}"}, timeout=120)
    try:
        async with Client(streamable_http_client(f"{url}/v1/mcp/bench", http_client=http)) as c:
            for call in range(calls):
                if time.monotonic() > deadline:
                    return latencies, errors + calls - call
                t = time.perf_counter()
                await c.call_tool("echo", {"text": f"session-{index}-call-{call}"})
                latencies.append(time.perf_counter() - t)
    except Exception as e:  # noqa: BLE001 - counted and named, the run goes on
        print(f"[bench] MCP session {index}: {type(e).__name__}: {e}", file=sys.stderr)
        errors += calls - len(latencies)
    return latencies, errors


def mcp_phase(url: str, a: argparse.Namespace, workers: int, deadline: float) -> dict:
    """``a.mcp_sessions`` MCP sessions of ``a.steps`` calls, ``workers`` at a time."""

    async def run() -> list[tuple[list[float], int]]:
        gate = asyncio.Semaphore(workers)

        async def one(i: int):
            async with gate:
                return await mcp_session(url, i, a.steps, a.max_tokens, deadline)

        return await asyncio.gather(*(one(i) for i in range(a.mcp_sessions)))

    t0 = time.perf_counter()
    results = asyncio.run(run())
    return _phase_figures(results, workers, time.perf_counter() - t0, "calls")


def _phase_figures(results: list, workers: int, wall: float, unit: str) -> dict:
    latencies = sorted(x for lat, _ in results for x in lat)
    return {
        "workers": workers,
        unit: len(latencies),
        "errors": sum(e for _, e in results),
        "wall_s": round(wall, 3),
        f"{unit}_per_s": round(len(latencies) / wall, 3),
        "p50_s": round(_quantile(latencies, 0.50), 4),
        "p99_s": round(_quantile(latencies, 0.99), 4),
    }


def history_session(url: str, index: int, a: argparse.Namespace, deadline: float) -> list[dict]:
    """One session's turns: what the engine reported of each (None: the step failed)."""
    from agentworld.sim import SimAPIError, SimEnv

    env = SimEnv(
        url,
        KEY,
        "terminal",
        environment=f"bash 5.2 on host node-{index}; the disk holds {DISK}",
        sampling={"max_tokens": a.max_tokens},
        timeout_s=120,
    )
    rows: list[dict] = []
    try:
        env.reset()
        for turn in range(a.affinity_turns):
            if time.monotonic() > deadline:
                rows.append(None)
                continue
            try:
                rows.append(env.step(f"tail -n 5 /srv/data/file{turn:03d}.log")[4]["engine"])
            except SimAPIError as e:
                print(f"[bench] history session {index} turn {turn}: {e}", file=sys.stderr)
                rows.append(None)
    finally:
        env.close()
    return rows


def history_phase(url: str, a: argparse.Namespace, deadline: float) -> dict:
    """``a.affinity_sessions`` sessions at once, each ``a.affinity_turns`` turns: per turn,
    the engine's time to first token and the share of the prompt it found cached."""
    n = a.affinity_sessions
    with ThreadPoolExecutor(max_workers=n) as pool:
        sessions = list(pool.map(lambda i: history_session(url, i, a, deadline), range(n)))
    by_turn = []
    for k in range(a.affinity_turns):
        rows = [s[k] for s in sessions if s[k] is not None]
        ttft = sorted(r["ttft_ms"] for r in rows if r["ttft_ms"] is not None)
        by_turn.append(
            {
                "turn": k + 1,
                "ttft_ms_p25": round(_quantile(ttft, 0.25), 2),
                "ttft_ms_p50": round(_quantile(ttft, 0.50), 2),
                "ttft_ms_p75": round(_quantile(ttft, 0.75), 2),
                "prompt_tokens": round(sum(r["prompt_tokens"] for r in rows) / max(len(rows), 1)),
                "cached_share": round(
                    sum(r["cached_tokens"] / r["prompt_tokens"] for r in rows) / max(len(rows), 1),
                    3,
                ),
            }
        )
    late = sorted(
        r["ttft_ms"]
        for s in sessions
        for r in s[a.affinity_turns // 2 :]
        if r is not None and r["ttft_ms"] is not None
    )
    return {
        "by_turn": by_turn,
        "late_turns_ttft_ms": [round(_quantile(late, q), 2) for q in (0.25, 0.5, 0.75)],
        "errors": sum(r is None for s in sessions for r in s),
    }


def affinity_part(model: str, url: str, a: argparse.Namespace) -> dict:
    """The history phase on 2 engine replicas, routed by session and then by load."""
    deadline = time.monotonic() + a.deadline_s
    out = {}
    for routing in ("session", "load"):
        redeploy(app_args(model, replicas=2, routing=routing))
        history_session(url, -1, argparse.Namespace(**{**vars(a), "affinity_turns": 2}), deadline)
        out[routing] = history_phase(url, a, deadline)
        print(f"[bench] history, routing {routing}: {out[routing]}")
    with_, without = out["session"]["late_turns_ttft_ms"][1], out["load"]["late_turns_ttft_ms"][1]
    out["late_ttft_ratio"] = round(with_ / without, 3) if without else float("nan")
    return out


def _quantile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    return values[min(len(values) - 1, int(q * len(values)))]


def main() -> int:
    from agentworld.sim import SimClient

    a = parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.time()
        model = a.model or tiny_model(tmp)
        url = start(model)
        print(
            f"[bench] simulator up in {time.time() - t0:.0f}s at {url} ({threading.active_count()} threads)"
        )
        run_session(url, -1, 2, a.max_tokens, time.monotonic() + 120)  # warm-up
        SimClient(url, KEY).request("PUT", "/v1/environments/bench", MCP_ENVIRONMENT)
        asyncio.run(mcp_session(url, -1, 2, a.max_tokens, time.monotonic() + 120))  # warm-up
        deadline = time.monotonic() + a.deadline_s
        try:
            sequential = phase(url, a, 1, deadline)
            concurrent = phase(url, a, a.sessions, deadline)
            mcp_sequential = mcp_phase(url, a, 1, deadline)
            mcp_concurrent = mcp_phase(url, a, a.mcp_sessions, deadline)
            affinity = affinity_part(model, url, a) if a.affinity_sessions else None
        finally:
            stop()
    ratio = concurrent["steps_per_s"] / sequential["steps_per_s"]
    mcp_ratio = mcp_concurrent["calls_per_s"] / mcp_sequential["calls_per_s"]
    result = {
        "bench": "serve",
        "quick": a.quick,
        "sessions": a.sessions,
        "steps_per_session": a.steps,
        "max_tokens": a.max_tokens,
        "sequential": sequential,
        "concurrent": concurrent,
        "throughput_ratio": round(ratio, 2),
        "mcp_sessions": a.mcp_sessions,
        "mcp_sequential": mcp_sequential,
        "mcp_concurrent": mcp_concurrent,
        "mcp_throughput_ratio": round(mcp_ratio, 2),
        "affinity": affinity,
        "errors": sum(p["errors"] for p in (sequential, concurrent, mcp_sequential, mcp_concurrent))
        + sum(affinity[r]["errors"] for r in ("session", "load") if affinity),
    }
    for name in ("sequential", "concurrent", "mcp_sequential", "mcp_concurrent"):
        print(f"[bench] {name}: {result[name]}")
    print(
        f"[bench] throughput ratio concurrent/sequential: {ratio:.2f}x, MCP tools/call at "
        f"{a.mcp_sessions} at once vs one at a time: {mcp_ratio:.2f}x, errors: {result['errors']}"
    )
    goals = [
        goal(
            "concurrent_vs_sequential",
            ratio,
            ">=",
            5.0,
            f"the simulator serves many sessions at once: steps/s of {a.sessions} concurrent"
            " sessions vs one step at a time",
        ),
        goal(
            "mcp_concurrent_vs_sequential",
            mcp_ratio,
            ">=",
            4.0,
            f"a simulated MCP server serves many agents at once: tools/call per second of "
            f"{a.mcp_sessions} concurrent MCP client sessions vs one at a time",
        ),
        goal("errors", result["errors"], "<=", 0, "no failed step or call under concurrent load"),
    ]
    if affinity:
        goals.append(
            goal(
                "late_turn_ttft_affinity_vs_load",
                affinity["late_ttft_ratio"],
                "<=",
                1.0,
                f"a session's history stays cached: median time to first token of turns "
                f"{a.affinity_turns // 2 + 1}-{a.affinity_turns}, {a.affinity_sessions} sessions "
                "on 2 engine replicas, routed by session vs by load",
            )
        )
    print(f"[bench] -> {write_result('serve', result, goals)}")
    return 0 if result["errors"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
