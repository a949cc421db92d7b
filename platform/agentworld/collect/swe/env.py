"""swe: a small generated Python repository with a planted bug and unittest tests.

Actions are tool calls (list_files, view_file, search, apply_patch, run_tests,
git_diff); each runs as a real command in the episode's sandboxed shell and the
observation is that command's output. The outcome records whether the tests pass at
the end.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import subprocess

from agentworld.collect.env import Action, Task, parse_tool_call
from agentworld.collect.sandbox import SANDBOX_HOME, base_env
from agentworld.collect.shell_env import GIT_ENV, ShellEnvironment, command_turn
from agentworld.collect.variety import Variety
from agentworld.schema import Outcome, Turn

TOOLS = [
    {"name": "list_files", "description": "List the repository's tracked files.", "parameters": {}},
    {
        "name": "view_file",
        "description": "Show a file with line numbers.",
        "parameters": {"path": "string"},
    },
    {
        "name": "search",
        "description": "Search tracked files for a pattern (git grep).",
        "parameters": {"pattern": "string"},
    },
    {
        "name": "apply_patch",
        "description": "Apply a unified diff (paths a/..., b/...) to the working tree.",
        "parameters": {"patch": "string"},
    },
    {
        "name": "run_tests",
        "description": "Run the test suite (python -m unittest).",
        "parameters": {},
    },
    {"name": "git_diff", "description": "Show uncommitted changes.", "parameters": {}},
]
_PATCH_DIR = ".aw"


class SweEnvironment(ShellEnvironment):
    domain = "swe"
    source = "collect/swe"

    def reset(self, task: Task) -> str:
        # The repository is HOME itself: the tools' paths are relative to its root.
        v = dataclasses.replace(Variety.of(task.state), workdir=Variety.of(task.state).home)
        shell = self.start_shell(task.state["files"], v)
        _git_init(shell.spec.work_dir, shell.spec.env)
        self._patches = 0
        self._tests_passed: bool | None = None
        tools = "\n".join(json.dumps(t) for t in TOOLS)
        return (
            f"A Python repository ({task.state['package']}) checked out at {v.home}, "
            "with its tests under tests/. Each action is a tool call (JSON with name and "
            "arguments); the observation is the real output of the command it runs.\n"
            f"Tools:\n{tools}\nTask: {task.text}"
        )

    def step(self, action: Action) -> Turn:
        call = action.tool_call
        if call is None or call.name not in {t["name"] for t in TOOLS}:
            name = "a plain-text action" if call is None else f"unknown tool {call.name!r}"
            obs = f"Error: {name}; available tools: {', '.join(t['name'] for t in TOOLS)}"
            return Turn(action=action.text, observation=obs, tool_call=call, exit_code=2)
        try:
            command = self._command(call.name, dict(call.arguments))
        except (KeyError, TypeError) as e:
            obs = f"Error: {call.name} needs argument {e}"
            return Turn(action=action.text, observation=obs, tool_call=call, exit_code=2)
        result = self.run(command)
        if call.name == "run_tests" and result.exit_code is not None:
            self._tests_passed = result.exit_code == 0
        return command_turn(action, result, result.output)

    def _command(self, name: str, args: dict) -> str:
        if name == "list_files":
            return "git ls-files"
        if name == "view_file":
            return _view_command(shlex.quote(str(args["path"])), self.variety.home)
        if name == "search":
            return f"git grep -n -e {shlex.quote(str(args['pattern']))}"
        if name == "apply_patch":
            return f"git apply -v {self._stage_patch(str(args['patch']))}"
        if name == "run_tests":
            return "python3 -m unittest 2>&1"
        return "git --no-pager diff"

    def _stage_patch(self, patch: str) -> str:
        """Write the patch where the sandbox sees it. The session could have replaced
        .aw with a symlink: the directory is opened without following links, and the
        file is created fresh inside it, so a host write never leaves the work dir."""
        self._patches += 1
        name = f"patch-{self._patches}.diff"
        root = os.open(self.shell.spec.work_dir, os.O_DIRECTORY | os.O_RDONLY)
        try:
            d = os.open(_PATCH_DIR, os.O_DIRECTORY | os.O_NOFOLLOW | os.O_RDONLY, dir_fd=root)
            try:
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                fd = os.open(name, flags, 0o644, dir_fd=d)
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    f.write(patch if patch.endswith("\n") else patch + "\n")
            finally:
                os.close(d)
        finally:
            os.close(root)
        return f"{_PATCH_DIR}/{name}"

    def outcome(self) -> Outcome | None:
        if self._tests_passed is None:
            return None
        return Outcome(success=self._tests_passed, reward=1.0 if self._tests_passed else 0.0)

    def parse_agent_action(self, text: str) -> Action:
        return parse_tool_call(text)


def _view_command(path: str, home: str = SANDBOX_HOME) -> str:
    """cat -n of a repository file. A path that resolves outside the repository (an
    absolute one, ../, or a symlink the session planted) is refused: the tool reads the
    repository, and the sandbox alone would still let it show system files."""
    inside = f"{home}/*"
    refused = f"echo view_file: {path}: outside the repository >&2; false"
    return f'case "$(realpath -m -- {path})" in {inside}) cat -n -- {path} ;; *) {refused} ;; esac'


def _git_init(path: str, identity: dict[str, str] | None = None) -> None:
    """Commit the generated repository (host side, before any agent action), as the
    episode's git identity and date."""
    env = base_env(identity or GIT_ENV) | {"HOME": path}
    for args in (
        ["init", "-q", "-b", "main"],
        ["add", "-A"],
        ["commit", "-q", "-m", "Initial version"],
    ):
        subprocess.run(["git", *args], cwd=path, env=env, check=True, capture_output=True)
    os.makedirs(os.path.join(path, _PATCH_DIR))
    with open(os.path.join(path, ".git", "info", "exclude"), "a") as f:
        f.write(f"{_PATCH_DIR}/\n")
