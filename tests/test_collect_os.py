"""The os domain against a real desktop: Xvfb, Openbox and GTK applications (Mousepad,
galculator, Gnumeric, PCManFM) in the collectors' sandbox, read through AT-SPI and
driven with real X input. One workspace serves the module, as in a collect task; each
episode starts its own desktop."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time

import pytest

from agentworld.collect import CollectConfig
from agentworld.collect.env import Task, Workspace
from agentworld.collect.episode import EpisodeSpec, draw_task, run_episode
from agentworld.collect.os.actions import ActionError, parse_action, render_action
from agentworld.collect.os.env import OsEnvironment, os_action
from agentworld.collect.os.playbooks import PLAYBOOKS
from agentworld.collect.os.session import SYSTEM_PYTHON, desktop_spec
from agentworld.collect.os.tree_text import elements, find, render_tree, value_of
from agentworld.collect.playbook import scripted
from agentworld.collect.sandbox import base_env, sandbox_command
from agentworld.schema import Trajectory
from tests.conftest import ROOT

CONFIG = CollectConfig(domains=("os",), episodes=1, seed=0)


@pytest.fixture(scope="module")
def workspace():
    with Workspace(CONFIG) as ws:
        yield ws


def _task(app: str, **state) -> Task:
    return Task(playbook="test", text="test", script=scripted([]), state={"app": app, **state})


@pytest.fixture
def open_env(workspace):
    """A function starting an os environment on a task's state; closed after the test."""
    envs: list[OsEnvironment] = []

    def start(app: str, workspace=workspace, **state) -> OsEnvironment:
        env = OsEnvironment(workspace)
        envs.append(env)
        env.reset(_task(app, **state))
        return env

    yield start
    for env in envs:
        env.close()


def _one_spec_per_playbook() -> dict[str, EpisodeSpec]:
    found: dict[str, EpisodeSpec] = {}
    for i in range(200):
        spec = EpisodeSpec(index=i, domain="os", seed=0)
        found.setdefault(draw_task(spec, CONFIG).playbook, spec)
        if len(found) == len(PLAYBOOKS):
            return found
    raise AssertionError(f"playbooks never drawn: {set(PLAYBOOKS) - set(found)}")


@pytest.fixture(scope="module")
def os_records(workspace):
    """One scripted episode of every playbook (seed 0) and the screenshots it wrote."""
    out = {}
    for name, spec in sorted(_one_spec_per_playbook().items()):
        traj = run_episode(spec, workspace)
        out[name] = (traj, workspace.take_artifacts())
    return out


def test_every_playbook_records_a_changing_desktop_and_reaches_its_end_state(os_records):
    assert set(os_records) == {f"os/{n}" for n in PLAYBOOKS}
    for name, (traj, shots) in os_records.items():
        assert traj.outcome is not None and traj.outcome.success, (name, traj.outcome)
        observations = [t.observation for t in traj.turns]
        assert all(o.startswith(("Window: ", "Error: ")) for o in observations)
        assert all(elements(o) for o in observations), name  # real trees, element lines
        assert len(set(observations)) > 1, name  # the screen changed with the actions
        for turn in traj.turns:
            assert shots[turn.screenshot].startswith(b"\x89PNG\r\n\x1a\n"), turn.screenshot
        assert len(set(shots.values())) > 1  # and so did the pixels
        assert Trajectory.from_json(traj.to_json()) == traj


def test_typed_text_shows_in_the_editor_and_the_saved_file_holds_it(open_env):
    env = open_env("mousepad")
    first = env.step(os_action("wait", seconds=0))
    editor = find(first.observation, "text")
    assert value_of(first.observation, editor) == ""
    typed = env.step(os_action("type", text="Dear Ada,\nthe meeting moved."))
    assert value_of(typed.observation, editor) == "Dear Ada,\nthe meeting moved."
    assert "Window: *Untitled 1 - Mousepad" in typed.observation  # unsaved, says the title
    dialog = env.step(os_action("hotkey", keys=["ctrl", "s"]))
    assert "Window: Save As" in dialog.observation
    saved = env.step(os_action("type", text="memo.txt\n")).observation
    for _ in range(10):  # a loaded machine may take seconds to write and retitle
        if "Window: ~/memo.txt - Mousepad" in saved:
            break
        saved = env.step(os_action("wait", seconds=1)).observation
    assert "Window: ~/memo.txt - Mousepad" in saved
    with open(os.path.join(env.home, "memo.txt")) as f:
        assert f.read() == "Dear Ada,\nthe meeting moved."


