"""A real interactive bash on a pseudo-terminal, inside the sandbox.

The session's prompt ends with an invisible terminal escape (OSC 777) carrying a
random token and the last exit status; reading up to it tells where a command's
output ends without guessing from timing. The escape is removed from what is recorded,
so an observation is exactly what a user at the terminal sees: the output, then the
next prompt.
"""

from __future__ import annotations

import fcntl
import os
import re
import secrets
import select
import shlex
import signal
import struct
import subprocess
import termios
import time
from dataclasses import dataclass, replace

from agentworld.collect.sandbox import SandboxSpec, base_env, sandbox_command

PROMPT = r"agent@sandbox:\w$ "
_TAIL_KEEP = 512  # bytes kept beyond the cap, to find the prompt marker in huge output
_ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]")


class SessionDead(RuntimeError):
    """The shell exited or had to be killed; the session cannot take more commands."""


@dataclass(frozen=True, kw_only=True)
class CommandResult:
    output: str
    """What the command printed (after its echoed line, before the next prompt)."""
    prompt: str
    """The prompt shown after the command, '' when the session ended."""
    exit_code: int | None
    duration_s: float
    truncated_bytes: int = 0
    """Bytes of output dropped beyond the cap."""
    timed_out: bool = False
    session_ended: bool = False

    @property
    def screen(self) -> str:
        """Output and the next prompt, as the terminal shows them."""
        return self.output + self.prompt


class _Capture:
    """Keeps the first ``cap`` bytes of a stream and a short tail, counting the rest."""

    def __init__(self, cap: int) -> None:
        self.cap, self.head, self.tail, self.dropped = cap, bytearray(), bytearray(), 0

    def feed(self, data: bytes) -> None:
        room = self.cap - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > _TAIL_KEEP:
                cut = len(self.tail) - _TAIL_KEEP
                self.dropped += cut
                del self.tail[:cut]

    def joined(self) -> bytes:
        return bytes(self.head + self.tail)

    def text(self, end: int | None = None) -> str:
        """The captured text up to byte ``end`` of joined(), with a note where bytes
        were dropped; the kept tail starts at a line boundary."""
        raw = self.joined()[:end]
        head, tail = raw[: len(self.head)], raw[len(self.head) :]
        if not self.dropped:
            return _text(head + tail)
        nl = tail.find(b"\n")
        skipped = nl + 1 if nl >= 0 else 0
        note = f"\n[output truncated: {self.dropped + skipped} bytes omitted]\n"
        return _text(head) + note + _text(tail[skipped:])


