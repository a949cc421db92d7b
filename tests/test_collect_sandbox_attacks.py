"""The collect sandbox, attacked from inside: each test plays a hostile session and
checks from the host that the attack failed (no network, loopback included; no host
files read or written; a fork bomb and a memory hog contained and recorded; no host
secret visible; no SWE tool reaching outside its repository through a planted link)."""

from __future__ import annotations

import os
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from agentworld.collect.env import Action
from agentworld.collect.sandbox import SandboxSpec, sandbox_command
from agentworld.collect.shell import ShellSession
from tests import test_collect_envs as envs

_task, run = envs._task, envs.run
workspace, terminal = envs.workspace, envs.terminal  # the same fixtures, shared

CHECKOUT = Path(__file__).resolve().parents[1]


def _python(code: str) -> str:
    """A command line running ``code`` with the sandbox's python3."""
    return "python3 -c " + "'" + code.replace("'", "'\"'\"'") + "'"


_CONNECT = """
import socket, sys
for fam, addr in ((socket.AF_INET, ("127.0.0.1", {port})), (socket.AF_UNIX, "\\0{abstract}")):
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.settimeout(2)
    try:
        s.connect(addr); print("CONNECTED", fam)
    except OSError as e:
        print("refused", fam, type(e).__name__)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    u.sendto(b"leak", ("127.0.0.1", {port})); print("udp sent")
except OSError as e:
    print("udp refused", type(e).__name__)
"""


def test_no_network_not_even_host_loopback(terminal):
    """A TCP listener, an abstract UNIX socket and a UDP port on the host's loopback:
    nothing from inside reaches them, also after the session brings its own lo up."""
    tcp = socket.create_server(("127.0.0.1", 0))
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", tcp.getsockname()[1]))
    abstract = "aw-probe-" + os.urandom(4).hex()
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.bind("\0" + abstract)
    unix.listen()
    arrived: list[str] = []

    def watch(sock: socket.socket, kind: str) -> None:
        sock.settimeout(0.5)
        while not stop.is_set():
            try:
                (sock.accept() if kind != "udp" else sock.recvfrom(64)) and arrived.append(kind)
            except OSError:
                pass

    stop = threading.Event()
    watchers = [
        threading.Thread(target=watch, args=a) for a in ((tcp, "tcp"), (unix, "unix"), (udp, "udp"))
    ]
    for w in watchers:
        w.start()
    try:
        probe = _python(_CONNECT.format(port=tcp.getsockname()[1], abstract=abstract))
        first = run(terminal, probe).observation
        lo_up = run(terminal, "ip link set lo up 2>&1; " + probe).observation
    finally:
        stop.set()
        for w in watchers:
            w.join()
        for s in (tcp, udp, unix):
            s.close()
    assert "CONNECTED" not in first + lo_up
    assert first.count("refused") >= 2, first
    assert arrived == []


def test_host_files_cannot_be_read(tmp_path):
    """The host checkout, the host user's home and other users' files: not readable,
    not even listable. A read path shows its tree, but a file of an unmapped user there
    stays closed, and /etc/shadow (root's, readable by root) is masked."""
    home_probe = Path.home() / f".aw-probe-{os.urandom(4).hex()}"
    home_probe.write_text("home-secret\n")
    shared = tmp_path / "shared"
    shared.mkdir()
    other = shared / "other-user.txt"
    other.write_text("other-user-secret\n")
    os.chown(other, 4242, 4242)
    other.chmod(0o600)
    (shared / "public.txt").write_text("public-text\n")
    host_shadow = Path("/etc/shadow").read_text() if os.access("/etc/shadow", os.R_OK) else ""
    try:
        with ShellSession(
            SandboxSpec(work_dir=str(_home(tmp_path)), read_paths=(str(shared),)), timeout_s=3
        ) as sh:
            out = {
                c: sh.run(c).output
                for c in (
                    f"cat {CHECKOUT}/README.md",
                    f"ls -A {CHECKOUT} {CHECKOUT.parent}",
                    f"cat {home_probe}",
                    f"ls -A {Path.home()}",
                    f"cat {other}",
                    f"cat {shared}/public.txt",
                    "cat /etc/shadow",
                    "cat /proc/1/root/etc/hostname; ls /proc/1/root/",
                )
            }
    finally:
        home_probe.unlink()
    seen = "".join(out.values())
    assert "public-text" in out[f"cat {shared}/public.txt"]  # the read path works...
    assert "other-user-secret" not in seen  # ...but not for another user's file
    assert "Permission denied" in out[f"cat {other}"]
    assert "home-secret" not in seen and home_probe.name not in out[f"ls -A {Path.home()}"]
    assert "AgentWorld" not in seen and "pyproject.toml" not in seen
    for line in filter(None, host_shadow.splitlines()):
        assert line not in seen
    assert out["cat /etc/shadow"] == ""


