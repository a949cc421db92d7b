"""The ingest adapters on the real recordings of ../shared/realdata: every file ingests
with the episodes and turns its source holds (counted here from the raw file, with json
and regular expressions, never through an adapter), observations checked against the
raw text, domains as the data's listing says; the chat round trip; the restricted
unpickler; bad input of each kind quarantined with the file and the position; fuzzed
variants that never stop a read. No Ray: the reads are prepare's own read functions
(plan_ranges, read_range) called in the test process."""

from __future__ import annotations

import collections
import csv
import datetime
import gzip
import json
import os
import pickle
import pickletools
import re
import shutil
import tempfile
from pathlib import Path
from typing import get_args

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentworld.config import ConfigError
from agentworld.data.config import DataConfig, InputFormat
from agentworld.data.formats import FORMAT_NAMES, FORMATS, safe_pickle
from agentworld.data.formats.base import Unit
from agentworld.data.formats.messages import chat_turns, to_messages
from agentworld.data.formats.openai_chat import build as build_chat
from agentworld.data.ingest_rows import ReaderSpec, plan_ranges, read_range
from agentworld.schema import Trajectory

ROOT = Path(__file__).resolve().parents[1]
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>]")
DOMAIN_OF_FOLDER = {"function_calling": "mcp", "asciinema": "terminal", "desktop": "os"}
"""The realdata listing's folders, as platform domains (the rest are named alike)."""


@pytest.fixture(scope="session")
def realdata() -> Path:
    """../shared/realdata beside the repository, or $AGENTWORLD_REALDATA."""
    path = Path(os.environ.get("AGENTWORLD_REALDATA") or ROOT.parent / "shared" / "realdata")
    if not path.is_dir():
        pytest.skip(f"the real recordings are not at {path} (set AGENTWORLD_REALDATA)")
    return path.resolve()


def rows_of(paths: list[Path], fmt: str = "auto") -> dict[str, list[dict]]:
    """Ingest rows by input label, read as prepare reads them (no Ray)."""
    out: dict[str, list[dict]] = collections.defaultdict(list)
    spec = ReaderSpec(fmt=fmt)
    ranges = plan_ranges([str(p) for p in paths], split_bytes=1 << 27, storage_options={}, fmt=fmt)
    for r in ranges:
        for block in read_range(r, spec):
            out[r.label].extend(block.to_pylist())
    return out


@pytest.fixture(scope="module")
def ingested(realdata) -> dict[str, list[dict]]:
    return rows_of([realdata])


def records(rows: list[dict]) -> list[Trajectory]:
    return [Trajectory.from_json(r["record"]) for r in rows if r["status"] == "ok"]


# ---- counting the raw files, independently of the adapters --------------------------


def _json(p: Path):
    return json.loads(p.read_text())


def _content(m: dict) -> str:
    c = m.get("content")
    return "\n".join(x["text"] for x in c) if isinstance(c, list) else (c or "")


def _answered(messages: list[dict]) -> int:
    answered = {m.get("tool_call_id") for m in messages if m.get("role") == "tool"}
    return sum(
        1
        for m in messages
        if m.get("role") == "assistant"
        for c in m.get("tool_calls") or []
        if c["id"] in answered
    )


def _openhands_turns(events: list[dict]) -> int:
    by_id = {e["id"]: e for e in events}
    return sum(
        1
        for e in events
        if "observation" in e
        and "action" in by_id.get(e.get("cause"), {})
        and by_id[e["cause"]]["source"] == "agent"
    )


def count_swe_agent(p):
    return 1, len(_json(p)["trajectory"]), 0


def count_openhands_lines(p):
    lines = [json.loads(x) for x in p.read_text().splitlines() if x.strip()]
    return len(lines), sum(_openhands_turns(d["history"]) for d in lines), 0


def count_openhands_events(p):
    return 1, _openhands_turns(_json(p)), 0


def count_tau(p):
    per = [_answered(r["traj"]) for r in _json(p)]
    return sum(1 for n in per if n), sum(per), sum(1 for n in per if not n)


def count_message_list(p):
    return 1, _answered(_json(p)), 0


def count_toolbench(p):
    chain = _json(p)["answer_generation"]["train_messages"][-1]
    pairs = zip(chain, chain[1:], strict=False)
    return 1, sum(1 for a, b in pairs if a.get("function_call") and b["role"] == "function"), 0


