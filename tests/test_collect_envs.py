"""The recorders against their real environments, without Ray: a sandboxed bash on a
pty, MCP servers from PyPI over stdio, a generated repository, BM25 search."""

from __future__ import annotations

import os
import signal
import subprocess

import pytest

from agentworld.collect import CollectConfig
from agentworld.collect.env import Action, Task, Workspace
from agentworld.collect.playbook import scripted


def _task(**state) -> Task:
    return Task(playbook="test", text="test task", script=scripted([]), state=state)


@pytest.fixture
def workspace():
    with Workspace(CollectConfig(command_timeout_s=1.5, output_cap_bytes=2048)) as ws:
        yield ws


@pytest.fixture
def terminal(workspace):
    from agentworld.collect.terminal.env import TerminalEnvironment

    env = TerminalEnvironment(workspace)
    env.reset(_task(files={"notes.txt": "hello\n"}))
    yield env
    env.close()


def run(env, command: str):
    return env.step(Action(text=command))


def test_terminal_observations_are_real(terminal):
    token = os.urandom(8).hex()
    first = run(terminal, f"echo {token} && touch made-{token}.txt")
    assert first.observation == f"{token}\nagent@sandbox:~$ "
    assert first.exit_code == 0
    second = run(terminal, "ls")
    assert f"made-{token}.txt" in second.observation and "notes.txt" in second.observation
    third = run(terminal, "cat missing.txt")
    assert "No such file or directory" in third.observation and third.exit_code == 1
    assert run(terminal, "cd /tmp && pwd").observation == "/tmp\nagent@sandbox:/tmp$ "


def test_terminal_cannot_write_outside_its_directory(terminal, tmp_path):
    outside = tmp_path / "escaped.txt"
    turn = run(terminal, f"echo x > {outside}; touch /etc/aw-escape; echo done")
    assert "Permission denied" in turn.observation or "No such file" in turn.observation
    assert not outside.exists() and not os.path.exists("/etc/aw-escape")
    # Its /tmp is private: a file written there never shows up on the host.
    run(terminal, "echo private > /tmp/aw-private-probe")
    assert not os.path.exists("/tmp/aw-private-probe")


def test_terminal_host_secrets_are_not_visible(workspace, monkeypatch):
    from agentworld.collect.terminal.env import TerminalEnvironment

    secret = "aw-secret-" + os.urandom(6).hex()
    monkeypatch.setenv("AGENTWORLD_TEST_SECRET", secret)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    env = TerminalEnvironment(workspace)
    env.reset(_task())
    try:
        seen = "".join(
            run(env, c).observation
            for c in (
                "env",
                "cat /proc/*/environ | tr '\\0' '\\n'",
                f"cat /proc/{os.getpid()}/environ",
                "ps -e -o pid,comm",
            )
        )
    finally:
        env.close()
    assert secret not in seen
    assert "AWS_SECRET_ACCESS_KEY" not in seen
    assert "HOME=/home/agent" in seen
    # A PID namespace of its own: the host test process does not exist in there.
    assert "No such file or directory" in seen and "pytest" not in seen


def test_terminal_runaway_commands_are_stopped(terminal):
    slow = run(terminal, "sleep 600")
    assert slow.metadata["timed_out"] is True
    assert "interrupted" in slow.observation and slow.observation.endswith("agent@sandbox:~$ ")
    assert run(terminal, "echo still-alive").observation.startswith("still-alive")

    huge = run(terminal, "seq 1 200000")
    assert huge.metadata["truncated_bytes"] > 1_000_000
    assert "[output truncated:" in huge.observation and len(huge.observation) < 4096
    assert huge.observation.rstrip().endswith("agent@sandbox:~$")  # the tail and prompt stay

    run(terminal, "sleep 777123 &")
    stubborn = run(terminal, "trap '' INT; while :; do :; done")
    assert stubborn.metadata["session_ended"] is True and "session killed" in stubborn.observation
    assert terminal.ended
    # Killing the session took its whole process tree, background jobs included.
    left = subprocess.run(["pgrep", "-f", "sleep 777123"], capture_output=True, text=True)
    assert left.stdout.strip() == ""


def test_terminal_programs_get_default_signal_actions(workspace):
    """Whatever the collector ignores or blocks, the shell's programs start as at a
    login: a pipe closed early ends its writer quietly (Python ignores SIGPIPE), and
    Ctrl-C interrupts a command although the collector ignores and blocks SIGINT, as a
    script's background job does."""
    from agentworld.collect.terminal.env import TerminalEnvironment

    env = TerminalEnvironment(workspace)
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        env.reset(_task())
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        signal.signal(signal.SIGINT, old)
    try:
        piped = run(env, "yes | head -n 1; cat /dev/zero | head -c 3 | wc -c")
        slow = run(env, "sleep 600")
        after = run(env, "echo still-alive")
    finally:
        env.close()
    assert piped.observation == "y\n3\nagent@sandbox:~$ "
    assert slow.metadata["timed_out"] is True and "interrupted" in slow.observation
    assert after.observation.startswith("still-alive")


