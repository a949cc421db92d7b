"""The simulator endpoint under concurrent sessions vs sequential calls, same deployment.

Starts a local Ray cluster (4 logical CPUs) and the simulator app (serve/sim_cpu.yaml's
settings) on a tiny checkpoint built from the example trajectories (or --model), over
loopback only. Then the same work at several concurrencies: S sessions x T steps
  sequential: one step at a time (the first level's sessions);
  concurrent: for each level in --sessions (16 and 64), that many sessions at once, each
  in its own thread.
Each phase gives steps/s, p50/p99 latency, errors, and where a step's time goes: the
engine's own report of each step (waiting in its queue, to the first token, decoding)
and the rest of the client's latency (HTTP, Serve's routing, the ingress, the session
store), so that the bound at the highest concurrency is named.
And the same for a simulated MCP server (a registered environment at /v1/mcp/bench),
through the official ``mcp`` client: M MCP sessions x T ``tools/call``, one at a time,
then all M at once.
Goals (bench/results/serve.json): 16 concurrent sessions >= 8x one step at a time, their
p99 latency <= 3x their p50, MCP tools/call at concurrency M >= 4x one at a time, 0
errors (the exit code is 1 on any error).
Then history per session (--affinity-sessions 16 x --affinity-turns 8 on 2 engine
replicas serving a model of --affinity-shape's size, medium_cpu by default): the same
sessions with ``engine_routing: session`` (every turn to the replica holding the
session's prefix cache) and then ``round_robin`` (the replicas in turn; Serve's default
``load`` kept 86-98% of a session's turns on one replica here, so it is no baseline
without affinity), time to first token of each turn as the engine reports it, and the
share of turns the replica of the session's turn before served. Goal: late turns'
median TTFT with affinity below the one without (ratio < 1; p25-p75 intervals beside
it). ``--affinity-sessions 0`` leaves this part out.
Every request has a timeout and the run stops after --deadline-s.

Run:  python bench/bench_serve.py [--sessions 16,64 --mcp-sessions 16 --steps 3 --max-tokens 32] [--quick]
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
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

from _quick import parse_sized
from _results import goal, write_result

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "2")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

KEY = "sk-bench-000000"
# The start-up (Ray, Serve, vLLM) dominates a run, not the load phases (~20 s at full
# size); so --quick keeps the session counts and answer length the goals are about, fewer
# steps.
QUICK = {"steps": 2, "affinity_turns": 6}
APP = "agentworld-sim-bench"
# A session's environment long enough that its history fills KV-cache blocks (only whole
# blocks are cached and reused).
DISK = " ".join(f"/srv/data/file{i:03d}.log" for i in range(12))


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--sessions",
        type=_levels,
        default="16,64",
        help="concurrent sessions, one phase per level (comma-separated); the goals are "
        "about the first",
    )
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
    p.add_argument(
        "--affinity-shape",
        default="medium_cpu",
        help="the recipe whose model shape the affinity part serves (on the tiny model a "
        "whole history's prefill takes about as long as scheduling jitter, so a cached "
        "prefix cannot show in the time to first token); 'tiny': the load phases' model",
    )
    return parse_sized(p, QUICK)


def _levels(text: str) -> list[int]:
    levels = [int(x) for x in text.split(",") if x.strip()]
    if not levels or min(levels) < 1:
        raise argparse.ArgumentTypeError(
            f"want positive session counts such as 16,64, got {text!r}"
        )
    return levels


def tiny_model(directory: str, shape: str | None = None) -> str:
    """A checkpoint with a tokenizer trained on the example trajectories: the debug_cpu
    model's shape, or the named recipe's."""
    from agentworld.model import build_tiny_checkpoint
    from agentworld.recipes import get_recipe
    from agentworld.schema.examples import example_trajectories

    texts = []
    for t in example_trajectories(copies=8):
        texts.append(t.environment)
        texts += [x for turn in t.turns for x in (turn.action, turn.observation)]
    cfg = get_recipe(shape).model if shape else None
    return build_tiny_checkpoint(texts, os.path.join(directory, f"model-{shape or 'tiny'}"), cfg)


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
) -> tuple[list[tuple[float, dict | None]], int]:
    """One session's steps, each its latency and the engine's report of it, and the
    session's error count."""
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
                info = env.step(f"echo session-{index}-step-{step}")[4]
                latencies.append((time.perf_counter() - t, info.get("engine")))
            except SimAPIError as e:
                print(f"[bench] session {index} step {step}: {e}", file=sys.stderr)
                errors += 1
    finally:
        env.close()
    return latencies, errors


