"""terminal: a real bash on a pseudo-terminal in a throw-away sandboxed home.

Actions are command lines; an observation is what the terminal shows after Enter: the
output, then the next prompt.
"""

from __future__ import annotations

import os
import re

from agentworld.collect.env import Action, Environment, Task
from agentworld.collect.sandbox import SandboxSpec
from agentworld.collect.shell import CommandResult, SessionDead, ShellSession
from agentworld.collect.variety import DEFAULT, Variety
from agentworld.schema import Turn

# Fixed identities and dates make commit hashes depend on the content alone.
GIT_ENV = {
    "GIT_AUTHOR_NAME": "agent",
    "GIT_AUTHOR_EMAIL": "agent@sandbox",
    "GIT_COMMITTER_NAME": "agent",
    "GIT_COMMITTER_EMAIL": "agent@sandbox",
    "GIT_AUTHOR_DATE": "2026-01-05T09:00:00+00:00",
    "GIT_COMMITTER_DATE": "2026-01-05T09:00:00+00:00",
}


def write_files(root: str, files: dict[str, str]) -> None:
    """Create the initial files of an episode (host side, in a directory it just made)."""
    for rel, content in sorted(files.items()):
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(content)


def command_turn(action: Action, result: CommandResult, observation: str) -> Turn:
    meta = {}
    if result.truncated_bytes:
        meta["truncated_bytes"] = result.truncated_bytes
    if result.timed_out:
        meta["timed_out"] = True
    if result.session_ended:
        meta["session_ended"] = True
    return Turn(
        action=action.text,
        observation=observation,
        tool_call=action.tool_call,
        duration_s=result.duration_s,
        exit_code=result.exit_code,
        metadata=meta,
    )


class ShellEnvironment(Environment):
    """An environment backed by one sandboxed shell session per episode."""

    def start_shell(self, files: dict[str, str], variety: Variety = DEFAULT) -> ShellSession:
        """A shell as the episode's settings describe it (user, host, prompt, home,
        starting directory, time zone, locale, width); ``files`` go to the starting
        directory."""
        self.variety = variety
        work_dir = self.workspace_dir = self.workspace.episode_dir()
        write_files(self.host_path(variety.workdir), files)
        spec = SandboxSpec(
            work_dir=work_dir,
            home=variety.home,
            hostname=variety.host,
            max_file_bytes=self.config.max_file_bytes,
            env={**GIT_ENV, **variety.env()} if variety != DEFAULT else dict(GIT_ENV),
        )
        start = None if variety.workdir == variety.home else variety.workdir
        self.shell = ShellSession(
            spec,
            timeout_s=self.config.command_timeout_s,
            output_cap=self.config.output_cap_bytes,
            prompt=variety.prompt,
            columns=variety.columns,
            start_dir=start,
        )
        self.shell.start()
        return self.shell

    def host_path(self, inside: str) -> str:
        """The host path of a directory at or below the sandbox's HOME (created)."""
        rel = os.path.relpath(inside, self.variety.home)
        path = os.path.normpath(os.path.join(self.workspace_dir, rel))
        os.makedirs(path, exist_ok=True)
        return path

    def run(self, command: str) -> CommandResult:
        try:
            result = self.shell.run(command)
        except SessionDead:
            self.ended = True
            raise
        self.ended = result.session_ended
        return result

    def close(self) -> None:
        shell = getattr(self, "shell", None)
        if shell is not None:
            shell.close()


class TerminalEnvironment(ShellEnvironment):
    domain = "terminal"
    source = "collect/terminal"

    def reset(self, task: Task) -> str:
        v = Variety.of(task.state)
        shell = self.start_shell(task.state.get("files", {}), v)
        where = f"{v.home} (HOME)" if v.workdir == v.home else f"{v.workdir} (HOME is {v.home})"
        return (
            f"A Linux terminal running GNU bash as user {v.user} on {v.host} in {where}. "
            "Each action is a command line typed at the prompt; the observation is what "
            "the terminal shows next: the output, then the prompt. No network access.\n"
            f"Task: {task.text}\n\nThe screen shows:\n{shell.banner}"
        )

    def step(self, action: Action) -> Turn:
        result = self.run(action.text)
        return command_turn(action, result, result.screen)

    def parse_agent_action(self, text: str) -> Action:
        return Action(text=first_command(text))


_FENCE = re.compile(r"```(?:bash|sh|shell|console)?\s*\n(.*?)```", re.S)


def first_command(text: str) -> str:
    """The first command line of a model reply: inside a code fence when there is one."""
    m = _FENCE.search(text)
    body = m.group(1) if m else text
    for line in body.splitlines():
        line = line.strip().removeprefix("$ ").strip()
        if line:
            return line
    return text.strip()[:200] or "true"
