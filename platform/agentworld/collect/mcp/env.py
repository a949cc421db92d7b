"""mcp: real MCP servers from PyPI (mcp-server-time, mcp-server-git), run sandboxed
and spoken to over stdio with the official ``mcp`` client.

The environment text is the server's own tool list; actions are tool calls; an
observation is the tool result's text as the server returned it, errors included (the
result's ``is_error`` flag and JSON-RPC errors are kept in the turn's metadata).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from contextlib import asynccontextmanager
from typing import Any

from anyio.from_thread import start_blocking_portal

from agentworld.collect.env import Action, Environment, Task, Workspace, parse_tool_call
from agentworld.collect.sandbox import (
    SandboxSpec,
    base_env,
    python_read_paths,
    sandbox_command,
    sandbox_python,
)
from agentworld.collect.shell_env import GIT_ENV, write_files
from agentworld.schema import Turn

SERVER_COMMANDS = {"time": "mcp-server-time", "git": "mcp-server-git"}
START_TIMEOUT_S = 120.0
SERVER_ARGS = {"time": ["--local-timezone", "UTC"], "git": []}


def server_executable(name: str) -> str:
    """The console script of an installed MCP server, beside the running Python (in its
    resolved folder, as the sandbox sees it)."""
    path = os.path.join(os.path.dirname(sandbox_python()), SERVER_COMMANDS[name])
    if not os.path.exists(path):
        raise FileNotFoundError(
            f"MCP server {name!r} is not installed ({path} is missing): pip install {SERVER_COMMANDS[name]}"
        )
    return path


class McpServer:
    """One running server and its client session, driven from synchronous code through
    an anyio blocking portal (the client is async; the recorders are not)."""

    def __init__(self, name: str, home: str, *, timeout_s: float, max_file_bytes: int) -> None:
        self.name, self.home, self.timeout_s = name, home, timeout_s
        spec = SandboxSpec(
            work_dir=home, max_file_bytes=max_file_bytes, read_paths=python_read_paths()
        )
        # Run by the interpreter, not through its shebang: the script's first line names
        # the interpreter as it was installed, perhaps through a link the sandbox lacks.
        program = [sandbox_python(), server_executable(name), *SERVER_ARGS[name]]
        self._argv = sandbox_command(spec, program)
        self._errlog = open(os.path.join(home, f".{name}-stderr.log"), "w")  # noqa: SIM115
        self._portal_cm = start_blocking_portal()
        self.portal = self._portal_cm.__enter__()
        try:
            self._session_cm = self.portal.wrap_async_context_manager(self._connect())
            self.session = self._session_cm.__enter__()
            self.tools = self.portal.call(self.session.list_tools).tools
        except BaseException:
            self._portal_cm.__exit__(None, None, None)
            raise

    @asynccontextmanager
    async def _connect(self):
        from mcp import ClientSession, StdioServerParameters
        from mcp.client.stdio import stdio_client

        params = StdioServerParameters(
            command=self._argv[0], args=self._argv[1:], env=base_env(GIT_ENV)
        )
        async with stdio_client(params, errlog=self._errlog) as streams:
            # Start-up (a Python server importing its SDK) can take far longer than a
            # call on a busy machine: the short per-call limit applies to calls only.
            async with ClientSession(*streams, read_timeout_seconds=START_TIMEOUT_S) as session:
                self.info = (await session.initialize()).server_info
                yield session

    def tool_list(self) -> list[dict[str, Any]]:
        keep = ("name", "description", "inputSchema")
        return [
            {k: v for k, v in t.model_dump(by_alias=True, exclude_none=True).items() if k in keep}
            for t in self.tools
        ]

    def call(self, name: str, arguments: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """(observation text, metadata) of one tool call, the server's errors included."""
        from mcp.shared.exceptions import MCPError

        async def call() -> Any:
            return await self.session.call_tool(
                name, arguments, read_timeout_seconds=self.timeout_s
            )

        try:
            result = self.portal.call(call)
        except MCPError as e:
            return f"MCP error {e.error.code}: {e.error.message}", {"rpc_error": e.error.code}
        return _result_text(result.content), {"is_error": bool(result.is_error)}

    def close(self) -> None:
        try:
            self._session_cm.__exit__(None, None, None)
        finally:
            self._portal_cm.__exit__(None, None, None)
            self._errlog.close()


def _result_text(content: list[Any]) -> str:
    parts = []
    for block in content:
        text = getattr(block, "text", None)
        parts.append(text if text is not None else f"[{block.type} content]")
    return "\n".join(parts)


class McpEnvironment(Environment):
    domain = "mcp"
    source = "collect/mcp"

    def reset(self, task: Task) -> str:
        name = task.state["server"]
        home = self.workspace.resource("mcp-home", lambda: _mcp_home(self.workspace))
        self.server: McpServer = self.workspace.resource(
            f"mcp-server-{name}",
            lambda: McpServer(
                name,
                home,
                timeout_s=self.config.command_timeout_s,
                max_file_bytes=self.config.max_file_bytes,
            ),
        )
        _prepare_repo(home, task.state.get("repo"))
        tools = "\n".join(json.dumps(t, ensure_ascii=False) for t in self.server.tool_list())
        return (
            f"An MCP server, {self.server.info.name} {self.server.info.version}, over stdio. "
            "Each action is a tool call (JSON with name and arguments); the observation is "
            "the tool result as the server returns it.\n"
            f"Tools:\n{tools}\n"
            f"{task.state.get('context', '')}Task: {task.text}"
        )

    def step(self, action: Action) -> Turn:
        t0 = time.monotonic()
        if action.tool_call is None:
            obs = 'Not a tool call: expected JSON {"name": ..., "arguments": {...}}'
            meta: dict[str, Any] = {"is_error": True, "client_error": True}
        else:
            obs, meta = self.server.call(action.tool_call.name, dict(action.tool_call.arguments))
        obs = _cap(obs, self.config.output_cap_bytes, meta)
        return Turn(
            action=action.text,
            observation=obs,
            tool_call=action.tool_call,
            duration_s=round(time.monotonic() - t0, 4),
            metadata=meta,
        )

    def parse_agent_action(self, text: str) -> Action:
        return parse_tool_call(text)


def _mcp_home(workspace: Workspace) -> str:
    path = os.path.join(workspace.root, "mcp-home")
    os.makedirs(path, exist_ok=True)
    return path


def _prepare_repo(home: str, repo: dict[str, Any] | None) -> None:
    """A fresh git repository for the episode at the path the task names (the server is
    stateless between calls, so replacing the directory resets the environment)."""
    if repo is None:
        return

    path = os.path.join(home, repo["name"])
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    env = {**base_env(GIT_ENV), "HOME": home}
    git = lambda *a: subprocess.run(["git", *a], cwd=path, env=env, check=True, capture_output=True)  # noqa: E731
    git("init", "-q", "-b", "main")
    for message, files in repo["commits"]:
        write_files(path, files)
        git("add", "-A")
        git("commit", "-q", "-m", message)
    write_files(path, repo.get("dirty", {}))


def _cap(text: str, cap: int, meta: dict[str, Any]) -> str:
    data = text.encode()
    if len(data) <= cap:
        return text
    meta["truncated_bytes"] = len(data) - cap
    head = data[:cap].decode("utf-8", errors="ignore")
    return head + f"\n[output truncated: {len(data) - cap} bytes omitted]"
