"""The ingest formats, one row each: the adapter module that detects and reads it, the
domain its records usually belong to, and what it reads. A new format is one module in
this folder (``detect(path, head)`` and ``read(unit)``) and one row here (docs/formats.md).

Rows name modules instead of importing them: the table stays light (the data config
reads its keys), and an adapter's dependencies (pyte for casts) load only when a file of
its format is read. Order matters: ``auto`` asks the rows in order and the first that
claims a file reads it, so a specific format comes before a general one.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import Any

SHARD_FORMATS = ("record", "awb", "chat")
"""The platform's own line formats, read from JSONL and Parquet shards (agentworld.io)."""


@dataclass(frozen=True, kw_only=True)
class Format:
    """Where one ingest format's adapter is, and what it reads."""

    module: str
    """The adapter module: ``detect(path, head) -> bool`` and ``read(unit)`` yielding
    Trajectory or Problem; with ``lines``, also ``claims_line(obj)`` and
    ``from_line(obj, source, position)`` for one JSONL line."""
    domain: str
    """The domain its records usually get (the adapter may decide per record); a part
    it cannot read is counted under it."""
    reads: str
    """One line: the source and its shape."""
    folder: bool = False
    """It claims folders (one folder, one input unit), not files."""
    lines: bool = False
    """Its records also come one per JSONL line, read by prepare's line reader."""

    def adapter(self) -> ModuleType:
        return importlib.import_module(self.module)


_PKG = "agentworld.data.formats"

FORMATS: dict[str, Format] = {
    "swe_agent": Format(
        module=f"{_PKG}.swe_agent",
        domain="swe",
        reads="SWE-agent .traj: trajectory steps (thought, action, observation), history",
    ),
    "openhands": Format(
        module=f"{_PKG}.openhands",
        domain="swe",
        reads="OpenHands event streams: evaluation output.jsonl records, bare event lists",
        lines=True,
    ),
    "toolbench": Format(
        module=f"{_PKG}.toolbench",
        domain="mcp",
        reads="ToolBench answers: the winning chain, legacy function_call messages",
    ),
    "openai_chat": Format(
        module=f"{_PKG}.openai_chat",
        domain="mcp",
        reads="OpenAI chat with tool_calls and role tool (tau-bench traj, message lists)",
    ),
    "mcp_xml": Format(
        module=f"{_PKG}.mcp_xml",
        domain="mcp",
        reads="MCP calls as <use_mcp_tool> XML in assistant text (MiroFlow task results)",
    ),
    "intercode": Format(
        module=f"{_PKG}.intercode",
        domain="terminal",
        reads="InterCode results: parallel actions / observations per task",
    ),
    "asciicast": Format(
        module=f"{_PKG}.asciicast",
        domain="terminal",
        reads="asciicast v2 terminal recordings, rendered by a terminal emulator",
    ),
    "search_r1": Format(
        module=f"{_PKG}.search_r1",
        domain="search",
        reads="Search-R1 rollouts: chat-template text with <search> and <information>",
    ),
    "react": Format(
        module=f"{_PKG}.react",
        domain="search",
        reads="ReAct logs: Question, Thought n, Action n, Observation n blocks",
    ),
    "browsergym": Format(
        module=f"{_PKG}.browsergym",
        domain="web",
        reads="BrowserGym / AgentLab experiment folders: step_N.pkl.gz, summary_info.json",
        folder=True,
    ),
    "aitz": Format(
        module=f"{_PKG}.aitz",
        domain="android",
        reads="AITW / AITZ episodes: step dicts with result_action_type and OCR elements",
    ),
    "android_world": Format(
        module=f"{_PKG}.android_world",
        domain="android",
        reads="AndroidWorld agent histories: steps with UI element lists and actions",
    ),
    "screenagent": Format(
        module=f"{_PKG}.screenagent",
        domain="os",
        reads="ScreenAgent session folders: one JSON per plan / act / evaluate step",
        folder=True,
    ),
    "opencua": Format(
        module=f"{_PKG}.opencua",
        domain="os",
        reads="OpenCUA / AgentNet samples: steps with pyautogui actions and monologue",
    ),
}
"""In detection order."""

FORMAT_NAMES: tuple[str, ...] = tuple(FORMATS)


def lookup(name: str) -> Format:
    """The row of ``name``; ValueError naming the known formats when there is none."""
    try:
        return FORMATS[name]
    except KeyError:
        raise ValueError(
            f"no ingest format {name!r}; known: {', '.join((*SHARD_FORMATS, *FORMATS))}"
        ) from None


def detect(path: str, head: Any) -> str | None:
    """The first format whose adapter claims the file or folder at ``path``."""
    for name, fmt in FORMATS.items():
        if fmt.folder == head.is_dir and fmt.adapter().detect(path, head):
            return name
    return None


def line_format(obj: Any) -> str | None:
    """The line format claiming one parsed JSONL line, if any."""
    for name, fmt in FORMATS.items():
        if fmt.lines and fmt.adapter().claims_line(obj):
            return name
    return None