class ShellSession:
    """``with ShellSession(spec) as sh: sh.run("ls")``: one bash per episode."""

    def __init__(
        self,
        spec: SandboxSpec,
        *,
        timeout_s: float = 5.0,
        interrupt_grace_s: float = 5.0,
        output_cap: int = 8192,
        prompt: str = PROMPT,
        columns: int = 80,
        start_dir: str | None = None,
    ):
        self.spec, self.timeout_s, self.output_cap = spec, timeout_s, output_cap
        self.interrupt_grace_s = interrupt_grace_s
        self.prompt, self.columns, self.start_dir = prompt, columns, start_dir
        self._token = secrets.token_hex(6)
        self._marker = re.compile(rb"\x1b\]777;" + self._token.encode() + rb";(-?\d+)\x07")
        self.proc: subprocess.Popen | None = None
        self.banner = ""

    # ---- lifecycle -------------------------------------------------------------------
    def __enter__(self) -> ShellSession:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> str:
        """Start bash and wait for its first prompt; returns that prompt."""
        master, slave = os.openpty()
        # The window size programs such as ls read to lay out their columns.
        fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", 24, self.columns, 0, 0))
        ps1 = self.prompt + r"\[\e]777;" + self._token + r";$?\a\]"
        env = base_env({"PS1": ps1, "PS2": "> ", "HISTFILE": "/dev/null", **self.spec.env})
        argv = sandbox_command(
            self.spec, ["bash", "--norc", "--noprofile", "--noediting", "-i"], ctty=True
        )
        self.proc = subprocess.Popen(
            argv, stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True
        )
        os.close(slave)
        self._fd = master
        first = self._read_until_prompt(self.timeout_s + 10)
        if not first.session_ended and not first.timed_out:
            # The prompt variables stay shell variables but leave the environment, so
            # `env` inside shows a plain session, not the marker.
            setup = "export -n PS1 PS2 HISTFILE"
            if self.start_dir:
                setup += (
                    f"; mkdir -p {shlex.quote(self.start_dir)}; cd {shlex.quote(self.start_dir)}"
                )
            os.write(self._fd, setup.encode() + b"\n")
            first = self._read_until_prompt(self.timeout_s + 10)
        if first.session_ended or first.timed_out:
            self.close()
            raise SessionDead(f"shell did not start: {first.output.strip()[:500]!r}")
        self.banner = first.prompt
        return self.banner

    def close(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            _killpg(self.proc.pid)
            self.proc.wait(timeout=10)
        # The process waited on is unshare: it is gone before the kernel has finished
        # killing its PID namespace, and job control put background jobs in process
        # groups of their own. Return only when nothing of the session is left.
        _end_session(self.proc.pid)
        os.close(self._fd)
        self.proc = None

    # ---- commands --------------------------------------------------------------------
    def run(self, command: str) -> CommandResult:
        """Type ``command`` and Enter; wait for the prompt (interrupting with Ctrl-C after
        the time limit, killing the session if that does not help)."""
        if self.proc is None or self.proc.poll() is not None:
            raise SessionDead("the shell session has ended")
        os.write(self._fd, command.encode() + b"\n")
        cap, t0 = _Capture(self.output_cap), time.monotonic()
        result = self._read_until_prompt(self.timeout_s, cap=cap, t0=t0)
        if result.timed_out:
            result = self._interrupt(result, cap, t0)
        return _strip_echo(result, command)

    def _interrupt(self, first: CommandResult, cap: _Capture, t0: float) -> CommandResult:
        os.write(self._fd, b"\x03")
        after = self._read_until_prompt(self.interrupt_grace_s, cap=cap, t0=t0)
        limit = f"{self.timeout_s:g}s time limit"
        if after.timed_out or after.session_ended:
            self.close()
            note = f"\n[command exceeded the {limit}; session killed]\n"
            return replace(after, output=after.output + note, prompt="", session_ended=True)
        note = f"\n[command exceeded the {limit}; interrupted]\n"
        return replace(after, output=after.output + note, timed_out=True)

    def _read_until_prompt(
        self, timeout: float, *, cap: _Capture | None = None, t0: float | None = None
    ) -> CommandResult:
        """Read until the prompt marker (or timeout, or end of the session). ``cap`` and
        ``t0`` continue an earlier read, so an interrupted command is one capture."""
        cap = cap or _Capture(self.output_cap)
        t0 = time.monotonic() if t0 is None else t0
        deadline = time.monotonic() + timeout
        while True:
            m = self._marker.search(cap.joined())
            if m:
                return self._result(cap, m, t0)
            left = deadline - time.monotonic()
            if left <= 0:
                return self._partial(cap, t0, timed_out=True)
            ready, _, _ = select.select([self._fd], [], [], min(left, 0.5))
            if not ready:
                continue
            try:
                data = os.read(self._fd, 65536)
            except OSError:  # EIO: the slave side closed, the shell is gone
                data = b""
            if not data:
                return self._partial(cap, t0, ended=True)
            cap.feed(data)

    def _result(self, cap: _Capture, m: re.Match, t0: float) -> CommandResult:
        before = cap.text(m.start())
        # The prompt is the text after the last newline before the marker.
        cut = before.rfind("\n") + 1
        output, prompt = before[:cut], before[cut:]
        return CommandResult(
            output=output,
            prompt=prompt,
            exit_code=int(m.group(1)),
            duration_s=round(time.monotonic() - t0, 4),
            truncated_bytes=cap.dropped,
        )

    def _partial(self, cap: _Capture, t0: float, *, timed_out=False, ended=False) -> CommandResult:
        return CommandResult(
            output=cap.text(),
            prompt="",
            exit_code=None,
            duration_s=round(time.monotonic() - t0, 4),
            truncated_bytes=cap.dropped,
            timed_out=timed_out,
            session_ended=ended,
        )


def _text(raw: bytes) -> str:
    raw = _ANSI.sub(b"", raw)
    return raw.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "")


def _strip_echo(result: CommandResult, command: str) -> CommandResult:
    """Drop the terminal's echo of the typed command (the user already sees it typed)."""
    lines = command.count("\n") + 1
    parts = result.output.split("\n", lines)
    rest = parts[lines] if len(parts) > lines else ""
    return replace(result, output=rest)


def _killpg(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _session_members(sid: int) -> list[int]:
    """Live (not zombie) processes whose session id is ``sid``, from /proc."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:  # exited meanwhile
            continue
        # After the command name in parentheses: state, ppid, pgrp, session, ...
        state, _, _, session = stat[stat.rindex(b")") + 2 :].split()[:4]
        if int(session) == sid and state != b"Z":
            members.append(int(entry))
    return members


def _end_session(sid: int, timeout_s: float = 10.0) -> None:
    """SIGKILL every process left in session ``sid`` (the sandbox's setsid) and wait
    until none is alive, at most ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while (members := _session_members(sid)) and time.monotonic() < deadline:
        for pid in members:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.02)
