"""Terminal playbooks: file chores, text processing, a small git workflow, scripting,
and the everyday mistakes (typos, missing files) that real sessions contain."""

from __future__ import annotations

import random
import shlex
from collections.abc import Callable

from agentworld.collect.env import Action, Task
from agentworld.collect.playbook import scripted, words


def _maybe_typo(rng: random.Random, command: str) -> list[str]:
    """Sometimes the user mistypes the program name first, as people do."""
    if rng.random() < 0.25:
        prog, _, rest = command.partition(" ")
        if len(prog) > 2:
            i = rng.randrange(len(prog) - 1)
            typo = prog[:i] + prog[i + 1] + prog[i] + prog[i + 2 :]
            return [f"{typo} {rest}".strip(), command]
    return [command]


def files_chores(rng: random.Random) -> Task:
    d = rng.choice(["notes", "docs", "drafts", "work", "inbox"])
    names = sorted(set(words(rng, rng.randint(2, 4))))
    token = f"{rng.choice(names)}-{rng.randint(100, 999)}"
    cmds = [f"mkdir -p {d}", *(f"echo {shlex.quote(n + ' ' + token)} > {d}/{n}.txt" for n in names)]
    cmds += _maybe_typo(rng, f"ls -1 {d}")
    cmds += [f"cat {d}/{names[0]}.txt", f"grep -rl {token.split('-')[0]} {d}"]
    if rng.random() < 0.5:
        cmds += [f"mv {d}/{names[-1]}.txt {d}/{names[-1]}.bak", f"ls {d}"]
    if rng.random() < 0.4:
        cmds += [f"cat {d}/missing.txt"]
    cmds += [f"wc -l {d}/*", f"rm -r {d}", "ls"]
    return Task(
        playbook="terminal/files",
        text=f"Create a {d}/ directory with notes named {', '.join(names)}, inspect them, then clean up.",
        script=scripted(Action(text=c) for c in cmds),
    )


def text_processing(rng: random.Random) -> Task:
    rows = [f"{w},{rng.randint(1, 50)}" for w in words(rng, rng.randint(6, 12))]
    data = "name,count\n" + "\n".join(rows) + "\n"
    key = rows[0].split(",")[0]
    cmds = _maybe_typo(rng, "head -n 3 data.csv")
    cmds += [
        "wc -l data.csv",
        "tail -n +2 data.csv | cut -d, -f1 | sort | uniq -c | sort -rn | head -n 5",
        f"grep -n {key} data.csv",
        "awk -F, 'NR>1 {s+=$2} END {print s}' data.csv",
    ]
    if rng.random() < 0.5:
        cmds += ["sort -t, -k2 -n data.csv | tail -n 3"]
    if rng.random() < 0.5:
        cmds += [f"sed -n '2,{rng.randint(3, 6)}p' data.csv"]
    cmds += [f"grep -c {rng.choice(['a', 'e', 'o'])} data.csv"]
    return Task(
        playbook="terminal/text",
        text="Summarize data.csv: how many rows, which names repeat, and the total count.",
        script=scripted(Action(text=c) for c in cmds),
        state={"files": {"data.csv": data}},
    )


def git_workflow(rng: random.Random) -> Task:
    proj = rng.choice(["tools", "site", "scripts", "notes-app", "budget"])
    w1, w2 = words(rng, 2)
    branch = f"feature/{w2}"
    cmds = [
        f"mkdir {proj} && cd {proj}",
        "git init -q -b main",
        f"echo '# {proj}' > README.md",
        "git add README.md",
        "git commit -q -m 'Initial commit'",
        f"git switch -c {branch}",
        f"printf '{w1}\\n{w2}\\n' > items.txt",
        "git status --short",
        "git add items.txt",
        f"git commit -m 'Add {w1} and {w2}'",
        "git log --oneline",
    ]
    if rng.random() < 0.5:
        cmds += ["git switch main", f"git merge --ff-only {branch}", "git log --oneline -n 1"]
    else:
        cmds += ["git diff main --stat"]
    return Task(
        playbook="terminal/git",
        text=f"Start a git repository {proj} and commit a list of items on a feature branch.",
        script=scripted(Action(text=c) for c in cmds),
    )


def scripting(rng: random.Random) -> Task:
    n = rng.randint(5, 40)
    name = rng.choice(["count", "squares", "fizz", "report"])
    body = f"for i in $(seq 1 {n}); do echo $((i * i)); done | tail -n 3"
    cmds = [
        f"printf '#!/bin/bash\\n{body}\\n' > {name}.sh",
        f"./{name}.sh",
        f"chmod +x {name}.sh",
        f"./{name}.sh",
        f"python3 -c 'print(sum(i * i for i in range(1, {n + 1})))'",
    ]
    if rng.random() < 0.5:
        cmds += [f"bash -n {name}.sh && echo syntax ok"]
    cmds += ["echo $HOME $USER", "pwd"]
    return Task(
        playbook="terminal/scripting",
        text=f"Write {name}.sh that prints the last squares up to {n}, run it, and check with Python.",
        script=scripted(Action(text=c) for c in cmds),
    )


def explore(rng: random.Random) -> Task:
    logs = {
        f"logs/{w}.log": "".join(
            f"2026-01-0{d} {rng.choice(['INFO', 'WARN', 'ERROR'])} {rng.choice(['start', 'stop', 'retry', 'timeout'])}\n"
            for d in range(1, rng.randint(3, 9))
        )
        for w in sorted(set(words(rng, 3)))
    }
    level = rng.choice(["ERROR", "WARN"])
    cmds = _maybe_typo(rng, "ls -R")
    cmds += [
        "du -sh logs",
        f"grep -c {level} logs/*.log",
        "find . -name '*.log' | sort",
        f"grep -h {level} logs/*.log | sort | head -n 5",
        "cd logs && ls -1 | wc -l",
        "cd ..",
        "tar czf logs.tgz logs && tar tzf logs.tgz",
    ]
    return Task(
        playbook="terminal/explore",
        text=f"Find which log files contain {level} lines and archive the logs.",
        script=scripted(Action(text=c) for c in cmds),
        state={"files": logs},
    )


PLAYBOOKS: dict[str, Callable[[random.Random], Task]] = {
    "files": files_chores,
    "text": text_processing,
    "git": git_workflow,
    "scripting": scripting,
    "explore": explore,
}
