"""State and structure checks per domain on hand-made real/predicted pairs: each passes
a faithful prediction, fails one broken the way it targets (an error dropped, a key
renamed, a made-up result id, a wrong test count, ...) and does not apply where the
real observation gives it nothing to check. Their pass rates reach the summary beside
the rule metrics, for the model and the baselines."""

from __future__ import annotations

import json

import pytest

from agentworld.evaluate.checks import (
    CHECKS,
    desktop,
    mcp,
    run_checks,
    search,
    swe,
    terminal,
    ui,
    web,
)
from agentworld.evaluate.score import add_baselines, summarize

PROMPT = "agent@ip-10-0-3-17:~/work$ "
LS = f"logs\nnotes.txt\n{PROMPT}"
MISSING = f"cat: nope.txt: No such file or directory\n{PROMPT}"
UNKNOWN = f"bash: frobnicate: command not found\n{PROMPT}"


def test_terminal_prompt_must_end_the_screen_as_the_real_one_does():
    assert terminal.prompt_end(LS, LS) is True
    assert terminal.prompt_end("logs\nnotes.txt\n", LS) is False  # prompt dropped
    assert terminal.prompt_end("logs\nagent@ip-10-0-3-17:~/work/logs$ ", LS) is False  # wrong cwd
    assert terminal.prompt_end("logs", "still running...") is None


def test_terminal_error_where_the_command_failed_and_none_where_it_succeeded():
    for real in (MISSING, UNKNOWN, f"Traceback (most recent call last):\n  x\n{PROMPT}"):
        assert terminal.error_agrees(real, real) is True
        assert terminal.error_agrees(PROMPT, real) is False  # error dropped
    assert terminal.error_agrees(LS, LS) is True
    assert terminal.error_agrees(MISSING, LS) is False  # error made up


def test_terminal_line_count_within_a_factor():
    real = "".join(f"line {i}\n" for i in range(10)) + PROMPT
    assert terminal.line_count(real, real) is True
    near = "".join(f"l{i}\n" for i in range(7)) + PROMPT
    assert terminal.line_count(near, real) is True
    assert terminal.line_count(f"line 0\n{PROMPT}", real) is False  # output cut short
    assert terminal.line_count(PROMPT, f"x\n{PROMPT}") is True  # zero and one line are close


TIME = json.dumps(
    {
        "source": {"timezone": "Europe/Paris", "datetime": "2026-01-05T09:00:00+01:00"},
        "target": {"timezone": "Asia/Tokyo", "datetime": "2026-01-05T17:00:00+09:00"},
        "time_difference": "+8.0h",
    },
    indent=2,
)
TOOL_ERROR = "Error executing tool git_status: /home/agent/missing-repo"


def test_mcp_json_parses_with_the_same_keys_and_value_types():
    assert mcp.json_parses(TIME, TIME) is True and mcp.json_shape(TIME, TIME) is True
    renamed = TIME.replace('"time_difference"', '"difference"')
    assert mcp.json_parses(renamed, TIME) is True
    assert mcp.json_shape(renamed, TIME) is False  # key renamed
    retyped = json.dumps({**json.loads(TIME), "time_difference": 8.0})
    assert mcp.json_shape(retyped, TIME) is False  # value of another type
    assert mcp.json_parses(TIME[:-3], TIME) is False  # cut: not JSON any more
    assert mcp.json_parses("Commit history:", "Commit history:") is None
    assert mcp.json_shape("[1]", "[2, 3]") is True and mcp.json_shape("{}", "[2]") is False


def test_mcp_error_result_where_the_real_one_is_an_error():
    assert mcp.error_agrees(TOOL_ERROR, TOOL_ERROR) is True
    assert mcp.error_agrees("Repository status:\nOn branch main", TOOL_ERROR) is False  # dropped
    assert mcp.error_agrees(TOOL_ERROR, "Repository status:\nclean") is False  # made up
    assert mcp.is_error('{"isError": true, "content": []}') and not mcp.is_error(TIME)


RAN_FAILED = (
    ".F.\n======\nFAIL: test_clamp_0 (tests.test_core.TestCore.test_clamp_0)\n------\n"
    "Ran 3 tests in 0.001s\n\nFAILED (failures=1)\n"
)
RAN_OK = "...\n----------------------------------------------------------------------\nRan 3 tests in 0.000s\n\nOK\n"
APPLIED = "Checking patch onyxkit/core.py...\nApplied patch onyxkit/core.py cleanly.\n"
REJECTED = "Checking patch onyxkit/core.py...\nerror: patch failed: onyxkit/core.py:3\nerror: onyxkit/core.py: patch does not apply\n"