@pytest.mark.parametrize("grace_s, killed", [(0.5, True), (8.0, False)])
def test_an_interrupted_command_has_its_grace_period_to_return(grace_s, killed):
    """After Ctrl-C the shell gets ``interrupt_grace_s`` to print its prompt: a command
    whose INT trap takes 1.5 s to exit outlives a 0.5 s grace (the session is killed) and
    fits in 8 s (interrupted; the session goes on)."""
    from agentworld.collect.terminal.env import TerminalEnvironment

    cfg = CollectConfig(command_timeout_s=1.0, interrupt_grace_s=grace_s)
    with Workspace(cfg) as ws:
        env = TerminalEnvironment(ws)
        env.reset(_task())
        try:
            turn = run(env, "bash -c \"trap 'sleep 1.5; exit 130' INT; sleep 600 & wait\"")
        finally:
            env.close()
    assert turn.metadata["timed_out"] is True
    assert turn.metadata.get("session_ended", False) is killed
    assert ("session killed" in turn.observation) is killed
    assert ("interrupted" in turn.observation) is not killed


def test_mcp_time_server_real_results_and_errors(workspace):
    from agentworld.collect.mcp.env import McpEnvironment

    env = McpEnvironment(workspace)
    text = env.reset(_task(server="time"))
    assert "mcp-time" in text and '"name": "convert_time"' in text
    good = env.step(
        Action.tool(
            "convert_time", source_timezone="UTC", time="14:30", target_timezone="Asia/Tokyo"
        )
    )
    assert '"datetime": "' in good.observation and "T23:30:00+09:00" in good.observation
    assert good.metadata == {"is_error": False}
    bad = env.step(Action.tool("get_current_time", timezone="Mars/Olympus"))
    assert bad.metadata["is_error"] is True
    assert "Invalid timezone" in bad.observation and "Mars/Olympus" in bad.observation
    missing = env.step(Action.tool("convert_time", time="14:30"))
    assert missing.metadata["is_error"] is True and "Field required" in missing.observation
    unknown = env.step(Action.tool("get_weather", city="Oslo"))
    assert unknown.observation == "MCP error -32602: Unknown tool: get_weather"


def test_mcp_git_server_sees_the_episode_repository(workspace):
    from agentworld.collect.mcp.env import McpEnvironment

    repo = {
        "name": "demo",
        "commits": [("Initial commit", {"a.txt": "a\n"})],
        "dirty": {"b.txt": "b\n"},
    }
    env = McpEnvironment(workspace)
    env.reset(_task(server="git", repo=repo))
    status = env.step(Action.tool("git_status", repo_path="/home/agent/demo"))
    assert "b.txt" in status.observation and status.metadata["is_error"] is False
    log = env.step(Action.tool("git_log", repo_path="/home/agent/demo", max_count="x"))
    assert log.metadata["is_error"] is True and "valid integer" in log.observation


def test_swe_episode_fails_then_fixes_the_tests(workspace):
    from agentworld.collect.episode import EpisodeSpec, run_episode

    traj = run_episode(EpisodeSpec(index=3, domain="swe", seed=0), workspace)
    runs = [t for t in traj.turns if t.tool_call and t.tool_call.name == "run_tests"]
    assert runs[0].exit_code == 1 and "FAILED" in runs[0].observation
    assert runs[-1].exit_code == 0 and runs[-1].observation.rstrip().endswith("OK")
    assert traj.outcome.success is True
    patch = next(t for t in traj.turns if t.tool_call and t.tool_call.name == "apply_patch")
    assert "Applied patch" in patch.observation


def test_swe_patch_staging_does_not_follow_links(workspace, tmp_path):
    import random

    from agentworld.collect.swe.env import SweEnvironment
    from agentworld.collect.swe.playbooks import generate_repo

    repo = generate_repo(random.Random(1))
    env = SweEnvironment(workspace)
    env.reset(_task(files=repo["files"], package=repo["package"]))
    try:
        run_ = env.run(f"rm -r .aw && ln -s {tmp_path} .aw && echo linked")
        assert "linked" in run_.output
        with pytest.raises(OSError):
            env.step(Action.tool("apply_patch", patch=repo["fix"]))
        assert list(tmp_path.iterdir()) == []
    finally:
        env.close()


def test_search_over_the_standard_library_docs(workspace):
    from agentworld.collect.search.env import SearchEnvironment

    env = SearchEnvironment(workspace)
    text = env.reset(_task())
    assert "standard library" in text
    hits = env.step(
        Action.tool("search", query="deserialize a JSON document to a Python object", k=5)
    )
    assert "1. json." in hits.observation and "json.loads" in hits.observation
    doc = env.step(Action.tool("open", doc_id="json.loads"))
    assert doc.observation.startswith("json.loads (function)") and "Deserialize" in doc.observation
    missing = env.step(Action.tool("open", doc_id="json.nothing"))
    assert missing.metadata == {"is_error": True}
