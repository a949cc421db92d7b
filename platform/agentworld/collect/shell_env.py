"""The base of the shell-backed environments (terminal, swe): one sandboxed shell
session per episode, started as the episode's settings describe it, and the Turn of
one command."""

from __future__ import annotations

import os

from agentworld.collect.env import Action, Environment
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
            interrupt_grace_s=self.config.interrupt_grace_s,
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
