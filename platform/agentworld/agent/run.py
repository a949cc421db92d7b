"""The agent stage's driver: ``run(job) -> manifest``.

``train``: tasks (generated with a held-out split, or a task file) -> demonstrations
(collected trajectories and oracle episodes of the training tasks, recorded in the real
environments) -> for each agent variant: the demonstration fit, then multi-turn GRPO in
its environment (controlled sim, uncontrolled sim, real) -> every agent evaluated on
the held-out tasks in the REAL environment -> injection probes, WM2Real, steps/s -> the
report (``report.json``, ``report.md``, PNGs) and ``manifest.json``. Warm variants start
from the world-model checkpoint; ``cold_sim`` from a checkpoint of the same
architecture that never saw world-model training.

``evaluate``: given agent checkpoints, the same evaluation, probes and steps/s.
A finished run does nothing on rerun; an unfinished one is redone.
"""

from __future__ import annotations

import json
import os
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from agentworld.agent.demos import (
    action_nll,
    episode_transcript,
    fit_demonstrations,
    trajectory_transcripts,
)
from agentworld.agent.envs import Describer, RealEnv, RealOracle, SimEnv
from agentworld.agent.episodes import EnvPool, Slot, replay, run_episodes
from agentworld.agent.grpo import grpo_step
from agentworld.agent.intervals import agent_intervals, comparisons
from agentworld.agent.job import AgentJob
from agentworld.agent.measures import steps_per_second, summarize, wm2real
from agentworld.agent.placement import start_workers
from agentworld.agent.policy import EnginePolicy, Renderer, WorkersPolicy
from agentworld.agent.probes import run_probes
from agentworld.agent.report import write_report
from agentworld.agent.tasks import read_tasks, write_tasks
from agentworld.agent.tasksets import generate_tasks
from agentworld.agent.webtasks import oracle_action
from agentworld.agent.world import ConsistentWorld, EngineWorld, ServeWorld
from agentworld.collect.web.env import find_browser
from agentworld.console import say
from agentworld.io import (
    is_complete,
    join,
    read_manifest,
    read_records,
    write_bytes,
    write_manifest,
)
from agentworld.model import load_tokenizer, local_model_dir, save_pretrained
from agentworld.model.card import card_data, write_card


def run(job: AgentJob, *, world: Any = None) -> dict[str, Any]:
    """Run ``job``; ``world`` (an EngineWorld/ServeWorld, optionally consistent) is used
    instead of starting one (tests share an engine)."""

    if is_complete(job.out):
        say(f"[agent] {job.out} is complete; nothing to do")
        return read_manifest(job.out)
    ctx = Context(job, world)
    try:
        write_tasks(join(job.out, "tasks.jsonl"), ctx.tasks)
        body = _train(ctx) if job.command == "train" else _evaluate(ctx)
        body.update(shared_measures(ctx))
        _jsonl(join(job.out, "metrics.jsonl"), ctx.metrics)
        prompts = ctx.world.prompts if ctx.world_started else []
        _jsonl(join(job.out, "sim_prompts.jsonl"), [{"messages": m} for m in prompts])
    finally:
        ctx.close()
    body["wm2real"] = {k: v["wm2real"] for k, v in body["agents"].items() if "wm2real" in v}
    body["intervals"] = {k: agent_intervals(rows) for k, rows in ctx.eval_rows.items()}
    body["comparisons"] = comparisons(ctx.eval_rows)
    report = {
        "command": job.command,
        "world_model": job.world_model,
        "counts": {
            "tasks": len(ctx.tasks),
            "train_tasks": len(ctx.train_tasks),
            "eval_tasks": len(ctx.eval_tasks),
        },
        **body,
    }
    paths = write_report(job.out, report)
    return write_manifest(
        job.out,
        stage=f"agent-{job.command}",
        inputs={"world_model": job.world_model, "data": job.data, "agents": job.agents},
        config=job.config,
        counts={
            **report["counts"],
            "agents": len(report["agents"]),
            "probes": report.get("probes", {}).get("probes", 0),
        },
        outputs={
            **paths,
            "agents": {k: v.get("hf") for k, v in report["agents"].items()},
            "tasks": join(job.out, "tasks.jsonl"),
        },
    )


