"""The sandboxed browser driver process, seen from the host: started once per
workspace (Chromium and the applications' server inside one sandbox; a
``DriverProcess``), and where the browser comes from."""

from __future__ import annotations

import dataclasses
import glob
import importlib.util
import json
import os
import shutil

from agentworld.collect.driver_process import DriverProcess
from agentworld.collect.sandbox import (
    SandboxSpec,
    base_env,
    python_read_paths,
    sandbox_command,
    sandbox_python,
)

WEB_DIR = os.path.dirname(os.path.realpath(__file__))
TCP_PORTS = (8001, 8002)
"""Datasette's and the helpdesk's ports: the only TCP the sandbox allows."""
BROWSER_ARGS = [
    "--no-sandbox",  # its own sandbox needs namespaces ours already took; ours contains it
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",  # /dev/shm is not writable in the sandbox: use /tmp
]
VIEWPORT = {"width": 1280, "height": 600}
START_TIMEOUT_S = 120.0
ELEMENT_TIMEOUT_S = 1.5
"""How long an element action waits for its element (BrowserGym waits 0.5 s): a wrong
bid fails fast with Playwright's own message."""


class BrowserUnavailable(RuntimeError):
    """The web domain cannot run on this machine (no Chromium, or a missing package)."""


def find_browser() -> str:
    """Debian's ``chromium`` on PATH, else a Chromium that ``playwright install`` put in
    its browsers folder; BrowserUnavailable says how to get one."""
    for package in ("playwright", "datasette"):
        if importlib.util.find_spec(package) is None:
            raise BrowserUnavailable(
                f"the web domain needs the Python package {package!r}: pip install {package}"
            )
    path = shutil.which("chromium")
    if path:
        return path
    folder = os.environ.get("PLAYWRIGHT_BROWSERS_PATH") or os.path.expanduser(
        "~/.cache/ms-playwright"
    )
    managed = sorted(glob.glob(os.path.join(folder, "chromium-*", "chrome-linux*", "chrome")))
    if managed:
        return managed[-1]
    raise BrowserUnavailable(
        "the web domain needs a Chromium browser and found none (no `chromium` on PATH, "
        f"none under {folder}): apt-get install -y chromium (Debian), or "
        "python -m playwright install --with-deps chromium; the other domains do not need it"
    )


class BrowserTimeout(RuntimeError):
    pass


class BrowserSession(DriverProcess):
    """The sandboxed driver process: applications and browser, answering JSON lines."""

    what = "the browser"
    timeout_error = BrowserTimeout
    close_wait_s = 15.0

    def __init__(self, home: str, *, timeout_s: float, max_file_bytes: int) -> None:
        executable = find_browser()
        self.timeout_s = timeout_s
        config = {
            "executable": executable,
            "args": BROWSER_ARGS,
            "element_timeout_ms": int(min(ELEMENT_TIMEOUT_S, timeout_s) * 1000),
            "navigation_timeout_ms": int(timeout_s * 1000),
            "viewport": VIEWPORT,
        }
        read = [*python_read_paths(), WEB_DIR]
        real = os.path.realpath(executable)
        if not real.startswith(("/usr/", "/bin/")):
            read.append(os.path.dirname(real))  # a Playwright-managed browser's folder
        spec = SandboxSpec(
            work_dir=home,
            max_file_bytes=max_file_bytes,
            read_paths=tuple(read),
            tcp_ports=TCP_PORTS,
            tmp_size="512m",
            **_browser_limits(),
        )
        argv = sandbox_command(
            spec, [sandbox_python(), os.path.join(WEB_DIR, "driver.py"), json.dumps(config)]
        )
        self.episodes = 0
        super().__init__(
            argv,
            base_env(),
            os.path.join(home, ".driver-stderr.log"),
            start_timeout_s=START_TIMEOUT_S,
        )
        self.info = self.first


def _browser_limits() -> dict[str, int]:
    """A browser runs dozens of processes and threads and maps much memory: raise the
    sandbox's tree limits where this version of SandboxSpec has them."""
    wanted = {"max_open_files": 4096, "max_processes": 2048, "max_memory_bytes": 6 << 30}
    names = {f.name for f in dataclasses.fields(SandboxSpec)}
    return {k: v for k, v in wanted.items() if k in names}
