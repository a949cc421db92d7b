"""Record real trajectories: terminal (sandboxed bash), mcp (MCP servers from PyPI over
stdio), swe (generated repository, real test runs), search (BM25 over Python's docs).

Writes <out>/part-XXXXX.jsonl record shards, <out>/status/ and <out>/manifest.json
(counts, failed episodes with their errors). A finished run does nothing on rerun; a
killed one resumes without duplicates.

Run:  python jobs/collect.py --out runs/demo/raw --domains terminal,mcp,swe,search --episodes 24 --seed 0
      ray job submit --working-dir . -- python jobs/collect.py --out s3://bucket/raw --episodes 1000
With an agent instead of the scripted playbooks (any OpenAI-compatible endpoint):
      python jobs/collect.py --out runs/agent/raw --episodes 8 --agent-endpoint http://127.0.0.1:8000/v1
"""

from __future__ import annotations

import argparse
import sys
import time

from agentworld.cli import run_job, url


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--out", type=url, required=True, help="output directory (path or URL)")
    p.add_argument("--recipe", default="debug_cpu", help="defaults come from recipe.collect")
    p.add_argument("--domains", help="comma-separated, e.g. terminal,mcp,swe,search")
    p.add_argument("--episodes", type=int)
    p.add_argument("--seed", type=int)
    p.add_argument("--episodes-per-task", type=int)
    p.add_argument("--parallel", type=int, help="Ray tasks in flight")
    p.add_argument("--max-turns", type=int)
    p.add_argument("--command-timeout", type=float, help="seconds per command or tool call")
    p.add_argument("--output-cap", type=int, help="bytes kept per observation")
    p.add_argument("--mcp-servers", help="comma-separated: time,git")
    p.add_argument("--agent-endpoint", help="OpenAI-compatible base URL; replaces the playbooks")
    p.add_argument("--agent-model")
    return p.parse_args(argv)


def _split(value: str | None) -> tuple[str, ...] | None:
    return None if value is None else tuple(v.strip() for v in value.split(",") if v.strip())


def build_config(args: argparse.Namespace):
    """recipe.collect with the flags that were given."""
    import dataclasses

    from agentworld.recipes import get_recipe

    given = {
        "domains": _split(args.domains),
        "episodes": args.episodes,
        "seed": args.seed,
        "episodes_per_task": args.episodes_per_task,
        "max_parallel": args.parallel,
        "max_turns": args.max_turns,
        "command_timeout_s": args.command_timeout,
        "output_cap_bytes": args.output_cap,
        "mcp_servers": _split(args.mcp_servers),
        "agent_endpoint": args.agent_endpoint,
        "agent_model": args.agent_model,
    }
    base = get_recipe(args.recipe).collect
    return dataclasses.replace(base, **{k: v for k, v in given.items() if v is not None})


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    config = build_config(args)  # a bad config fails here, before Ray starts
    from agentworld.cluster import local_ray
    from agentworld.collect import collect
    from agentworld.console import say

    t0 = time.time()
    with local_ray():
        manifest = collect(config, args.out)
    c = manifest["counts"]
    say(
        f"[collect] {c['trajectories']} trajectories ({c['turns']} turns) by domain "
        f"{c['by_domain']}, {c['failed']} failed, in {time.time() - t0:.1f}s -> {args.out}"
    )
    for f in manifest["outputs"]["failed_episodes"][:10]:
        say(f"[collect] failed {f['id']}: {f['error']}")
    return 0


if __name__ == "__main__":
    sys.exit(run_job("collect", main))
