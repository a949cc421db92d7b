"""The playground page (``/playground`` of the session's Serve application) in Debian's
Chromium driven by Playwright: it loads nothing from elsewhere, keeps the key in the
tab's session storage only, opens a session, shows the observations of two actions
(sent with the keyboard and with the button), forks at turn 1 (the fork shows one
turn), and its copied Python lines reproduce the session. A screenshot is kept."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from agentworld.sim import SimClient
from tests.conftest import ROOT, SIM_KEYS

pytestmark = pytest.mark.slow

TEAM = "team-f"


def test_the_playground_opens_steps_forks_and_copies_a_session(sim_url, tmp_path):
    from playwright.sync_api import expect, sync_playwright

    chromium = shutil.which("chromium")
    assert chromium, "Debian's chromium is installed by scripts/setup.sh"
    client = SimClient(sim_url, SIM_KEYS[TEAM])
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=chromium,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        requested: list[str] = []
        page.on("request", lambda r: requested.append(r.url))
        page.goto(f"{sim_url}/playground")
        page.get_by_label("Team API key").fill(SIM_KEYS[TEAM])
        page.keyboard.press("Enter")  # the key form submits from the keyboard
        expect(page.locator("#key-state")).to_have_text("key set for this tab")
        page.get_by_label("Start from").select_option("domain:terminal")
        page.get_by_label("Environment text").fill("bash 5.2 in /home/user")
        page.get_by_label("World facts").fill("the host is called quelmar-7")
        page.get_by_label("Max tokens per step").fill("12")
        page.get_by_role("button", name="New session").click()
        expect(page.locator("#session-id")).to_contain_text("turn 0")
        source = page.locator("#session-id").text_content().split(" ")[0]

        action = page.get_by_label("Action")
        action.fill("ls -la")
        action.press("Control+Enter")
        expect(page.locator("li.turn")).to_have_count(1)
        action.fill("hostname")
        page.get_by_role("button", name="Send").click()
        expect(page.locator("li.turn")).to_have_count(2)
        shown = page.locator("li.turn pre.observation").all_text_contents()
        stored = client.get_session(source)
        page.get_by_role("button", name="Copy as Python").click()
        expect(page.locator("#status")).to_have_text("Copying as Python: done")
        python = page.locator("#export").input_value()

        page.get_by_role("button", name="Fork the session, keeping turns 1 to 1").focus()
        page.keyboard.press("Enter")
        expect(page.locator("li.turn")).to_have_count(1)
        fork = page.locator("#session-id").text_content().split(" ")[0]
        screenshot = tmp_path / "playground.png"
        page.screenshot(path=str(screenshot), full_page=True)
        storage = page.evaluate(
            "[Object.keys(sessionStorage), localStorage.length, document.cookie]"
        )
        browser.close()
    print(f"\nplayground screenshot: {screenshot}")

    assert all(url.startswith(sim_url + "/") for url in requested), requested
    assert storage == [["agentworld.sim.key"], 0, ""]
    assert [t["action"] for t in stored["turns"]] == ["ls -la", "hostname"]
    assert shown == [t["observation"] for t in stored["turns"]]
    assert "quelmar-7" in stored["system"]
    forked = client.get_session(fork)
    assert fork != source and forked["turns"] == stored["turns"][:1]
    assert forked["metadata"] == {"forked_from": source, "forked_at_turn": "1"}

    run = subprocess.run(
        [sys.executable, "-c", python],
        env={
            **os.environ,
            "PYTHONPATH": str(ROOT / "platform"),
            "AGENTWORLD_SIM_API_KEY": SIM_KEYS[TEAM],
        },
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    [copy] = [s for s in client.list_sessions() if s["metadata"].get("reproduces") == source]
    again = client.get_session(copy["id"])
    assert again["system"] == stored["system"]
    assert [(t["action"], t["observation"]) for t in again["turns"]] == [
        (t["action"], t["observation"]) for t in stored["turns"]
    ]
    assert screenshot.stat().st_size > 10_000
    for sid in (source, fork, copy["id"]):
        client.delete_session(sid)
