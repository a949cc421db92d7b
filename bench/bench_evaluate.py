"""Evaluation throughput: items/s of ``infer`` against an OpenAI-compatible endpoint with
concurrency vs one request at a time, against the same served model in one run.

The served model is vLLM's OpenAI API server (CPU build) on a tiny Qwen3-MoE built here;
the items are AgentWorldBench rows of generated terminal trajectories. Both passes run
the real ``agentworld.evaluate.infer.infer_endpoint`` (same client, same retries).

Run:  python bench/bench_evaluate.py [--items 64] [--concurrency 16] [--quick]
Writes bench/results/evaluate.json. Goal: concurrency >= 3x the items/s of one at a time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _quick import parse_sized
from _results import goal, write_result

ROOT = Path(__file__).resolve().parents[1]
# Fewer and shorter answers; concurrency unchanged, so the ratio compares the same thing.
QUICK = {"items": 32, "max_tokens": 16}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(model_dir: str, port: int, log: Path) -> subprocess.Popen:
    cmd = [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        model_dir,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--dtype",
        "float32",
        "--enforce-eager",
        "--max-model-len",
        "1024",
        "--gpu-memory-utilization",
        "0.2",
        "--seed",
        "0",
    ]
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1")}
    return subprocess.Popen(cmd, stdout=log.open("wb"), stderr=subprocess.STDOUT, env=env)


def wait_ready(base_url: str, proc: subprocess.Popen, limit_s: float = 600) -> None:
    import urllib.request

    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"vLLM server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(f"{base_url}/models", timeout=2):
                return
        except OSError:
            time.sleep(1)
    raise TimeoutError("vLLM server did not become ready")


def build_items(n: int):
    from agentworld.evaluate.items import items_from_row
    from agentworld.schema import trajectory_to_rows
    from agentworld.schema.examples import sample_trajectories

    rows = [r for t in sample_trajectories(n, seed=1) for r in trajectory_to_rows(t)]
    return [items_from_row(r) for r in rows[:n]]


def items_per_s(items, base_url: str, concurrency: int, max_tokens: int) -> float:
    from agentworld.evaluate.config import InferConfig
    from agentworld.evaluate.infer import infer_endpoint
    from agentworld.scoring.config import EndpointConfig, SamplingConfig

    cfg = InferConfig(
        backend="endpoint",
        endpoint=EndpointConfig(base_url=base_url, concurrency=concurrency, timeout_s=300),
        sampling=SamplingConfig(max_tokens=max_tokens, temperature=0.0),
    )
    done: list[dict] = []
    t0 = time.perf_counter()
    failures = asyncio.run(infer_endpoint(items, cfg, done.append))
    elapsed = time.perf_counter() - t0
    if failures or len(done) != len(items):
        raise RuntimeError(f"{len(failures)} requests failed: {failures[:1]}")
    return len(items) / elapsed


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--items", type=int, default=64)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--max-tokens", type=int, default=32)
    args = parse_sized(p, QUICK)
    from agentworld.model import build_tiny_checkpoint
    from agentworld.schema.examples import sample_trajectories

    with tempfile.TemporaryDirectory() as tmp:
        texts = [
            x
            for t in sample_trajectories(40)
            for turn in t.turns
            for x in (turn.action, turn.observation)
        ]
        model_dir = build_tiny_checkpoint(texts, f"{tmp}/model")
        port = free_port()
        base_url = f"http://127.0.0.1:{port}/v1"
        proc = start_server(model_dir, port, Path(tmp) / "server.log")
        try:
            wait_ready(base_url, proc)
            items = build_items(args.items)
            items_per_s(items[:8], base_url, 4, args.max_tokens)  # warm-up
            sequential = items_per_s(items, base_url, 1, args.max_tokens)
            concurrent = items_per_s(items, base_url, args.concurrency, args.max_tokens)
        finally:
            proc.terminate()
            proc.wait(timeout=60)
    result = {
        "benchmark": "evaluate.infer against an OpenAI-compatible endpoint (vLLM CPU, tiny MoE)",
        "quick": args.quick,
        "items": len(items),
        "max_tokens": args.max_tokens,
        "concurrency": args.concurrency,
        "sequential_items_per_s": round(sequential, 2),
        "concurrent_items_per_s": round(concurrent, 2),
        "speedup": round(concurrent / sequential, 2),
    }
    goals = [
        goal(
            "concurrent_vs_sequential",
            concurrent / sequential,
            ">=",
            3.0,
            f"evaluate keeps an endpoint busy: infer items/s at concurrency {args.concurrency}"
            " vs one request at a time",
        )
    ]
    out = write_result("evaluate", result, goals)
    print(
        f"infer: {sequential:.2f} items/s one at a time, {concurrent:.2f} items/s with "
        f"concurrency {args.concurrency}: {result['speedup']}x  -> {out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