def count_mcp_xml(p):
    msgs = _json(p)["message_history"]
    pairs = zip(msgs, msgs[1:], strict=False)
    calls = sum(
        1
        for a, b in pairs
        if a["role"] == "assistant" and "<use_mcp_tool>" in _content(a) and b["role"] == "user"
    )
    return 1, calls, 0


def count_intercode(p):
    tasks = _json(p)
    return len(tasks), sum(len(t["turn_history"]["actions"]) for t in tasks.values()), 0


def cast_lines(p: Path) -> list[str]:
    """The cast's output without colour codes, each line as its last carriage return
    left it: a crude screen, enough to find the prompts."""
    events = [json.loads(x) for x in p.read_text().splitlines()[1:] if x.strip()]
    text = ANSI.sub("", "".join(e[2] for e in events if e[1] == "o"))
    out = []
    for line in text.split("\n"):
        parts = [s for s in line.rstrip("\r").split("\r") if s]
        out.append(parts[-1] if parts else "")
    return out


CAST_PROMPTS = ("> ", "bash-3.2$ ")


def count_cast(p):
    commands = [
        line
        for line in cast_lines(p)
        for pr in CAST_PROMPTS
        if line.startswith(pr) and line[len(pr) :].strip()
    ]
    return 1, len(commands), 0


def count_search_r1(p):
    rollouts = p.read_text().split("<|im_start|>system")[1:]
    turns = [
        len(re.findall(r"</search>\s*<information>", r.split("<|im_start|>assistant", 1)[1]))
        for r in rollouts
    ]
    return len(rollouts), sum(turns), 0


def count_react(p):
    episodes, turns, actions = 0, 0, set()
    for line in p.read_text().splitlines():
        if line.startswith("Question:"):
            episodes, actions = episodes + 1, set()
        elif m := re.match(r"Action (\d+):", line):
            actions.add(m.group(1))
        elif (m := re.match(r"Observation (\d+):", line)) and m.group(1) in actions:
            turns += 1
    return episodes, turns, 0


def count_browsergym(folder):
    return 1, _json(folder / "summary_info.json")["n_steps"], 0


def count_aitz(p):
    steps = _json(p)
    acts = sum(
        1
        for k, s in enumerate(steps)
        if k + 1 < len(steps) and s["result_action_type"] not in (10, 11)
    )
    return 1, acts, 0


def count_android_world(p):
    return 1, sum(1 for s in _json(p) if "list for the after screenshot" in s["summary_prompt"]), 0


def screenagent_steps(folder: Path) -> list[dict]:
    return [_json(f) for f in sorted(folder.glob("*_translate.json"))]


def count_screenagent(folder):
    steps = screenagent_steps(folder)
    kinds = [{a["action_type"] for a in s["actions"]} for s in steps]
    turns = sum(
        1
        for a, b in zip(kinds, kinds[1:], strict=False)
        if a & {"MouseAction", "KeyboardAction"} and "EvaluateSubTaskAction" in b
    )
    return len({s["session_id"] for s in steps}), turns, 0


def count_opencua(p):
    steps = _json(p)["steps"]
    acts = sum(
        1 for k, s in enumerate(steps) if k + 1 < len(steps) and "terminate" not in s["action"]
    )
    return 1, acts, 0


