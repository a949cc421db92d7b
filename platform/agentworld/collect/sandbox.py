"""How a recorded environment's processes are contained.

Every shell, test run and MCP server that a collector starts runs through
``sandbox_command``: ``setsid`` (own session and controlling terminal, so the whole
tree can be interrupted and killed), ``unshare`` (new user, mount, PID, network, UTS
and IPC namespaces; the namespace's init dies with its parent; root inside has no
capability over the host even when the host runs as root) and ``sandbox_init.py``
(a new root holding only system directories, the work dir and a private /tmp;
resource limits; Landlock file and network rules). Where the host lets us create
cgroups (v1 or v2), the tree also joins its own cgroup with ``pids.max`` and a memory
limit, which bound a fork bomb or a memory hog as a whole. The environment is rebuilt
from scratch: nothing of the host's environment, secrets included, reaches the session.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

SANDBOX_HOME = "/home/agent"
_HOME_RE = re.compile(r"/(home|srv|workspace)(/[A-Za-z0-9_][A-Za-z0-9._-]*)+")
_USER_RE = re.compile(r"[a-z_][a-z0-9_-]{0,31}")
_HOST_RE = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]{0,62})")
_INIT = Path(__file__).with_name("sandbox_init.py")
_SYSTEM_PYTHON = "/usr/bin/python3"
_CGROUP_ROOT = "/sys/fs/cgroup"
_CGROUP_PREFIX = "agentworld-sandbox-"
_CGROUP_GRACE_S = 120.0


@dataclass(frozen=True, kw_only=True)
class SandboxSpec:
    """Limits and visible paths of one sandboxed process tree."""

    work_dir: str
    """Host directory shown as ``home`` (HOME and working directory)."""
    home: str = SANDBOX_HOME
    """Where the work dir shows inside: an absolute path below /home, /srv or /workspace."""
    hostname: str | None = None
    """Host name inside (the sandbox has its own UTS namespace); None keeps the host's."""
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
    max_processes: int = 256
    """Tasks (processes and threads) of the whole tree: the cgroup's pids.max, and
    RLIMIT_NPROC where that applies (not to the host's root). 0: no limit."""
    max_memory_bytes: int = 1 << 30
    """Memory of the whole tree (the cgroup's limit; the OOM killer ends the biggest
    process) and of each process (RLIMIT_DATA: allocations beyond it fail). 0: no limit."""
    user: str | None = None
    """Run as this user (uid 1000, listed in /etc/passwd inside), in a user namespace
    nested in the sandbox's, instead of as its root: desktop applications warn when they
    run as root, and dbus-daemon needs its user listed. None: root of the namespace."""

    def __post_init__(self) -> None:
        # Mounted over the new root: a system directory there would hide the real one.
        if not _HOME_RE.fullmatch(self.home):
            raise ValueError(
                f"SandboxSpec.home: {self.home!r} is not /home, /srv or /workspace/NAME..."
            )
        if self.user is not None and not _USER_RE.fullmatch(self.user):
            raise ValueError(f"SandboxSpec.user: {self.user!r} is not a user name")
        if self.hostname is not None and not _HOST_RE.fullmatch(self.hostname):
            raise ValueError(f"SandboxSpec.hostname: {self.hostname!r} is not a host name")


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


# Variables a caller may set beyond base_env's: the shell session's prompt settings.
SESSION_VARS = ("PS1", "PS2", "HISTFILE")


def python_read_paths() -> tuple[str, ...]:
    """Paths the current Python (venv and base install) needs to run inside the sandbox,
    resolved: a virtual environment reached through a symlink (``.venv -> elsewhere``)
    is bound where it really is, since the link's own folder is not in the sandbox."""
    paths = {sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable))}
    real = {os.path.realpath(p) for p in paths if p}
    return tuple(sorted(p for p in real if not p.startswith(("/usr", "/bin"))))


def sandbox_python() -> str:
    """The running interpreter as the sandbox sees it: its folders resolved (see
    python_read_paths), its own name kept, since a virtual environment's ``python`` is a
    link whose path is what selects the environment."""
    folder = os.path.realpath(os.path.dirname(sys.executable))
    return os.path.join(folder, os.path.basename(sys.executable))


