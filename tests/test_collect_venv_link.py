"""The sandboxed recorders when the interpreter's virtual environment is reached through
a symlink (``.venv -> /some/other/place``, as tools that keep environments elsewhere
make it): the link's own folder is not in the sandbox, so every path handed to it must
be the resolved one. Runs a fresh interpreter through such a link, and the os domain
from a checkout reached through one as well (its driver folder is bound inside)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import ROOT

EPISODES = """
import json, random, sys
from agentworld.collect import CollectConfig
from agentworld.collect.env import Action, Task, Workspace
from agentworld.collect.mcp.env import McpEnvironment
from agentworld.collect.playbook import scripted
from agentworld.collect.web import sites
from agentworld.collect.web.env import DATASETTE_URL, WebEnvironment, web_action
from agentworld.collect.os.env import OsEnvironment, os_action

def task(**state):
    return Task(playbook="test", text="test", script=scripted([]), state=state)

out = {"prefix": sys.prefix}
with Workspace(CollectConfig(domains=("mcp", "web"))) as ws:
    mcp = McpEnvironment(ws)
    try:
        mcp.reset(task(server="time"))
        turn = mcp.step(Action.tool("get_current_time", timezone="UTC"))
        out["mcp"] = turn.observation
    finally:
        mcp.close()
    web = WebEnvironment(ws)
    try:
        db = sites.shop(random.Random(3))
        web.reset(task(app="datasette", databases=[db], settings={}))
        turn = web.step(web_action("goto", url=f"{DATASETTE_URL}/{db['name']}/products"))
        out["web"] = turn.observation
    finally:
        web.close()
    desktop = OsEnvironment(ws)
    try:
        desktop.reset(task(app="galculator"))
        turn = desktop.step(os_action("type", text="6*7="))
        out["os"] = turn.observation
        out["os_driver"] = desktop.session.proc.args[-2]
    finally:
        desktop.close()
print(json.dumps(out))
"""


def test_mcp_web_and_os_episodes_record_with_the_venv_behind_a_symlink(tmp_path):
    link = tmp_path / "tools" / ".venv"
    link.parent.mkdir()
    link.symlink_to(os.path.realpath(sys.prefix), target_is_directory=True)
    checkout = tmp_path / "checkout"
    checkout.symlink_to(ROOT, target_is_directory=True)
    env = {**os.environ, "PYTHONPATH": f"{checkout / 'platform'}:{checkout}"}
    done = subprocess.run(
        [str(link / "bin" / "python"), "-c", EPISODES],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["prefix"] == str(link)  # the interpreter really ran through the link
    assert '"timezone": "UTC"' in out["mcp"] and '"datetime": "' in out["mcp"]
    assert out["web"].startswith("URL: ") and 'heading "' in out["web"]
    assert out["os"].startswith("Window: galculator") and 'value="42"' in out["os"]
    assert out["os_driver"].startswith(str(ROOT))  # the checkout's real path, not the link
