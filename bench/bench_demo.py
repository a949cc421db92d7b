"""Bench: is the demo worth its time? `jobs/demo.py` end to end, as `make demo` runs it
(its own local Ray, every stage), and what a newcomer gets from it: the world model it
trains against the best parameter-free baseline on the same held-out turns, overall
(the margin's 95% interval) and per domain, and the wall time of the run and of each
stage.

Goals (the demo issue): the final world model beats the best baseline overall with the
interval above zero and on at least 3 of the 5 domains; the demo takes at most 20
minutes after set-up; the agent stage at most 2 minutes. The baseline is measured in
the same run: copy_previous and retrieval (BM25 over the run's own training split) are
scored on the same held-out turns as the model.

Run:  python bench/bench_demo.py [--quick] [--set KEY=VALUE ...]
      (full: the demo's defaults, about 15 to 20 minutes on a 2-core machine; --quick a
      few minutes at a size where no goal can be met: it checks the benchmark runs)
      python bench/bench_demo.py --from-run runs/demo
      (the same figures read from a demo that already ran, such as a fresh clone's
      `make demo`; its time is the sum of its stages')
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _quick import parse_sized
from _results import goal, write_result

ROOT = Path(__file__).resolve().parents[1]
QUICK = {"episodes": 10, "max_steps": 4, "skip": "rl,serve,agent"}
METRIC = "char_f1"
DEMO_MINUTES = 20.0
AGENT_SECONDS = 120.0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--episodes", type=int, help="episodes to record (default: the demo's)")
    p.add_argument("--max-steps", type=int, help="steps of cpt, sft and rl (default: recipe)")
    p.add_argument("--skip", default="", help="stages to leave out, e.g. rl,agent")
    p.add_argument("--recipe", help="the demo's recipe (default: the demo's)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--out", help="run directory (default: a temporary one)")
    p.add_argument(
        "--from-run",
        metavar="DIR",
        help="read the figures of a finished demo run (its --out) instead of running one",
    )
    return parse_sized(p, QUICK, argv)


def demo_argv(a: argparse.Namespace, out: str) -> list[str]:
    """The demo's command line: the demo's own defaults unless a size is given."""
    argv = [sys.executable, str(ROOT / "jobs" / "demo.py"), "--out", out]
    if a.episodes:
        argv += ["--episodes", str(a.episodes)]
    if a.max_steps:
        argv += ["--max-steps", str(a.max_steps)]
    if a.recipe:
        argv += ["--recipe", a.recipe]
    argv += [f"--skip-{s}" for s in filter(None, a.skip.split(","))]
    for item in a.set:
        argv += ["--set", item]
    return argv


def figures(out: str, wall_s: float) -> dict:
    """What the run's summary and pipeline record say: the margin overall and per domain,
    the domains won, the time per stage."""
    summary = json.loads(Path(out, "eval", "score", "summary.json").read_text())
    stages = json.loads(Path(out, "pipeline.json").read_text())["stages"]
    margins = {d: m[METRIC] for d, m in summary.get("margin", {}).items() if METRIC in m}
    domains = {d: m for d, m in margins.items() if d != "all"}
    return {
        "wall_seconds": round(wall_s, 1),
        "stage_seconds": {name: s["seconds"] for name, s in stages.items()},
        "metric": METRIC,
        "overall": margins.get("all"),
        "domains": domains,
        "domains_won": sorted(d for d, m in domains.items() if m["margin"] > 0),
    }


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    if a.from_run:
        return report(a, from_run(a.from_run), ["--from-run", a.from_run])
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'platform'}:{ROOT}"}
    env.setdefault("WANDB_MODE", "offline")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.abspath(a.out or os.path.join(tmp, "demo"))
        argv_ = demo_argv(a, out)
        print(f"[bench_demo] {' '.join(argv_[1:])}", flush=True)
        t0 = time.time()
        rc = subprocess.run(argv_, env=env, cwd=ROOT).returncode
        wall = time.time() - t0
        if rc:
            print(f"[bench_demo] the demo failed with exit code {rc}", file=sys.stderr)
            return rc
        result = figures(out, wall)
    return report(a, result, argv_[2:])


def from_run(out: str) -> dict:
    """The figures of a finished demo run; its time is the sum of its stages."""
    for need in ("pipeline.json", "eval/score/summary.json"):
        if not Path(out, need).is_file():
            raise SystemExit(f"[bench_demo] {out} is not a finished demo run: {need} is missing")
    stages = json.loads(Path(out, "pipeline.json").read_text())["stages"]
    undone = [name for name, s in stages.items() if s.get("status") != "done"]
    if undone:
        raise SystemExit(f"[bench_demo] {out}: stages not done: {', '.join(undone)}")
    return figures(out, sum(s["seconds"] for s in stages.values()))


def report(a: argparse.Namespace, result: dict, argv: list[str]) -> int:
    """Write the figures and their goals to bench/results/demo.json; print the verdict."""
    overall = result["overall"]
    ratio = overall["model"] / max(overall["baseline_value"], 1e-9)
    ci = overall["ci95"] or [overall["margin"], overall["margin"]]
    agent_s = result["stage_seconds"].get("agent")
    goals = [
        goal("model_vs_best_baseline_char_f1", ratio, ">=", 1.0,
             "the demo's world model beats the best baseline overall (held-out char F1)"),
        goal("margin_ci95_low", ci[0], ">=", 0.0,
             "the margin over the best baseline is above zero with its 95% interval"),
        goal("domains_won", len(result["domains_won"]), ">=", 3,
             "the demo's world model beats the best baseline on at least 3 of 5 domains"),
        goal("demo_minutes", result["wall_seconds"] / 60, "<=", DEMO_MINUTES,
             "the demo runs in at most 20 minutes after set-up"),
    ]  # fmt: skip
    if agent_s is not None:
        goals.append(goal("agent_stage_seconds", agent_s, "<=", AGENT_SECONDS,
                          "the demo's agent stage costs at most 2 minutes"))  # fmt: skip
    result.update(quick=a.quick, argv=argv)
    path = write_result("demo", result, goals=goals)
    print(
        f"[bench_demo] model {overall['model']:.1f} vs {overall['baseline']} "
        f"{overall['baseline_value']:.1f}: {ratio:.2f}x, margin {overall['margin']:+.1f} "
        f"[{ci[0]:+.1f}, {ci[1]:+.1f}]; won {len(result['domains_won'])} of "
        f"{len(result['domains'])} domains ({', '.join(result['domains_won']) or 'none'}); "
        f"{result['wall_seconds'] / 60:.1f} min -> {path}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