def phase(url: str, a: argparse.Namespace, workers: int, sessions: int, deadline: float) -> dict:
    """``sessions`` sessions of ``a.steps`` steps, ``workers`` at a time."""
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = list(
            pool.map(
                lambda i: run_session(url, i, a.steps, a.max_tokens, deadline), range(sessions)
            )
        )
    wall = time.perf_counter() - t0
    steps = [x for lat, _ in results for x in lat]
    figures = _phase_figures(
        [([t for t, _ in lat], e) for lat, e in results], workers, wall, "steps"
    )
    figures["sessions"] = sessions
    figures["time_ms_p50"] = where_time_goes(steps)
    return figures


ENGINE_PARTS = ("queue_ms", "ttft_ms", "generation_ms")


def where_time_goes(steps: list[tuple[float, dict | None]]) -> dict:
    """Medians over the steps of the client's latency, of each part of the engine's time
    (waiting in its queue, to the first token once scheduled, decoding), and of the rest
    of the latency: HTTP, Serve's routing, the ingress and the session store."""
    rows = [
        (t * 1000, e) for t, e in steps if e and all(e.get(k) is not None for k in ENGINE_PARTS)
    ]
    if not rows:
        return {}
    out = {"latency": _median([t for t, _ in rows])}
    for k in ENGINE_PARTS:
        out[k.removesuffix("_ms")] = _median([e[k] for _, e in rows])
    out["outside_engine"] = _median([t - sum(e[k] for k in ENGINE_PARTS) for t, e in rows])
    return {k: round(v, 1) for k, v in out.items()}


def bound(parts: dict) -> str:
    """The part of a step's median time that is largest (its name)."""
    named = {k: v for k, v in parts.items() if k != "latency"}
    return max(named, key=named.get) if named else "unknown"


def _median(values: list[float]) -> float:
    return _quantile(sorted(values), 0.5)


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
        print(f"[bench] MCP session {index}: {_leaves(e)}", file=sys.stderr)
        errors += calls - len(latencies)
    return latencies, errors


def _leaves(e: BaseException) -> str:
    """An exception named by what was raised: a task group's own errors, not the group."""
    if isinstance(e, BaseExceptionGroup):
        return "; ".join(_leaves(x) for x in e.exceptions)
    return f"{type(e).__name__}: {e}"


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
    # Turns after the first that the replica of the session's turn before served: 1.0
    # routed by session; about 1 / replicas in turn.
    pairs = [(s[k - 1], s[k]) for s in sessions for k in range(1, len(s))]
    kept = [
        now["replica"] == was["replica"] for was, now in pairs if was and now and was.get("replica")
    ]
    return {
        "by_turn": by_turn,
        "late_turns_ttft_ms": [round(_quantile(late, q), 2) for q in (0.25, 0.5, 0.75)],
        "same_replica_share": round(sum(kept) / len(kept), 3) if kept else None,
        "turns_by_replica": sorted(
            Counter(r["replica"] for s in sessions for r in s if r).values(), reverse=True
        ),
        "errors": sum(r is None for s in sessions for r in s),
    }


ROUTINGS = ("session", "round_robin")
"""The affinity part's routing and its baseline, in the order they run."""