def test_ids_stay_with_their_elements_through_an_episode(open_env):
    env = open_env("mousepad")
    start = env.step(os_action("wait", seconds=0)).observation
    menu, editor = find(start, "menu", "Edit"), find(start, "text")
    opened = env.step(os_action("hotkey", keys=["alt", "e"])).observation
    item = find(opened, "menu-item", "Select All")
    assert item is not None and find(opened, "menu", "Edit") == menu
    closed = env.step(os_action("press", key="escape")).observation
    assert find(closed, "menu-item") is None  # a closed menu's items are not on screen
    assert (find(closed, "menu", "Edit"), find(closed, "text")) == (menu, editor)
    again = env.step(os_action("click", id=menu)).observation
    assert find(again, "menu-item", "Select All") == item
    chosen = env.step(os_action("click", id=item)).observation
    assert find(chosen, "text") == editor


def test_failed_actions_observe_the_real_error(open_env):
    env = open_env("galculator")
    key = env.step(os_action("hotkey", keys=["ctrl", "nosuchkey"]))
    assert key.observation.startswith("Error: (symbol) No such key name 'nosuchkey'.")
    assert key.metadata["is_error"] and "\nWindow: galculator\n" in key.observation
    missing = env.step(os_action("click", id=9999))
    assert missing.observation.startswith("Error: no element [9999] has been on screen")
    outside = env.step(os_action("click", x=5000, y=3))
    assert outside.observation.startswith("Error: (5000, 3) is outside the screen")
    typo = env.step(env.parse_agent_action("clik(3)"))
    assert typo.observation.startswith("Error: invalid action: unknown action 'clik'")
    ok = env.step(env.parse_agent_action('I will type it.\n```\ntype("7")\n```'))
    assert ok.action == 'type("7")' and not ok.metadata.get("is_error")
    assert value_of(ok.observation, find(ok.observation, "text")) == "7"


def test_observation_is_cut_at_its_cap_and_says_so(open_env):
    cap = 400
    with Workspace(CollectConfig(domains=("os",), os_observation_cap=cap)) as ws:
        env = open_env("gnumeric", workspace=ws)
        turn = env.step(os_action("type", text="42\n"))
    text = turn.observation
    assert turn.metadata["truncated_chars"] > 0
    head, _, marker = text.rpartition("\n")
    assert len(head) <= cap and elements(head.splitlines()[-1])  # cut after a whole line
    assert marker.startswith("[observation truncated: ") and marker.endswith(" more lines]")


def test_the_application_reads_and_writes_nothing_of_the_host_outside_its_home(open_env):
    host_file = ROOT / "pyproject.toml"
    env = open_env("mousepad", args=[str(host_file)], files={"mine.txt": "my own notes\n"})
    start = env.step(os_action("wait", seconds=0)).observation
    assert value_of(start, find(start, "text")) == ""  # no such file in its world
    env.step(os_action("type", text="x"))
    env.step(os_action("hotkey", keys=["ctrl", "s"]))
    refused = env.step(os_action("wait", seconds=1)).observation
    assert "The document is read-only" in refused
    assert host_file.read_text().startswith("[")  # untouched
    env.step(os_action("press", key="escape"))

    def open_file(path: str) -> str:
        env.step(os_action("hotkey", keys=["ctrl", "o"]))
        for _ in range(5):  # type only once the chooser is in front
            if 'push-button "Open"' in env.step(os_action("wait", seconds=1)).observation:
                break
        # Ctrl+L opens the chooser's location entry focused: a path typed from "/" can
        # lose its next letter while the entry pops up ("/ome/agent").
        env.step(os_action("hotkey", keys=["ctrl", "l"]))
        env.step(os_action("type", text=path + "\n"))
        return env.step(os_action("wait", seconds=1)).observation

    # The chooser or the editor says so, depending on when the Return reaches it.
    missing = open_file(str(ROOT / "README.md"))
    assert 'alert "Error"' in missing, missing
    assert any(s in missing for s in ("Failed to open the document", "could not be displayed"))
    # The error, a second one the chooser may raise for its folder, and the chooser if it
    # is still open: escape until the editor is back in front with no alert over it.
    for _ in range(4):
        page = env.step(os_action("press", key="escape")).observation
        front = "Window: Mousepad" in page or "- Mousepad" in page.split("\n", 1)[0]
        if front and 'alert "Error"' not in page:
            break
    mine = open_file("/home/agent/mine.txt")  # the task's home, where its files are
    assert 'value="my own notes\\n"' in mine, mine