def test_swe_test_summary_agrees_with_the_real_runner():
    assert swe.summary_agrees(RAN_FAILED, RAN_FAILED) is True
    assert swe.summary_agrees(RAN_FAILED.replace("Ran 3", "Ran 4"), RAN_FAILED) is False  # count
    assert swe.summary_agrees(RAN_FAILED.replace("failures=1", "failures=2"), RAN_FAILED) is False
    assert swe.summary_agrees(RAN_OK, RAN_FAILED) is False  # verdict
    assert swe.summary_agrees("tests passed", RAN_OK) is False  # no summary at all
    assert swe.summary_agrees(RAN_OK, "onyxkit/core.py:5:def clamp") is None
    pytest_out = "===== 1 failed, 2 passed in 0.12s =====\n"
    assert swe.runner_summary(pytest_out) == {"failed": 1, "passed": 2}
    assert swe.summary_agrees("===== 3 passed in 0.1s =====", pytest_out) is False


def test_swe_patch_applied_or_rejected_as_in_reality():
    assert swe.patch_agrees(APPLIED, APPLIED) is True and swe.patch_agrees(REJECTED, REJECTED)
    assert swe.patch_agrees(APPLIED, REJECTED) is False  # a rejected patch reported applied
    assert swe.patch_agrees(REJECTED, APPLIED) is False
    assert swe.patch_agrees(APPLIED, RAN_OK) is None


CORPUS = frozenset({"json", "json.loads", "json.dumps", "base64.a85decode", "shlex.split"})
PAGE = (
    'Results for "parse json" (2 shown, 794 documents searched):\n'
    "1. json.loads (function) score=3.10\n   Deserialize s to a Python object.\n"
    "2. json (module) score=2.40\n   JSON encoder and decoder."
)
EMPTY = 'No results for "zzqx".'


def test_search_results_exist_in_the_corpus():
    assert search.ids_exist(PAGE, PAGE, corpus=CORPUS) is True
    made_up = PAGE.replace("json.loads (function)", "json.parse_fast (function)")
    assert search.ids_exist(made_up, PAGE, corpus=CORPUS) is False  # a made-up result id
    opened = "json.loads (function)\n\nDeserialize s."
    assert search.ids_exist(opened, opened, corpus=CORPUS) is True
    assert search.ids_exist("base64.z85 (function)\n\nx", opened, corpus=CORPUS) is False
    assert search.ids_exist(EMPTY, PAGE, corpus=CORPUS) is None  # shows no id
    elsewhere = "1. Paris (article) score=1\n"  # not this corpus's recording: not judged
    assert search.ids_exist(PAGE, "1. wiki.Paris (module) score=1", corpus=CORPUS) is None
    assert search.ids_exist(PAGE, elsewhere, corpus=CORPUS) is True


def test_search_result_count_and_empty_where_the_real_search_found_nothing():
    assert search.result_count(PAGE, PAGE) is True and search.empty_agrees(PAGE, PAGE) is True
    one = PAGE.split("\n2.")[0].replace("2 shown", "1 shown")
    assert search.result_count(one, PAGE) is False  # a result missing
    assert search.empty_agrees(one, PAGE) is True
    assert search.result_count(EMPTY, EMPTY) is True and search.empty_agrees(EMPTY, EMPTY)
    assert search.empty_agrees(PAGE, EMPTY) is False  # results where reality found none
    assert search.empty_agrees(EMPTY, PAGE) is False
    assert search.result_count(PAGE, "json.loads (function)\n\ntext") is None


def test_search_corpus_is_the_search_environments():
    ids = search.corpus_ids()
    assert {"json.loads", "base64.a85decode"} <= ids and "json.parse_fast" not in ids


PAGE_WEB = "\n".join(
    [
        "URL: http://127.0.0.1:8001/fixtures",
        "Title: fixtures",
        '[1] banner "site"',
        '  [2] link "Home", focused',
        '  [3] searchbox "Search", value="x"',
        "[4] main",
        '  [5] heading "fixtures"',
        '    StaticText "12 rows"',
        '  [6] combobox "sort", options=["a", "b"]',
    ]
)


def test_web_tree_is_wellformed_with_unique_bids_and_aria_roles():
    assert web.axtree_wellformed(PAGE_WEB, PAGE_WEB) is True
    assert web.axtree_wellformed(PAGE_WEB.replace("[5]", "[2]"), PAGE_WEB) is False  # bid twice
    assert web.axtree_wellformed(PAGE_WEB.replace("heading", "headline"), PAGE_WEB) is False
    assert (
        web.axtree_wellformed(PAGE_WEB.replace("    StaticText", "        StaticText"), PAGE_WEB)
        is False
    )
    assert web.axtree_wellformed(PAGE_WEB + "\n<div>free html</div>", PAGE_WEB) is False
    assert web.axtree_wellformed("URL: x\nTitle: y", PAGE_WEB) is False  # no tree at all
    assert web.axtree_wellformed(PAGE_WEB, "Error: timeout") is None


def test_web_url_and_title_lines_of_the_real_page():
    assert web.url_title(PAGE_WEB, PAGE_WEB) is True
    moved = PAGE_WEB.replace("/fixtures", "/facets", 1)
    assert web.url_title(moved, PAGE_WEB) is False  # another page
    assert web.url_title(PAGE_WEB.replace("Title: fixtures\n", ""), PAGE_WEB) is False
    assert web.url_title(PAGE_WEB, "just text") is None