OPENCUA = "desktop/OpenCUA__agentnetbench_sample_data"
UNITS = {
    "swe/SWE-agent__swe-agent__test-repo-i1.traj": ("swe_agent", count_swe_agent),
    "swe/SWE-agent__marshmallow-1867.function_calling_replace.traj": ("swe_agent", count_swe_agent),
    "swe/OpenHands__multi_swe_bench_output.jsonl": ("openhands", count_openhands_lines),
    "swe/OpenHands__trajs_basic.json": ("openhands", count_openhands_events),
    "terminal/intercode__ic_bash_multiturn_gpt-4_10_turns_fs_1.json": (
        "intercode",
        count_intercode,
    ),
    "terminal/SWE-agent__ctf_pwn_warmup.demo.traj": ("swe_agent", count_swe_agent),
    "asciinema/asciinema-server__welcome.cast": ("asciicast", count_cast),
    "function_calling/tau-bench__gpt-4o-airline.first20.json": ("openai_chat", count_tau),
    "function_calling/ToolBench__G1_10_ChatGPT_DFS_woFilter_w2.json": (
        "toolbench",
        count_toolbench,
    ),
    "function_calling/ToolBench__G2_102_ChatGPT_DFS_woFilter_w2.json": (
        "toolbench",
        count_toolbench,
    ),
    "function_calling/MiroFlow__task_result.mcp_xml.json": ("mcp_xml", count_mcp_xml),
    "search/MiroFlow__debug_message_history.json": ("openai_chat", count_message_list),
    "search/Search-R1__case.txt": ("search_r1", count_search_r1),
    "search/reflexion__hotpotqa_ReAct_base_react_thought_log.txt": ("react", count_react),
    "web/BrowserGym__DemoAgent-gpt-4o_workarena.order-ipad-pro_14": (
        "browsergym",
        count_browsergym,
    ),
    "android/CoAT__AITZ_GOOGLE_APPS-523638528775825151/GOOGLE_APPS-523638528775825151.json": (
        "aitz",
        count_aitz,
    ),
    "android/my_android_world__androidworld_m3a_history_2025_04_19_23_20_05.json": (
        "android_world",
        count_android_world,
    ),
    "desktop/ScreenAgent__session_02ea503d": ("screenagent", count_screenagent),
    **{
        f"{OPENCUA}/{n}.json": ("opencua", count_opencua)
        for n in (
            "s_5473959e0f6e21f7",
            "s_7f27a11115e596eb",
            "s_a96285eb665bef92",
            "s_df0fd37049f470c2",
        )
    },
}


def manifest(realdata: Path) -> list[dict]:
    with open(realdata / "MANIFEST.tsv", newline="") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def listed_domain(realdata: Path, unit: str) -> str:
    rows = [
        r
        for r in manifest(realdata)
        if r["local_path"] == unit or r["local_path"].startswith(unit + "/")
    ]
    folder = rows[0]["domain"]
    return DOMAIN_OF_FOLDER.get(folder, folder)


def test_the_units_cover_every_file_of_the_listing(realdata, ingested):
    """Every file the listing names is a unit read here, inside a folder read whole,
    or a screenshot beside a unit; and prepare's listing finds exactly these units."""
    for row in manifest(realdata):
        path = row["local_path"]
        inside = [u for u in UNITS if path == u or path.startswith(u + "/")]
        beside = path.lower().endswith((".png", ".jpg")) and any(
            Path(u).parent == Path(path).parent for u in UNITS
        )
        assert inside or beside, path
    units = {
        label for label in ingested if not label.startswith(("LICENSES/", "README", "MANIFEST"))
    }
    assert units == set(UNITS)


@pytest.mark.parametrize("unit", sorted(UNITS))
def test_every_file_ingests_with_the_episodes_and_turns_its_source_holds(realdata, ingested, unit):
    fmt, count = UNITS[unit]
    episodes, turns, left_out = count(realdata / unit)
    rows = ingested[unit]
    got = records(rows)
    assert len(got) == episodes and episodes > 0
    assert sum(len(t.turns) for t in got) == turns
    assert {t.source for t in got} == {f"{fmt}:{unit}"}
    assert {t.domain for t in got} == {listed_domain(realdata, unit)}
    quarantined = [r for r in rows if r["status"] == "quarantined"]
    assert len(quarantined) == left_out
    for r in quarantined:  # one line naming the file and the position
        assert r["reason"].startswith(f"{unit}, record [") and "\n" not in r["reason"]
        assert r["source"] == f"{fmt}:{unit}" and r["domain"] == listed_domain(realdata, unit)


def test_files_no_adapter_claims_are_quarantined_naming_the_formats_tried(ingested):
    for label in ("README.md", "MANIFEST.tsv", "LICENSES/SWE-agent_SWE-agent__LICENSE"):
        [row] = ingested[label]
        assert row["status"] == "quarantined" and row["source"] == "unclaimed"
        assert row["reason"].startswith(f"{label}, file: no adapter claims it (tried: ")
        assert all(name in row["reason"] for name in FORMAT_NAMES), row["reason"]


# ---- observations against the raw text ----------------------------------------------


def strings(obj) -> set[str]:
    """Every string value of a parsed JSON document."""
    out, stack = set(), [obj]
    while stack:
        x = stack.pop()
        if isinstance(x, str):
            out.add(x)
        elif isinstance(x, dict):
            stack.extend(x.values())
        elif isinstance(x, list):
            stack.extend(x)
    return out


def pickled_strings(path: Path) -> set[str]:
    """The strings a pickle holds, read with pickletools (nothing is unpickled)."""
    data = gzip.decompress(path.read_bytes())
    return {arg for op, arg, _ in pickletools.genops(data) if isinstance(arg, str)}