def test_the_desktop_sandbox_has_no_network(tmp_path):
    """The sandbox the desktop runs in (its own spec), probed from inside: a listener on
    the host's loopback and an outside address are both out of reach."""
    host = socket.socket()
    host.bind(("127.0.0.1", 0))
    host.listen()
    host.settimeout(0.5)
    port = host.getsockname()[1]
    probe = (
        "import socket\n"
        f"for addr in [('127.0.0.1', {port}), ('192.0.2.1', 80)]:\n"
        "    try:\n"
        "        socket.create_connection(addr, timeout=2); print('reached', addr)\n"
        "    except OSError as e:\n"
        "        print('refused', addr, e.errno)\n"
    )
    home = tmp_path / "home"
    home.mkdir()
    spec = desktop_spec(str(home), user="ana", shown_as="/home/ana", max_file_bytes=1 << 20, env={})
    done = subprocess.run(
        sandbox_command(spec, [SYSTEM_PYTHON, "-c", probe]),
        env=base_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    with pytest.raises(TimeoutError):
        host.accept()
    host.close()
    assert done.stdout.count("refused") == 2 and "reached" not in done.stdout, done


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
            children.setdefault(ppid, []).append(int(name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    """Running or stopped; not gone, not a zombie waiting for a parent to reap it."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_hung_application_dies_with_its_episode(open_env):
    env = open_env("mousepad")
    tree = _descendants(env.session.proc.pid)
    app = [p for p in tree if _comm(p) == "mousepad"]
    assert len(app) == 1 and {"Xvfb", "openbox", "dbus-daemon"} <= {_comm(p) for p in tree}
    os.kill(app[0], signal.SIGSTOP)  # it no longer answers anything, SIGTERM included
    env.close()
    time.sleep(0.5)
    alive = [p for p in tree if _alive(p)]
    assert alive == [], [(p, _comm(p)) for p in alive]


def test_two_episodes_at_once_see_only_their_own_display_and_bus(open_env):
    editor, calc = open_env("mousepad"), open_env("galculator")
    editor.step(os_action("type", text="12345"))
    mine = calc.step(os_action("wait", seconds=0)).observation
    theirs = editor.step(os_action("wait", seconds=0)).observation
    assert value_of(mine, find(mine, "text")) == "0"  # the keys went to the other display
    assert value_of(theirs, find(theirs, "text")) == "12345"
    assert "Mousepad" not in mine and "galculator" not in theirs  # one tree each
    buses = {
        p: _environ(p).get("DBUS_SESSION_BUS_ADDRESS")
        for env in (editor, calc)
        for p in _descendants(env.session.proc.pid)
        if _comm(p) in ("mousepad", "galculator")
    }
    assert len(buses) == 2 and all(buses.values())
    # The same address names two buses: each lives in its own sandbox's /tmp.
    assert len({os.stat(f"/proc/{p}/root/tmp").st_dev for p in buses}) == 2


def _environ(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/environ", "rb") as f:
        items = f.read().decode(errors="replace").split("\0")
    return dict(i.split("=", 1) for i in items if "=" in i)


def test_actions_parse_and_render_as_pyautogui_calls():
    cases = {
        "click(12)": ("click", {"id": 12}),
        "click('12')": ("click", {"id": 12}),
        "click(640, 400)": ("click", {"x": 640, "y": 400}),
        'type("a \\"b\\"\\n")': ("type", {"text": 'a "b"\n'}),
        'hotkey("Ctrl", "s")': ("hotkey", {"keys": ["ctrl", "s"]}),
        "scroll(-3)": ("scroll", {"clicks": -3}),
        "scroll(5, 2)": ("scroll", {"id": 5, "clicks": 2}),
        "drag(4, 9)": ("drag", {"id": 4, "to_id": 9}),
        "wait()": ("wait", {}),
        "done()": ("done", {}),
    }
    for text, (name, args) in cases.items():
        assert parse_action(text) == (name, args), text
        assert parse_action(render_action(name, **args)) == (name, args)
    for bad in ("click()", "click(1, 2, 3)", "type(3)", "wait(99)", "hotkey()", "open('x')"):
        with pytest.raises(ActionError):
            parse_action(bad)


def test_tree_text_joins_button_runs_and_drops_what_says_nothing():
    def node(i, role, name="", states=(), children=(), **kw):
        states = ["showing", "visible", "enabled", "sensitive", *states]
        return {
            "id": i,
            "role": role,
            "name": name,
            "states": states,
            "children": list(children),
            **kw,
        }

    buttons = [node(10 + k, "push button", n) for k, n in enumerate(["New", "Open", "Save"])]
    window = node(
        1,
        "frame",
        "Notes",
        ["active"],
        [
            node(2, "panel", children=[*buttons, node(20, "push button")]),
            node(
                3, "filler", children=[node(4, "text", states=["editable", "focused"], text="hi")]
            ),
            node(5, "separator"),
            node(6, "label", "Notes"),
        ],
    )
    text = render_tree([window])
    assert text == (
        '[1] frame "Notes", active\n'
        '  push-buttons: [10] "New", [11] "Open", [12] "Save"\n'
        '  [4] text, focused, editable, value="hi"'
    )
    assert [e[:3] for e in elements(text)][1:3] == [
        (10, "push-button", "New"),
        (11, "push-button", "Open"),
    ]


def test_collect_writes_the_screenshots_its_records_name(ray_cluster, tmp_path):
    from agentworld.collect import collect
    from agentworld.io import read_records

    out = str(tmp_path / "raw")
    config = CollectConfig(domains=("os",), episodes=2, episodes_per_task=2, max_parallel=1)
    manifest = collect(config, out)
    assert manifest["counts"]["trajectories"] == 2, manifest["outputs"]["failed_episodes"]
    records = read_records(out).records
    shots = [t.screenshot for r in records for t in r.turns]
    assert shots and all(s.startswith(f"screenshots/{r.id}/") for r in records for s in
                         [t.screenshot for t in r.turns])  # fmt: skip
    for shot in shots:
        with open(os.path.join(out, shot), "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_prepare_keeps_every_os_sample_at_the_demo_recipe(
    ray_cluster, collected_corpus, os_records, tmp_path
):
    import dataclasses

    import pyarrow as pa

    from agentworld.data.run import prepare
    from agentworld.io import join, list_shards, read_parquet, write_jsonl
    from agentworld.recipes import debug_cpu
    from agentworld.recipes.jobs import prepare_job

    records = [traj for traj, _ in os_records.values()]
    raw = str(tmp_path / "os")
    write_jsonl(join(raw, "part-00000.jsonl"), [t.to_dict() for t in records])
    recipe = debug_cpu()
    recipe = dataclasses.replace(recipe, data=dataclasses.replace(recipe.data, progress_bars=False))
    out = str(tmp_path / "prepared")
    # Beside the other domains' records, as in the demo: the tokenizer is trained on all.
    job = prepare_job(recipe, inputs=(collected_corpus, raw), out=out)
    report = prepare(job, log=lambda _: None)
    assert report["by_domain"]["os"]["kept"] == len(records), report["by_domain"]["os"]
    samples = pa.concat_tables(
        [read_parquet(s) for s in list_shards(join(out, "samples", "sft"))]
    ).to_pylist()
    turns = {(t.id, k): x.observation for t in records for k, x in enumerate(t.turns, 1)}
    got = {
        (s["trajectory_id"], s["turn_idx"]): s["reference"] for s in samples if s["domain"] == "os"
    }
    assert got == turns  # every turn a sample, its target the real observation
    assert report.get("sft_drop_rates", {}).get("os", {}).get("dropped", 0) == 0


def test_the_simulator_and_the_agent_stage_take_os(os_records):
    from agentworld.agent.envs import canonical_action
    from agentworld.schema import predict_turn_messages
    from agentworld.sim.errors import SimError
    from agentworld.sim.prompt import resolve_domain, step_messages, system_text
    from agentworld.sim.protocol import EnvironmentSpec

    assert resolve_domain("os") == "os"
    with pytest.raises(SimError):
        resolve_domain("desktop")  # the check can fail: an unregistered domain is a 422
    for name, (traj, _) in os_records.items():
        # A session of the simulator API prompts as training did, turn after turn.
        system = system_text(EnvironmentSpec(domain="os", environment=traj.environment))
        turns = [{"action": t.action, "observation": t.observation} for t in traj.turns]
        for k in range(1, len(turns) + 1):
            messages = step_messages(system, turns[: k - 1], turns[k - 1]["action"])
            assert messages == predict_turn_messages(traj, k), (name, k)
        # The agent stage reads an agent's os action as the record writes it.
        for turn in traj.turns:
            assert canonical_action("os", turn.action) == turn.action, name
    assert canonical_action("os", 'I will save it.\nhotkey( "ctrl","s" )') == 'hotkey("ctrl", "s")'
    assert canonical_action("os", "click(12)\nthen type") == "click(12)"


def test_without_a_desktop_os_fails_clearly_and_other_domains_record(monkeypatch, tmp_path):
    from agentworld.collect.chunk import run_chunk

    monkeypatch.setenv("PATH", str(tmp_path))  # no Xvfb, no applications
    config = CollectConfig(domains=("os", "search"), episodes=2)
    specs = [EpisodeSpec(index=i, domain=d, seed=0) for i, d in enumerate(config.domains)]
    result = run_chunk(specs, config)
    assert [f["domain"] for f in result.failed] == ["os"]
    assert "the os domain needs Xvfb" in result.failed[0]["error"]
    assert "apt-get install -y xvfb" in result.failed[0]["error"]
    assert [json.loads(r)["domain"] for r in result.records] == ["search"]