ELEMENTS = "\n".join(
    [
        "[0] android.widget.FrameLayout bbox=[0, 0, 1080, 2400]",
        '[1] android.widget.TextView "Clock" desc="Clock app" clickable bbox=[10, 20, 300, 90]',
        '[2] android.widget.Button "Start" clickable focusable',
    ]
)


def test_ui_element_list_parses_where_the_real_one_does():
    assert ui.ui_elements_parse(ELEMENTS, ELEMENTS) is True
    assert ui.ui_elements_parse(ELEMENTS.replace("[2]", "[1]"), ELEMENTS) is False  # index twice
    assert ui.ui_elements_parse(ELEMENTS + "\nThe screen shows a clock.", ELEMENTS) is False
    assert ui.ui_elements_parse(ELEMENTS.replace("1080, 2400]", "1080, 2400"), ELEMENTS) is False
    assert ui.ui_elements_parse("A clock app is open.", ELEMENTS) is False
    assert ui.ui_elements_parse(ELEMENTS, "A desktop with two windows.") is None
    assert run_checks("os", ELEMENTS, ELEMENTS) == {
        "ui_elements_parse": True,
        "desktop_tree_wellformed": None,
        "window_title": None,
    }


SCREEN = "\n".join(
    [
        "Window: ~/Documents/list-77.txt - Mousepad",
        '[1] frame "~/Documents/list-77.txt - Mousepad", active',
        '  menus: [5] "File", [6] "Edit", [7] "Search"',
        "  [13] page-tab, selected",
        '    [15] text, focused, editable, value="Xenon raven\\napple"',
        '  [16] spin-button "Size", value=12',
        "[observation truncated: 4 more lines]",
    ]
)
"""A screen as ``agentworld.collect.os`` records it (taken from a recorded episode)."""


def test_desktop_screen_parses_and_keeps_the_real_window():
    assert desktop.desktop_tree_wellformed(SCREEN, SCREEN) is True
    assert desktop.window_title(SCREEN, SCREEN) is True
    broken = {
        "an id twice": SCREEN.replace("[16]", "[5]"),
        "an id twice in a row": SCREEN.replace("[6]", "[5]"),
        "prose among the elements": SCREEN + "\nThe editor shows a list.",
        "a level skipped": SCREEN.replace("  [13] page-tab", "      [13] page-tab"),
        "no window line": SCREEN.split("\n", 1)[1],
        "a state that is not a word": SCREEN.replace(", selected", ", selected!"),
        "an unclosed name": SCREEN.replace('"Size"', '"Size'),
    }
    for what, predicted in broken.items():
        assert desktop.desktop_tree_wellformed(predicted, SCREEN) is False, what
    other = SCREEN.replace("Window: ~/Documents/list-77.txt", "Window: ~/notes.txt")
    assert desktop.window_title(other, SCREEN) is False
    assert desktop.desktop_tree_wellformed(SCREEN, "A desktop with two windows.") is None
    assert desktop.window_title(SCREEN, ELEMENTS) is None
    assert run_checks("os", SCREEN, SCREEN) == {
        "ui_elements_parse": None,  # the ingested format's check leaves recorded screens
        "desktop_tree_wellformed": True,
        "window_title": True,
    }


def _row(key: str, domain: str, prediction: str, reference: str) -> dict:
    return {"key": key, "domain": domain, "output": prediction, "prediction": prediction,
            "reference": reference}  # fmt: skip


def test_check_pass_rates_reach_the_summary_for_the_model_and_the_baselines():
    model = [
        _row("t#1", "terminal", MISSING, MISSING),
        _row("t#2", "terminal", LS, UNKNOWN),  # error dropped; prompt and lines fine
        _row("m#1", "mcp", TIME, TIME),
    ]
    copy = [
        _row("t#1", "terminal", "", MISSING),
        _row("t#2", "terminal", MISSING, UNKNOWN),
        _row("m#1", "mcp", "", TIME),
    ]
    summary = summarize(model)
    add_baselines(summary, {"copy_previous": copy}, model)
    t = summary["domains"]["terminal"]["checks"]
    assert t["error_agrees"] == {"passed": 50.0, "n": 2}
    assert t["prompt_end"] == {"passed": 100.0, "n": 2}
    assert summary["domains"]["mcp"]["checks"]["json_shape"] == {"passed": 100.0, "n": 1}
    pooled = summary["domains"]["all"]["checks"]["all"]
    assert pooled == {"passed": pytest.approx(100 * 8 / 9), "n": 9}
    b = summary["baselines"]["copy_previous"]
    assert b["terminal"]["checks"]["prompt_end"] == {"passed": 50.0, "n": 2}
    assert b["mcp"]["checks"]["json_parses"] == {"passed": 0.0, "n": 1}
    assert set(CHECKS) == {"terminal", "mcp", "swe", "search", "web", "android", "os"}
