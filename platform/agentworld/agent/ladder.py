"""A ladder of scripted agents whose real quality is known by construction, for ranking
agreement (``agentworld.agent.ranking``).

Every rung replays a task's oracle solution with a share of its environment actions
replaced by a random valid action of the task's domain (0: the oracle; 1: a random
agent), then answers with what its last observation showed, read the way the task
family reads it (the id at the result number the oracle answers with, the answer
file's line, the converted time, the commit message or count). Because the answer is
read from the observations, an agent scores in a simulator only what the simulator
showed it: a simulator that shows wrong or flattering observations moves its success
away from the real one.

The draws nest: for a task and a seed, each action gets one uniform number and one
random replacement, shared by every rung, and a rung replaces the actions whose number
falls below its share. A higher rung therefore replaces a superset of a lower rung's
actions, the same replacements, in every environment.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from dataclasses import dataclass

from agentworld.agent.envs import AgentEnv, parse_answer
from agentworld.agent.episodes import Episode, replay
from agentworld.agent.tasks import ANSWER_PREFIX, Task
from agentworld.agent.tasksets import tool
from agentworld.collect.mcp.playbooks import ZONES
from agentworld.collect.sandbox import SANDBOX_HOME
from agentworld.evaluate.checks.search import result_ids
from agentworld.evaluate.checks.terminal import output_text

READ_FAMILIES = ("search", "terminal", "mcp")
"""Families whose answer an agent can read from one observation (a table is built
from many: the table family is not on the ladder)."""
_WORDS = ("file list time string number path date object value error parse read write "
          "format text table queue random convert encode decode split join").split()  # fmt: skip
_COMMANDS = ("ls", "pwd", "head -n 2 data.csv", "wc -l data.csv", "tail -n 1 data.csv",
             "date +%Y", "cat data.csv | sort | head -n 1")  # fmt: skip
_TARGET_TIME = re.compile(r'"target".*?"datetime": "[^T]*T(\d\d:\d\d)', re.S)
_MESSAGE = re.compile(r"^Message: (.*)$", re.M)


@dataclass(frozen=True, kw_only=True)
class Rung:
    name: str
    share: float
    """The share of the oracle's environment actions replaced by random ones."""


def ladder(shares: tuple[float, ...]) -> list[Rung]:
    """The oracle, a rung per share, the random agent: best first."""
    middle = [Rung(name=f"oracle_{round(100 * s)}", share=s) for s in shares]
    return [Rung(name="oracle", share=0.0), *middle, Rung(name="random", share=1.0)]


def random_action(task: Task, rng: random.Random) -> str:
    """A valid action of the task's environment, drawn at random."""
    if task.domain == "search":
        if rng.random() < 0.5:
            return tool("search", query=" ".join(rng.sample(_WORDS, 2)), k=3)
        return tool("open", doc_id=rng.choice(("json", "os.path", "re", "csv")))
    if task.domain == "terminal":
        command = rng.choice(_COMMANDS)
        return command if rng.random() < 0.8 else f"echo {rng.randint(0, 99)} > answer.txt"
    if task.state.get("server") == "time":
        return tool("get_current_time", timezone=rng.choice(ZONES))
    path = f"{SANDBOX_HOME}/{task.state['repo']['name']}"
    return tool(rng.choice(["git_status", "git_diff_unstaged"]), repo_path=path)


def env_actions(task: Task) -> list[str]:
    return [a for a in task.solution if not a.upper().startswith(ANSWER_PREFIX)]


def rung_actions(task: Task, rung: Rung, seed: int) -> list[str]:
    """The rung's environment actions for ``task`` under ``seed`` (nested draws)."""
    rng = random.Random(f"ladder:{task.id}:{seed}")
    out = []
    for action in env_actions(task):
        u, replacement = rng.random(), random_action(task, rng)
        out.append(replacement if u < rung.share else action)
    return out


def answer_rank(task: Task) -> int:
    """The result number a search task's oracle answers with: the target need not rank
    first (another document can share its description and its score); 1 when the
    oracle names the id itself."""
    final = parse_answer(task.solution[-1]) or ""
    return int(final) if final.isdigit() and int(final) > 0 else 1


def read_answer(task: Task, observation: str) -> str | None:
    """The answer the task's family reads from one observation, or None."""
    if task.family == "search":
        ids, n = result_ids(observation), answer_rank(task)
        return ids[n - 1] if len(ids) >= n else None
    if task.family == "terminal":
        lines = [x.strip() for x in output_text(observation).split("\n") if x.strip()]
        return lines[0] if lines else None
    if task.state.get("answer_kind") == "time":
        m = _TARGET_TIME.search(observation)
        return m.group(1) if m else None
    messages = _MESSAGE.findall(observation)
    if not messages:
        return None
    return str(len(messages)) if task.prompt.startswith("How many") else messages[0].strip()


def _script(env: AgentEnv, task: Task, actions: list[str]) -> Iterator[str]:
    """The actions, then the answer read from the last observation the env showed."""
    yield from actions
    last = env.history[-1][1] if env.history else ""
    yield f"{ANSWER_PREFIX} {read_answer(task, last) or 'unknown'}"


def play(env: AgentEnv, task: Task, rung: Rung, seed: int) -> Episode:
    """One episode of ``rung`` on ``task`` in ``env`` (the world's seed is 0 for every
    rung: a simulator that keeps one world per action prefix shows every rung the same
    world where their actions agree)."""
    actions = rung_actions(task, rung, seed)
    return replay(env, task, _script(env, task, actions), seed=0)
