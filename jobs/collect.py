"""Record real trajectories: terminal (sandboxed bash), mcp (MCP servers from PyPI over
stdio), swe (generated repository, real test runs), search (BM25 over Python's docs).

Writes <out>/part-XXXXX.jsonl record shards, <out>/status/ and <out>/manifest.json
(counts, failed episodes with their errors). A finished run does nothing on rerun; a
killed one resumes without duplicates.

Settings come from the recipe's ``collect`` section (agentworld.collect.config),
changed with ``--set collect.FIELD=VALUE``.

Run:  python jobs/collect.py --out runs/demo/raw --set collect.domains=terminal,mcp,swe,search \
          --set collect.episodes=24 --set collect.seed=0
      ray job submit --working-dir . -- python jobs/collect.py --out s3://bucket/raw --set collect.episodes=1000
With an agent instead of the scripted playbooks (any OpenAI-compatible endpoint):
      python jobs/collect.py --out runs/agent/raw --set collect.episodes=8 \
          --set collect.agent_endpoint=http://127.0.0.1:8000/v1
"""

from __future__ import annotations

import argparse
import sys
import time

from agentworld.cli import job_parser, run_job, url


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = job_parser(__doc__)
    p.add_argument("--out", type=url, required=True, help="output directory (path or URL)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from agentworld.recipes import load

    config = load(args.recipe, args.set).collect  # a bad value fails here, before Ray starts
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
