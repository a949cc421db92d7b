"""Register a simulated twin of a real MCP server and print its URL: the real server is
started (--server-command, over stdio) or reached (--server-url, streamable HTTP), its
tools/list is read (and, with --record, a few real calls and their results become the
twin's initial state), and the twin is registered on a running simulator
(`python jobs/serve.py`) under --name. Agents then connect to the printed URL with any
MCP client, or through the stdio bridge (`python -m agentworld.sim.mcp_stdio`).

Run:
  AGENTWORLD_SIM_API_KEY=sk-agentworld-demo python jobs/twin.py \
      --server-command "mcp-server-time --local-timezone UTC" --name time
  python jobs/twin.py --server-command "mcp-server-git" --name git \
      --record '{"name": "git_status", "arguments": {"repo_path": "/tmp/repo"}}'
  python jobs/twin.py --server-url http://127.0.0.1:9000/mcp --name docs --sim-url http://sim:8000

The simulator's team key comes from the variable --api-key-env names; the real server's
bearer token, when it needs one, from --server-token-env.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys

from agentworld.cli import job_parser, run_job
from agentworld.config import ConfigError
from agentworld.sim.twin import read_server, register, registration, server_client


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = job_parser(__doc__, recipe=False)
    real = p.add_mutually_exclusive_group(required=True)
    real.add_argument("--server-command", help="command line that starts the real server (stdio)")
    real.add_argument("--server-url", help="the real server's streamable HTTP URL")
    p.add_argument("--name", required=True, help="the twin's environment name (its URL path)")
    p.add_argument("--sim-url", default="http://127.0.0.1:8000", help="the simulator")
    p.add_argument("--api-key-env", default="AGENTWORLD_SIM_API_KEY", help="variable with the key")
    p.add_argument("--server-token-env", help="variable with the real server's bearer token")
    p.add_argument(
        "--record",
        action="append",
        default=[],
        type=json.loads,
        metavar="CALL",
        help='a real call to record as initial state, {"name": ..., "arguments": {...}} (repeatable)',
    )
    p.add_argument("--control", type=json.loads, help="the twin's control, as JSON")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    key = os.environ.get(args.api_key_env)
    if not key:
        raise ConfigError("--api-key-env", f"${args.api_key_env} holds no simulator key")
    token = os.environ.get(args.server_token_env) if args.server_token_env else None
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    client = server_client(args.server_command, args.server_url, headers=headers, timeout=60)
    transport = "stdio" if args.server_command else "streamable HTTP"
    server = asyncio.run(read_server(client, args.record, transport=transport))
    url = register(args.sim_url, key, args.name, registration(server, control=args.control))
    print(
        f"[twin] {server.name} {server.version}: {len(server.tools)} tools, "
        f"{len(server.calls)} recorded calls"
    )
    print(f"[twin] {url}")
    print(
        f"[twin] stdio: python -m agentworld.sim.mcp_stdio --url {args.sim_url} --environment {args.name}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(run_job("twin", main))
