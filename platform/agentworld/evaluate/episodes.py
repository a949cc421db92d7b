"""Held-out real episodes rebuilt from evaluation items, for closed-loop rollouts.

An item asks for turn k with the real history; an episode is the trajectory behind a
trajectory id's items: its environment text, its real actions and the real
observation after each. Turn k's action and observation come from the item for turn k,
or from the history of a later item of the same trajectory whose history is whole
(prepare's samples may have lost their oldest turns to the window). An episode is the
turns 1..K known without a gap; turns after a gap are left out and counted.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace

from agentworld.evaluate.items import EvalItem
from agentworld.schema import reference_messages, render_messages
from agentworld.schema.awb import load_system_prompt, reference_system

Message = dict[str, str]


@dataclass(frozen=True, kw_only=True)
class Episode:
    id: str
    task: str
    domain: str
    system: str
    """The environment text, as the items' system message holds it."""
    actions: tuple[str, ...]
    """The real actions, turn 1 first."""
    references: tuple[str, ...]
    """The real observation after each action."""
    system_prompt: str | None = None
    """The reference's system prompt of the domain: set, the turns are rendered in its
    format (the ``awb`` prompt style); None, in this project's."""

    @property
    def turns(self) -> int:
        return len(self.actions)

    def messages(self, k: int, history: Sequence[str]) -> list[Message]:
        """The prompt for turn ``k`` (1-based): the real actions so far with
        ``history[:k-1]`` as the earlier observations (the real ones: teacher forcing;
        the simulator's own: closed loop)."""
        past = list(zip(self.actions[: k - 1], history[: k - 1], strict=True))
        if self.system_prompt is None:
            return render_messages(self.system, past, self.actions[k - 1])
        system = reference_system(self.system_prompt, self.system)
        return reference_messages(system, past, self.actions[k - 1])


def with_system_prompts(episodes: list[Episode], prompts_dir: str) -> list[Episode]:
    """The episodes in the ``awb`` style: each with its domain's system prompt, read once
    per domain; a missing file raises (a RecordError naming it) before any episode."""
    prompts = {d: load_system_prompt(prompts_dir, d) for d in {e.domain for e in episodes}}
    return [replace(e, system_prompt=prompts[e.domain]) for e in episodes]


def _whole_history(item: EvalItem) -> bool:
    """Whether an item's messages hold every earlier turn: system, then (user, assistant)
    per earlier turn, then the action."""
    m = item.messages
    roles = [x["role"] for x in m]
    want = ["system"] + ["user", "assistant"] * (item.turn_idx - 1) + ["user"]
    return roles == want


def _known_turns(items: list[EvalItem]) -> dict[int, tuple[str, str]]:
    """turn -> (real action, real observation) from one trajectory's items."""
    known: dict[int, tuple[str, str]] = {}
    for item in items:
        known[item.turn_idx] = (item.messages[-1]["content"], item.reference)
        if _whole_history(item):
            m = item.messages
            for k in range(1, item.turn_idx):
                known.setdefault(k, (m[2 * k - 1]["content"], m[2 * k]["content"]))
    return known


def episodes_from_items(
    items: list[EvalItem], *, max_turns: int | None = None
) -> tuple[list[Episode], int]:
    """Episodes in the order their trajectories first appear, and how many items were
    left out (after a gap in the known turns, beyond ``max_turns``, or of a trajectory
    whose first turn is unknown)."""
    groups: dict[str, list[EvalItem]] = defaultdict(list)
    for item in items:
        groups[item.id].append(item)
    episodes, left_out = [], 0
    for traj_id, group in groups.items():
        known = _known_turns(group)
        k = 0
        while k + 1 in known and (max_turns is None or k < max_turns):
            k += 1
        left_out += sum(1 for i in group if i.turn_idx > k)
        if k == 0:
            continue
        first = min(group, key=lambda i: i.turn_idx)
        episodes.append(
            Episode(
                id=traj_id,
                task=first.task,
                domain=first.domain,
                system=first.messages[0]["content"],
                actions=tuple(known[t][0] for t in range(1, k + 1)),
                references=tuple(known[t][1] for t in range(1, k + 1)),
            )
        )
    return episodes, left_out