def _home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return home


def test_writes_outside_the_home_fail(tmp_path):
    """Writes to every host location the session can see (a read path, /etc, /usr,
    the host's /dev/shm, the root, /proc/sys) and through mount tricks fail; checked on
    the host, not through the session's private /tmp."""
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "kept.txt").write_text("original\n")
    shm = Path("/dev/shm") / f"aw-probe-{os.urandom(4).hex()}"
    hostname = Path("/proc/sys/kernel/hostname").read_text()
    targets = [f"{shared}/new.txt", f"{shared}/kept.txt", "/etc/aw-probe", "/usr/aw-probe"]
    targets += [str(shm), "/aw-probe", "/var/tmp/aw-probe", "/proc/sys/kernel/hostname"]
    attacks = [f"echo pwned > {t}" for t in targets]
    attacks += [
        f"mount -t tmpfs none {shared} && echo pwned > {shared}/new.txt",
        f"umount -l {shared} && echo pwned > {shared}/new.txt",
        "mount -o remount,rw / && echo pwned > /aw-probe",
        f"ln {shared}/kept.txt hard-link && echo pwned >> hard-link",
    ]
    with ShellSession(
        SandboxSpec(work_dir=str(_home(tmp_path)), read_paths=(str(shared),)), timeout_s=3
    ) as sh:
        results = [sh.run(a) for a in attacks]
        home_ok = sh.run("echo mine > own.txt && cat own.txt").output
    assert home_ok == "mine\n"  # the home stays writable: the denials are specific
    assert all(r.exit_code != 0 for r in results), [r.output for r in results]
    assert sorted(p.name for p in shared.iterdir()) == ["kept.txt"]
    assert (shared / "kept.txt").read_text() == "original\n"
    assert not shm.exists() and not Path("/etc/aw-probe").exists()
    assert not Path("/usr/aw-probe").exists() and not Path("/aw-probe").exists()
    assert Path("/proc/sys/kernel/hostname").read_text() == hostname


def test_fork_bomb_is_contained_and_recorded(workspace):
    """A fork bomb through the terminal recorder: the tree never exceeds the process
    limit, the session is killed, the turn says so, and nothing is left on the host."""
    from agentworld.collect.episode import EpisodeSpec, run_episode

    limit = 256  # SandboxSpec.max_processes: the recorders use the default
    if not _tree_limited():
        pytest.skip("no cgroup to create and the host runs as root: nothing bounds a bomb")
    shell_pid: list[int] = []
    sizes: list[int] = []
    done = threading.Event()

    class Bomber:
        def next_action(self, env, environment, turns):
            shell_pid[:] = [env.shell.proc.pid]
            texts = [":(){ :|:& };:", "sleep 1; echo after-bomb"]
            return Action(text=texts[len(turns)]) if len(turns) < len(texts) else None

    def sample() -> None:  # the host's view of the session's tree while it runs
        while not done.wait(0.05):
            if shell_pid:
                sizes.append(_tree_size(shell_pid[0]))

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        traj = run_episode(EpisodeSpec(index=0, domain="terminal", seed=0), workspace, Bomber())
    finally:
        done.set()
        sampler.join()
    # The bomb burns out against the limit (the next command then runs), or keeps the
    # shell from forking for the next command, until the command's time limit interrupts
    # it or bash gives up its fork retries and prompts again (what a loaded machine sees),
    # or kills the session: the turn says which, and the session never ran more
    # processes than the limit.
    last = traj.turns[-1]
    if last.metadata.get("session_ended"):
        assert "session killed" in last.observation
    elif "after-bomb" not in last.observation:
        assert "fork: retry: Resource temporarily unavailable" in last.observation
        interrupted = "time limit; interrupted" in last.observation
        assert interrupted or last.observation.rstrip().endswith("$"), last.observation
    assert "Resource temporarily unavailable" in "".join(t.observation for t in traj.turns)
    assert limit / 2 < max(sizes) <= limit + 4  # sh, setsid, unshare, init sit outside
    # Nothing of it survives on the host: the kernel tears the PID namespace down after
    # its init dies (asynchronously, hence the bounded wait).
    assert _wait_until(lambda: _tree_size(shell_pid[0]) == 0, timeout_s=30)
    assert subprocess.run(["true"]).returncode == 0  # and the host can still fork


