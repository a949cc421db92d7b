"""How a recorded environment's processes are contained.

Every shell, test run and MCP server that a collector starts runs through
``sandbox_command``: ``setsid`` (own session and controlling terminal, so the whole
tree can be interrupted and killed), ``unshare`` (new mount, PID and network
namespaces; the namespace's init dies with its parent) and ``sandbox_init.py``
(private /home and /tmp, resource limits, Landlock file and network rules). The
environment is rebuilt from scratch: nothing of the host's environment, secrets
included, reaches the session.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

SANDBOX_HOME = "/home/agent"
_INIT = Path(__file__).with_name("sandbox_init.py")
_SYSTEM_PYTHON = "/usr/bin/python3"


@dataclass(frozen=True, kw_only=True)
class SandboxSpec:
    """Limits and visible paths of one sandboxed process tree."""

    work_dir: str
    """Host directory shown as /home/agent (HOME and working directory)."""
    max_file_bytes: int = 16 * 1024 * 1024
    """Largest file a process may write (RLIMIT_FSIZE)."""
    tmp_size: str = "64m"
    """Size of the private /tmp."""
    read_paths: tuple[str, ...] = ()
    """Extra host paths readable inside (e.g. a virtual environment an MCP server runs from)."""
    env: dict[str, str] = field(default_factory=dict)
    """Extra environment variables; everything else of the host environment is dropped."""
    tcp_ports: tuple[int, ...] = ()
    """Loopback TCP ports the processes may bind and connect to (a web application and
    the browser that visits it). With any, the namespace's loopback interface is brought
    up; the namespace has no other interface, and Landlock refuses every other port."""
    max_open_files: int = 256
    """RLIMIT_NOFILE (a browser needs more than a shell)."""


def base_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """A scrubbed environment: a fixed PATH, HOME and locale, nothing from the host."""
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": SANDBOX_HOME,
        "USER": "agent",
        "LOGNAME": "agent",
        "SHELL": "/bin/bash",
        "TERM": "dumb",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TMPDIR": "/tmp",
        "PYTHONDONTWRITEBYTECODE": "1",
        "GIT_CONFIG_NOSYSTEM": "1",
        # No interactive pagers: output goes straight to the screen, as in scripts.
        "PAGER": "cat",
        "GIT_PAGER": "cat",
    }
    env.update(extra or {})
    return env


def python_read_paths() -> tuple[str, ...]:
    """Paths the current Python (venv and base install) needs to run inside the sandbox."""
    paths = {sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable))}
    return tuple(sorted(p for p in paths if p and not p.startswith(("/usr", "/bin"))))


def sandbox_command(spec: SandboxSpec, program: list[str], *, ctty: bool = False) -> list[str]:
    """The argv that runs ``program`` inside the sandbox described by ``spec``."""
    init_spec = {
        "work_dir": os.path.realpath(spec.work_dir),
        "max_file_bytes": spec.max_file_bytes,
        "tmp_size": spec.tmp_size,
        "read_paths": list(spec.read_paths),
        "tcp_ports": list(spec.tcp_ports),
        "max_open_files": spec.max_open_files,
    }
    unshare = ["unshare", "--mount", "--pid", "--net", "--fork", "--kill-child", "--mount-proc"]
    if os.geteuid() != 0:
        unshare.append("--map-root-user")  # an unprivileged host user gets its own user ns
    init = [_init_python(), "-S", "-I", str(_INIT), json.dumps(init_spec), "--"]
    setsid = ["setsid", "--ctty"] if ctty else ["setsid"]
    return [*setsid, *unshare, *init, *program]


def _init_python() -> str:
    """The interpreter for sandbox_init.py: the system one when present (readable inside
    without extra paths), else the running one."""
    return _SYSTEM_PYTHON if os.path.exists(_SYSTEM_PYTHON) else sys.executable
