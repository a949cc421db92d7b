"""Ranking agreement: does the simulator rank agents as reality does, and how much does
it flatter them?

The ladder (``agentworld.agent.ladder``: the oracle, the oracle with 25/50/75% of its
actions replaced by random valid ones, a random agent) runs the same tasks in the real
environments and in the simulator, controlled (the task's facts as control) and
uncontrolled, with the agent stage's environments and checkers. Per domain: each
rung's success in real and in sim; Kendall's tau-b between the rungs' real and
simulated success, with a 95% interval from a bootstrap over the tasks; the inflation
(sim minus real success) of each rung.

``jobs/evaluate.py ranking`` runs it (``run_ranking``); ``rank`` is the part that takes
any environments, so that a test can stand the real environment in for the simulator.
"""

from __future__ import annotations

import json
import os
import queue
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from agentworld.agent.config import AgentConfig
from agentworld.agent.envs import AgentEnv, Describer, RealEnv, RealOracle, SimEnv
from agentworld.agent.ladder import READ_FAMILIES, Rung, env_actions, ladder, play
from agentworld.agent.tasks import Task, read_tasks
from agentworld.agent.tasksets import generate_tasks
from agentworld.agent.world import ConsistentWorld, EngineWorld, ServeWorld
from agentworld.config import ConfigError
from agentworld.console import say
from agentworld.evaluate.config import RankingConfig
from agentworld.io import is_complete, join, read_bytes, write_bytes, write_manifest

ALL = "all"


