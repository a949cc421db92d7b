"""The web domain against real applications in a real browser: Datasette and the
helpdesk app on the sandbox's loopback, headless Chromium driven by Playwright. One
browser serves the module (it starts once per workspace, as in a collect task)."""

from __future__ import annotations

import random
import re
import socket

import pytest

from agentworld.collect import CollectConfig
from agentworld.collect.env import Task, Workspace
from agentworld.collect.playbook import scripted
from agentworld.collect.web import sites
from agentworld.collect.web.env import DATASETTE_URL, HELPDESK_URL, TCP_PORTS, web_action
from agentworld.collect.web.playbooks import elements, find
from agentworld.schema import Trajectory

CONFIG = CollectConfig(domains=("web",), episodes=8, episodes_per_task=8, seed=0)


@pytest.fixture(scope="module")
def workspace():
    with Workspace(CONFIG) as ws:
        yield ws


@pytest.fixture
def env(workspace):
    from agentworld.collect.web.env import WebEnvironment

    env = WebEnvironment(workspace)
    yield env
    env.close()


def _task(state: dict) -> Task:
    return Task(playbook="test", text="test", script=scripted([]), state=state)


def _shop() -> dict:
    db = sites.shop(random.Random(3))
    return {"app": "datasette", "databases": [db], "settings": {"default_page_size": 50}}


def _cells(observation: str) -> list[str]:
    return [name for _, role, name, _ in elements(observation) if role == "cell"]


def test_filter_in_datasette_shows_the_rows_the_application_selects(env):
    state = _shop()
    db, table = state["databases"][0], state["databases"][0]["tables"][0]
    category = table["rows"][0][2]
    expected = [r[1] for r in table["rows"] if r[2] == category]  # in key order, as shown
    others = {r[2] for r in table["rows"]} - {category}
    env.reset(_task(state))
    first = env.step(web_action("goto", url=f"{DATASETTE_URL}/{db['name']}/products"))
    assert f'heading "{len(table["rows"])} rows"' in first.observation
    assert others & set(_cells(first.observation))  # unfiltered: other categories show
    column = find(first.observation, "combobox", has="- column -")
    box, apply = find(first.observation, "textbox"), find(first.observation, "button", "Apply")
    turns = [first, env.step(web_action("select_option", bid=column, value="category"))]
    turns.append(env.step(web_action("fill", bid=box, value=category)))
    assert f'value="{category}"' in turns[-1].observation  # the field shows what was typed
    turns.append(env.step(web_action("click", bid=apply)))
    after = turns[-1].observation
    assert re.search(rf"^URL: .*category__exact={category}", after, re.M), after[:300]
    assert re.search(rf'heading "{len(expected)} rows? where category = ', after), after[:600]
    shown = _cells(after)
    assert category in shown and not others & set(shown)  # only the application's rows
    names = [n for n in shown if n in {r[1] for r in table["rows"]}]
    assert names and names == expected[: len(names)]  # on screen: the first matching rows
    # The record of these turns validates in the form it would be written.
    traj = Trajectory(
        id="web-test", domain="web", source=env.source, environment="x", turns=tuple(turns)
    )
    assert Trajectory.from_json(traj.to_json()) == traj


