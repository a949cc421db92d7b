"""The sandboxed desktop of one episode, seen from the host: the driver process (X
server, buses, window manager and applications inside one sandbox; a
``DriverProcess``), and what the desktop needs from the machine."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from typing import Any

from agentworld.collect.driver_process import DriverProcess
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


class DesktopSession(DriverProcess):
    """One episode's desktop: started with its applications, closed with the episode."""

    what = "the desktop"
    timeout_error = DesktopTimeout

    def __init__(self, spec: SandboxSpec, config: dict[str, Any], *, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        program = [SYSTEM_PYTHON, "-E", "-s", os.path.join(OS_DIR, "driver.py"), json.dumps(config)]
        super().__init__(
            sandbox_command(spec, program),
            base_env(spec.env),
            spec.work_dir.rstrip("/") + ".driver-stderr",
            start_timeout_s=START_TIMEOUT_S,
        )
