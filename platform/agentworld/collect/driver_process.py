"""A sandboxed driver process seen from the host (the web domain's browser, the os
domain's desktop): started with a command line, spoken to over JSON lines with a time
limit on every answer, killed with its whole tree when it does not answer or when its
episode ends. Killing the sandbox's init ends every process of its PID namespace."""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import time
from typing import Any


class DriverProcess:
    """One driver: ``first`` holds its opening message (``ready`` and what it reports).

    ``what`` names it in errors ("the browser", "the desktop"); ``timeout_error`` is the
    exception a late answer raises (the domain's own, so its environment can report
    the timeout as an observation)."""

    what = "the driver"
    timeout_error: type[Exception] = TimeoutError
    close_wait_s = 5.0

    def __init__(
        self, argv: list[str], env: dict[str, str], stderr_path: str, *, start_timeout_s: float
    ) -> None:
        self._stderr = open(stderr_path, "w+")  # noqa: SIM115
        self.proc = subprocess.Popen(
            argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr
        )
        self._buf = b""
        try:
            self.first = self._read(start_timeout_s)
        except BaseException:
            self.kill()
            raise
        if not self.first.get("ready"):
            self.kill()
            raise RuntimeError(f"{self.what} did not start: {self.first.get('fatal', self.first)}")

    def request(self, message: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """Send one message and wait at most ``timeout_s`` for its answer."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write((json.dumps(message) + "\n").encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            raise RuntimeError(f"{self.what} driver exited: {self._stderr_tail()}") from None
        answer = self._read(timeout_s)
        if "fatal" in answer:
            raise RuntimeError(f"{self.what} driver failed: {answer['fatal']}")
        return answer

    def _read(self, timeout_s: float) -> dict[str, Any]:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout_s
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while b"\n" not in self._buf:
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    self.kill()
                    raise self.timeout_error(f"{self.what} did not answer within {timeout_s:g}s")
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    raise RuntimeError(f"{self.what} driver exited: {self._stderr_tail()}")
                self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return json.loads(line)

    def _stderr_tail(self) -> str:
        self._stderr.flush()
        self._stderr.seek(0)
        return " | ".join(self._stderr.read().strip().splitlines()[-5:])[-1500:]

    def kill(self) -> None:
        """SIGKILL the sandbox: its init dies, and the kernel ends every process of its
        PID namespace with it (a hung or runaway application included)."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def close(self) -> None:
        """Ask the driver to close, then kill what is left."""
        try:
            if self.proc.poll() is None and self.proc.stdin is not None:
                self.proc.stdin.write(b'{"op": "close"}\n')
                self.proc.stdin.flush()
                self.proc.wait(timeout=self.close_wait_s)
        except (OSError, subprocess.TimeoutExpired):
            pass
        finally:
            self.kill()
            self._stderr.close()
