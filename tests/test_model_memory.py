"""The world model's observation memory (agentworld.model.memory): its lookup, the SFT
samples prepare writes with it, the file that travels with the tokenizer into every
checkpoint, and the prompts RL and the simulator render with it."""

from __future__ import annotations

import json

import numpy as np
import pytest

from agentworld.data.tokenize import ChatLayout, encode_trajectories, sft_sample
from agentworld.model.memory import (
    Entry,
    ObservationMemory,
    attach,
    query_text,
    read_memory,
    split_memory,
)
from agentworld.schema import Trajectory, Turn, predict_turn_messages

ENV = "search over the standard library docs"


def _search(traj_id: str, query: str, page: str) -> Trajectory:
    action = json.dumps({"name": "search", "arguments": {"query": query}})
    return Trajectory(
        id=traj_id,
        domain="search",
        source="t",
        environment=ENV,
        turns=(Turn(action=action, observation=page),),
    )


def _entries(trajs: list[Trajectory]) -> list[Entry]:
    return [
        Entry(query_text(predict_turn_messages(t, k)), t.turns[k - 1].observation, t.id)
        for t in trajs
        for k in range(1, len(t.turns) + 1)
    ]


@pytest.fixture(scope="module")
def tokenizer(corpus_texts):
    from agentworld.model import train_tokenizer

    return train_tokenizer(corpus_texts, vocab_size=512)


def test_lookup_finds_the_planted_neighbour_from_another_trajectory():
    trajs = [
        _search("a", "json decode", "json.loads: decode a document"),
        _search("b", "json decode", "json.JSONDecoder: decode"),
        _search("c", "socket connect", "socket.create_connection"),
    ]
    memory = ObservationMemory(_entries(trajs))
    asked = predict_turn_messages(_search("new", "json decode strings", "?"), 1)
    found = memory.lookup([asked, asked, asked], ["a", "b", "new"])
    assert found[0] == "json.JSONDecoder: decode"  # never a turn of its own trajectory
    assert found[1] == "json.loads: decode a document"
    assert found[2] in {"json.loads: decode a document", "json.JSONDecoder: decode"}
    nothing = [{"role": "system", "content": "qqqq"}, {"role": "user", "content": "zzzz"}]
    assert memory.lookup([nothing]) == [None]  # no word in common: no memory

    [with_memory] = memory.with_memory([asked], ["a"])
    action, remembered = split_memory(with_memory[-1]["content"])
    assert action == asked[-1]["content"] and remembered == "json.JSONDecoder: decode"
    assert query_text(with_memory) == query_text(asked)  # matched without its memory
    assert memory.with_memory([with_memory], ["b"]) == [with_memory]  # added once only
    assert ObservationMemory.from_parquet(memory.to_parquet()).entries == memory.entries


def test_a_trajectory_whose_turns_outrank_every_other_still_gets_another_ones():
    """A trajectory's turns share its environment text, so they can fill every top
    match of a query; the lookup looks past all of them."""
    long_env = "user alice host box prompt alice@box " * 5
    own = Trajectory(
        id="own",
        domain="terminal",
        source="t",
        environment=long_env,
        turns=tuple(Turn(action=f"ls dir{i}", observation=f"file{i}") for i in range(12)),
    )
    other = Trajectory(
        id="other",
        domain="terminal",
        source="t",
        environment="user bob",
        turns=(Turn(action="ls dir3", observation="theirs"),),
    )
    memory = ObservationMemory(_entries([own, other]))
    assert memory.lookup([predict_turn_messages(own, 4)], ["own"]) == ["theirs"]


def test_sft_samples_with_memory_hold_the_tokens_inference_feeds(tokenizer):
    """The sample's prompt is the templated prompt of its messages_json (the action with
    its memory) encoded whole, as evaluate, RL and serve encode it; the targets are the
    observation alone; a sample too long with its memory goes without it."""
    trajs = [
        Trajectory(
            id="t1",
            domain="terminal",
            source="t",
            environment="env",
            turns=(
                Turn(action="ls", observation="a.py\nb.py"),
                Turn(action="  cat a.py", observation="\n    print(1)"),
            ),
        )
    ]
    remembered = [["a.py", "    print(2)\n"]]
    layout = ChatLayout.of(tokenizer)
    [e] = encode_trajectories(tokenizer, layout, trajs, remembered)

    def ids(text: str) -> list[int]:
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    for k, turn in enumerate(trajs[0].turns, start=1):
        s = sft_sample(e, layout, "key", k, seq_len=4096, truncation="left")
        messages = json.loads(s.messages_json)
        assert split_memory(messages[-1]["content"]) == (turn.action, remembered[0][k - 1])
        prompt = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        assert s.tokens[: np.argmax(s.mask)].tolist() == ids(prompt)
        assert s.tokens[s.mask == 1].tolist() == [*ids(turn.observation), tokenizer.eos_token_id]

    plain = sft_sample(
        encode_trajectories(tokenizer, layout, trajs)[0], layout, "key", 1, seq_len=4096,
        truncation="left",
    )  # fmt: skip
    with_memory = sft_sample(e, layout, "key", 1, seq_len=4096, truncation="left")
    fits_plain_only = plain.tokens.size
    assert with_memory.tokens.size > fits_plain_only
    short = sft_sample(e, layout, "key", 1, seq_len=fits_plain_only, truncation="left")
    assert short.tokens.tolist() == plain.tokens.tolist()
    assert split_memory(json.loads(short.messages_json)[-1]["content"])[1] is None