def _wait_until(check, *, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def _tree_size(sid: int) -> int:
    return sum(1 for pid in _all_pids() if _sid(pid) == sid)


def _sid(pid: int) -> int | None:
    try:
        return os.getsid(pid)
    except OSError:
        return None


def _all_pids() -> set[int]:
    return {int(p) for p in os.listdir("/proc") if p.isdigit()}


def _tree_limited() -> bool:
    cmd = sandbox_command(SandboxSpec(work_dir="/"), ["true"])
    return os.geteuid() != 0 or cmd[0] == "/bin/sh"


def test_memory_hog_is_contained(tmp_path):
    """One big allocation fails in the process (RLIMIT_DATA); several allocations each
    under that limit but together over it are killed (the tree's cgroup); the session
    and the host carry on."""
    mib = 1 << 20
    with ShellSession(
        SandboxSpec(work_dir=str(_home(tmp_path)), max_memory_bytes=256 * mib), timeout_s=20
    ) as sh:
        single = sh.run(_python("a = bytearray(2 << 30); print('allocated')") + "; echo rc=$?")
        hog = "import time; a = bytearray(200 << 20); a[::4096] = b'x' * len(a[::4096]); time.sleep(2)"
        many = sh.run(f"for i in 1 2 3 4; do {_python(hog)} & done; wait; echo done")
        after = sh.run("echo still-alive").output
    assert "MemoryError" in single.output and "rc=1" in single.output
    assert "allocated" not in single.output
    if _tree_limited() and os.geteuid() == 0:
        assert "Killed" in many.output, many.output
    assert after == "still-alive\n"


def test_host_secret_is_not_visible_even_if_the_caller_passes_its_environment(tmp_path):
    """The sandbox keeps only its own variables, even when a caller hands it the full
    host environment (forgetting base_env)."""
    secret = "aw-secret-" + os.urandom(6).hex()
    env = {**os.environ, "AGENTWORLD_TEST_SECRET": secret, "AWS_SECRET_ACCESS_KEY": secret}
    argv = sandbox_command(
        SandboxSpec(work_dir=str(_home(tmp_path))),
        ["sh", "-c", "env; cat /proc/1/environ /proc/self/environ | tr '\\0' '\\n'"],
    )
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert "PATH=" in out.stdout
    assert secret not in out.stdout and "AWS_SECRET_ACCESS_KEY" not in out.stdout
    assert "PYTHONPATH" not in out.stdout


@pytest.fixture
def swe(workspace, tmp_path):
    import random

    from agentworld.collect.swe.env import SweEnvironment
    from agentworld.collect.swe.playbooks import generate_repo

    repo = generate_repo(random.Random(1))
    env = SweEnvironment(workspace)
    env.reset(_task(files=repo["files"], package=repo["package"]))
    yield env, repo
    env.close()


def test_swe_symlinks_do_not_reach_outside_the_repository(swe, tmp_path):
    """A link planted in the repository (to a system file, to /tmp, to a host path)
    neither lets view_file show what it points to nor lets apply_patch write there."""
    env, repo = swe
    host_dir = tmp_path / "host-target"
    host_dir.mkdir()
    env.run(
        "mkdir -p /tmp/outside && ln -s /etc/passwd passwd-link && ln -s /tmp/outside out"
        f" && ln -s {host_dir} host && ln -s /etc etc-link"
    )
    views = [
        env.step(Action.tool("view_file", path=p))
        for p in ("passwd-link", "/etc/passwd", "../../etc/passwd", "etc-link/hostname")
    ]
    for turn in views:
        assert "root:" not in turn.observation and "outside the repository" in turn.observation
        assert turn.exit_code != 0
    own = next(p for p, text in repo["files"].items() if p.endswith(".py") and text)
    assert "     1\t" in env.step(Action.tool("view_file", path=own)).observation  # still works
    patches = [_new_file_patch(f"{d}/evil.py") for d in ("out", "host", "etc-link")]
    patches.append(_symlink_then_write_patch())
    for patch in patches:
        turn = env.step(Action.tool("apply_patch", patch=patch))
        assert turn.exit_code != 0, turn.observation
    assert env.run("ls -A /tmp/outside").output == ""
    assert list(host_dir.iterdir()) == []
    assert not Path("/etc/evil.py").exists()


def _new_file_patch(path: str) -> str:
    return (
        f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
        "@@ -0,0 +1 @@\n+PWNED = True\n"
    )


def _symlink_then_write_patch() -> str:
    """One patch that creates a link to /tmp and then a file beneath it."""
    link = (
        "diff --git a/sneaky b/sneaky\nnew file mode 120000\n--- /dev/null\n+++ b/sneaky\n"
        "@@ -0,0 +1 @@\n+/tmp/outside\n\\ No newline at end of file\n"
    )
    return link + _new_file_patch("sneaky/evil.py")
