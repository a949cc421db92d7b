"""Distil a world model's reasoning: for every turn of every record, a teacher (any
OpenAI-compatible endpoint) writes the reasoning that leads from the session so far and
the action to the observation the environment really returned; it goes into the turn's
``simulator_reasoning``, which SFT then targets as a think block before the observation.

Concurrent (the client's bounded concurrency) and resumable: each answered turn is one
line of ``<out>/journal.jsonl``, appended and flushed as it arrives; a rerun skips the
turns answered there and asks again for those that failed. A failed request is retried
with back-off, then recorded as failed (journal, ``failed.jsonl``, manifest counts),
never dropped. The records are written once, at the end, to ``<out>/records/``.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from agentworld.io import join, read_records, write_jsonl, write_manifest
from agentworld.schema import Trajectory, predict_turn_messages
from agentworld.schema.parse import split_reasoning
from agentworld.scoring.chat_client import ChatClient, EndpointError
from agentworld.scoring.config import DistillConfig

TEACHER_SYSTEM = (
    "You study how an environment (a shell, a tool server, a search engine, a web page, "
    "an app) answers an agent. You are shown the environment's description, the session "
    "so far, the agent's latest action and the observation the environment really "
    "returned. Write the reasoning a simulator of this environment would think through "
    "before producing exactly that observation: what state the environment is in, what "
    "the action does to it, what the answer must therefore contain and in which format. "
    "Write only the reasoning, in a few short paragraphs; do not copy the observation."
)


@dataclass(frozen=True)
class TurnKey:
    trajectory: str
    turn: int  # 1-based

    @property
    def text(self) -> str:
        return f"{self.trajectory}#{self.turn}"


def teacher_messages(traj: Trajectory, k: int, max_chars: int) -> list[dict[str, str]]:
    """The teacher's prompt for turn ``k``: the context as the world model sees it
    (oldest turns dropped past ``max_chars``), the action and the recorded observation."""
    messages = predict_turn_messages(traj, k)
    system, history, action = messages[0]["content"], messages[1:-1], messages[-1]["content"]
    while history and sum(len(m["content"]) for m in history) + len(system) > max_chars:
        history = history[2:]
    lines = [f"## Environment\n{system}", "## Session so far"]
    for i in range(0, len(history), 2):
        lines.append(f"Action: {history[i]['content']}\nObservation: {history[i + 1]['content']}")
    lines += [
        f"## Latest action\n{action}",
        f"## Observation returned\n{traj.turns[k - 1].observation}",
    ]
    return [
        {"role": "system", "content": TEACHER_SYSTEM},
        {"role": "user", "content": "\n\n".join(lines)},
    ]


def read_journal(path: str) -> dict[str, dict[str, Any]]:
    """The latest entry per turn key; a line cut by a kill is ignored (asked again)."""
    done: dict[str, dict[str, Any]] = {}
    if not os.path.exists(path):
        return done
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue
            done[entry["key"]] = entry
    return done


def _reasoning(text: str) -> str:
    """The teacher's answer: what it wrote after its own think block (a reasoning model
    served with a reasoning parser returns that block apart), or the think block's text
    where it wrote nothing else."""
    thought, answer, _ = split_reasoning(text)
    return answer.strip() or (thought or "").strip()


async def _ask(client: ChatClient, cfg: DistillConfig, traj, key: TurnKey, journal) -> None:
    messages = teacher_messages(traj, key.turn, cfg.max_context_chars)
    try:
        reply = await client.complete(messages, cfg.sampling)
        entry = {"key": key.text, "status": "ok", "reasoning": _reasoning(reply.text)}
        entry["attempts"] = reply.attempts
        if not entry["reasoning"]:
            entry = {"key": key.text, "status": "failed", "error": "empty answer"}
    except EndpointError as e:
        entry = {"key": key.text, "status": "failed", "error": str(e), "attempts": e.attempts}
    journal.write(json.dumps(entry, ensure_ascii=False) + "\n")
    journal.flush()


async def ask_teacher(cfg: DistillConfig, trajs: list[Trajectory], journal_path: str) -> None:
    """Ask for every turn the journal does not hold as answered; append each result."""
    done = read_journal(journal_path)
    todo = [
        (traj, TurnKey(traj.id, k))
        for traj in trajs
        for k in range(1, len(traj.turns) + 1)
        if done.get(f"{traj.id}#{k}", {}).get("status") != "ok"
    ]
    if not todo:
        return
    with open(journal_path, "a", encoding="utf-8") as journal:
        async with ChatClient(cfg.endpoint) as client:
            await asyncio.gather(*(_ask(client, cfg, t, key, journal) for t, key in todo))


def with_reasoning(traj: Trajectory, journal: dict[str, dict[str, Any]]) -> Trajectory:
    turns = []
    for k, turn in enumerate(traj.turns, start=1):
        entry = journal.get(f"{traj.id}#{k}", {})
        if entry.get("status") == "ok":
            turn = replace(turn, simulator_reasoning=entry["reasoning"])
        turns.append(turn)
    return replace(traj, turns=tuple(turns))


def distill(cfg: DistillConfig, inputs: Iterable[str], out: str) -> dict[str, Any]:
    """Distil the records under ``inputs`` into ``out`` (a local directory); returns the
    manifest."""
    trajs = [t for url in inputs for t in read_records(url).records]
    if len({t.id for t in trajs}) != len(trajs):
        raise ValueError("trajectory ids must be unique: the journal is keyed by them")
    os.makedirs(out, exist_ok=True)
    journal_path = os.path.join(out, "journal.jsonl")
    asyncio.run(ask_teacher(cfg, trajs, journal_path))
    journal = read_journal(journal_path)
    records = [with_reasoning(t, journal) for t in trajs]
    write_jsonl(join(out, "records", "part-00000.jsonl"), [t.to_dict() for t in records])
    failed = [e for e in journal.values() if e["status"] != "ok"]
    write_jsonl(join(out, "failed.jsonl"), failed)
    turns = sum(len(t.turns) for t in trajs)
    return write_manifest(
        out,
        stage="distill",
        inputs={"records": list(inputs), "teacher": cfg.endpoint.base_url},
        config=cfg,
        counts={"trajectories": len(trajs), "turns": turns, "reasoned": turns - len(failed)},
        outputs={"records": join(out, "records"), "failed": join(out, "failed.jsonl")},
        status="complete" if not failed else "partial",
    )