def test_helpdesk_form_is_validated_by_the_server_then_creates_a_ticket(env):
    data = sites.helpdesk(random.Random(5))
    env.reset(_task({"app": "helpdesk", "helpdesk": data}))
    page = env.step(web_action("goto", url=f"{HELPDESK_URL}/tickets/new")).observation
    fields = {label: find(page, "textbox", label) for label in ("Title", "Your email")}
    env.step(web_action("fill", bid=fields["Title"], value="Monitor flickers"))
    env.step(web_action("fill", bid=fields["Your email"], value="ada at acme"))
    env.step(
        web_action(
            "select_option", bid=find(page, "combobox", "Category"), value=data["categories"][0]
        )
    )
    env.step(
        web_action("fill", bid=find(page, "textbox", "Description"), value="It flickers all day.")
    )
    bad = env.step(web_action("click", bid=find(page, "button", "Create ticket"))).observation
    assert (
        "Your email is not a valid address." in bad
        and "URL: http://127.0.0.1:8002/tickets\n" in bad
    )
    assert 'value="Monitor flickers"' in bad  # the server kept what was typed
    env.step(web_action("fill", bid=find(bad, "textbox", "Your email"), value="ada@acme.com"))
    done = env.step(web_action("click", bid=find(bad, "button", "Create ticket"))).observation
    new_id = len(data["tickets"]) + 1
    assert f"URL: {HELPDESK_URL}/tickets/{new_id}?msg=created" in done
    assert f'heading "#{new_id} Monitor flickers"' in done and "Ticket created." in done


def test_failed_actions_observe_the_real_error(env):
    env.reset(_task(_shop()))
    env.step(web_action("goto", url=f"{DATASETTE_URL}/"))
    missing = env.step(web_action("click", bid="9999"))
    assert missing.observation.startswith("Error: Locator.click: Timeout 1500ms exceeded.")
    assert 'get_by_test_id("9999")' in missing.observation and missing.metadata["is_error"]
    assert f"URL: {DATASETTE_URL}/" in missing.observation  # and the page as it still is
    typo = env.step(env.parse_agent_action("clik('3')"))
    assert typo.observation.startswith("Error: invalid action: unknown action 'clik'")
    assert env.parse_agent_action("I will open it.\n```\nclick('12')\n```").text == "click('12')"


def test_sandbox_blocks_every_address_but_the_applications(env):
    """Another loopback port inside the sandbox (Landlock refuses it); the host's own
    loopback on the helpdesk's port, which Landlock allows but this Datasette episode
    does not serve (another network namespace: the host listener is never reached); a
    documentation-only address (no route out of the namespace): all fail in the
    browser, before anything leaves it."""
    host = socket.socket()
    host.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    host.bind(("127.0.0.1", TCP_PORTS[1]))  # the helpdesk's port, unused by this episode
    host.listen()
    host.settimeout(0.5)
    reached: list[object] = []
    env.reset(_task(_shop()))
    ok = env.step(web_action("goto", url=f"{DATASETTE_URL}/"))
    assert not ok.metadata.get("is_error")
    other_port = env.step(web_action("goto", url="http://127.0.0.1:8003/"))
    assert other_port.observation.startswith("Error: Page.goto: net::ERR_NETWORK_ACCESS_DENIED")
    for url in (HELPDESK_URL + "/", "http://192.0.2.1:8001/"):
        turn = env.step(web_action("goto", url=url))
        assert turn.observation.startswith("Error: Page.goto: net::ERR_"), turn.observation[:200]
    try:
        reached.append(host.accept())
    except OSError:
        pass
    host.close()
    assert reached == []


@pytest.fixture(scope="module")
def web_records(workspace):
    """Eight scripted episodes (seed 0), recorded in the module's workspace (its browser
    already started) the way a collect task records them."""
    from agentworld.collect.episode import plan_episodes, run_episode

    return [run_episode(spec, workspace) for spec in plan_episodes(CONFIG)]


def test_scripted_episodes_are_real_and_deterministic(workspace, web_records):
    from agentworld.collect.episode import episode_digest, plan_episodes, run_episode

    assert len({t.metadata["playbook"] for t in web_records}) >= 4
    assert any(t.outcome and t.outcome.success for t in web_records)
    for traj in web_records:
        assert traj.turns[0].action.startswith("goto('http://127.0.0.1:800")
        for turn in traj.turns:
            assert len(turn.observation) <= CONFIG.web_observation_cap + 60
            cut = turn.metadata.get("truncated_chars")
            assert (cut is not None) == ("[observation truncated:" in turn.observation)
    again = run_episode(plan_episodes(CONFIG)[0], workspace)
    assert episode_digest(again) == episode_digest(web_records[0])


