"""Sandbox init: runs as the first process inside fresh user, mount, PID, network,
UTS and IPC namespaces (started by ``unshare``, see ``sandbox.py``), sets up the throw-away file
system view, restricts itself with Landlock and execs the session's program.

It runs as ``python -S -I sandbox_init.py SPEC_JSON -- PROGRAM ARGS...`` and imports
nothing outside the standard library, because it runs before any site packages are
visible and must stay tiny.

What the program then sees:
  /             a new root: system directories read-only, nothing else of the host
  /home/agent   the episode's work directory (a bind mount of a host directory), HOME
  /tmp          a private tmpfs
  /proc         this PID namespace only: host processes and their environments are gone
  root          root of its own user namespace: no capability over the host (or, with
                a user in the spec, that user, uid 1000, in a user namespace nested
                in it, listed in /etc/passwd and /etc/group)
  writes        only under /home/agent, /tmp and a few /dev files (Landlock)
  reads         system directories plus the read-only paths in the spec (Landlock)
  network       none: a new network namespace, and Landlock denies TCP where supported;
                with tcp_ports in the spec, the namespace's own loopback comes up and
                only those ports may be bound or connected to
"""

import ctypes
import fcntl
import json
import os
import resource
import signal
import socket
import struct
import sys

_SYS_CREATE, _SYS_ADD_RULE, _SYS_RESTRICT = 444, 445, 446  # x86_64 and aarch64 alike
_PR_SET_NO_NEW_PRIVS = 38
_MS_BIND, _MS_REC, _MS_NOSUID, _MS_NODEV = 4096, 16384, 2, 4
_MS_RDONLY, _MS_REMOUNT = 1, 32
_SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}.get(os.uname().machine, 155)
_MNT_DETACH = 2
SANDBOX_HOME = "/home/agent"
_NEW_ROOT = "/tmp"  # a mount point every Linux has; the host's /tmp is covered anyway
_SYSTEM_DIRS = ("usr", "bin", "sbin", "lib", "lib64", "lib32", "libx32", "etc", "proc", "dev")
_EMPTY_DIRS = ("/mnt", "/opt", "/root", "/run", "/srv", "/var/tmp")
_MASKED = ("/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-")

_EXECUTE, _WRITE_FILE, _READ_FILE, _READ_DIR = 1, 2, 4, 8
_READ = _EXECUTE | _READ_FILE | _READ_DIR
_FILE_RW = _READ_FILE | _WRITE_FILE
_TRUNCATE = 1 << 14

_SYSTEM_READ = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/etc", "/proc")
_DEV_FILES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty")

libc = ctypes.CDLL(None, use_errno=True)


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class _NetPort(ctypes.Structure):
    _fields_ = [("allowed", ctypes.c_uint64), ("port", ctypes.c_uint64)]


_RULE_NET_PORT, _NET_BIND_CONNECT = 2, 3
_CLONE_NEWUSER = 0x10000000
SANDBOX_UID = 1000
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1


def _fail(msg: str) -> None:
    sys.stderr.write(f"sandbox: {msg}\n")
    sys.exit(121)


def _mount(source: str, target: str, fstype: str | None, flags: int, data: str | None) -> None:
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    if libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)) != 0:
        _fail(f"mount {target}: {os.strerror(ctypes.get_errno())}")


def setup_mounts(
    work_dir: str,
    tmp_size: str,
    read_paths: list[str],
    home: str = SANDBOX_HOME,
    user: str | None = None,
) -> None:
    """Build a new root from nothing and pivot into it, so that the host's own files (its
    checkouts, /root, other users' homes, /var, /opt, sockets under /run or /tmp) do not
    exist inside: only the system directories (read-only), a fresh /proc, the host /dev
    (Landlock limits it to a few device files), the work dir as /home/agent, a private
    /tmp and the spec's read paths (read-only, at their host locations). The work dir
    and read paths are held open first, since the new root is mounted over /tmp, where
    they usually live. Password hashes are masked: root inside still owns /etc/shadow."""
    flags = _MS_NOSUID | _MS_NODEV
    work_fd = os.open(work_dir, os.O_PATH)
    kept = [(p, os.open(p, os.O_PATH)) for p in read_paths if os.path.exists(p)]
    _mount("tmpfs", _NEW_ROOT, "tmpfs", flags, "size=1m,mode=755")
    for name in _SYSTEM_DIRS:
        _bind_system_dir(name)
    _bind(f"/proc/self/fd/{work_fd}", _NEW_ROOT + home, read_only=False)
    os.makedirs(_NEW_ROOT + "/tmp")
    _mount("tmpfs", _NEW_ROOT + "/tmp", "tmpfs", flags, f"size={tmp_size},mode=1777")
    for path, fd in kept:  # after /tmp: a read path under /tmp shows inside it
        _bind(f"/proc/self/fd/{fd}", _NEW_ROOT + path, read_only=True)
        os.close(fd)
    os.close(work_fd)
    for name in _EMPTY_DIRS:
        os.makedirs(_NEW_ROOT + name, mode=0o700 if name == "/root" else 0o755, exist_ok=True)
    for name in _MASKED:
        if os.path.isfile(_NEW_ROOT + name):
            _mount("/dev/null", _NEW_ROOT + name, None, _MS_BIND, None)
    if user:
        _list_user(user, home)
    _pivot_root(_NEW_ROOT)
    _mount("none", "/", None, _MS_REMOUNT | _MS_RDONLY | flags, None)


