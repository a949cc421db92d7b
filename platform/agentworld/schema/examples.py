"""A few hand-shaped trajectories, one per recorded domain, for the demo and docs.

Real corpora come from ``agentworld.collect``; these only show the record's shape.
"""

from __future__ import annotations

import random

from agentworld.schema.record import ToolCall, Trajectory, Turn


def example_trajectories(*, seed: int = 0, copies: int = 4) -> list[Trajectory]:
    rng = random.Random(seed)
    out: list[Trajectory] = []
    for i in range(copies):
        name = rng.choice(["notes", "todo", "plan", "log"])
        n = rng.randint(2, 40)
        out.append(
            Trajectory(
                id=f"example-terminal-{i}",
                domain="terminal",
                source="examples",
                environment="bash 5.2 in an empty directory /home/user. Task: create and inspect a file.",
                turns=(
                    Turn(action=f"seq {n} > {name}.txt", observation="$ ", exit_code=0),
                    Turn(
                        action=f"wc -l {name}.txt", observation=f"{n} {name}.txt\n$ ", exit_code=0
                    ),
                    Turn(action="ls", observation=f"{name}.txt\n$ ", exit_code=0),
                ),
            )
        )
        zone = rng.choice(["Europe/Paris", "Asia/Tokyo", "America/Lima"])
        call = ToolCall(name="get_current_time", arguments={"timezone": zone}, call_id="c0")
        out.append(
            Trajectory(
                id=f"example-mcp-{i}",
                domain="mcp",
                source="examples",
                environment='Tools: [{"name": "get_current_time", "inputSchema": {"timezone": "string"}}]',
                turns=(
                    Turn(
                        action=f'{{"name": "get_current_time", "arguments": {{"timezone": "{zone}"}}}}',
                        observation=f'{{"timezone": "{zone}", "datetime": "2026-12-02T1{i}:00:00", "is_dst": false}}',
                        tool_call=call,
                    ),
                ),
            )
        )
    return out


_COMMANDS = [
    "ls",
    "pwd",
    "cat notes.txt",
    "echo {w}",
    "mkdir {w}",
    "grep -r {w} .",
    "wc -l notes.txt",
]
_WORDS = ["alpha", "beta", "gamma", "delta", "omega", "kappa", "sigma"]


def sample_trajectories(n: int, *, seed: int = 0, domain: str = "terminal") -> list[Trajectory]:
    """``n`` small generated bash trajectories (tests, benchmarks): random commands
    over a few words, ids ``gen-<seed>-<i>``."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        turns = []
        for _ in range(rng.randint(2, 5)):
            w = rng.choice(_WORDS)
            cmd = rng.choice(_COMMANDS).format(w=w)
            turns.append(Turn(action=cmd, observation=f"$ {cmd}\n{w} {rng.randint(0, 999)}\n$ "))
        out.append(
            Trajectory(
                id=f"gen-{seed}-{i}",
                domain=domain,
                source="generated",
                environment=f"A bash shell in /home/user{i % 3}. Task: tidy the notes.",
                turns=tuple(turns),
            )
        )
    return out
