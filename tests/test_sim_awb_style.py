"""The ``awb`` prompt style: a simulator session rendered the way AgentWorldBench rows
are (the reference's per-domain system prompt, ``### Turn N`` / ``**Action:**`` user
turns, ``**Environment Observation:**`` answers), read from a prompts folder made here."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from agentworld.agent.config import SimConfig
from agentworld.agent.world import EngineWorld, SimRequest
from agentworld.config import ConfigError
from agentworld.evaluate.closed_loop import run_closed_loop
from agentworld.evaluate.config import ClosedLoopConfig
from agentworld.evaluate.episodes import Episode
from agentworld.evaluate.simulators import Reply, Simulator
from agentworld.schema import parse_output, predict_turn_messages, trajectory_to_rows
from agentworld.schema.awb import load_system_prompt
from agentworld.schema.errors import RecordError
from agentworld.schema.examples import sample_trajectories
from agentworld.sim.config import LimitsConfig, ServeConfig
from agentworld.sim.errors import SimError
from agentworld.sim.prompt import PromptStyle, read_prediction, step_messages, system_text
from agentworld.sim.protocol import CreateSession
from agentworld.sim.sessions import Sessions, new_session
from agentworld.sim.store import SessionStore

TEMPLATE = "# Role\n\nYou simulate a Linux terminal. Answer with the observation only.\n"


@pytest.fixture
def prompts(tmp_path: Path) -> Path:
    (tmp_path / "terminal").mkdir()
    (tmp_path / "terminal" / "system_prompt.txt").write_text(TEMPLATE, encoding="utf-8")
    return tmp_path


def _row_messages(row: dict) -> list[dict[str, str]]:
    """A row as the published eval script feeds it: system_str, earlier prompts and
    responses as they are, then current_prompt."""
    k = row["turn_idx"]
    messages = [{"role": "system", "content": row["system_str"]}]
    for action, observation in zip(row["prompt"][: k - 1], row["response"][: k - 1], strict=True):
        messages += [
            {"role": "user", "content": action},
            {"role": "assistant", "content": observation},
        ]
    return messages + [{"role": "user", "content": row["current_prompt"]}]


def test_an_awb_session_renders_as_the_reference_row_of_the_same_turns(prompts):
    traj = sample_trajectories(1)[0]
    style = PromptStyle(name="awb", prompts_dir=str(prompts))
    system = system_text(CreateSession(domain=traj.domain, environment=traj.environment))
    turns = [{"action": t.action, "observation": t.observation} for t in traj.turns]
    rows = trajectory_to_rows(traj, system_prompt=load_system_prompt(str(prompts), traj.domain))
    assert len(rows) == len(turns) > 2
    for row in rows:
        k = row["turn_idx"]
        rendered = step_messages(
            system, turns[: k - 1], turns[k - 1]["action"], domain=traj.domain, style=style
        )
        assert rendered == _row_messages(row)
    # The reference's format itself, not only agreement between the two renderings.
    last = step_messages(system, turns[:2], turns[2]["action"], domain="terminal", style=style)
    assert last[0]["content"] == f"{TEMPLATE}\n\n{traj.environment}"
    assert last[1]["content"] == f"### Turn 1\n**Action:**\n{turns[0]['action']}"
    assert last[2]["content"] == f"**Environment Observation:**\n{turns[0]['observation']}"
    assert last[5]["content"] == f"### Turn 3\n**Action:**\n{turns[2]['action']}"


def test_the_native_style_stays_the_training_prompt(prompts):
    traj = sample_trajectories(1)[0]
    system = system_text(CreateSession(domain=traj.domain, environment=traj.environment))
    turns = [{"action": t.action, "observation": t.observation} for t in traj.turns]
    for k in range(1, len(turns) + 1):
        expected = predict_turn_messages(traj, k)
        history, action = turns[: k - 1], turns[k - 1]["action"]
        assert step_messages(system, history, action) == expected
        native = PromptStyle(name="native")
        assert step_messages(system, history, action, domain="terminal", style=native) == expected


@pytest.mark.parametrize(
    "text",
    [
        "<think>ls lists the one file.</think>\n\n**Environment Observation:**\nnotes.txt",
        # The template opened <think> in the prompt: only its closing tag is in the answer.
        "ls lists the one file.</think>\n**Environment Observation:**\nnotes.txt\n",
        # A line before the marker is not part of the observation.
        "<think>ls lists the one file.</think>\nThe shell prints:\n"
        "**Environment Observation:**\nnotes.txt",
    ],
)
def test_the_observation_is_read_after_the_think_block_and_the_marker(text):
    parsed = parse_output(text)
    assert parsed.observation == "notes.txt"
    assert parsed.reasoning == "ls lists the one file."
    assert read_prediction(text, None).observation == "notes.txt"


def test_a_domain_without_its_prompt_file_fails_naming_the_file(prompts):
    missing = prompts / "web" / "system_prompt.txt"
    with pytest.raises(RecordError, match=re.escape(str(missing))):
        load_system_prompt(str(prompts), "web")
    style = PromptStyle(name="awb", prompts_dir=str(prompts))
    with pytest.raises(SimError) as e:
        step_messages("a browser", [], "goto /", domain="web", style=style)
    assert e.value.status == 422 and e.value.field == "domain"
    assert str(missing) in e.value.message


def test_the_style_and_its_folder_are_checked_config_fields(prompts):
    assert ServeConfig().prompt_style == "native"
    cfg = ServeConfig.from_dict({"prompt_style": "awb", "prompts_dir": str(prompts)})
    assert (cfg.prompt_style, cfg.prompts_dir) == ("awb", str(prompts))
    bad = [
        ({"prompt_style": "reference"}, "serve.prompt_style"),
        ({"prompt_style": "awb"}, "serve.prompts_dir"),
        ({"prompts_dir": str(prompts)}, "serve.prompts_dir"),
        ({"prompt_style": "awb", "prompts_dir": str(prompts / "nowhere")}, "serve.prompts_dir"),
    ]
    for args, field in bad:
        with pytest.raises(ConfigError) as e:
            ServeConfig.from_dict(args)
        assert e.value.field == field, args
    with pytest.raises(ConfigError) as e:
        SimConfig(
            backend="serve", serve_url="http://x", prompt_style="awb", prompts_dir=str(prompts)
        )
    assert e.value.field == "agent.sim.prompt_style"


def test_a_session_step_hands_its_domain_to_the_renderer(prompts):
    store = SessionStore(LimitsConfig())
    style = PromptStyle(name="awb", prompts_dir=str(prompts))
    seen: list[list[dict]] = []

    async def call(method, *args, **kwargs):
        return getattr(store, method)(*args, **kwargs)

    async def predict(system, turns, action, control, sampling, domain, affinity=None) -> dict:
        seen.append(step_messages(system, turns, action, domain=domain, style=style))
        return {"action": action, "observation": "notes.txt", "reasoning": None}

    async def run() -> None:
        sessions = Sessions(call, predict, max_turns=8)
        spec = CreateSession(domain="terminal", environment="bash in /home/u")
        record = await sessions.open("alpha", new_session(spec))
        await sessions.step("alpha", record["id"], "ls")
        await sessions.step("alpha", record["id"], "cat notes.txt")

    asyncio.run(run())
    assert seen[1][0]["content"] == f"{TEMPLATE}\n\nbash in /home/u"
    assert seen[1][3]["content"] == "### Turn 2\n**Action:**\ncat notes.txt"


class _Tokenizerless:
    """EngineWorld.render needs no engine; the constructor only asks for a tokenizer."""

    def get_tokenizer(self) -> None:
        return None


def test_the_agent_world_renders_in_its_configured_style(prompts):
    cfg = SimConfig(prompt_style="awb", prompts_dir=str(prompts))
    world = EngineWorld(_Tokenizerless(), cfg)
    try:
        req = SimRequest(
            domain="terminal",
            environment="bash in /home/u",
            control=None,
            history=(("ls", "notes.txt"),),
            action="cat notes.txt",
        )
        messages = world.render(req)
    finally:
        world.close()
    assert messages[0]["content"] == f"{TEMPLATE}\n\nbash in /home/u"
    assert messages[2]["content"] == "**Environment Observation:**\nnotes.txt"
    assert messages[3]["content"] == "### Turn 2\n**Action:**\ncat notes.txt"


class _Recorder(Simulator):
    """Answers every turn with its real observation and keeps the prompts it was given."""

    def __init__(self, episode: Episode, seen: list[list[dict]]) -> None:
        self.episode, self.seen = episode, seen

    async def ask(self, messages: list[dict]) -> Reply:
        self.seen.append(messages)
        k = sum(m["role"] == "user" for m in messages)
        return Reply(output="x", observation=self.episode.references[k - 1])


def test_evaluate_closed_loop_renders_its_episodes_in_the_awb_style(prompts, tmp_path):
    traj = sample_trajectories(1)[0]
    ep = Episode(
        id=traj.id,
        task=traj.domain,
        domain=traj.domain,
        system=traj.environment,
        actions=tuple(t.action for t in traj.turns),
        references=tuple(t.observation for t in traj.turns),
    )
    seen: list[list[dict]] = []
    cfg = ClosedLoopConfig(prompt_style="awb", prompts_dir=str(prompts))
    run_closed_loop([ep], lambda: _Recorder(ep, seen), cfg, str(tmp_path / "out"))
    style = PromptStyle(name="awb", prompts_dir=str(prompts))
    turns = [{"action": t.action, "observation": t.observation} for t in traj.turns]
    expected = [
        step_messages(
            traj.environment, turns[: k - 1], turns[k - 1]["action"], domain="terminal", style=style
        )
        for k in range(1, len(turns) + 1)
    ]
    assert seen == expected
    web = Episode(**{**ep.__dict__, "id": "w", "domain": "web"})
    with pytest.raises(RecordError, match=re.escape(str(prompts / "web" / "system_prompt.txt"))):
        run_closed_loop([ep, web], lambda: _Recorder(ep, []), cfg, str(tmp_path / "out2"))
