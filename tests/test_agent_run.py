"""A short CPU run of the agent stage in each mode: the demonstration fit, one GRPO step
in the controlled simulator (the world model on vLLM) and one in the real sandboxes
(rl's vLLM rollout engine and DeepSpeed learner), every agent evaluated on held-out
tasks in the real environment, probes, WM2Real, steps/s and the report. One run serves
the module (starting the workers is the cost)."""

from __future__ import annotations

import json
import os

import pytest

from agentworld.config import set_overrides
from agentworld.recipes import get_recipe

pytestmark = pytest.mark.slow

OVERRIDES = [
    "tasks.families=('search','table','terminal')",
    "tasks.per_family=3",
    "variants=('untrained','sim','real')",
    "rl.max_steps=1",
    "rl.contexts_per_step=2",
    "rl.group_size=2",
    "rl.call_timeout_s=600",
    "demo_steps=2",
    "demo_batch=4",
    "limits.max_turns=2",
    "speed_steps=4",
    "concurrency=2",
]


def _rows(path: str) -> list[dict]:
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


@pytest.fixture(scope="module")
def agent_run(tiny_checkpoint, vllm_engine, ray_cluster, tmp_path_factory):
    import dataclasses

    from agentworld.agent.run import run
    from agentworld.agent.world import ConsistentWorld, EngineWorld
    from agentworld.io import write_jsonl
    from agentworld.recipes.jobs import agent_job
    from agentworld.schema.examples import sample_trajectories

    root = tmp_path_factory.mktemp("agent")
    write_jsonl(
        str(root / "raw" / "part-00000.jsonl"), [t.to_dict() for t in sample_trajectories(4)]
    )
    recipe = get_recipe("debug_cpu")
    recipe = dataclasses.replace(recipe, agent=set_overrides(recipe.agent, OVERRIDES))
    job = agent_job(
        recipe,
        command="train",
        out=str(root / "out"),
        world_model=tiny_checkpoint,
        data=str(root / "raw"),
    )
    engine = EngineWorld(vllm_engine, recipe.agent.sim)  # the session's engine as the world model
    try:
        manifest = run(job, world=ConsistentWorld(engine))
    finally:
        engine.close()
    return job, manifest


def test_each_mode_produces_episodes_rewards_and_a_report(agent_run):
    job, manifest = agent_run
    out = job.out
    assert manifest["status"] == "complete"
    report = json.load(open(os.path.join(out, "report.json")))
    assert set(report["agents"]) == {"untrained", "sim", "real"}
    for name, agent in report["agents"].items():
        real = agent["real_eval"]
        assert real["all"]["n"] == report["counts"]["eval_tasks"], name
        assert {"search", "table", "terminal"} <= set(real)
        assert real["table"]["item_f1"] is not None and real["table"]["row_f1"] is not None
        assert os.path.exists(os.path.join(out, "agents", name, "hf", "config.json"))
    for mode in ("sim", "real"):
        rows = _rows(os.path.join(out, "episodes", f"{mode}-train-step001.jsonl"))
        assert len(rows) == 4 and {r["mode"] for r in rows} == {mode}
        assert all(isinstance(r["reward"], float) and r["end_reason"] for r in rows)
        # The loss sees the agent's tokens only: observations and prompts are masked.
        assert all(0 < r["agent_tokens"] < r["tokens"] for r in rows)
        # Siblings share task and seed.
        for g in {r["group"] for r in rows}:
            assert len({(r["task"], r["seed"]) for r in rows if r["group"] == g}) == 1
    # Intervals over the held-out tasks, the paired comparisons, the held-out oracle NLL.
    for name in report["agents"]:
        assert report["intervals"][name]["all"]["success"]["n"] == report["counts"]["eval_tasks"]
        agent = report["agents"][name]
        assert agent["heldout_nll_init"] > 0 and agent["heldout_nll"] > 0, name
    pairs = {(c["a"], c["b"]) for c in report["comparisons"]}
    assert pairs == {("sim", "untrained"), ("real", "untrained"), ("real", "sim")}
    assert "Comparisons (paired by task" in open(os.path.join(out, "report.md")).read()
    for row in _rows(os.path.join(out, "metrics.jsonl")):  # a flat step is not taken
        assert row["learner/skipped"] == float(row["adv/flat_group_share"] == 1.0), row
    assert report["agents"]["sim"]["rl"]["steps"] == 1
    assert "wm2real" in report["agents"]["sim"]
    speed = report["steps_per_s"]
    assert speed["sim"]["steps"] >= 4 and speed["real"]["steps"] >= 4
    assert speed["sim"]["concurrency"] == speed["real"]["concurrency"] == 2
    for name in ("report.md", "success_by_family.png", "f1.png", "steps_per_s.png"):
        assert os.path.getsize(os.path.join(out, name)) > 0, name
    assert (
        "Agents on held-out tasks (real environment)" in open(os.path.join(out, "report.md")).read()
    )


def test_control_instructions_are_in_the_runs_simulator_prompts(agent_run):
    job, _ = agent_run
    tasks = {r["id"]: r for r in _rows(os.path.join(job.out, "tasks.jsonl"))}
    prompts = [r["messages"] for r in _rows(os.path.join(job.out, "sim_prompts.jsonl"))]
    assert prompts
    controlled = [m for m in prompts if "Facts of this world" in m[0]["content"]]
    assert controlled
    systems = "\n".join(m[0]["content"] for m in controlled)
    # Some task's reference facts, verbatim, are in the prompts the simulator was given.
    assert any(
        all(f in systems for f in t.get("facts", []))
        for t in tasks.values()
        if t["split"] == "train"
    )


def test_probes_ran_at_evaluation_and_a_rerun_does_nothing(agent_run):
    from agentworld.agent.probes import probe_actions
    from agentworld.agent.run import run

    job, manifest = agent_run
    report = json.load(open(os.path.join(job.out, "report.json")))
    tasks = [r for r in _rows(os.path.join(job.out, "tasks.jsonl")) if r["split"] == "eval"]
    domain = {"search": "search", "table": "search", "terminal": "terminal"}
    expected = sum(len(probe_actions(domain[t["family"]])) for t in tasks)
    assert report["probes"]["probes"] == expected == manifest["counts"]["probes"]
    assert report["probes"]["leaks"] == sum(bool(r["leaked"]) for r in report["probes"]["records"])
    assert run(job) == manifest  # complete: nothing is started, the manifest is returned