def sandbox_command(spec: SandboxSpec, program: list[str], *, ctty: bool = False) -> list[str]:
    """The argv that runs ``program`` inside the sandbox described by ``spec``."""
    init_spec = {
        "work_dir": os.path.realpath(spec.work_dir),
        "home": spec.home,
        "hostname": spec.hostname,
        "max_file_bytes": spec.max_file_bytes,
        "tmp_size": spec.tmp_size,
        "read_paths": list(spec.read_paths),
        "tcp_ports": list(spec.tcp_ports),
        "max_open_files": spec.max_open_files,
        "max_processes": spec.max_processes,
        "max_memory_bytes": spec.max_memory_bytes,
        "user": spec.user,
        # Only these names pass into the sandbox, whatever environment the caller hands
        # the process: a caller that forgets base_env() still leaks no host secret.
        "env_names": sorted({*base_env(spec.env), *SESSION_VARS}),
    }
    # A user namespace even when the host runs as root: root inside then holds its
    # capabilities over its own namespaces only (no clock, modules or host mounts).
    unshare = ["unshare", "--user", "--map-root-user", "--mount", "--pid", "--net", "--uts"]
    unshare += ["--ipc", "--fork", "--kill-child", "--mount-proc"]
    init = [_init_python(), "-S", "-I", str(_INIT), json.dumps(init_spec), "--"]
    setsid = ["setsid", "--ctty"] if ctty else ["setsid"]
    return [*_join_cgroups(spec), *setsid, *unshare, *init, *program]


def _join_cgroups(spec: SandboxSpec) -> list[str]:
    """A prefix that moves the process into fresh cgroups limiting the tree, or [] where
    the host offers none we may create. Written by a shell that then execs the rest, so
    the limit holds from the first fork on."""
    procs = [p for p in (_make_cgroup(c, spec) for c in ("pids", "memory")) if p]
    if not procs:
        return []
    script = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 121; shift; done; shift; exec "$@"'
    return ["/bin/sh", "-c", script, "sh", *procs, "--"]


def _make_cgroup(controller: str, spec: SandboxSpec) -> str | None:
    limit = spec.max_processes if controller == "pids" else spec.max_memory_bytes
    parent = _cgroup_parent(controller)
    if limit <= 0 or parent is None:
        return None
    _collect_cgroups(parent)
    path = os.path.join(parent, f"{_CGROUP_PREFIX}{os.getpid()}-{secrets.token_hex(4)}")
    files = {"pids": ("pids.max",), "memory": ("memory.max", "memory.limit_in_bytes")}
    try:
        os.mkdir(path)
        name = next(f for f in files[controller] if os.path.exists(os.path.join(path, f)))
        with open(os.path.join(path, name), "w") as f:
            f.write(str(limit))
    except (OSError, StopIteration):
        _remove_dir(path)
        return None
    return os.path.join(path, "cgroup.procs")


def _cgroup_parent(controller: str) -> str | None:
    """This process's own cgroup for ``controller``: a v1 hierarchy mounted at
    /sys/fs/cgroup/<controller>, else the v2 tree. None when we cannot write there."""
    try:
        with open("/proc/self/cgroup") as f:
            lines = [line.rstrip("\n").split(":", 2) for line in f]
    except OSError:
        return None
    rel = next((r for _, names, r in lines if controller in names.split(",")), None)
    base = os.path.join(_CGROUP_ROOT, controller)
    if rel is None:  # not a v1 hierarchy: the v2 tree, if that is what is mounted
        rel = next((r for _, names, r in lines if names == ""), None)
        base = _CGROUP_ROOT
        if rel is None or not os.path.exists(os.path.join(base, "cgroup.controllers")):
            return None
    parent = os.path.join(base, rel.lstrip("/"))
    return parent if os.access(parent, os.W_OK) else None


def _collect_cgroups(parent: str) -> None:
    """Remove the empty cgroups of earlier sandboxes (nobody is left to remove them when
    a session is killed); a young one may still be waiting for its first process."""
    try:
        names = [n for n in os.listdir(parent) if n.startswith(_CGROUP_PREFIX)]
    except OSError:
        return
    for name in names:
        path = os.path.join(parent, name)
        try:
            if time.time() - os.stat(path).st_mtime > _CGROUP_GRACE_S:
                os.rmdir(path)
        except OSError:
            pass  # still holds processes, or another collector was faster


def _remove_dir(path: str) -> None:
    try:
        os.rmdir(path)
    except OSError:
        pass


def _init_python() -> str:
    """The interpreter for sandbox_init.py: the system one when present (readable inside
    without extra paths), else the running one."""
    return _SYSTEM_PYTHON if os.path.exists(_SYSTEM_PYTHON) else sys.executable
