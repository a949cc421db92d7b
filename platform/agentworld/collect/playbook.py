"""What every domain's playbooks share. A domain's ``playbooks.py`` holds families of
tasks whose parameters (names, contents, numbers, the order and mistakes of the
actions) come from a seeded RNG, so the corpus has realistic repetition and
near-duplicates and a seed fixes every action; ``pick_task`` draws one of them."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Iterable

from agentworld.collect.domains import lookup
from agentworld.collect.env import Action, Script, Task
from agentworld.collect.variety import draw_variety

WORDS = (
    "alpha apple amber birch cobalt delta ember falcon garnet harbor indigo juniper "
    "kestrel lumen maple nectar onyx pepper quartz raven saffron tundra umber violet "
    "willow xenon yarrow zephyr"
).split()


def pick_task(domain: str, rng: random.Random, *, mcp_servers: tuple[str, ...] = ()) -> Task:
    """Draw one task of ``domain``: a playbook family, then its parameters. For a
    per-server domain (mcp), only families whose server is in ``mcp_servers``."""
    row = lookup(domain)
    playbooks = row.playbook_table()
    names = sorted(playbooks)
    if row.per_server:
        names = [n for n in names if n.split("-")[0] in mcp_servers]
    name = rng.choice(names)
    task = playbooks[name](rng)
    # Drawn after the playbook's own choices, which a seed therefore fixes as before.
    variety = draw_variety(rng).to_dict()
    return dataclasses.replace(task, state={**task.state, "variety": variety})


def words(rng: random.Random, n: int) -> list[str]:
    return [rng.choice(WORDS) for _ in range(n)]


def scripted(actions: Iterable[Action]) -> Callable[[], Script]:
    """A script of fixed actions (that does not look at the observations)."""
    actions = list(actions)

    def gen() -> Script:
        # Not `yield from`: the episode loop send()s each turn, which a list rejects.
        for action in actions:  # noqa: UP028
            yield action

    return gen
