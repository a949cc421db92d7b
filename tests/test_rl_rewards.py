"""Rule rewards, their combination (weights, rewards that do not apply, failures left
out), custom rewards, RL config validation and context loading from samples/sft."""

from __future__ import annotations

import dataclasses
import json

import pytest

from agentworld.config import ConfigError
from agentworld.model.engine import EngineConfig
from agentworld.recipes import get_recipe
from agentworld.rl.config import LearnerConfig, RewardSpec, RLConfig, RolloutConfig
from agentworld.rl.rewards import (
    Failed,
    Prediction,
    build_rewards,
    fixed_lines_reward,
    format_reward,
    json_reward,
    known_rewards,
    register_reward,
    score,
)

CTX = [
    {"role": "system", "content": "A bash shell."},
    {"role": "user", "content": "echo hi"},
    {"role": "assistant", "content": "$ echo hi\nhi\n$ "},
    {"role": "user", "content": "ls"},
]


def pred(raw: str, reference: str = "$ ls\nnotes.txt\n$", finished: bool = True) -> Prediction:
    return Prediction(
        domain="terminal", messages=CTX, reference=reference, raw=raw, finished=finished
    )


def test_format_reward_wants_exactly_one_parseable_observation():
    assert format_reward(pred("<predicted_observation>$ ls\nx</predicted_observation>")) == 1.0
    assert format_reward(pred("<think>plan</think>$ ls")) == 1.0
    assert format_reward(pred("$ ls", finished=False)) == 0.0  # cut at max_new_tokens
    assert format_reward(pred("<think>never closed")) == 0.0
    two = "<predicted_observation>a</predicted_observation><predicted_observation>b</predicted_observation>"
    assert format_reward(pred(two)) == 0.0
    assert format_reward(pred("<predicted_observation>   </predicted_observation>")) == 0.0


def test_json_reward_scores_validity_and_shape():
    ref = json.dumps({"content": [{"type": "text", "text": "12:00"}], "is_error": False})
    assert json_reward(pred("plain text", reference="$ ls")) is None  # not a tool result
    assert json_reward(pred("not json", reference=ref)) == 0.0
    assert json_reward(pred(ref, reference=ref)) == 1.0
    same_keys = json.dumps({"content": [{"type": "text", "text": "9:15"}], "is_error": True})
    assert json_reward(pred(same_keys, reference=ref)) == 1.0  # shape, not values
    # Paths of ref: $, $.content, $.content[], $.content[].type, .text, $.is_error (6);
    # of {"content": []}: $ and $.content -> Jaccard 2/6.
    assert json_reward(pred('{"content": []}', reference=ref)) == pytest.approx(0.5 + 0.5 * 2 / 6)


def test_fixed_lines_reward_checks_content_the_session_fixes():
    # "$ ls"-like lines fixed by the context: "hi" and "$ echo hi" appear earlier.
    ref = "$ echo hi\nhi\nnew output"
    assert fixed_lines_reward(pred("$ echo hi\nhi\nsomething else", reference=ref)) == 1.0
    assert fixed_lines_reward(pred("$ echo hi\nbye", reference=ref)) == 0.5
    assert fixed_lines_reward(pred("anything", reference="all new")) is None


def test_score_combines_weights_skips_inapplicable_and_excludes_failures():
    if "test_flaky" not in known_rewards():  # a custom reward, registered once per process
        register_reward(
            "test_flaky",
            lambda cfg: lambda ps: [Failed("boom") if "x" in p.raw else 1.0 for p in ps],
        )
    cfg = RLConfig(
        rewards=(
            RewardSpec(name="format", weight=1.0),
            RewardSpec(name="json", weight=3.0),
            RewardSpec(name="test_flaky", weight=1.0),
        )
    )
    fns = build_rewards(cfg)
    weights = {s.name: s.weight for s in cfg.rewards}
    batch = score([pred("$ ls"), pred("$ ls", finished=False), pred("x")], fns, weights)
    # json does not apply (reference is not JSON): weighted mean of format and test_flaky.
    assert batch.total == [1.0, 0.5, 0.0]
    assert batch.valid == [True, True, False]  # the failure is excluded, not a zero
    assert batch.failures == {"format": [], "json": [], "test_flaky": ["boom"]}
    assert batch.components["json"] == [None, None, None]