EXACT = {"swe_agent", "openhands", "openai_chat", "toolbench", "intercode", "opencua", "mcp_xml"}


@pytest.mark.parametrize("unit", sorted(UNITS))
def test_observations_are_the_source_s_own_text(realdata, ingested, unit):
    """Each observation is, by format: a string of the raw JSON itself; a span of the
    raw text; or, where the adapter renders (a terminal, a page tree, a UI element
    list), made only of what the raw file says. None is empty where the source has
    text."""
    fmt, _ = UNITS[unit]
    path = realdata / unit
    got = records(ingested[unit])
    turns = [t for r in got for t in r.turns]
    if fmt in EXACT:
        if path.suffix == ".jsonl":
            raw = set().union(*(strings(json.loads(x)) for x in path.read_text().splitlines()))
        else:
            raw = strings(_json(path))
        assert all(t.observation in raw for t in turns)
    elif fmt in ("react", "search_r1"):
        text = path.read_text()
        assert all(t.observation and t.observation in text for t in turns)
    elif fmt == "asciicast":
        screen = "\n".join(cast_lines(path))
        for t in turns:
            assert all(line in screen for line in t.observation.splitlines())
            assert t.observation or t.action.startswith("#")  # only comments print nothing
    elif fmt == "browsergym":
        for t, step in zip(turns, range(1, len(turns) + 1), strict=True):
            held = "\n".join(pickled_strings(path / f"step_{step}.pkl.gz"))
            for bid, role in re.findall(r"^\s*\[(\w+)\] (\w+)", t.observation, re.M):
                assert f"[{bid}] {role}" in held
            assert t.observation.splitlines()[1].removeprefix("Title: ") in held
    elif fmt == "aitz":
        steps = _json(path)
        for k, t in enumerate(turns):
            for text in json.loads(steps[k + 1]["ui_text"]):
                assert not text or json.dumps(text, ensure_ascii=False) in t.observation
    elif fmt == "android_world":
        raw = "\n".join(s["summary_prompt"] for s in _json(path))
        for t in turns:
            assert all(
                json.loads(q) in raw for q in re.findall(r'"(?:[^"\\]|\\.)*"', t.observation)
            )
    elif fmt == "screenagent":
        raw = "\n".join(s["LLM_response_editer_en"] for s in screenagent_steps(path))
        for t in turns:
            assert all(
                line.removeprefix("Advice: ") in raw for line in t.observation.splitlines()[1:]
            )
    if fmt not in EXACT and fmt != "asciicast":  # (those are empty only where the source is)
        assert all(t.observation for t in turns)


