"""The one command line's overrides (agentworld.config.set_overrides, recipes.load):
dotted keys over the typed recipe, values read for their field, every item landing
together, and a bad one named from the top."""

from __future__ import annotations

import pytest

from agentworld.config import ConfigError, set_overrides
from agentworld.recipes import get_recipe, load


def test_values_are_read_for_their_field():
    r = load(
        "debug_cpu",
        [
            "train.learning_rate=3e-4",
            "collect.domains=terminal,search",
            "rl.wandb=false",
            "evaluate.infer.max_items=12",
            "serve.model_id=7",
            "rl.rollout.engine.replicas=2",
        ],
    )
    assert r.train.learning_rate == 3e-4
    assert r.collect.domains == ("terminal", "search")
    assert r.rl.wandb is False
    assert r.evaluate.infer.max_items == 12
    assert r.serve.model_id == "7"  # a string field keeps the text
    assert r.rl.rollout.engine.replicas == 2
    assert get_recipe("debug_cpu").train.learning_rate != 3e-4  # a copy, not a mutation


def test_items_land_together_and_the_last_one_wins():
    # max_steps=4 alone is below the default warm-up (5): valid only with its partner.
    r = load("debug_cpu", ["train.max_steps=4", "train.warmup_steps=1"])
    assert (r.train.max_steps, r.train.warmup_steps) == (4, 1)
    assert load("debug_cpu", ["train.max_steps=3", "train.max_steps=20"]).train.max_steps == 20


@pytest.mark.parametrize(
    ("items", "field", "why"),
    [
        (["train.nope=1"], "train.nope", "unknown field in override 'train.nope=1'"),
        (["nosuch.x=1"], "nosuch", "unknown field"),
        (["collect.episodes=many"], "collect.episodes", "expects int"),
        (["train=3"], "train", "is a section"),
        (["train.max_steps"], "train.max_steps", "is not KEY=VALUE"),
        (["train.max_steps=4"], "train.warmup_steps", "must be below max_steps 4"),
        (["rl.rollout.engine.replicas=0"], "rl.rollout.engine.replicas", "must be > 0"),
        (["evaluate.infer.sampling.temperature=-1"], "evaluate.infer.sampling.temperature", ">= 0"),
        (["train.max_steps=4", "train.max_steps.x=1"], "train.max_steps.x", "inside a value"),
    ],
)
def test_a_bad_item_is_named_from_the_top(items, field, why):
    with pytest.raises(ConfigError, match=why) as err:
        load("debug_cpu", items)
    assert err.value.field == field


def test_owner_prefixes_the_names():
    cfg = get_recipe("debug_cpu").agent
    with pytest.raises(ConfigError) as err:
        set_overrides(cfg, ["rl.max_stepz=3"], owner="agent")
    assert err.value.field == "agent.rl.max_stepz"
