"""Search playbooks: look something up in the standard-library docs. Queries are
built from a randomly chosen target document (words of its name and text, sometimes
vague, sometimes misspelled); the scripted user opens results, refines, and opens the
target when it shows up."""

from __future__ import annotations

import random
import re
from collections.abc import Callable

from agentworld.collect.env import Action, Script, Task
from agentworld.collect.search.env import load_corpus
from agentworld.schema import Turn

_STOP = set(
    "the a an of to and or in is are be by for with as on at it this that from if not "
    "return returns object objects value values none true false can may use used".split()
)


def _query_words(rng: random.Random, doc_id: str, text: str, n: int) -> list[str]:
    words = [w.lower() for w in re.findall(r"[A-Za-z]{4,}", text)]
    words = [w for w in dict.fromkeys(words) if w not in _STOP][:30]
    picked = rng.sample(words, min(n, len(words)))
    if rng.random() < 0.5:
        picked.insert(0, doc_id.rsplit(".", 1)[-1].replace("_", " "))
    return picked


def _typo(rng: random.Random, word: str) -> str:
    if len(word) < 5:
        return word
    i = rng.randrange(1, len(word) - 1)
    return word[:i] + word[i + 1 :]


def _result_ids(observation: str) -> list[str]:
    return re.findall(r"^\d+\. (\S+) \(", observation, flags=re.M)


def lookup(rng: random.Random) -> Task:
    docs = [d for d in load_corpus() if d.kind != "module" and len(d.text) > 80]
    target = rng.choice(docs)
    words = _query_words(rng, target.id, target.text, rng.randint(2, 4))
    vague = " ".join(words[1:] or words)
    if rng.random() < 0.25:
        vague = " ".join(_typo(rng, w) for w in vague.split())
    precise = " ".join(words)

    def gen() -> Script:
        first: Turn = yield Action.tool("search", query=vague, k=rng.choice([3, 5]))
        ids = _result_ids(first.observation)
        if ids and rng.random() < 0.6:
            yield Action.tool("open", doc_id=rng.choice(ids))
        if target.id not in ids:
            second: Turn = yield Action.tool("search", query=precise, k=5)
            ids = _result_ids(second.observation)
        if rng.random() < 0.15:
            yield Action.tool("open", doc_id=target.id.replace(".", "_"))
        yield Action.tool("open", doc_id=target.id if target.id in ids else (ids or [target.id])[0])

    return Task(
        playbook="search/lookup",
        text=f"Find the standard-library function or class for: {precise}.",
        script=gen,
        state={"target": target.id},
    )


PLAYBOOKS: dict[str, Callable[[random.Random], Task]] = {"lookup": lookup}