def test_gate_multiplies_instead_of_averaging_in():
    """The default mix gates on format: a well-formed answer that says nothing earns
    about nothing, and a close answer cut at max_new_tokens earns nothing at all."""
    cfg = RLConfig()
    assert [s.name for s in cfg.rewards if s.gate] == ["format"]
    fns = build_rewards(cfg)
    weights = {s.name: s.weight for s in cfg.rewards}
    gates = {s.name for s in cfg.rewards if s.gate}
    empty, close = pred("."), pred("$ ls\nnotes.txt\n$")
    cut = pred("$ ls\nnotes.txt\n$", finished=False)
    gated = score([empty, close, cut], fns, weights, gates).total
    added = score([empty, close, cut], fns, {**weights, "format": 0.3}).total
    # "." shares one character with the reference (char F1 1/7): gated, that is all it
    # earns; with format averaged in, its form alone pays more than its content.
    assert gated[0] == pytest.approx(0.6 * (1 / 7) / 0.8)
    assert added[0] > gated[0] + 0.2
    assert gated[1] == pytest.approx(1.0)
    assert gated[2] == 0.0 < added[2]
    # Gates alone: their product; nothing that applies: 0.
    assert score([close, cut], {"format": fns["format"]}, {"format": 1.0}, gates).total == [
        1.0,
        0.0,
    ]
    with pytest.raises(ConfigError, match=r"rl\.rewards: needs a reward that is not a gate"):
        RLConfig(rewards=(RewardSpec(name="format", gate=True),))


def test_rl_config_fails_naming_the_field():
    with pytest.raises(ConfigError, match=r"rl\.rewards: unknown reward 'bleu'"):
        RLConfig(rewards=(RewardSpec(name="bleu"),))
    with pytest.raises(ConfigError, match=r"rl\.judge"):
        RLConfig(rewards=(RewardSpec(name="judge"),))
    with pytest.raises(ConfigError, match=r"rl\.group_size"):
        RLConfig(group_size=1)
    with pytest.raises(ConfigError, match=r"rl\.learner\.mini_batches"):
        RLConfig(contexts_per_step=3, group_size=3, learner=LearnerConfig(num_learners=2))
    with pytest.raises(ConfigError, match=r"rl\.rollout\.max_prompt_tokens"):
        RolloutConfig(
            engine=EngineConfig(max_model_len=512), max_prompt_tokens=500, max_new_tokens=48
        )
    with pytest.raises(ConfigError, match=r"rl\.rewards\[format\]\.weight"):
        RewardSpec(name="format", weight=-1)
    recipe = get_recipe("debug_cpu")
    assert dataclasses.replace(recipe, rl=RLConfig(max_steps=3)).rl.max_steps == 3


def test_contexts_load_from_samples_and_bad_rows_are_kept_apart(tmp_path):
    import pyarrow as pa

    from agentworld.io import write_parquet
    from agentworld.rl.data import choose_contexts, load_contexts, sample_rows
    from agentworld.schema.examples import sample_trajectories

    rows = sample_rows(sample_trajectories(3))
    rows[1] = {**rows[1], "messages_json": "{not json"}
    rows[2] = {**rows[2], "messages_json": json.dumps([{"role": "user", "content": "x"}])}
    rows[3] = {**rows[3], "reference": None}
    rows[4] = {**rows[4], "split": "eval"}  # prepare's held-out split: never trained on
    write_parquet(
        str(tmp_path / "samples" / "sft" / "part-00000.parquet"), pa.Table.from_pylist(rows)
    )
    result = load_contexts(str(tmp_path))
    assert len(result.contexts) == len(rows) - 4 and result.held_out == 1
    assert [(r["row"], r["field"]) for r in result.rejected] == [
        (2, "messages_json"),
        (3, "messages_json"),
        (4, "reference"),
    ]
    first = result.contexts[0]
    assert first.messages[-1]["role"] == "user" and first.reference == rows[0]["reference"]
    a = choose_contexts(result.contexts, 3, seed=1, step=5)
    assert a == choose_contexts(result.contexts, 3, seed=1, step=5)  # resumable draws
    assert a != choose_contexts(result.contexts, 3, seed=1, step=6)


def test_contexts_whose_observation_a_rollout_cannot_finish_are_left_out(tiny_checkpoint):
    """With the format gate, a rollout cut at max_new_tokens scores 0 however faithful it
    is: a context whose real observation is longer only rewards shorter answers."""
    from agentworld.model import load_tokenizer
    from agentworld.rl.data import Context, LoadResult, tokenize_contexts

    tok = load_tokenizer(tiny_checkpoint)
    short, long = "$ ls\nnotes.txt\n$", "\n".join(f"line {i} of a long listing" for i in range(40))
    contexts = [
        Context(trajectory_id=t, domain="terminal", turn_idx=2, messages=CTX, reference=r)
        for t, r in (("short", short), ("long", long))
    ]
    need = len(tok(long, add_special_tokens=False)["input_ids"]) + 1
    result = LoadResult()
    kept = tokenize_contexts(
        contexts, tok, max_prompt_tokens=512, max_new_tokens=need - 1, result=result
    )
    assert [c.trajectory_id for c in kept] == ["short"]
    assert [r["source"] for r in result.rejected] == ["long:2"]
    assert "rl.rollout.max_new_tokens" in result.rejected[0]["reason"]
    fits = tokenize_contexts(
        contexts, tok, max_prompt_tokens=512, max_new_tokens=need, result=LoadResult()
    )
    assert len(fits) == 2  # exactly enough room: kept
