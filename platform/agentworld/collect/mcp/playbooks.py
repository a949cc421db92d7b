"""MCP playbooks: time-zone questions for mcp-server-time and repository chores for
mcp-server-git, with the argument mistakes agents make (unknown zones, bad times,
missing or mistyped arguments, branches that do not exist)."""

from __future__ import annotations

import random
import re
from collections.abc import Callable

from agentworld.collect.env import Action, Script, Task
from agentworld.collect.playbook import scripted, words
from agentworld.collect.sandbox import SANDBOX_HOME
from agentworld.schema import Turn

ZONES = (
    "UTC Europe/London Europe/Paris Europe/Berlin Europe/Warsaw America/New_York "
    "America/Chicago America/Denver America/Los_Angeles America/Sao_Paulo Asia/Tokyo "
    "Asia/Kolkata Asia/Singapore Asia/Shanghai Australia/Sydney Africa/Nairobi"
).split()
BAD_ZONES = ("Mars/Olympus", "Europe/Pariss", "EST5", "Asia/Tokio", "America/NewYork")


def time_meeting(rng: random.Random) -> Task:
    src, *targets = rng.sample(ZONES, rng.randint(3, 4))
    hhmm = f"{rng.randint(6, 20):02d}:{rng.choice(['00', '15', '30', '45'])}"
    actions = []
    if rng.random() < 0.4:
        actions.append(Action.tool("get_current_time", timezone=src))
    for tgt in targets:
        if rng.random() < 0.2:
            actions.append(
                Action.tool(
                    "convert_time",
                    source_timezone=src,
                    time=hhmm,
                    target_timezone=rng.choice(BAD_ZONES),
                )
            )
        actions.append(
            Action.tool("convert_time", source_timezone=src, time=hhmm, target_timezone=tgt)
        )
    if rng.random() < 0.3:
        bad = rng.choice(["25:00", "9am", "12:75"])
        actions.append(
            Action.tool("convert_time", source_timezone=src, time=bad, target_timezone=targets[0])
        )
    if rng.random() < 0.2:
        actions.append(Action.tool("get_current_time"))
    return Task(
        playbook="mcp/time",
        text=f"A meeting is at {hhmm} in {src}; find the local time in {', '.join(targets)}.",
        script=scripted(actions),
        state={"server": "time"},
    )


def _repo(rng: random.Random) -> dict:
    name = rng.choice(["inventory", "blog", "cli-tools", "weather-app", "recipes"])
    items = words(rng, 4)
    commits = [
        ("Initial commit", {"README.md": f"# {name}\n"}),
        (f"Add {items[0]} module", {f"src/{items[0]}.py": f"def {items[0]}():\n    return 1\n"}),
    ]
    if rng.random() < 0.6:
        commits.append((f"Document {items[1]}", {"README.md": f"# {name}\n\nUses {items[1]}.\n"}))
    dirty = {
        f"src/{items[0]}.py": f"def {items[0]}():\n    return {rng.randint(2, 99)}\n",
        f"src/{items[2]}.py": f"NAME = {items[2]!r}\n",
    }
    return {"name": name, "commits": commits, "dirty": dirty, "items": items}


def git_chores(rng: random.Random) -> Task:
    repo = _repo(rng)
    path = f"{SANDBOX_HOME}/{repo['name']}"
    items = repo["items"]
    branch = f"{rng.choice(['fix', 'feature', 'chore'])}/{items[3]}"

    def gen() -> Script:
        yield Action.tool("git_status", repo_path=path)
        yield Action.tool("git_diff_unstaged", repo_path=path)
        if rng.random() < 0.3:
            yield Action.tool("git_add", repo_path=path, files=[])
        yield Action.tool("git_add", repo_path=path, files=sorted(repo["dirty"]))
        yield Action.tool("git_diff_staged", repo_path=path, context_lines=rng.choice([1, 3]))
        if rng.random() < 0.5:
            yield Action.tool("git_create_branch", repo_path=path, branch_name=branch)
            yield Action.tool("git_checkout", repo_path=path, branch_name=branch)
        elif rng.random() < 0.5:
            yield Action.tool("git_checkout", repo_path=path, branch_name=f"release/{items[1]}")
        yield Action.tool(
            "git_commit", repo_path=path, message=f"Update {items[0]} and add {items[2]}"
        )
        log: Turn = yield Action.tool("git_log", repo_path=path, max_count=rng.randint(2, 5))
        yield Action.tool("git_show", repo_path=path, revision=_first_hash(log.observation))
        yield Action.tool("git_branch", repo_path=path, branch_type=rng.choice(["local", "all"]))

    return Task(
        playbook="mcp/git",
        text=f"Commit the pending changes in {path} with a clear message and review the history.",
        script=gen,
        state={
            "server": "git",
            "repo": repo,
            "context": f"A git repository is checked out at {path} with uncommitted changes.\n",
        },
    )


def git_inspect(rng: random.Random) -> Task:
    repo = _repo(rng)
    repo["dirty"] = {}
    path = f"{SANDBOX_HOME}/{repo['name']}"

    def gen() -> Script:
        log: Turn = yield Action.tool("git_log", repo_path=path)
        yield Action.tool("git_show", repo_path=path, revision=_first_hash(log.observation))
        if rng.random() < 0.4:
            yield Action.tool("git_show", repo_path=path, revision="deadbeef")
        yield Action.tool("git_diff", repo_path=path, target="HEAD~1")
        if rng.random() < 0.3:
            yield Action.tool("git_log", repo_path=path, max_count="three")
        if rng.random() < 0.3:
            yield Action.tool("git_status", repo_path=f"{SANDBOX_HOME}/missing-repo")
        yield Action.tool("git_status", repo_path=path)

    return Task(
        playbook="mcp/git-inspect",
        text=f"Explain what the last commit of {path} changed.",
        script=gen,
        state={"server": "git", "repo": repo, "context": f"A git repository is at {path}.\n"},
    )


def _first_hash(log_text: str) -> str:
    """The first commit hash in a git_log observation (HEAD when there is none)."""

    m = re.search(r"\b[0-9a-f]{40}\b", log_text)
    return m.group(0) if m else "HEAD"


PLAYBOOKS: dict[str, Callable[[random.Random], Task]] = {
    "time": time_meeting,
    "git": git_chores,
    "git-inspect": git_inspect,
}
