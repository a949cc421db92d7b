"""The sandboxed desktop of one episode, seen from the host: the driver process (X
server, buses, window manager and applications inside one sandbox), spoken to over
JSON lines with a time limit on every answer, and killed with everything it started
when the episode ends or stops answering."""

from __future__ import annotations

import json
import os
import selectors
import shutil
import subprocess
import time
from typing import Any

from agentworld.collect.sandbox import SandboxSpec, base_env, sandbox_command

OS_DIR = os.path.dirname(os.path.realpath(__file__))
SYSTEM_PYTHON = "/usr/bin/python3"
"""The driver's interpreter: Debian's, which has the AT-SPI bindings (python3-gi)."""
PROGRAMS = ("Xvfb", "dbus-daemon", "openbox", "xdotool")
FONT_CACHE = "/var/cache/fontconfig"
"""Read-only inside: without the system's font cache every application start rescans
the fonts."""
START_TIMEOUT_S = 60.0
APT_PACKAGES = (
    "xvfb openbox xdotool dbus-daemon at-spi2-core libatk-adaptor python3-gi gir1.2-atspi-2.0"
)


class DesktopUnavailable(RuntimeError):
    """The os domain cannot run on this machine (a program or package is missing)."""


class DesktopTimeout(RuntimeError):
    pass


def check_desktop(apps: list[str]) -> None:
    """DesktopUnavailable naming what is missing and how to install it."""
    missing = [p for p in (*PROGRAMS, *apps) if shutil.which(p) is None]
    if not os.path.exists(SYSTEM_PYTHON):
        missing.append(SYSTEM_PYTHON)
    elif subprocess.run(
        [SYSTEM_PYTHON, "-c", "import gi; gi.require_version('Atspi', '2.0')"],
        capture_output=True,
    ).returncode:
        missing.append("the AT-SPI bindings of the system Python (gir1.2-atspi-2.0)")
    if missing:
        raise DesktopUnavailable(
            f"the os domain needs {', '.join(missing)}: apt-get install -y {APT_PACKAGES} "
            f"{' '.join(apps)} (Debian; `make setup` does it); the other domains do not need it"
        )


def desktop_spec(
    home: str, *, user: str, shown_as: str, max_file_bytes: int, env: dict[str, str]
) -> SandboxSpec:
    """The sandbox of an episode's desktop: no network, the home its only writable
    folder beside a private /tmp, and room for an X server and a few applications."""
    return SandboxSpec(
        work_dir=home,
        home=shown_as,
        max_file_bytes=max_file_bytes,
        read_paths=(OS_DIR, FONT_CACHE),
        env=env,
        tmp_size="256m",
        max_open_files=4096,
        max_processes=1024,
        max_memory_bytes=4 << 30,
        user=user,
    )


class DesktopSession:
    """One episode's desktop: started with its applications, closed with the episode."""

    def __init__(self, spec: SandboxSpec, config: dict[str, Any], *, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        program = [SYSTEM_PYTHON, "-E", "-s", os.path.join(OS_DIR, "driver.py"), json.dumps(config)]
        argv = sandbox_command(spec, program)
        self._stderr = open(spec.work_dir.rstrip("/") + ".driver-stderr", "w+")  # noqa: SIM115
        self.proc = subprocess.Popen(
            argv,
            env=base_env(spec.env),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
        )
        self._buf = b""
        try:
            self.first = self._read(START_TIMEOUT_S)
        except BaseException:
            self.kill()
            raise
        if not self.first.get("ready"):
            self.kill()
            raise RuntimeError(f"the desktop did not start: {self.first.get('fatal', self.first)}")

    def request(self, message: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write((json.dumps(message) + "\n").encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            raise RuntimeError(f"the desktop driver exited: {self._stderr_tail()}") from None
        answer = self._read(timeout_s)
        if "fatal" in answer:
            raise RuntimeError(f"the desktop driver failed: {answer['fatal']}")
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
                    raise DesktopTimeout(f"the desktop did not answer within {timeout_s:g}s")
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    raise RuntimeError(f"the desktop driver exited: {self._stderr_tail()}")
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
        try:
            if self.proc.poll() is None and self.proc.stdin is not None:
                self.proc.stdin.write(b'{"op": "close"}\n')
                self.proc.stdin.flush()
                self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            pass
        finally:
            self.kill()
            self._stderr.close()
