"""BrowserGym / AgentLab experiment folders: ``step_N.pkl.gz`` (a pickled StepInfo: the
observation the agent saw at step N and the action it chose), ``summary_info.json``
(reward, termination), ``goal_object.pkl.gz``, ``screenshot_step_N.png``.

Step N's action and step N+1's observation are one turn: the action code the agent
emitted (``click('a405')``; the prose before it, or the agent's ``think``, is the
reasoning), the page that followed as the web collector shows pages (error first, URL,
title, then the accessibility tree as ``[bid] role "name"`` lines: agentworld.data.
formats.bgym_axtree), and the path of ``screenshot_step_{N+1}.png``. The goal and the
first page are the environment. Outcome: the cumulated reward; success when the task
terminated with a positive reward.

Pickles are read only through the restricted unpickler (agentworld.data.formats.
safe_pickle): a step naming any global outside its allow-list quarantines the folder,
the reason naming the global and the step file; nothing in it runs. Domain ``web``.
"""

from __future__ import annotations

import gzip
import json
import pickle
import re
import zlib
from collections.abc import Iterator
from typing import Any

from agentworld.data.formats.base import Head, Item, Problem, Unit, describe, guarded, text_of
from agentworld.data.formats.bgym_axtree import render_object, render_text
from agentworld.data.formats.safe_pickle import ForbiddenGlobal, Record, loads
from agentworld.schema import Outcome, RecordError, Trajectory, Turn

FORMAT = "browsergym"
_STEP = re.compile(r"^step_(\d+)\.pkl(?:\.gz)?$")
_CODE = re.compile(r"```(?:python)?\s*(.*?)```", re.S)


def detect(path: str, head: Head) -> bool:
    return head.is_dir and any(_STEP.match(n) for n in head.names)


def read(unit: Unit) -> Iterator[Item]:
    names = unit.names()
    steps = sorted((int(m.group(1)), n) for n in names if (m := _STEP.match(n)))
    states = []
    for _, name in steps:
        try:
            states.append(_state(unit, name))
        except ForbiddenGlobal as e:
            yield Problem(
                position=name, reason=f"{e} in {name}: not unpickled", error="ForbiddenGlobal"
            )
            return
        except (
            pickle.UnpicklingError,
            EOFError,
            OSError,
            zlib.error,
            ValueError,
            RecordError,
        ) as e:
            yield Problem(
                position=name, reason=f"unreadable step: {describe(e)}", error=type(e).__name__
            )
            return
    yield guarded("folder", lambda: build(unit, states, names))


def _state(unit: Unit, name: str) -> dict[str, Any]:
    data = unit.read_bytes(name)
    if name.endswith(".gz"):
        data = gzip.decompress(data)
    obj = loads(data)
    if not isinstance(obj, Record) or not isinstance(obj.state, dict):
        raise RecordError(f"{name} holds no StepInfo")
    return obj.state


def build(unit: Unit, states: list[dict[str, Any]], names: list[str]) -> Trajectory:
    if not states:
        raise RecordError("no step files")
    turns = []
    for k in range(len(states) - 1):
        action = states[k].get("action")
        if not isinstance(action, str) or not action.strip():
            continue
        code, reasoning = split_action(action, states[k].get("agent_info"))
        shot = f"screenshot_step_{k + 1}.png"
        turns.append(
            Turn(
                action=code,
                observation=page_text(states[k + 1].get("obs")),
                reasoning=reasoning,
                screenshot=unit.child(shot) if shot in names else None,
                metadata={"step": k},
            )
        )
    summary = _summary(unit, names)
    return Trajectory(
        id=unit.label,
        domain="web",
        source=unit.source(FORMAT),
        environment=_environment(unit, names, states[0]),
        turns=tuple(turns),
        outcome=_outcome(summary),
        metadata={"format": FORMAT, "steps": len(states)},
    )


def split_action(action: str, agent_info: Any) -> tuple[str, str | None]:
    """(the action code, the reasoning): the last fenced block of an answer that wraps
    its code in prose, or the whole action; the agent's ``think`` before the prose."""
    think = agent_info.get("think") if isinstance(agent_info, dict) else None
    think = think if isinstance(think, str) and think.strip() else None
    blocks = _CODE.findall(action)
    if not blocks:
        return action.strip(), think
    prose = _CODE.sub("", action).strip()
    return blocks[-1].strip(), think or prose or None


def page_text(obs: Any) -> str:
    """The page as the web collector writes it: error, URL, title, tree."""
    if not isinstance(obs, dict):
        raise RecordError("the step has no observation")
    if isinstance(obs.get("axtree_object"), dict):
        title, url, tree = render_object(obs["axtree_object"])
    else:
        title, url, tree = render_text(text_of(obs.get("axtree_txt"), "obs.axtree_txt"))
    urls, titles = obs.get("open_pages_urls") or [], obs.get("open_pages_titles") or []
    url = url or (str(urls[0]) if urls else "")
    title = title or (str(titles[0]) if titles else "")
    head = []
    error = obs.get("last_action_error")
    if isinstance(error, str) and error.strip():
        head += [f"Error: {error.strip()}", ""]
    head += [f"URL: {url}", f"Title: {title}"]
    return "\n".join([*head, tree]) if tree else "\n".join(head)


def _environment(unit: Unit, names: list[str], first: dict[str, Any]) -> str:
    goal = _goal(unit, names, first.get("obs"))
    return f"Goal: {goal}\n\n{page_text(first.get('obs'))}"


def _goal(unit: Unit, names: list[str], obs: Any) -> str:
    if isinstance(obs, dict) and isinstance(obs.get("goal"), str) and obs["goal"]:
        return obs["goal"]
    if "goal_object.pkl.gz" in names:
        try:
            return text_of(
                loads(gzip.decompress(unit.read_bytes("goal_object.pkl.gz"))), "goal_object"
            )
        except (pickle.UnpicklingError, EOFError, OSError, zlib.error, RecordError):
            pass
    messages = obs.get("chat_messages") if isinstance(obs, dict) else None
    users = [
        m.get("message") for m in messages or [] if isinstance(m, dict) and m.get("role") == "user"
    ]
    return str(users[0]) if users else ""


def _summary(unit: Unit, names: list[str]) -> dict[str, Any]:
    if "summary_info.json" not in names:
        return {}
    try:
        doc = json.loads(unit.read_text("summary_info.json"))
    except (json.JSONDecodeError, RecordError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _outcome(summary: dict[str, Any]) -> Outcome | None:
    reward = summary.get("cum_reward")
    if isinstance(reward, bool) or not isinstance(reward, int | float):
        return None
    err = summary.get("err_msg")
    return Outcome(
        reward=float(reward),
        success=bool(summary.get("terminated")) and reward > 0,
        note=f"error: {err}" if isinstance(err, str) and err else None,
    )