def _train(ctx: Context) -> dict[str, Any]:
    job, cfg = ctx.job, ctx.cfg
    demos, oracle_success = demonstrations(ctx)
    say(
        f"[agent] {len(ctx.train_tasks)} train / {len(ctx.eval_tasks)} held-out tasks, "
        f"{len(demos)} demonstrations"
    )
    warm = [v for v in cfg.variants if v != "cold_sim"]
    agents: dict[str, Any] = {}
    if warm:
        agents.update(run_group(ctx, job.world_model, warm, demos))
    if "cold_sim" in cfg.variants:
        cold = build_cold_checkpoint(
            job.world_model, join(job.out, "_work", "cold-init"), seed=cfg.rl.seed
        )
        agents.update(run_group(ctx, cold, ["cold_sim"], demos))
    return {"agents": agents, "oracle_success": oracle_success, "demonstrations": len(demos)}


def _evaluate(ctx: Context) -> dict[str, Any]:
    agents = {}
    ro = ctx.cfg.rl.rollout
    for name, path in ctx.job.agents.items():
        policy = EnginePolicy(
            path,
            temperature=ctx.cfg.eval_temperature,
            max_new_tokens=ro.max_new_tokens,
            engine=ro.engine,
        )
        try:
            agents[name] = {"init": path, "real_eval": evaluate_real(ctx, policy, name)}
        finally:
            policy.close()
    return {"agents": agents}


def demonstrations(ctx: Context) -> tuple[list[Any], float]:
    """Transcripts of the collected trajectories and of the oracle episodes, and the
    oracle episodes' success share in the real environment (a check of the checkers)."""

    out = []
    if ctx.job.data:
        records = read_records(ctx.job.data).records
        out += trajectory_transcripts(records, ctx.renderer, {t.domain for t in ctx.tasks})
    oracle = _replay_oracles(ctx, ctx.train_tasks)
    out += [episode_transcript(ep, ctx.renderer) for ep in oracle]
    _jsonl(join(ctx.job.out, "episodes", "oracle-real.jsonl"), [e.to_dict() for e in oracle])
    ctx.heldout_oracle = [
        episode_transcript(ep, ctx.renderer) for ep in _replay_oracles(ctx, ctx.eval_tasks)
    ]
    if not out:
        raise ValueError("no demonstrations: give --data or tasks with solutions")
    return out, (sum(e.success for e in oracle) / len(oracle) if oracle else None)


def _replay_oracles(ctx: Context, tasks: list[Any]) -> list[Any]:
    """The oracle solutions of ``tasks`` replayed in the real environments."""
    solved = [t for t in tasks if t.solution]
    envs = ctx.real.take(min(len(solved), ctx.cfg.concurrency)) if solved else []
    oracle = []
    for i in range(0, len(solved), max(len(envs), 1)):
        chunk = solved[i : i + len(envs)]
        oracle += list(
            ctx.pool.map(
                lambda te: replay(te[1], te[0], te[0].solution, resolve=oracle_action),
                zip(chunk, envs, strict=False),
            )
        )
    return oracle


def heldout_nll(ctx: Context, workers: Any) -> float | None:
    """The agent's NLL of the held-out tasks' oracle actions (never trained on): a
    measure that separates agents where their success rates are all low."""
    probe = ctx.heldout_oracle[: ctx.cfg.nll_tasks]
    if not probe:
        return None
    return action_nll(workers.learners, probe, max_tokens=ctx.cfg.demo_max_tokens)


def run_group(ctx: Context, init_dir: str, variants: list[str], demos: list[Any]) -> dict[str, Any]:
    """One set of workers from ``init_dir``: fit the demonstrations once, save that
    state, and train + evaluate each variant from it."""

    cfg, out = ctx.cfg, ctx.job.out
    workers = start_workers(cfg, ctx.job.train, init_dir)
    results: dict[str, Any] = {}
    try:
        probe = demos[: min(4, len(demos))]
        nll0 = action_nll(workers.learners, probe, max_tokens=cfg.demo_max_tokens)
        heldout0 = heldout_nll(ctx, workers)
        fit_demonstrations(
            workers.learners, demos, steps=cfg.demo_steps, batch=cfg.demo_batch,
            pad_id=ctx.tokenizer.pad_token_id, max_tokens=cfg.demo_max_tokens, seed=cfg.rl.seed,
            learning_rate=cfg.fit_learning_rate,
        )  # fmt: skip
        nll1 = action_nll(workers.learners, probe, max_tokens=cfg.demo_max_tokens)
        if cfg.rl.kl_reference == "frozen":
            workers.learners.freeze_reference()  # RL's KL term holds it near this agent
        _sync(ctx, workers)
        ckpt = join(out, "_work", f"demo-{variants[0]}")
        workers.learners.save(ckpt, "demo")
        greedy = WorkersPolicy(workers.rollout, temperature=cfg.eval_temperature)
        for i, v in enumerate(variants):
            if i:
                workers.learners.load(ckpt, "demo")
                _sync(ctx, workers)
            res: dict[str, Any] = {
                "init": init_dir,
                "demo_nll": [nll0, nll1],
                "heldout_nll_init": heldout0,
            }
            sim_eps: list[Any] = []
            if v != "untrained":
                res["rl"], sim_eps = train_variant(ctx, workers, v)
            res["heldout_nll"] = heldout_nll(ctx, workers)
            res["real_eval"] = evaluate_real(ctx, greedy, v)
            if v in ("sim", "cold_sim"):
                sim_eps += sim_eval(ctx, greedy, v)
                res["wm2real"] = wm2real(sim_eps, ctx.make_real, pool=ctx.pool)
            res["hf"] = workers.learners.export_hf(
                join(out, "agents", v, "hf"), ctx.job.world_model
            )
            recipe = ctx.job.config.get("name", "custom")
            card = card_data(stage="agent", name=f"agentworld-{recipe}-agent-{v}",
                             base_model=init_dir, domains={}, recipe=recipe,
                             steps=cfg.rl.max_steps if v != "untrained" else 0)  # fmt: skip
            write_card(res["hf"], card)
            results[v] = res
            say(f"[agent] {v}: real success {res['real_eval']['all']['success_rate']:.2f}")
    finally:
        workers.close()
    return results