def _list_user(user: str, home: str) -> None:
    """The host's /etc/passwd and /etc/group with ``user`` (SANDBOX_UID) in place of
    any entry of that name or id, bound over the originals: programs look their user
    up, and dbus-daemon refuses to start without an entry."""
    entries = {
        "passwd": f"{user}:x:{SANDBOX_UID}:{SANDBOX_UID}:{user}:{home}:/bin/bash",
        "group": f"{user}:x:{SANDBOX_UID}:",
    }
    for db, entry in entries.items():
        with open(f"/etc/{db}") as f:
            rows = [r.split(":") for r in f.read().splitlines() if r.count(":") >= 2]
        keep = [":".join(r) for r in rows if r[0] != user and r[2] != str(SANDBOX_UID)]
        path = f"{_NEW_ROOT}/run/sandbox-{db}"  # in the new root: read-only once pivoted
        with open(path, "w") as f:
            f.write("\n".join([*keep, entry]) + "\n")
        _mount(path, f"{_NEW_ROOT}/etc/{db}", None, _MS_BIND, None)


def _bind_system_dir(name: str) -> None:
    """/usr and friends read-only; a merged-/usr symlink (/bin -> usr/bin) stays a link."""
    src = "/" + name
    if os.path.islink(src):
        os.symlink(os.readlink(src), _NEW_ROOT + src)
    elif os.path.isdir(src):
        _bind(src, _NEW_ROOT + src, read_only=name not in ("proc", "dev"))


def _bind(source: str, target: str, *, read_only: bool) -> None:
    os.makedirs(target, exist_ok=True)
    _mount(source, target, None, _MS_BIND | _MS_REC, None)
    if read_only:
        # A remount inside a user namespace must keep the flags the host mount has
        # locked (nosuid, nodev, noexec, atime); read them from the mount itself.
        locked = _locked_flags(os.statvfs(target).f_flag)
        _mount("none", target, None, _MS_BIND | _MS_REMOUNT | _MS_RDONLY | locked, None)


def _locked_flags(st_flag: int) -> int:
    pairs = ((os.ST_NOSUID, _MS_NOSUID), (os.ST_NODEV, _MS_NODEV), (os.ST_NOEXEC, 8))
    pairs += ((os.ST_NOATIME, 1024), (os.ST_NODIRATIME, 2048), (os.ST_RELATIME, 1 << 21))
    return sum(ms for st, ms in pairs if st_flag & st)


def _pivot_root(new_root: str) -> None:
    """pivot_root(".", ".") then detach the old root: nothing of the host tree stays
    reachable, not even through '..' of a mount point."""
    os.chdir(new_root)
    if libc.syscall(_SYS_PIVOT_ROOT, b".", b".") != 0:
        _fail(f"pivot_root: {os.strerror(ctypes.get_errno())}")
    if libc.umount2(b".", _MNT_DETACH) != 0:
        _fail(f"umount old root: {os.strerror(ctypes.get_errno())}")
    os.chdir("/")


