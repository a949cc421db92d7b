"""Serve a world-model checkpoint as the simulator endpoint (Ray Serve + vLLM): the
OpenAI-compatible routes (/v1/chat/completions, /v1/models) and the simulator API
(/v1/sessions, /v1/simulate, /healthz). The first answer comes about 80 s after start
on a 2-core CPU machine.

Run:
  python jobs/serve.py --model runs/demo/sft/hf                       (or `make serve`)
  python jobs/serve.py --model runs/demo/sft/hf --smoke --out runs/demo/serve
      start, check every route once (openai client, a SimEnv session, /v1/simulate,
      a wrong key), write manifest.json, stop
or through Ray: ray job submit --working-dir . -- python jobs/serve.py --config serve/sim_cpu.yaml
The Serve CLI runs the same application: PYTHONPATH=platform serve run serve/sim_cpu.yaml

API keys: --api-keys 'team=key,team2=key2', and the variable named in the config's
auth.api_keys_env (AGENTWORLD_SIM_API_KEYS); --smoke without either generates one.
Settings: the config file's application args, changed with --set serve.FIELD=VALUE
(serve.limits.max_sessions=64, serve.engine.replicas=2); --recipe and the other --set
items are checked like every job's.
"""

from __future__ import annotations

import argparse
import os
import sys

from agentworld.cli import job_parser, run_job, url

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = job_parser(__doc__)
    p.add_argument(
        "--config", default=os.path.join(ROOT, "serve", "sim_cpu.yaml"), help="Serve config (YAML)"
    )
    p.add_argument(
        "--model", type=url, help="checkpoint path or URL (overrides the config's model)"
    )
    p.add_argument("--api-keys", help="team=key pairs, comma separated")
    p.add_argument("--host", default=None, help="HTTP host (default: the config's)")
    p.add_argument("--port", type=int, default=None, help="HTTP port (default: the config's)")
    p.add_argument(
        "--num-cpus", type=int, default=4, help="logical CPUs of a local Ray cluster (>= 4)"
    )
    p.add_argument("--smoke", action="store_true", help="check every route once, then stop")
    p.add_argument("--out", type=url, help="with --smoke: where manifest.json goes")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from agentworld.recipes import load
    from agentworld.sim.run import load_job, run

    load(args.recipe, args.set)  # every override is checked, before anything starts
    job = load_job(
        args.config,
        model=args.model,
        api_keys=args.api_keys,
        host=args.host,
        port=args.port,
        smoke=args.smoke,
        out=args.out,
        overrides=[item.removeprefix("serve.") for item in args.set if item.startswith("serve.")],
    )
    run(job, num_cpus=args.num_cpus)
    return 0


if __name__ == "__main__":
    sys.exit(run_job("serve", main))