def train_variant(ctx: Context, workers: Any, variant: str) -> tuple[dict[str, Any], list[Any]]:
    """RL in the variant's environment; the sim episodes it ran (for WM2Real)."""

    mode = {
        "sim": "sim",
        "cold_sim": "sim",
        "sim_uncontrolled": "sim_uncontrolled",
        "real": "real",
    }[variant]
    policy = WorkersPolicy(workers.rollout)
    rows, sim_eps = [], []
    for step in range(ctx.cfg.rl.max_steps):
        if hasattr(ctx.world, "clear"):
            ctx.world.clear()  # keys carry the step's seeds: old entries are never hit again
        metrics, eps = grpo_step(
            step,
            ctx.train_tasks,
            ctx.cfg.rl,
            workers=workers,
            rollout=lambda slots, mode=mode: ctx.episodes(slots, mode, policy),
            sync=lambda: _sync(ctx, workers),
            pad_id=ctx.tokenizer.pad_token_id,
        )
        rows.append({"variant": variant, **metrics})
        say(
            f"[agent] {variant} step {step + 1}/{ctx.cfg.rl.max_steps} "
            f"reward {metrics['reward/mean']:.3f}"
        )
        _jsonl(
            join(ctx.job.out, "episodes", f"{variant}-train-step{step + 1:03d}.jsonl"),
            [e.to_dict() for e in eps],
        )
        if mode != "real":
            sim_eps += eps
    ctx.metrics += rows
    return {
        "steps": len(rows),
        "reward_first": rows[0]["reward/mean"],
        "reward_last": rows[-1]["reward/mean"],
    }, sim_eps


def evaluate_real(ctx: Context, policy: Any, name: str) -> dict[str, Any]:
    eps = ctx.episodes([Slot(task=t, seed=0) for t in ctx.eval_tasks], "real", policy)
    ctx.eval_rows[name] = [e.to_dict() for e in eps]
    _jsonl(join(ctx.job.out, "episodes", f"{name}-eval-real.jsonl"), ctx.eval_rows[name])
    return summarize(eps)


def sim_eval(ctx: Context, policy: Any, name: str) -> list[Any]:
    eps = ctx.episodes([Slot(task=t, seed=0) for t in ctx.eval_tasks], "sim", policy)
    _jsonl(join(ctx.job.out, "episodes", f"{name}-eval-sim.jsonl"), [e.to_dict() for e in eps])
    return eps


def shared_measures(ctx: Context) -> dict[str, Any]:
    """Probes against the controlled simulator, and steps/s sim vs real."""

    cfg = ctx.cfg
    out: dict[str, Any] = {}
    if cfg.probes:
        out["probes"] = run_probes(ctx.eval_tasks, lambda: ctx.make_sim(True), pool=ctx.pool)
    n = cfg.concurrency
    out["steps_per_s"] = {
        "sim": steps_per_second(
            ctx.train_tasks, ctx.envs("sim", n), steps=cfg.speed_steps, pool=ctx.pool
        ),
        "real": steps_per_second(
            ctx.train_tasks, ctx.envs("real", n), steps=cfg.speed_steps, pool=ctx.pool
        ),
    }
    return out


def _sync(ctx: Context, workers: Any) -> float:
    """Push the learner's weights to the engines under a new version; seconds taken."""
    ctx.version += 1
    return workers.sync_weights(ctx.version)


