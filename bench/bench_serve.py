"""The simulator endpoint under concurrent sessions vs sequential calls, same deployment.

Starts a local Ray cluster (4 logical CPUs) and the simulator app (serve/sim_cpu.yaml's
settings) on a tiny checkpoint built from the example trajectories (or --model), over
loopback only. Then the same work twice: S sessions x T steps
  sequential: one step at a time;
  concurrent: every session in its own thread, all at once.
Prints the throughput ratio (concurrent / sequential steps per second), p50/p99 step
latency of both, and the error count; writes bench/results/serve.json. Goals:
concurrent >= 5x sequential, 0 errors (the exit code is 1 on any error).
Every request has a timeout and the run stops after --deadline-s.

Run:  python bench/bench_serve.py [--sessions 32 --steps 3 --max-tokens 32] [--quick]
"""

from __future__ import annotations

import argparse
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
QUICK = {"steps": 2}


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--sessions", type=int, default=32)
    p.add_argument("--steps", type=int, default=3, help="steps per session")
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument("--model", default=None, help="checkpoint (default: a tiny one built here)")
    p.add_argument(
        "--deadline-s", type=float, default=600.0, help="stop the load phases after this"
    )
    return parse_sized(p, QUICK)


def tiny_model(directory: str) -> str:
    from agentworld.model import build_tiny_checkpoint
    from agentworld.schema.examples import example_trajectories

    texts = []
    for t in example_trajectories(copies=8):
        texts.append(t.environment)
        texts += [x for turn in t.turns for x in (turn.action, turn.observation)]
    return build_tiny_checkpoint(texts, os.path.join(directory, "model"))


def start(model: str) -> str:
    import ray
    import yaml
    from ray import serve

    from agentworld.sim.placement.app import build_app

    args = yaml.safe_load(open(os.path.join(ROOT, "serve", "sim_cpu.yaml")))["applications"][0][
        "args"
    ]
    args["model"] = model
    args["engine"]["max_model_len"] = 1024
    args["auth"] = {"api_keys": {"bench": KEY}, "api_keys_env": None}
    args["limits"].update(rate_per_minute=1e6, burst=100_000, request_timeout_s=120)
    args["store_name"] = "agentworld-sim-bench"
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
    serve.run(build_app(args), name="agentworld-sim-bench", route_prefix="/")
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
    wall = time.perf_counter() - t0
    latencies = sorted(x for lat, _ in results for x in lat)
    return {
        "workers": workers,
        "steps": len(latencies),
        "errors": sum(e for _, e in results),
        "wall_s": round(wall, 3),
        "steps_per_s": round(len(latencies) / wall, 3),
        "p50_s": round(_quantile(latencies, 0.50), 4),
        "p99_s": round(_quantile(latencies, 0.99), 4),
    }


def _quantile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    return values[min(len(values) - 1, int(q * len(values)))]


def main() -> int:
    a = parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.time()
        url = start(a.model or tiny_model(tmp))
        print(
            f"[bench] simulator up in {time.time() - t0:.0f}s at {url} ({threading.active_count()} threads)"
        )
        run_session(url, -1, 2, a.max_tokens, time.monotonic() + 120)  # warm-up
        deadline = time.monotonic() + a.deadline_s
        try:
            sequential = phase(url, a, 1, deadline)
            concurrent = phase(url, a, a.sessions, deadline)
        finally:
            stop()
    ratio = concurrent["steps_per_s"] / sequential["steps_per_s"]
    result = {
        "bench": "serve",
        "quick": a.quick,
        "sessions": a.sessions,
        "steps_per_session": a.steps,
        "max_tokens": a.max_tokens,
        "sequential": sequential,
        "concurrent": concurrent,
        "throughput_ratio": round(ratio, 2),
        "errors": sequential["errors"] + concurrent["errors"],
    }
    print(f"[bench] sequential: {sequential}")
    print(f"[bench] concurrent: {concurrent}")
    print(
        f"[bench] throughput ratio concurrent/sequential: {ratio:.2f}x, errors: {result['errors']}"
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
        goal("errors", result["errors"], "<=", 0, "no failed step under concurrent load"),
    ]
    print(f"[bench] -> {write_result('serve', result, goals)}")
    return 0 if result["errors"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