def kendall_tau_b(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Kendall's tau-b of two paired sequences (ties counted as tau-b counts them);
    None when either is constant (no ordering to agree with)."""
    concordant = discordant = ties_x = ties_y = 0
    n = len(x)
    for i in range(n):
        for j in range(i + 1, n):
            dx, dy = np.sign(x[i] - x[j]), np.sign(y[i] - y[j])
            if dx and dy:
                concordant += dx == dy
                discordant += dx != dy
            elif dx:
                ties_y += 1
            elif dy:
                ties_x += 1
    denom = ((concordant + discordant + ties_x) * (concordant + discordant + ties_y)) ** 0.5
    return None if denom == 0 else float((concordant - discordant) / denom)


def success_matrix(results: list[dict[str, Any]], tasks: list[str], rungs: list[str], mode: str):
    """(tasks, rungs) mean success of each task's episodes (its seeds) in ``mode``."""
    sums = np.zeros((len(tasks), len(rungs)))
    counts = np.zeros((len(tasks), len(rungs)))
    t_at, r_at = {t: i for i, t in enumerate(tasks)}, {r: j for j, r in enumerate(rungs)}
    for r in results:
        if r["mode"] == mode and r["task"] in t_at:
            sums[t_at[r["task"]], r_at[r["rung"]]] += r["success"]
            counts[t_at[r["task"]], r_at[r["rung"]]] += 1
    return sums / np.maximum(counts, 1)


def bootstrap_tau(
    real: np.ndarray, sim: np.ndarray, *, samples: int, seed: int = 0
) -> dict[str, Any]:
    """tau-b of the rungs' mean success, real vs sim, over ``(tasks, rungs)`` matrices,
    and its 95% percentile interval over ``samples`` resamples of the tasks (a resample
    where either side is constant has no tau: counted as ``undefined``)."""
    tau = kendall_tau_b(real.mean(axis=0), sim.mean(axis=0))
    rng = np.random.default_rng(seed)
    taus, undefined = [], 0
    for _ in range(samples):
        pick = rng.integers(0, real.shape[0], size=real.shape[0])
        t = kendall_tau_b(real[pick].mean(axis=0), sim[pick].mean(axis=0))
        if t is None:
            undefined += 1
        else:
            taus.append(t)
    ci = [float(v) for v in np.percentile(taus, [2.5, 97.5])] if taus else None
    return {"tau": tau, "ci95": ci, "undefined": undefined, "samples": samples}


def domain_report(
    results: list[dict[str, Any]], rungs: list[str], sim_modes: Sequence[str], cfg: RankingConfig
) -> dict[str, Any]:
    """One domain's (or all domains') figures from its episode results."""
    tasks = sorted({r["task"] for r in results})
    real = success_matrix(results, tasks, rungs, "real")
    out: dict[str, Any] = {"tasks": len(tasks), "episodes": len(results)}
    out["success"] = {
        mode: dict(zip(rungs, success_matrix(results, tasks, rungs, mode).mean(axis=0).tolist(),
                       strict=True))
        for mode in ("real", *sim_modes)
    }  # fmt: skip
    out["real_vs_ladder"] = kendall_tau_b(real.mean(axis=0), [-i for i in range(len(rungs))])
    out["tau"], out["inflation"] = {}, {}
    for mode in sim_modes:
        sim = success_matrix(results, tasks, rungs, mode)
        out["tau"][mode] = bootstrap_tau(real, sim, samples=cfg.bootstrap, seed=cfg.seed)
        out["inflation"][mode] = {
            r: out["success"][mode][r] - out["success"]["real"][r] for r in rungs
        }
    return out


def ranking_report(
    results: list[dict[str, Any]], rungs: list[Rung], sim_modes: Sequence[str], cfg: RankingConfig
) -> dict[str, Any]:
    """``{"rungs", "sim_modes", "domains": {domain or "all": domain_report}}``."""
    names = [r.name for r in rungs]
    domains = sorted({r["domain"] for r in results})
    by = {d: [r for r in results if r["domain"] == d] for d in domains}
    by[ALL] = results
    return {
        "rungs": {r.name: r.share for r in rungs},
        "sim_modes": list(sim_modes),
        "domains": {d: domain_report(rows, names, sim_modes, cfg) for d, rows in by.items()},
    }


def run_mode(
    tasks: list[Task],
    rungs: list[Rung],
    seeds: int,
    make_env: Callable[[], AgentEnv],
    *,
    concurrency: int,
) -> list[dict[str, Any]]:
    """Every (task, rung, seed) episode in environments from ``make_env`` (at most
    ``concurrency`` of them, reused); one result row each."""
    envs: queue.Queue = queue.Queue()
    made: list[AgentEnv] = []
    for _ in range(concurrency):
        made.append(make_env())
        envs.put(made[-1])
    jobs = [(t, r, s) for t in tasks for r in rungs for s in range(seeds)]

    def one(job: tuple[Task, Rung, int]) -> dict[str, Any]:
        task, rung, seed = job
        env = envs.get()
        try:
            ep = play(env, task, rung, seed)
        finally:
            envs.put(env)
        return {
            "task": task.id, "family": task.family, "domain": task.domain, "rung": rung.name,
            "seed": seed, "success": ep.success, "end_reason": ep.end_reason, "actions": ep.actions, "observations": ep.observations,
        }  # fmt: skip

    try:
        with ThreadPoolExecutor(concurrency) as pool:
            return list(pool.map(one, jobs))
    finally:
        for env in made:
            env.close()


def rank(
    tasks: list[Task],
    envs: dict[str, Callable[[], AgentEnv]],
    cfg: RankingConfig,
    *,
    concurrency: int = 4,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The ladder on ``tasks`` in each environment of ``envs`` (``real`` and the sim
    modes, each a factory); (the report, every episode's result row)."""
    usable = [t for t in tasks if t.family in READ_FAMILIES and env_actions(t)]
    if not usable:
        raise ValueError(f"no task of a family the ladder reads ({', '.join(READ_FAMILIES)})")
    rungs = ladder(cfg.shares)
    results = []
    for mode, make in envs.items():
        rows = run_mode(usable, rungs, cfg.seeds, make, concurrency=concurrency)
        results += [{**r, "mode": mode} for r in rows]
        say(f"[ranking] {mode}: {sum(r['success'] for r in rows)}/{len(rows)} episodes succeeded")
    sim_modes = [m for m in envs if m != "real"]
    return ranking_report(results, rungs, sim_modes, cfg), results


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.0f}"


def _tau_text(t: dict[str, Any]) -> str:
    if t["tau"] is None:
        return "undefined (an ordering is constant)"
    ci = t["ci95"]
    interval = f" [{ci[0]:+.2f}, {ci[1]:+.2f}]" if ci else ""
    return f"{t['tau']:+.2f}{interval}"


def ranking_table(report: dict[str, Any]) -> str:
    """Markdown: per domain, each rung's success in real and in each simulation and its
    inflation, then tau with its interval."""
    modes = report["sim_modes"]
    head = ["domain", "rung", "replaced", "real %", *(f"{m} %" for m in modes)]
    head += [f"inflation {m}" for m in modes]
    lines = ["## Ranking agreement", "", "| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for domain, d in report["domains"].items():
        for rung, share in report["rungs"].items():
            cells = [domain, rung, f"{100 * share:.0f}%", _pct(d["success"]["real"][rung])]
            cells += [_pct(d["success"][m][rung]) for m in modes]
            cells += [f"{100 * d['inflation'][m][rung]:+.0f}" for m in modes]
            lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    for domain, d in report["domains"].items():
        taus = "; ".join(f"{m} {_tau_text(d['tau'][m])}" for m in modes)
        lines.append(f"- {domain} ({d['tasks']} tasks): Kendall tau-b real vs {taus}")
    lines += [
        "",
        "Success in % of each rung's episodes (tasks x seeds); inflation: sim minus real "
        "success, in points. Tau: Kendall's tau-b between the rungs' real and simulated "
        "success [95% interval, bootstrap over the tasks].",
    ]
    return "\n".join(lines) + "\n"


def load_tasks(agent: AgentConfig) -> list[Task]:
    """The agent stage's tasks: its task file, or its generated families (mcp answers
    computed through the real servers)."""
    if agent.tasks.task_file:
        return read_tasks(agent.tasks.task_file)
    oracle = RealOracle() if "mcp" in agent.tasks.families else None
    try:
        return generate_tasks(agent.tasks, oracle)
    finally:
        if oracle is not None:
            oracle.close()


def start_world(world_model: str | None, agent: AgentConfig) -> Any:
    """The simulator the agent stage's sim variants train in."""
    sim = agent.sim
    if sim.backend == "serve":
        world: Any = ServeWorld(sim.serve_url, os.environ.get(sim.api_key_env, ""))
    else:
        if world_model is None:
            raise ConfigError(
                "world-model", "the engine backend needs the world model's checkpoint"
            )
        world = EngineWorld.start(world_model, sim, seed=agent.rl.seed)
    return ConsistentWorld(world) if sim.consistent else world


def run_ranking(world_model: str | None, out: str, agent: AgentConfig, cfg: RankingConfig) -> int:
    """The ladder on the agent stage's tasks in the real environments and the simulator;
    writes ``<out>/ranking/``: report.json, report.md, episodes.jsonl, manifest.json. A
    finished run does nothing on rerun."""
    where = join(out, "ranking")
    if agent.sim.backend == "engine" and world_model is None:
        raise ConfigError("world-model", "the engine backend needs the world model's checkpoint")
    if is_complete(where):
        say(f"[ranking] {where} is complete; nothing to do")
        print(ranking_table(json.loads(read_bytes(join(where, "report.json")))))
        return 0
    tasks = [t for t in load_tasks(agent) if cfg.split == "all" or t.split == "eval"]
    world, describe = start_world(world_model, agent), Describer()
    envs: dict[str, Callable[[], AgentEnv]] = {"real": lambda: RealEnv(agent.limits)}
    for mode in cfg.sim_modes:
        envs[mode] = lambda controlled=(mode == "sim"): SimEnv(
            agent.limits, world=world, describe=describe, cfg=agent.sim, controlled=controlled
        )
    try:
        report, results = rank(tasks, envs, cfg, concurrency=agent.concurrency)
    finally:
        world.close()
        describe.close()
    report["world_model"] = world_model or agent.sim.serve_url
    write_bytes(join(where, "report.json"), json.dumps(report, indent=2).encode())
    write_bytes(join(where, "report.md"), ranking_table(report).encode())
    rows = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in results)
    write_bytes(join(where, "episodes.jsonl"), rows.encode())
    write_manifest(
        where,
        stage="evaluate.ranking",
        inputs={"world_model": world_model, "tasks": [t.id for t in tasks]},
        config={"ranking": cfg, "agent": agent},
        counts={"tasks": report["domains"][ALL]["tasks"], "episodes": len(results)},
        outputs={"report": join(where, "report.json"), "episodes": join(where, "episodes.jsonl")},
    )
    print(ranking_table(report))
    return 0