def build_cold_checkpoint(world_model: str, out_url: str, *, seed: int) -> str:
    """The world model's architecture and tokenizer, freshly initialized: the
    warm-start comparison's baseline."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(local_model_dir(world_model))
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config)
    return save_pretrained(model, load_tokenizer(world_model), out_url)


class Context:
    """What every part of a run shares: tasks, tokenizer, environments, the world."""

    def __init__(self, job: AgentJob, world: Any = None) -> None:
        self.job, self.cfg = job, job.cfg
        self.tasks = load_tasks(job)
        self.train_tasks = [t for t in self.tasks if t.split == "train"]
        self.eval_tasks = [t for t in self.tasks if t.split == "eval"]
        self.tokenizer = load_tokenizer(job.world_model)
        self.renderer = Renderer(
            self.tokenizer, max_observation_tokens=self.cfg.limits.max_observation_tokens
        )
        self.pool = ThreadPoolExecutor(self.cfg.concurrency)
        self._world = world
        self.own_world = world is None
        self._starting: Future | None = None
        if self.own_world and self.cfg.sim.backend == "engine" and self.cfg.sim.start_early:
            # Every run steps the simulator (steps/s at least): start it now, beside the
            # tasks, the workers and the demonstration fit, rather than after them.
            self._starter = ThreadPoolExecutor(1, thread_name_prefix="world-start")
            self._starting = self._starter.submit(start_world, job)
        self.describe = Describer()
        self.real = EnvPool(self.make_real)
        self.sim = {
            True: EnvPool(lambda: self.make_sim(True)),
            False: EnvPool(lambda: self.make_sim(False)),
        }
        self.metrics: list[dict[str, Any]] = []
        self.version = 0
        self.heldout_oracle: list[Any] = []
        """Transcripts of the held-out tasks' oracle episodes: measured, never fitted."""
        self.eval_rows: dict[str, list[dict[str, Any]]] = {}
        """Each agent's held-out episodes in the real environment (for the intervals)."""

    @property
    def world(self) -> Any:
        """The simulator: the engine started in the background as the run began
        (``sim.start_early``), or started here on first use."""
        if self._world is None:
            self._world = self._starting.result() if self._starting else start_world(self.job)
        return self._world

    @property
    def world_started(self) -> bool:
        """Whether the simulator is up (in use, or started early and ready)."""
        started = self._starting
        ready = started is not None and started.done() and started.exception() is None
        return self._world is not None or ready

    def make_real(self):
        return RealEnv(self.cfg.limits, self.renderer.count)

    def make_sim(self, controlled: bool):
        return SimEnv(
            self.cfg.limits,
            self.renderer.count,
            world=self.world,
            describe=self.describe,
            cfg=self.cfg.sim,
            controlled=controlled,
        )

    def envs(self, mode: str, n: int) -> list[Any]:
        if mode == "real":
            return self.real.take(n)
        return self.sim[mode == "sim"].take(n)

    def episodes(self, slots, mode: str, policy) -> list[Any]:
        return run_episodes(
            slots,
            self.envs(mode, len(slots)),
            policy,
            self.renderer,
            max_context=self.cfg.limits.max_tokens,
            pool=self.pool,
        )

    def close(self) -> None:
        self.pool.shutdown(wait=True)
        for p in (self.real, *self.sim.values()):
            p.close()
        self.describe.close()
        if self._starting is not None:
            self._starter.shutdown(wait=True)
            if self._world is None and self._starting.exception() is None:
                self._world = self._starting.result()  # started, never used: shut it down
        if self.own_world and self._world is not None:
            self._world.close()


def load_tasks(job: AgentJob) -> list[Any]:
    tc = job.cfg.tasks
    if tc.task_file:
        return read_tasks(tc.task_file)
    if "web" in tc.families:
        find_browser()  # BrowserUnavailable says how to get Chromium, before any work
    oracle = RealOracle() if "mcp" in tc.families else None
    try:
        return generate_tasks(tc, oracle)
    finally:
        if oracle is not None:
            oracle.close()


def start_world(job: AgentJob) -> Any:
    sim = job.cfg.sim
    if sim.backend == "serve":
        world = ServeWorld(sim.serve_url, os.environ.get(sim.api_key_env, ""))
    else:
        world = EngineWorld.start(job.world_model, sim, seed=job.cfg.rl.seed)
    return ConsistentWorld(world) if sim.consistent else world


def _jsonl(url: str, rows: list[dict[str, Any]]) -> None:
    write_bytes(
        url, "".join(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in rows).encode()
    )