def affinity_part(model: str, url: str, a: argparse.Namespace) -> dict:
    """The history phase on 2 engine replicas, routed by session and then in turn."""
    deadline = time.monotonic() + a.deadline_s
    out = {}
    for routing in ROUTINGS:
        redeploy(app_args(model, replicas=2, routing=routing))
        history_session(url, -1, argparse.Namespace(**{**vars(a), "affinity_turns": 2}), deadline)
        out[routing] = history_phase(url, a, deadline)
        print(f"[bench] history, routing {routing}: {out[routing]}")
    with_, without = (out[r]["late_turns_ttft_ms"][1] for r in ROUTINGS)
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
            sequential = phase(url, a, 1, a.sessions[0], deadline)
            concurrent = {n: phase(url, a, n, n, deadline) for n in a.sessions}
            mcp_sequential = mcp_phase(url, a, 1, deadline)
            mcp_concurrent = mcp_phase(url, a, a.mcp_sessions, deadline)
            affinity = None
            if a.affinity_sessions:
                tiny = a.affinity_shape == "tiny"
                affinity = affinity_part(
                    model if tiny else tiny_model(tmp, a.affinity_shape), url, a
                )
        finally:
            stop()
    first = concurrent[a.sessions[0]]
    ratios = {
        n: round(p["steps_per_s"] / sequential["steps_per_s"], 2) for n, p in concurrent.items()
    }
    mcp_ratio = mcp_concurrent["calls_per_s"] / mcp_sequential["calls_per_s"]
    top = concurrent[a.sessions[-1]]
    result = {
        "bench": "serve",
        "quick": a.quick,
        "sessions": a.sessions,
        "steps_per_session": a.steps,
        "max_tokens": a.max_tokens,
        "sequential": sequential,
        "concurrent": {str(n): p for n, p in concurrent.items()},
        "throughput_ratio": {str(n): r for n, r in ratios.items()},
        "bound": {"sessions": a.sessions[-1], "part": bound(top["time_ms_p50"])},
        "mcp_sessions": a.mcp_sessions,
        "mcp_sequential": mcp_sequential,
        "mcp_concurrent": mcp_concurrent,
        "mcp_throughput_ratio": round(mcp_ratio, 2),
        "affinity_shape": a.affinity_shape,
        "affinity": affinity,
        "errors": sum(p["errors"] for p in (sequential, mcp_sequential, mcp_concurrent))
        + sum(p["errors"] for p in concurrent.values())
        + sum(affinity[r]["errors"] for r in ROUTINGS if affinity),
    }
    print(f"[bench] sequential: {sequential}")
    for n, p in concurrent.items():
        print(f"[bench] {n} at once: {p}; {ratios[n]:.2f}x one at a time")
    for name in ("mcp_sequential", "mcp_concurrent"):
        print(f"[bench] {name}: {result[name]}")
    print(
        f"[bench] at {a.sessions[-1]} sessions a step's median time goes mostly to "
        f"{result['bound']['part']} ({top['time_ms_p50']}); MCP tools/call at "
        f"{a.mcp_sessions} at once vs one at a time: {mcp_ratio:.2f}x, errors: {result['errors']}"
    )
    n0 = a.sessions[0]
    goals = [
        goal(
            "concurrent_vs_sequential",
            ratios[n0],
            ">=",
            8.0,
            f"the simulator serves many sessions at once: steps/s of {n0} concurrent"
            " sessions vs one step at a time",
        ),
        goal(
            "concurrent_p99_vs_p50",
            first["p99_s"] / first["p50_s"],
            "<=",
            3.0,
            f"no session waits far longer than the rest: p99 over p50 step latency of {n0} "
            "concurrent sessions",
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
                "late_turn_ttft_affinity_vs_round_robin",
                affinity["late_ttft_ratio"],
                "<=",
                1.0,
                f"a session's history stays cached: median time to first token of turns "
                f"{a.affinity_turns // 2 + 1}-{a.affinity_turns}, {a.affinity_sessions} sessions "
                "on 2 engine replicas, routed by session vs in turn",
            )
        )
    print(f"[bench] -> {write_result('serve', result, goals)}")
    return 0 if result["errors"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
