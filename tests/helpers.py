"""Generated data for tests."""

from __future__ import annotations

import random

from agentworld.schema import Trajectory, Turn

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
