"""Bench: environment steps per second, simulated against real, at one concurrency, per
task family. The oracle solutions' environment actions are replayed in N real
environments at once (the collectors' sandboxes; web: Datasette or the helpdesk in real
Chromium, one browser per environment) and in N simulated ones (``SimEnv``, controlled)
on one simulator engine (the world model on vLLM), with the agent stage's own measure
(``agentworld.agent.measures.steps_per_second``: a wave of concurrent episodes counts its
slowest episode's stepping time, resets excluded).

Web is the family where a real step costs a browser; terminal (a shell) and search
(BM25) are the cheap ones. Goal: on web, the simulator steps at least as fast as real
Chromium at concurrency 16 (sim / real >= 1).

Run:  python bench/bench_agent_steps.py --world-model runs/demo/sft/hf [--quick]
      (writes bench/results/agent_steps.json)
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from _quick import parse_sized
from _results import goal, write_result

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
QUICK = {"families": "terminal,web", "steps": 32, "concurrency": 8}


def measure(family: str, world, tokenizer_count, a: argparse.Namespace) -> dict:
    """Steps/s of ``family`` in real and simulated environments, ``a.concurrency`` each."""
    from agentworld.agent.config import LimitsConfig, SimConfig, TasksConfig
    from agentworld.agent.envs import Describer, RealEnv, SimEnv
    from agentworld.agent.measures import steps_per_second
    from agentworld.agent.tasksets import generate_tasks

    tasks = generate_tasks(TasksConfig(families=(family,), per_family=4 * a.concurrency))
    train = [t for t in tasks if t.split == "train"]
    limits, n = LimitsConfig(max_turns=64), a.concurrency
    describe = Describer()
    out = {}
    with ThreadPoolExecutor(n) as pool:
        real = [RealEnv(limits, tokenizer_count) for _ in range(n)]
        try:
            out["real"] = steps_per_second(train, real, steps=a.steps, pool=pool)
        finally:
            list(pool.map(lambda e: e.close(), real))
        sim = [
            SimEnv(limits, tokenizer_count, world=world, describe=describe, cfg=SimConfig())
            for _ in range(n)
        ]
        out["sim"] = steps_per_second(train, sim, steps=a.steps, pool=pool)
    describe.close()
    out["sim_over_real"] = out["sim"]["steps_per_s"] / max(out["real"]["steps_per_s"], 1e-9)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--world-model", default=str(ROOT / "runs/demo/sft/hf"))
    p.add_argument("--families", default="terminal,search,web")
    p.add_argument("--steps", type=int, default=64, help="environment steps per mode")
    p.add_argument("--concurrency", type=int, default=16)
    a = parse_sized(p, QUICK, argv)
    if not Path(a.world_model, "config.json").exists():
        sys.exit(f"--world-model {a.world_model} holds no checkpoint: run `make demo` first")
    from agentworld.agent.config import SimConfig
    from agentworld.agent.world import ConsistentWorld, EngineWorld
    from agentworld.model import load_tokenizer

    tok = load_tokenizer(a.world_model)
    count = lambda text: len(tok(text, add_special_tokens=False)["input_ids"])  # noqa: E731
    t0 = time.perf_counter()
    world = ConsistentWorld(EngineWorld.start(a.world_model, SimConfig()))
    try:
        families = {f: measure(f, world, count, a) for f in a.families.split(",")}
    finally:
        world.close()
    for f, m in families.items():
        print(
            f"{f}: real {m['real']['steps_per_s']:.1f} steps/s, sim {m['sim']['steps_per_s']:.1f} "
            f"(sim/real {m['sim_over_real']:.2f}x) at concurrency {a.concurrency}"
        )
    result = {
        "families": families,
        "concurrency": a.concurrency,
        "steps": a.steps,
        "world_model": a.world_model,
        "seconds": time.perf_counter() - t0,
        "quick": a.quick,
    }
    goals = []
    if "web" in families:
        ratio = families["web"]["sim_over_real"]
        goals.append(goal("web_sim_over_real_steps", ratio, ">=", 1.0, "sim vs real steps/s, web"))
    path = write_result("agent_steps", result, goals=goals)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "platform"))
    sys.exit(main())
