"""Collector variety: an episode's settings (user, host, prompt, directories, time zone,
locale, width, git identity, search subset) follow from its seed, differ between seeds,
and are what the real sandboxed shell and search engine then show."""

from __future__ import annotations

import dataclasses

from agentworld.collect import CollectConfig
from agentworld.collect.env import Action, Task, Workspace
from agentworld.collect.episode import EpisodeSpec, draw_task
from agentworld.collect.playbook import scripted
from agentworld.collect.variety import DEFAULT, Variety

VARIED = ("user", "host", "home", "workdir", "prompt", "timezone", "columns", "search_share")


def _settings(domain: str, seed: int, index: int = 0) -> Variety:
    task = draw_task(EpisodeSpec(index=index, domain=domain, seed=seed), CollectConfig())
    return Variety.of(task.state)


def test_same_seed_same_settings_other_seeds_other_settings():
    for domain in ("terminal", "swe", "search", "mcp"):
        assert _settings(domain, 3) == _settings(domain, 3)
    drawn = [_settings("terminal", seed) for seed in range(12)]
    for name in VARIED:  # every varied setting takes several values over a few seeds
        assert len({getattr(v, name) for v in drawn}) >= 2, name
    assert sum(v != DEFAULT for v in drawn) == len(drawn)
    a, b = _settings("terminal", 0), _settings("terminal", 1)
    assert sum(getattr(a, n) != getattr(b, n) for n in VARIED) >= 3


def test_the_real_shell_shows_the_settings():
    from agentworld.collect.terminal.env import TerminalEnvironment

    v = dataclasses.replace(
        DEFAULT,
        user="priya",
        host="ws-114",
        home="/srv/priya",
        workdir="/srv/priya/src/helix",
        prompt="[priya@ws-114 \\W]$ ",
        timezone="Asia/Tokyo",
        columns=132,
        git_date="2024-03-11T10:12:00",
    )
    task = Task(
        playbook="test",
        text="t",
        script=scripted([]),
        state={"files": {"a.txt": "x\n"}, "variety": v.to_dict()},
    )
    with Workspace(CollectConfig(command_timeout_s=5)) as ws:
        env = TerminalEnvironment(ws)
        text = env.reset(task)
        try:
            obs = [
                env.step(Action(text=c)).observation
                for c in ("pwd", "ls", "hostname", "echo $USER $HOME", "date +%Z", "tput cols")
            ]
        finally:
            env.close()
    assert "user priya on ws-114 in /srv/priya/src/helix" in text
    assert text.endswith("[priya@ws-114 helix]$ ")
    assert obs[0] == "/srv/priya/src/helix\n[priya@ws-114 helix]$ "
    assert obs[1].startswith("a.txt\n")  # the task's files are in the starting directory
    assert obs[2].startswith("ws-114\n") and obs[3].startswith("priya /srv/priya\n")
    assert obs[4].startswith("JST\n") and obs[5].startswith("132\n")


def test_search_subset_follows_the_settings():
    from agentworld.collect.search.env import SearchEnvironment

    def documents(share: float) -> str:
        v = dataclasses.replace(DEFAULT, search_share=share)
        task = Task(playbook="t", text="t", script=scripted([]), state={"variety": v.to_dict()})
        with Workspace(CollectConfig()) as ws:
            env = SearchEnvironment(ws)
            text = env.reset(task)
            hits = env.step(Action.tool("search", query="json decode string", k=50)).observation
        return text.split(" documents:")[0].rsplit("(", 1)[1], hits

    (full, _), (part, hits) = documents(1.0), documents(0.5)
    assert int(part) < int(full)
    assert f"{part} documents searched" in hits