def test_spot_checks_of_what_each_adapter_keeps(realdata, ingested):
    def one(unit):
        return records(ingested[unit])

    [ctf] = one("terminal/SWE-agent__ctf_pwn_warmup.demo.traj")
    assert ctf.turns[0].action == "disassemble warmup"
    assert ctf.turns[0].observation.startswith("Function main not found!")
    [fc] = one("swe/SWE-agent__marshmallow-1867.function_calling_replace.traj")
    assert fc.turns[0].tool_call.name == "create" and fc.turns[0].action == "create reproduce.py"
    hands = one("swe/OpenHands__multi_swe_bench_output.jsonl")
    failed = [t for r in hands for t in r.turns if t.exit_code == 2]
    assert any("No such file or directory" in t.observation for t in failed)
    assert any(t.metadata.get("cut_by_source") for r in hands for t in r.turns)
    tau = {
        t.id.rsplit("#", 1)[1]: t
        for t in one("function_calling/tau-bench__gpt-4o-airline.first20.json")
    }
    raw = _json(realdata / "function_calling/tau-bench__gpt-4o-airline.first20.json")
    for rec in raw:
        key = f"{rec['task_id']}-{rec['trial']}"
        if key in tau:
            assert tau[key].outcome.reward == rec["reward"]
    [g1] = one("function_calling/ToolBench__G1_10_ChatGPT_DFS_woFilter_w2.json")
    assert g1.turns[0].metadata["cut_by_source"] and g1.turns[0].observation.endswith("...")
    assert not g1.turns[1].metadata.get("cut_by_source") and g1.outcome.success is True
    [web] = one("web/BrowserGym__DemoAgent-gpt-4o_workarena.order-ipad-pro_14")
    assert web.turns[0].action == "click('a405')" and "iPad pro" in web.turns[0].reasoning
    assert web.turns[1].action == "select_option('a271', '2')"
    assert web.turns[0].screenshot.endswith("screenshot_step_1.png")
    assert all(Path(t.screenshot).is_file() for t in web.turns)
    assert "[a271] combobox" in web.turns[0].observation and web.outcome.success is True
    [aitz] = one(
        "android/CoAT__AITZ_GOOGLE_APPS-523638528775825151/GOOGLE_APPS-523638528775825151.json"
    )
    assert [t.action.split("(")[0] for t in aitz.turns] == ["home", "swipe", "tap"]
    assert all(Path(t.screenshot).is_file() for t in aitz.turns) and aitz.outcome.success
    [world] = one("android/my_android_world__androidworld_m3a_history_2025_04_19_23_20_05.json")
    assert world.turns[0].action == 'open_app(name="Audio Recorder")'
    assert '"Get started" clickable' in world.turns[0].observation
    assert world.turns[1].action.startswith("tap(x=0.46")
    [screen] = one("desktop/ScreenAgent__session_02ea503d")
    assert screen.turns[0].action.splitlines() == [
        'pyautogui.click(x=487, y=193, button="left")',
        'pyautogui.write(message="冯诺依曼")',
        'pyautogui.press(keys="enter")',
    ]
    assert screen.turns[0].observation.startswith("Evaluation: sub_task_success")
    assert all(Path(t.screenshot).is_file() for t in screen.turns)
    cua = one(f"{OPENCUA}/s_df0fd37049f470c2.json")[0]
    assert cua.turns[0].action.startswith("pyautogui.") and cua.outcome.success
    assert all(Path(t.screenshot).is_file() for t in cua.turns)
    [cast] = one("asciinema/asciinema-server__welcome.cast")
    brew = next(t for t in cast.turns if t.action == "brew install asciinema")
    assert "100.0%" in brew.observation and "43.0%" not in brew.observation  # \r overwrote it
    assert "\x1b" not in "".join(t.observation for t in cast.turns)


# ---- the chat round trip --------------------------------------------------------------


def _normal(messages: list[dict]) -> list[tuple]:
    out = []
    for m in messages:
        calls = tuple(
            (c["id"], c["function"]["name"], json.loads(c["function"]["arguments"] or "{}"))
            for c in m.get("tool_calls") or []
        )
        out.append((m["role"], _content(m), calls, m.get("tool_call_id")))
    return out


def test_chat_round_trip_gives_the_same_record_and_the_source_s_messages(realdata):
    path = realdata / "function_calling/tau-bench__gpt-4o-airline.first20.json"
    unit = Unit(str(path), "tau.json")
    checked = 0
    for k, rec in enumerate(_json(path)):
        if not _answered(rec["traj"]):
            continue
        t = build_chat(unit, rec, str(k))
        messages = to_messages(t.environment, t.turns, t.metadata["chat"])
        assert _normal(messages) == _normal(rec["traj"])  # out: the transcript itself
        again = build_chat(unit, {**rec, "traj": messages}, str(k))
        assert again == t  # and in again: the same record
        checked += 1
    assert checked == 16
    env, turns, meta = chat_turns(to_messages(t.environment, t.turns, t.metadata["chat"]))
    assert (env, tuple(turns)) == (t.environment, t.turns)


# ---- the restricted unpickler -----------------------------------------------------------


def _browsergym_copy(realdata: Path, tmp_path: Path) -> Path:
    src = realdata / "web/BrowserGym__DemoAgent-gpt-4o_workarena.order-ipad-pro_14"
    dst = tmp_path / "exp"
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("*.png"))
    for p in dst.iterdir():
        p.chmod(0o644)
    return dst


