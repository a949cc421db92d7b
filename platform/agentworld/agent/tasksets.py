"""Generated task sets, one generator per family, each task with its gold answer,
reference facts, perturbations and an oracle solution; a stable held-out split.

- search: find the standard-library object for a docstring's first line (gold: doc id);
- table: WideSearch-style, every class and function of a module with columns name |
  kind | documented_methods (gold from the corpus the search tool indexes);
- terminal: a question about data.csv whose answer goes to answer.txt (gold computed
  here; checked in the sandbox);
- mcp: time conversions and repository questions whose gold answers are computed
  through the real mcp-server-time and mcp-server-git;
- web: Datasette questions and helpdesk form work in real Chromium, checked on the
  applications' state (``agentworld.agent.webtasks``).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import random
import re
from collections.abc import Callable

from agentworld.agent.config import TasksConfig
from agentworld.agent.tasks import ANSWER_PREFIX, Table, Task
from agentworld.agent.webtasks import web_task
from agentworld.collect.env import Action
from agentworld.collect.mcp.playbooks import ZONES, _repo
from agentworld.collect.playbook import words
from agentworld.collect.sandbox import SANDBOX_HOME
from agentworld.collect.search.env import CORPUS_MODULES, get_index, load_corpus


def tool(name: str, **arguments) -> str:
    """A tool-call action as the agent writes it (the collectors' rendering)."""
    return Action.tool(name, **arguments).text


def _first_line(text: str) -> str:
    return " ".join(text.strip().split("\n\n")[0].split())


def _perturb(rng: random.Random, tool_name: str | None, *, paged: bool) -> dict:
    """One perturbation per task, drawn: a tool error at turn 1, pagination, or a
    hidden field (the last two only where results are lists)."""
    kinds = ["tool_errors", "paginate", "hide_fields"] if paged else ["tool_errors"]
    kind = rng.choice(kinds)
    if kind == "tool_errors":
        message = f"Error: {tool_name or 'the command'} is temporarily unavailable; retry."
        return {"tool_errors": [{"tool": tool_name, "turns": [1], "message": message}]}
    if kind == "paginate":
        return {"paginate": {"page_size": 2}}
    return {"hide_fields": ["score"]}


@functools.cache
def _search_targets() -> tuple:
    return tuple(d for d in load_corpus() if d.kind != "module" and len(_first_line(d.text)) > 30)


def short_query(description: str, target: str) -> tuple[str, int]:
    """The shortest prefix of the description's words (from 4) that the real index
    ranks the target first for, and 1; else the whole description and the target's
    rank in its top 5 (0 when absent). How a searching agent writes a query."""
    index, tokens = get_index(), description.split()
    for n in (4, 6, 8, 12):
        query = " ".join(tokens[:n])
        hits = index.search(query, 5)
        if hits and hits[0][0].id == target:
            return query, 1
    ranked = [d.id for d, _ in index.search(description, 5)]
    return description, ranked.index(target) + 1 if target in ranked else 0


def search_task(rng: random.Random, index: int, seed: int) -> Task:
    target = rng.choice(_search_targets())
    description = _first_line(target.text)[:160]
    query, rank = short_query(description, target.id)
    # The answer names the document by its result number where the search shows it
    # (resolved against what the environment showed: ``envs.resolve_result_number``).
    final = str(rank) if rank else target.id
    return Task(
        id=f"search-s{seed}-{index:04d}",
        family="search",
        prompt=f"Find the standard-library object described as: {description} Answer with its id or its result number.",
        answer=target.id,
        facts=(
            f"The document {target.id} ({target.kind}) is the best match for the description.",
            f"{target.id}: {description}",
        ),
        perturbations=_perturb(rng, "search", paged=True),
        solution=(tool("search", query=query, k=5), f"{ANSWER_PREFIX} {final}"),
    )


@functools.cache
def module_tables() -> dict[str, list[tuple[str, str, str]]]:
    """module -> [(name, kind, documented_methods)] for modules with 2-6 members."""

    docs = load_corpus()
    out = {}
    for mod in CORPUS_MODULES:
        members = [
            d for d in docs if d.id.startswith(mod + ".") and "." not in d.id[len(mod) + 1 :]
        ]
        rows = []
        for d in members:
            n = sum(1 for m in docs if m.kind == "method" and m.id.startswith(d.id + "."))
            rows.append((d.id[len(mod) + 1 :], d.kind, str(n)))
        if 2 <= len(rows) <= 6:
            out[mod] = sorted(rows)
    return out


def markdown_table(columns: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def table_task(rng: random.Random, index: int, seed: int) -> Task:
    tables = module_tables()
    mod = rng.choice(sorted(tables))
    rows = tables[mod]
    columns = ("name", "kind", "documented_methods")
    facts = [f"Module {mod} defines exactly {len(rows)} public classes and functions."]
    facts += [f"{mod}.{n} is a {k} with {m} documented methods." for n, k, m in rows]
    return Task(
        id=f"table-s{seed}-{index:04d}",
        family="table",
        prompt=(
            f"List every public class and function of the {mod} module as a markdown table "
            "with columns: name | kind | documented_methods (name without the module prefix; "
            "kind is class or function; documented_methods is 0 for functions)."
        ),
        table=Table(
            columns=columns,
            unique=("name",),
            rows=tuple(rows),
            metrics={
                "kind": {"metric": "exact"},
                "documented_methods": {"metric": "number", "tolerance": 0.0},
            },
        ),
        facts=tuple(facts),
        perturbations=_perturb(rng, "search", paged=True),
        solution=(
            tool("search", query=f"{mod} module", k=5),
            f"{ANSWER_PREFIX}\n{markdown_table(columns, rows)}",
        ),
    )


TERMINAL_FILES = ("data.csv", "sales.csv", "scores.csv", "stock.csv", "visits.csv")
TERMINAL_COLUMNS = ("count", "score", "price", "qty", "visits")


def _terminal_question(rng: random.Random, col: str, f: str, names, values) -> tuple[str, str, str]:
    """(question, gold answer, oracle command) of one of six kinds; thresholds are drawn
    so that held-out tasks need the prompt's number copied, not remembered."""
    kind = rng.choice(["above", "below", "sum", "max", "min", "rows"])
    if kind in ("above", "below"):
        t = rng.randint(5, 55)
        op = ">" if kind == "above" else "<"
        n = sum(v > t if kind == "above" else v < t for v in values)
        command = f"awk -F, 'NR>1 && $2{op}{t}' {f} | wc -l > answer.txt"
        return f"How many rows have a {col} {kind} {t}?", str(n), command
    if kind == "sum":
        command = f"awk -F, 'NR>1 {{s+=$2}} END {{print s}}' {f} > answer.txt"
        return f"What is the total of the {col} column?", str(sum(values)), command
    if kind == "rows":
        command = f"tail -n +2 {f} | wc -l > answer.txt"
        return "How many data rows are there (not counting the header)?", str(len(names)), command
    best = max(values) if kind == "max" else min(values)
    order = "-nr" if kind == "max" else "-n"
    command = f"tail -n +2 {f} | sort -t, -k2 {order} -s | head -n 1 | cut -d, -f1 > answer.txt"
    word = "largest" if kind == "max" else "smallest"
    question = f"Which name has the {word} {col} (the first one on a tie)?"
    return question, names[values.index(best)], command


def terminal_task(rng: random.Random, index: int, seed: int) -> Task:
    f, col = rng.choice(TERMINAL_FILES), rng.choice(TERMINAL_COLUMNS)
    names = sorted(set(words(rng, rng.randint(5, 9))))
    values = [rng.randint(1, 60) for _ in names]
    data = f"name,{col}\n" + "".join(f"{n},{v}\n" for n, v in zip(names, values, strict=True))
    question, answer, command = _terminal_question(rng, col, f, names, values)
    return Task(
        id=f"terminal-s{seed}-{index:04d}",
        family="terminal",
        prompt=f"{f} lists names and their {col}. {question} Write the answer to answer.txt, then reply with it.",
        answer=answer,
        checks=({"command": "cat answer.txt", "expect": answer},),
        facts=(
            f"{SANDBOX_HOME}/{f} contains exactly:\n{data.rstrip()}",
            f"The answer to the question is {answer}.",
        ),
        perturbations=_perturb(rng, None, paged=False),
        state={"files": {f: data}},
        solution=(command, "cat answer.txt", f"{ANSWER_PREFIX} {answer}"),
    )


def mcp_task(rng: random.Random, index: int, seed: int, oracle: Callable[[dict, str], str]) -> Task:
    """Gold answers come from ``oracle(state, action) -> observation``: the real server."""

    if rng.random() < 0.5:
        src, tgt = rng.sample(ZONES, 2)
        hhmm = f"{rng.randint(6, 20):02d}:{rng.choice(['00', '15', '30', '45'])}"
        action = tool("convert_time", source_timezone=src, time=hhmm, target_timezone=tgt)
        state = {"server": "time", "answer_kind": "time"}
        observation = oracle(state, action)
        m = re.search(r'"target".*?"datetime": "[^T]*T(\d\d:\d\d)', observation, re.S)
        if not m:
            raise RuntimeError(f"mcp-server-time answered unexpectedly: {observation[:200]}")
        answer = m.group(1)
        prompt = f"A meeting is at {hhmm} in {src}. What is the local time in {tgt}? Answer HH:MM."
    else:
        repo = _repo(rng)
        repo["dirty"] = {}
        path = f"{SANDBOX_HOME}/{repo['name']}"
        action = tool("git_log", repo_path=path)
        state = {"server": "git", "repo": repo, "context": f"A git repository is at {path}.\n"}
        observation = oracle(state, action)
        messages = re.findall(r"^Message: (.*)$", observation, re.M)
        if not messages:
            raise RuntimeError(f"mcp-server-git answered unexpectedly: {observation[:200]}")
        if rng.random() < 0.5:
            answer, question = messages[0].strip(), "What is the message of the latest commit"
        else:
            answer, question = str(len(messages)), "How many commits are there in the history"
        prompt = f"{question} of the repository at {path}?"
    return Task(
        id=f"mcp-s{seed}-{index:04d}",
        family="mcp",
        prompt=prompt,
        answer=answer,
        facts=(
            f"The tool call {action} returns:\n{observation.strip()}",
            f"The answer is {answer}.",
        ),
        perturbations=_perturb(rng, action and _tool_name(action), paged=False),
        state=state,
        solution=(action, f"{ANSWER_PREFIX} {answer}"),
    )


def _tool_name(action: str) -> str:
    return json.loads(action)["name"]


def held_out(key: str, fraction: float) -> bool:
    h = int(hashlib.sha256(key.encode()).hexdigest()[:8], 16)
    return h / 0xFFFFFFFF < fraction


def split_key(task: Task) -> str:
    """What the held-out hash reads: the target for search (the document) and table
    (the module) tasks, so that no target is on both sides and a held-out task cannot
    be solved by remembering a training one; the id for the others (their data, a web
    task's database or tickets among them, are drawn per task)."""
    if task.family == "search":
        return f"search:{task.answer}"
    if task.family == "table":
        return f"table:{task.prompt}"  # the prompt names the module and nothing else varies
    return task.id


def _split(tasks: list[Task], fraction: float) -> list[Task]:
    """Held-out by a hash of each task's ``split_key``: a task's side does not depend
    on how many tasks were generated. Only a set so small that the hash puts every
    task on one side gets one task moved (the last to eval, or the first to train)."""

    flags = [held_out(split_key(t), fraction) for t in tasks]
    if not any(flags):
        flags[-1] = True
    if all(flags):
        flags[0] = False
    return [
        dataclasses.replace(t, split="eval" if f else "train")
        for t, f in zip(tasks, flags, strict=True)
    ]


def generate_tasks(
    cfg: TasksConfig, oracle: Callable[[dict, str], str] | None = None
) -> list[Task]:
    """``cfg.per_family`` tasks per family. The mcp family needs ``oracle`` (the real
    servers, see ``agentworld.agent.envs.RealOracle``)."""
    out: list[Task] = []
    for family in cfg.families:
        rng = random.Random(f"agentworld-agent:{cfg.seed}:{family}")
        tasks = []
        for i in range(cfg.per_family):
            if family == "mcp":
                if oracle is None:
                    raise ValueError("the mcp family needs the real servers to compute its answers")
                tasks.append(mcp_task(rng, i, cfg.seed, oracle))
            else:
                make = {
                    "search": search_task,
                    "table": table_task,
                    "terminal": terminal_task,
                    "web": web_task,
                }[family]
                tasks.append(make(rng, i, cfg.seed))
        out += _split(tasks, cfg.eval_fraction)
    return out
