"""`jobs/serve.py` (and so `make serve`) stops cleanly on SIGTERM, the signal Kubernetes,
docker and systemd send: Serve and Ray shut down, exit code 0, within the bound, and no
process of its cluster is left behind."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize("sig", [signal.SIGTERM])
def test_serve_stops_on_sigterm_with_exit_code_0(tiny_checkpoint, tmp_path, sig):
    from agentworld.sim.run import STOP_TIMEOUT_S

    port = _free_port()
    log = open(tmp_path / "serve.log", "w+")
    proc = subprocess.Popen(
        [sys.executable, "jobs/serve.py", "--model", tiny_checkpoint, "--port", str(port),
         "--api-keys", "team=sk-stop-test"],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 600
        while "[serve] ready" not in (tmp_path / "serve.log").read_text():
            assert proc.poll() is None, (tmp_path / "serve.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "serve did not become ready"
            time.sleep(2)
        with socket.create_connection(("127.0.0.1", port), timeout=10):
            pass
        proc.send_signal(sig)
        rc = proc.wait(timeout=STOP_TIMEOUT_S + 60)
        text = (tmp_path / "serve.log").read_text()
        assert rc == 0, text[-3000:]
        assert "[serve] stopping" in text and "[serve] stopped" in text, text[-2000:]
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
        deadline = time.monotonic() + 60  # Ray's daemons exit just after the driver
        while _group_alive(proc.pid) and time.monotonic() < deadline:
            time.sleep(1)
        assert not _group_alive(proc.pid), "processes of the serve job's cluster remain"
    finally:
        if _group_alive(proc.pid):
            os.killpg(proc.pid, signal.SIGKILL)
