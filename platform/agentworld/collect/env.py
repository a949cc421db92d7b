"""What every recorded environment implements, and the per-task workspace they share.

An episode is: a playbook draws a Task from a seeded RNG (initial state, task text,
scripted actions); the environment is set up from the task and describes itself
(``reset`` returns the environment text); a policy picks actions; each ``step`` runs
one action for real and returns the Turn (action and the real observation).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

from agentworld.collect.config import CollectConfig
from agentworld.schema import Outcome, ToolCall, Turn
from agentworld.schema.chat import render_tool_call

Script = Generator["Action", Turn, None]
ARTIFACTS = "artifacts"


@dataclass(frozen=True, kw_only=True)
class Action:
    """An agent action: the text a model sees, and the tool call when it is one."""

    text: str
    tool_call: ToolCall | None = None

    @classmethod
    def tool(cls, name: str, /, **arguments: Any) -> Action:
        call = ToolCall(name=name, arguments=arguments)
        return cls(text=render_tool_call(call), tool_call=call)


_JSON_OBJ = re.compile(r"\{.*\}", re.S)


def parse_tool_call(text: str) -> Action:
    """A tool call from a model reply: the outermost JSON object with a name; anything
    else stays a plain-text action (the environment answers that it is not a call)."""
    m = _JSON_OBJ.search(text)
    if m:
        try:
            obj = json.loads(m.group(0))
        except json.JSONDecodeError:
            obj = None
        if isinstance(obj, dict) and isinstance(obj.get("name"), str):
            args = obj.get("arguments") or {}
            if isinstance(args, dict):
                return Action.tool(obj["name"], **args)
    return Action(text=text.strip()[:500])


@dataclass(frozen=True, kw_only=True)
class Task:
    """One episode's set-up and goal, drawn by a playbook from a seeded RNG."""

    playbook: str
    """Name of the playbook family (kept in the trajectory's metadata)."""
    text: str
    """The goal, as the agent reads it (part of the environment text)."""
    script: Callable[[], Script]
    """The scripted policy: a generator of actions that is sent each resulting Turn."""
    state: dict[str, Any] = field(default_factory=dict)
    """Domain-specific initial state (files to create, repository to generate, ...)."""


class Workspace:
    """Per-Ray-task scratch space and shared, slow-to-start resources (MCP servers,
    the search index), reused by the episodes of one task and closed with it."""

    def __init__(self, config: CollectConfig) -> None:
        self.config = config
        self.root = tempfile.mkdtemp(prefix="aw-collect-")
        self._resources: dict[str, Any] = {}
        self._counter = 0

    def episode_dir(self) -> str:
        """A fresh, empty host directory for one episode (shown as /home/agent)."""
        self._counter += 1
        path = os.path.join(self.root, f"ep-{self._counter:04d}")
        os.makedirs(path)
        return path

    def artifact_path(self, relative: str) -> str:
        """Where to write a file that travels with the records (a screenshot): a record
        names it by ``relative``, a path under the collect run's output folder."""
        path = os.path.join(self.root, ARTIFACTS, relative)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return path

    def take_artifacts(self) -> dict[str, bytes]:
        """The files written with artifact_path since the last call, by relative path;
        they are removed here (the caller writes them beside the records)."""
        base = os.path.join(self.root, ARTIFACTS)
        out: dict[str, bytes] = {}
        for folder, _, names in os.walk(base):
            for name in names:
                path = os.path.join(folder, name)
                with open(path, "rb") as f:
                    out[os.path.relpath(path, base)] = f.read()
        shutil.rmtree(base, ignore_errors=True)
        return dict(sorted(out.items()))

    def resource(self, key: str, factory: Callable[[], Any]) -> Any:
        if key not in self._resources:
            self._resources[key] = factory()
        return self._resources[key]

    def drop(self, prefix: str) -> None:
        """Close and forget the resources whose key starts with ``prefix`` (they are
        started afresh on next use)."""
        for key in [k for k in self._resources if k.startswith(prefix)]:
            close = getattr(self._resources.pop(key), "close", None)
            try:
                if close is not None:
                    close()
            except Exception:  # noqa: BLE001 - a broken resource is being discarded anyway
                pass

    def close(self) -> None:
        # A server that fails to shut down cleanly must not cost the chunk its records.
        self.drop("")
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Environment:
    """Base of the recorded environments."""

    domain: str = ""
    source: str = ""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self.config = workspace.config
        self.ended = False
        """True once the environment cannot take more actions (e.g. its shell was killed)."""
        self.episode_id = ""
        """The episode's id (set by run_episode before reset): names its artifacts."""

    def reset(self, task: Task) -> str:
        """Set up the initial state; return the environment text (tools, state, task)."""
        raise NotImplementedError

    def step(self, action: Action) -> Turn:
        raise NotImplementedError

    def outcome(self) -> Outcome | None:
        return None

    def parse_agent_action(self, text: str) -> Action:
        """Turn an agent model's reply into an action (see agentworld.collect.agent)."""
        raise NotImplementedError

    def close(self) -> None:
        pass