def test_web_records_round_trip_through_agentworldbench_rows(web_records):
    from agentworld.schema import rows_to_trajectories, trajectory_to_rows

    rows = [row for t in web_records for row in trajectory_to_rows(t)]
    assert len(rows) == sum(len(t.turns) for t in web_records)
    back = {t.id: t for t in rows_to_trajectories(rows)}
    for traj in web_records:
        got = back[traj.id]
        assert (got.domain, got.environment) == ("web", traj.environment)
        assert [(t.action, t.observation) for t in got.turns] == [
            (t.action, t.observation) for t in traj.turns
        ]
    assert [r for t in back.values() for r in trajectory_to_rows(t)] == rows


def test_simulator_sessions_and_the_judge_take_web(web_records):
    from agentworld.scoring.rubrics import judge_instructions
    from agentworld.sim.prompt import resolve_domain, system_text
    from agentworld.sim.protocol import EnvironmentSpec

    traj = web_records[0]
    assert resolve_domain("web") == "web"
    spec = EnvironmentSpec(domain="web", environment=traj.environment)
    assert system_text(spec).startswith(traj.environment)
    assert "[bid]" in judge_instructions("web") and "validation messages" in judge_instructions(
        "web"
    )


def test_prepare_keeps_every_web_sample_at_the_demo_recipe(
    ray_cluster, collected_corpus, web_records, tmp_path
):
    import dataclasses

    import pyarrow as pa

    from agentworld.data.run import prepare
    from agentworld.io import join, list_shards, read_parquet, write_jsonl
    from agentworld.recipes import debug_cpu
    from agentworld.recipes.jobs import prepare_job

    web_dir = str(tmp_path / "web")
    write_jsonl(join(web_dir, "part-00000.jsonl"), [t.to_dict() for t in web_records])
    recipe = debug_cpu()
    recipe = dataclasses.replace(recipe, data=dataclasses.replace(recipe.data, progress_bars=False))
    out = str(tmp_path / "prepared")
    job = prepare_job(recipe, inputs=(collected_corpus, web_dir), out=out)
    report = prepare(job, log=lambda _: None)
    assert report["by_domain"]["web"]["kept"] == len(web_records), report["by_domain"]["web"]
    samples = pa.concat_tables(
        [read_parquet(s) for s in list_shards(join(out, "samples", "sft"))]
    ).to_pylist()
    # Every turn of every web record is an SFT sample (none dropped as too long), whose
    # target is that turn's real observation.
    turns = {(t.id, k): x.observation for t in web_records for k, x in enumerate(t.turns, 1)}
    web = {
        (s["trajectory_id"], s["turn_idx"]): s["reference"] for s in samples if s["domain"] == "web"
    }
    assert web == turns
    assert report.get("sft_drop_rates", {}).get("web", {}).get("dropped", 0) == 0


def test_without_a_browser_web_fails_clearly_and_other_domains_record(monkeypatch, tmp_path):
    from agentworld.collect.chunk import run_chunk
    from agentworld.collect.episode import EpisodeSpec

    monkeypatch.setenv("PATH", str(tmp_path))  # no chromium here
    monkeypatch.setenv("PLAYWRIGHT_BROWSERS_PATH", str(tmp_path))
    config = CollectConfig(domains=("web", "search"), episodes=2)
    specs = [EpisodeSpec(index=i, domain=d, seed=0) for i, d in enumerate(config.domains)]
    result = run_chunk(specs, config)
    assert [f["domain"] for f in result.failed] == ["web"]
    assert "the web domain needs a Chromium browser" in result.failed[0]["error"]
    assert "apt-get install -y chromium" in result.failed[0]["error"]
    assert [Trajectory.from_json(r).domain for r in result.records] == ["search"]