def test_the_memory_travels_with_the_tokenizer_into_every_checkpoint(tmp_path, corpus_texts):
    from agentworld.model import build_model, load_tokenizer, save_pretrained, train_tokenizer
    from agentworld.model.config import ModelConfig

    memory = ObservationMemory(_entries([_search("a", "json decode", "json.loads")]))
    tokenizer = train_tokenizer(corpus_texts, vocab_size=512)
    first = str(tmp_path / "first")
    save_pretrained(build_model(ModelConfig(), tokenizer), tokenizer, first)
    assert read_memory(first) is None  # a model without one is prompted as before
    (tmp_path / "first" / "memory.parquet").write_bytes(memory.to_parquet())

    loaded = load_tokenizer(first)  # as CPT, SFT and RL load their starting point's
    second = str(tmp_path / "second")
    save_pretrained(build_model(ModelConfig(), loaded), loaded, second)
    assert read_memory(second).entries == memory.entries


def test_rl_and_the_simulator_prompt_a_model_with_memory_as_prepare_did(tokenizer):
    from agentworld.rl.data import Context, LoadResult, tokenize_contexts
    from agentworld.sim.prompt import step_messages

    trajs = [_search("a", "json decode", "json.loads"), _search("b", "json decode", "json.dumps")]
    memory = ObservationMemory(_entries(trajs))
    tokenizer.agentworld_memory = memory.to_parquet()
    try:
        contexts = [
            Context(
                trajectory_id=t.id,
                domain=t.domain,
                turn_idx=1,
                messages=predict_turn_messages(t, 1),
                reference=t.turns[0].observation,
            )
            for t in trajs
        ]
        kept = tokenize_contexts(contexts, tokenizer, max_prompt_tokens=4096, result=LoadResult())
    finally:
        del tokenizer.agentworld_memory
    # Each training context is given the other trajectory's observation, never its own.
    assert [split_memory(c.messages[-1]["content"])[1] for c in kept] == [
        "json.dumps",
        "json.loads",
    ]
    text = tokenizer.apply_chat_template(
        kept[0].messages, tokenize=False, add_generation_prompt=True
    )
    assert list(kept[0].prompt_ids) == tokenizer(text, add_special_tokens=False)["input_ids"]

    action = trajs[0].turns[0].action
    served = step_messages(ENV, [], action, memory)
    assert served[-1]["content"] in {attach(action, "json.loads"), attach(action, "json.dumps")}
    assert step_messages(ENV, [], action) == predict_turn_messages(trajs[0], 1)


def test_the_export_carries_the_memory_of_its_data_not_of_its_init(tmp_path, corpus_texts):
    """SFT from a CPT export trained without the memory (another run's, or one made before
    the memory was switched on) exports the memory its samples were rendered with; SFT on
    data without a memory drops one the init brought along."""
    import shutil

    from agentworld.model import save_pretrained
    from agentworld.model.build import build_tiny_checkpoint
    from agentworld.recipes import debug_cpu
    from agentworld.train.engine import build_model
    from agentworld.train.job import TrainJob, _model_source

    init = build_tiny_checkpoint(corpus_texts, str(tmp_path / "cpt" / "hf"))
    memory = ObservationMemory(_entries([_search("a", "json decode", "json.loads")]))
    data = tmp_path / "prepared"
    shutil.copytree(init, data / "tokenizer")  # prepare's tokenizer/: the same vocabulary
    (data / "tokenizer" / "memory.parquet").write_bytes(memory.to_parquet())

    def sft_export(data_dir, name: str) -> str:
        job = TrainJob(stage="sft", data=str(data_dir), out="unused", recipe=debug_cpu(), init=init)
        model, tokenizer = build_model(job.recipe, _model_source(job))
        return save_pretrained(model, tokenizer, str(tmp_path / name))

    assert read_memory(init) is None
    assert read_memory(sft_export(data, "with")).entries == memory.entries
    (data / "tokenizer" / "memory.parquet").unlink()
    shutil.copy(tmp_path / "with" / "memory.parquet", tmp_path / "cpt" / "hf")  # init has one
    assert read_memory(sft_export(data, "without")) is None