class _Shell:
    """Pickles as a call of os.system, the classic malicious pickle."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _os_system_pickle(marker: Path) -> bytes:
    data = pickle.dumps(_Shell(marker), protocol=2)  # GLOBAL opcode: "c<module>\n<name>\n"
    # pickle names os.system by the module that defines it (posix); name os itself
    return data.replace(b"cposix\nsystem\n", b"cos\nsystem\n")


def test_restricted_unpickler_refuses_os_system_and_runs_nothing(realdata, tmp_path):
    marker = tmp_path / "pwned"
    data = _os_system_pickle(marker)
    assert b"cos\nsystem\n" in data
    with pytest.raises(safe_pickle.ForbiddenGlobal, match=r"os\.system"):
        safe_pickle.loads(data)
    exp = _browsergym_copy(realdata, tmp_path)
    (exp / "step_2.pkl.gz").write_bytes(gzip.compress(data))
    [row] = rows_of([exp])["exp"]
    assert row["status"] == "quarantined" and row["error"] == "ForbiddenGlobal"
    assert "os.system" in row["reason"] and "step_2.pkl.gz" in row["reason"]
    assert row["reason"].startswith("exp, step_2.pkl.gz:") and not marker.exists()


def test_restricted_unpickler_refuses_any_class_outside_its_list(realdata, tmp_path):
    data = pickle.dumps({"step": 1, "obs": {"when": datetime.datetime(2024, 1, 1)}})
    with pytest.raises(safe_pickle.ForbiddenGlobal, match=r"datetime\.datetime"):
        safe_pickle.loads(data)
    exp = _browsergym_copy(realdata, tmp_path)
    (exp / "step_0.pkl.gz").write_bytes(gzip.compress(data))
    [row] = rows_of([exp])["exp"]
    assert "forbidden pickle global datetime.datetime in step_0.pkl.gz" in row["reason"]
    # the real steps are read: their globals are the allowed ones
    real = realdata / "web/BrowserGym__DemoAgent-gpt-4o_workarena.order-ipad-pro_14/step_1.pkl.gz"
    step = safe_pickle.loads(gzip.decompress(real.read_bytes()))
    assert isinstance(step, safe_pickle.Record) and step.state["step"] == 1


# ---- bad input, quarantined with the file and the position ------------------------------


def test_bad_input_of_each_kind_is_quarantined_and_the_rest_proceeds(realdata, tmp_path):
    bad = tmp_path / "in"
    bad.mkdir()
    tau = (realdata / "function_calling/tau-bench__gpt-4o-airline.first20.json").read_text()
    cut = tau.index('"task_id": 5')  # inside record [5]: records 0-4 are whole
    (bad / "tau.json").write_text(tau[:cut])
    cast = (realdata / "asciinema/asciinema-server__welcome.cast").read_text().splitlines()
    (bad / "broken_header.cast").write_text("\n".join(['{"version": 2, "width": 80'] + cast[1:]))
    (bad / "broken_event.cast").write_text("\n".join(cast[:5] + ['[1.0, "o"'] + cast[5:]))
    (bad / "sizeless.cast").write_text("\n".join(['{"version": 2, "height": 20}'] + cast[1:]))
    lines = (realdata / "swe/OpenHands__multi_swe_bench_output.jsonl").read_text().splitlines()
    doc = json.loads(lines[1])
    orphan = next(e for e in doc["history"] if e.get("cause") is not None)
    orphan["cause"] = 99999
    (bad / "output.jsonl").write_text("\n".join([lines[0], json.dumps(doc), lines[2]]) + "\n")
    (bad / "step.traj").write_text('{"trajectory": [{"action": "ls", "observation": "a"}')
    shutil.copytree(realdata / "swe", bad / "good", ignore=shutil.ignore_patterns("*.jsonl"))
    rows = rows_of([bad])
    by = {label: [r for r in rs if r["status"] == "quarantined"] for label, rs in rows.items()}

    no_call, broken = by["tau.json"]  # record [1] never calls a tool; the cut is next
    assert (
        no_call["reason"]
        == "tau.json, record [1]: no tool call with an answer: nothing the environment said"
    )
    line = tau[:cut].count("\n") + 1
    assert broken["reason"].startswith(f"tau.json, line {line} column ") and broken["line"] == line
    assert "malformed JSON" in broken["reason"]
    assert [t.id.rsplit("#")[1] for t in records(rows["tau.json"])] == ["0-0", "2-0", "3-0", "4-0"]

    [q] = by["broken_header.cast"]
    assert q["reason"].startswith("broken_header.cast, line 1: broken asciicast header")
    assert not records(rows["broken_header.cast"])
    [q] = by["sizeless.cast"]
    assert (
        q["reason"]
        == "sizeless.cast, line 1: broken asciicast header: width None is not a screen size"
    )
    [q] = by["broken_event.cast"]
    assert q["reason"].startswith("broken_event.cast, line 6: broken event") and q["line"] == 6
    assert len(records(rows["broken_event.cast"])[0].turns) == 14

    [q] = by["output.jsonl"]
    assert q["line"] == 2 and "refers to no action (cause 99999)" in q["reason"]
    assert (
        q["reason"].startswith("output.jsonl, line 2") and q["source"] == "openhands:output.jsonl"
    )
    assert len(records(rows["output.jsonl"])) == 2

    [q] = by["step.traj"]
    assert q["reason"].startswith("step.traj, file: ") and "ends before" not in q["reason"]
    assert len(records(rows["good/SWE-agent__swe-agent__test-repo-i1.traj"])) == 1
    for label, rs in rows.items():
        for r in rs:
            assert r["reason"] is None or (
                "\n" not in r["reason"] and r["reason"].startswith(label)
            )


# ---- the table and the config ------------------------------------------------------------


def test_the_config_names_exactly_the_registered_formats():
    assert get_args(InputFormat) == ("auto", "record", "awb", "chat", *FORMAT_NAMES)
    with pytest.raises(ConfigError, match="data.input_format"):
        DataConfig(input_format="bogus")
    for name, row in FORMATS.items():
        module = row.adapter()
        assert callable(module.detect) and callable(module.read), name
        assert not row.lines or (callable(module.claims_line) and callable(module.from_line))


def test_a_format_named_in_the_config_reads_every_file_with_its_adapter(realdata, tmp_path):
    (tmp_path / "a.txt").write_text((realdata / "search/Search-R1__case.txt").read_text())
    (tmp_path / "b.json").write_text("{}")
    rows = rows_of([tmp_path], fmt="search_r1")
    assert len(records(rows["a.txt"])) == 2
    [q] = rows["b.json"]
    assert q["status"] == "quarantined" and q["source"] == "search_r1:b.json"


# ---- fuzzed variants ----------------------------------------------------------------------

FUZZED = [
    "swe/SWE-agent__swe-agent__test-repo-i1.traj",
    "swe/OpenHands__trajs_basic.json",
    "terminal/intercode__ic_bash_multiturn_gpt-4_10_turns_fs_1.json",
    "asciinema/asciinema-server__welcome.cast",
    "function_calling/ToolBench__G1_10_ChatGPT_DFS_woFilter_w2.json",
    "search/MiroFlow__debug_message_history.json",
    "search/Search-R1__case.txt",
    "android/CoAT__AITZ_GOOGLE_APPS-523638528775825151/GOOGLE_APPS-523638528775825151.json",
    f"{OPENCUA}/s_df0fd37049f470c2.json",
]
_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(), st.text(max_size=8), st.just([]), st.just({})
)


def _mutate(doc, data) -> object:
    """``doc`` with a few random nodes removed or replaced by values of other types."""
    for _ in range(data.draw(st.integers(1, 4))):
        parents, stack = [], [doc]
        while stack:
            node = stack.pop()
            if isinstance(node, dict | list) and node:
                parents.append(node)
                stack.extend(node.values() if isinstance(node, dict) else node)
        if not parents:
            return doc
        node = data.draw(st.sampled_from(parents))
        key = data.draw(st.sampled_from(list(node) if isinstance(node, dict) else range(len(node))))
        if data.draw(st.booleans()):
            del node[key]
        else:
            node[key] = data.draw(_VALUES)
    return doc


def _variant(raw: str, data) -> str:
    kind = data.draw(st.sampled_from(["truncate", "mutate", "bytes"]))
    if kind == "truncate":
        return raw[: data.draw(st.integers(0, len(raw)))]
    if kind == "bytes":
        at = data.draw(st.integers(0, len(raw)))
        return (
            raw[:at] + data.draw(st.text(max_size=20)) + raw[at + data.draw(st.integers(0, 50)) :]
        )
    try:
        doc = json.loads(raw)
    except ValueError:  # a text format: shuffle its lines instead
        lines = raw.splitlines()
        return "\n".join(data.draw(st.permutations(lines[:200])) + lines[200:])
    return json.dumps(_mutate(doc, data))


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_fuzzed_variants_never_stop_a_read_and_every_part_is_a_row(realdata, tmp_path, data):
    """Truncated, with fields removed, with values of the wrong type, or with bytes
    spliced in: each variant reads to rows, records that validate or problems whose
    one-line reason names the file; never an exception."""
    unit = data.draw(st.sampled_from(FUZZED))
    raw = (realdata / unit).read_text()
    name = f"v{data.draw(st.integers(0, 10**6))}{Path(unit).suffix}"
    folder = tmp_path / name.split(".")[0]
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(_variant(raw, data))
    rows = rows_of([folder])[name]
    assert rows
    for r in rows:
        if r["status"] == "ok":
            t = Trajectory.from_json(r["record"])
            assert t.turns and t.source.endswith(f":{name}")
        else:
            assert r["reason"].startswith(f"{name}, ") and "\n" not in r["reason"]


def test_fuzzed_openhands_lines_are_each_one_row(realdata, tmp_path):
    """A line stream: whatever a line holds, it is one row."""
    lines = (realdata / "swe/OpenHands__multi_swe_bench_output.jsonl").read_text().splitlines()
    variants = [
        lines[0][: len(lines[0]) // 2],
        lines[1].replace('"cause": ', '"cause": "x', 3),
        "[]",
        lines[2],
    ]
    (tmp_path / "out.jsonl").write_text("\n".join(variants) + "\n")
    rows = rows_of([tmp_path])["out.jsonl"]
    assert len(rows) == 4
    assert [r["status"] for r in rows][-1] == "ok" and rows[-1]["line"] == 4


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_fuzzed_folders_never_stop_a_read(realdata, tmp_path, data):
    """A BrowserGym step cut short or with bytes spliced in, a ScreenAgent step with
    fields removed or retyped: the folder reads to rows, never an exception."""
    which = data.draw(st.sampled_from(["web", "desktop"]))
    case = Path(tempfile.mkdtemp(dir=tmp_path))  # one per example
    if which == "web":
        folder = _browsergym_copy(realdata, case)
        victim = folder / data.draw(st.sampled_from(sorted(p.name for p in folder.glob("step_*"))))
        raw = victim.read_bytes()
        at = data.draw(st.integers(0, len(raw)))
        victim.write_bytes(raw[:at] + data.draw(st.binary(max_size=16)))
    else:
        folder = case / "session"
        shutil.copytree(
            realdata / "desktop/ScreenAgent__session_02ea503d",
            folder,
            ignore=shutil.ignore_patterns("images"),
        )
        for p in folder.iterdir():
            p.chmod(0o644)
        victim = folder / data.draw(st.sampled_from(sorted(p.name for p in folder.glob("*.json"))))
        victim.write_text(_variant(victim.read_text(), data))
    [label] = (rows := rows_of([folder])).keys()
    assert rows[label]
    for r in rows[label]:
        if r["status"] == "ok":
            assert Trajectory.from_json(r["record"]).turns
        else:
            assert r["reason"].startswith(f"{label}, ") and "\n" not in r["reason"]


def _retyped(doc, key: str, value):
    """``doc`` with the value of every ``key`` replaced by ``value``."""
    if isinstance(doc, dict):
        return {k: value if k == key else _retyped(v, key, value) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_retyped(v, key, value) for v in doc]
    return doc


@pytest.mark.parametrize("value", [7, True, [], {"x": 1}])
def test_values_of_the_wrong_type_are_quarantined_never_written(realdata, tmp_path, value):
    """One key at a time of each real file retyped: each row is a record that reads back
    as it was written, or a quarantined part naming the file; no record carries a
    number, a bool or a list where the record holds text."""
    for k, unit in enumerate(u for u in FUZZED if not u.endswith((".cast", ".txt"))):
        doc = _json(realdata / unit)
        keys = sorted({key for key in _keys(doc)})
        for j, key in enumerate(keys):
            folder = tmp_path / f"{k}-{j}"
            folder.mkdir()
            name = f"retyped{Path(unit).suffix}"
            (folder / name).write_text(json.dumps(_retyped(doc, key, value)))
            for r in rows_of([folder])[name]:
                if r["status"] == "ok":
                    t = Trajectory.from_json(r["record"])
                    assert json.loads(t.to_json()) == json.loads(r["record"]), (unit, key)
                else:
                    assert r["reason"].startswith(f"{name}, "), (unit, key)


def _keys(doc):
    stack = [doc]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            yield from x
            stack.extend(x.values())
        elif isinstance(x, list):
            stack.extend(x)


def test_the_formats_page_lists_every_format_in_the_table_s_order():
    page = (ROOT / "docs" / "formats.md").read_text()
    rows = re.findall(r"^\| `(\w+)` \| ([^|]+) \|", page, re.M)
    assert [name for name, _ in rows] == list(FORMAT_NAMES)
    for name, domain in rows:
        assert FORMATS[name].domain in domain, name