def _abi() -> int:
    v = libc.syscall(_SYS_CREATE, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    return v if v > 0 else 0


def _fs_rights(abi: int) -> int:
    rights = (1 << 13) - 1  # EXECUTE .. MAKE_SYM (ABI 1)
    if abi >= 2:
        rights |= 1 << 13  # REFER
    if abi >= 3:
        rights |= _TRUNCATE
    return rights


def _add_rule(ruleset: int, path: str, allowed: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    try:
        if not os.path.isdir(path):
            allowed &= _EXECUTE | _FILE_RW | _TRUNCATE  # only file rights apply to a file
        attr = _PathBeneath(allowed=allowed, parent_fd=fd)
        if libc.syscall(_SYS_ADD_RULE, ruleset, 1, ctypes.byref(attr), 0) != 0:
            _fail(f"landlock rule {path}: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(fd)


def loopback_up() -> None:
    """Bring up ``lo`` of the fresh network namespace (it starts down): 127.0.0.1 then
    reaches this namespace's own listeners and nothing else."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        ifreq = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(s, _SIOCGIFFLAGS, ifreq))[1]
        fcntl.ioctl(s, _SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | _IFF_UP))


def _add_port_rule(ruleset: int, port: int) -> None:
    attr = _NetPort(allowed=_NET_BIND_CONNECT, port=port)
    if libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_NET_PORT, ctypes.byref(attr), 0) != 0:
        _fail(f"landlock port rule {port}: {os.strerror(ctypes.get_errno())}")


def restrict(
    read_paths: list[str], write_paths: list[str], tcp_ports: list[int] | None = None
) -> None:
    """Landlock: writes only beneath write_paths, reads only beneath read_paths (plus
    listing directories from /), TCP only to and from tcp_ports (ABI >= 4), no signals
    or abstract sockets outside the sandbox (ABI >= 6)."""
    abi = _abi()
    if abi < 1:
        _fail("Landlock is not available in this kernel; refusing to run unconfined")
    rights = _fs_rights(abi)
    attr = _RulesetAttr(fs=rights, net=3 if abi >= 4 else 0, scoped=3 if abi >= 6 else 0)
    size = 24 if abi >= 6 else (16 if abi >= 4 else 8)
    ruleset = libc.syscall(_SYS_CREATE, ctypes.byref(attr), ctypes.c_size_t(size), 0)
    if ruleset < 0:
        _fail(f"landlock_create_ruleset: {os.strerror(ctypes.get_errno())}")
    _add_rule(ruleset, "/", _READ_DIR)
    _add_rule(ruleset, "/dev", _READ_DIR)
    for path in (*_SYSTEM_READ, *read_paths):
        _add_rule(ruleset, path, _READ)
    for path in _DEV_FILES:
        _add_rule(ruleset, path, _FILE_RW | (_TRUNCATE if abi >= 3 else 0))
    _add_rule(ruleset, "/dev/pts", _READ_DIR | _FILE_RW)
    for path in write_paths:
        _add_rule(ruleset, path, rights)
    for port in (tcp_ports or []) if abi >= 4 else []:
        _add_port_rule(ruleset, int(port))
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        _fail("prctl(NO_NEW_PRIVS) failed")
    if libc.syscall(_SYS_RESTRICT, ruleset, 0) != 0:
        _fail(f"landlock_restrict_self: {os.strerror(ctypes.get_errno())}")
    os.close(ruleset)


def become_user(uid: int) -> None:
    """Enter a user namespace nested in the sandbox's, in which this process is ``uid``
    (mapped to the sandbox's root, so it still owns its home): desktop applications warn
    when they run as root. Done just before Landlock, which forbids the map writes."""
    if libc.unshare(_CLONE_NEWUSER) != 0:
        _fail(f"unshare(CLONE_NEWUSER): {os.strerror(ctypes.get_errno())}")
    maps = (("setgroups", "deny"), ("uid_map", f"{uid} 0 1"), ("gid_map", f"{uid} 0 1"))
    for name, text in maps:
        with open(f"/proc/self/{name}", "w") as f:
            f.write(text)


def set_limits(spec: dict) -> None:
    """Per-process limits. RLIMIT_NPROC bounds a fork bomb only where the sandbox's root
    is not the host's root (the kernel exempts uid 0); the cgroup that sandbox.py joins,
    where the host offers one, bounds the whole tree in every case."""
    limits = {
        resource.RLIMIT_CORE: 0,
        resource.RLIMIT_FSIZE: int(spec["max_file_bytes"]),
        resource.RLIMIT_NOFILE: int(spec.get("max_open_files", 256)),
        resource.RLIMIT_NPROC: int(spec.get("max_processes", 0)),
        resource.RLIMIT_DATA: int(spec.get("max_memory_bytes", 0)),
    }
    for which, value in limits.items():
        if value > 0 or which == resource.RLIMIT_CORE:
            resource.setrlimit(which, (value, value))


def reset_signals() -> None:
    """Every signal back to its default action and none blocked, as a login shell
    starts. Ignored dispositions and the blocked mask survive exec: Python ignores
    SIGPIPE and SIGXFSZ (``yes | head`` then prints "Broken pipe"), and a collector
    started in the background of a script ignores SIGINT (Ctrl-C then stops nothing)."""
    for sig in signal.valid_signals():
        if sig not in (signal.SIGKILL, signal.SIGSTOP):
            try:
                signal.signal(sig, signal.SIG_DFL)
            except (OSError, ValueError):  # signals the runtime reserves
                pass
    signal.pthread_sigmask(signal.SIG_SETMASK, [])


def main(argv: list[str]) -> None:
    if len(argv) < 3 or argv[1] != "--":
        _fail("usage: sandbox_init.py SPEC_JSON -- PROGRAM [ARGS...]")
    spec = json.loads(argv[0])
    program = argv[2:]
    read_paths = [os.path.realpath(p) for p in spec.get("read_paths", [])]
    home = spec.get("home") or SANDBOX_HOME
    user = spec.get("user")
    setup_mounts(spec["work_dir"], spec.get("tmp_size", "64m"), read_paths, home, user)
    if spec.get("hostname"):
        socket.sethostname(spec["hostname"])  # our own UTS namespace
    if spec.get("tcp_ports"):
        loopback_up()
    set_limits(spec)
    if user:
        become_user(SANDBOX_UID)
    restrict(read_paths, [home, "/tmp"], spec.get("tcp_ports", []))
    os.chdir(home)
    allowed = set(spec.get("env_names", []))
    env = {k: v for k, v in os.environ.items() if k in allowed}
    reset_signals()
    try:
        os.execvpe(program[0], program, env)
    except OSError as e:
        _fail(f"exec {program[0]}: {e.strerror}")


if __name__ == "__main__":
    main(sys.argv[1:])
