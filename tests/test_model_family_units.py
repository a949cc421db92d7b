"""The released model family without Ray: each member's router logits reach the
load-balancing loss from the model's own output, a recurrent model's packed documents
never leak into each other, SFT masks exactly what inference feeds with the family's
thinking chat template, and a turn with the world model's reasoning trains on its think
block and the observation.

The tiny checkpoints and tokenizer are built in tests/family_checkpoints.py."""

from __future__ import annotations

import json

import numpy as np
import pytest

from agentworld.data.chat_tokens import ChatLayout, encode_trajectories, sft_sample
from agentworld.schema import Trajectory, Turn, predict_turn_messages
from agentworld.schema.examples import sample_trajectories
from tests.family_checkpoints import build_family_checkpoint, family_tokenizer

FAMILY = ("qwen3", "qwen3_moe", "qwen3_5_moe")


def corpus() -> list[str]:
    texts = []
    for t in sample_trajectories(40):
        texts += [t.environment, *(x for turn in t.turns for x in (turn.action, turn.observation))]
    return texts


@pytest.fixture(scope="module")
def tok():
    return family_tokenizer(corpus())


@pytest.fixture(scope="module")
def checkpoints(tok, tmp_path_factory):
    root = tmp_path_factory.mktemp("family")
    return {f: build_family_checkpoint(f, tok, str(root / f)) for f in FAMILY}


def _batch(tok, texts: list[str]):
    """One packed row holding ``texts`` as documents (every token a target)."""
    from agentworld.train.batch import collate

    docs = [tok(t, add_special_tokens=False).input_ids for t in texts]
    ids = [i for d in docs for i in d]
    pad = 8
    return collate(
        {
            "input_ids": [ids + [tok.pad_token_id] * pad],
            "loss_mask": [[1] * len(ids) + [0] * pad],
            "position_ids": [[p for d in docs for p in range(len(d))] + [0] * pad],
            "doc_lens": [[len(d) for d in docs]],
        }
    )


@pytest.mark.parametrize("family", FAMILY)
def test_each_member_loads_as_a_causal_lm_and_its_router_logits_reach_the_loss(
    family, checkpoints, tok
):
    """Red before: the loss imported Qwen3-MoE's load_balancing_loss_func and read the
    router shape off ``config.num_experts`` (AttributeError on dense Qwen3)."""
    import torch

    from agentworld.model import load_model
    from agentworld.model.family import checkpoint_architecture, family_of
    from agentworld.train.loss import RouterShape, forward_losses

    model = load_model(checkpoints[family], dtype=torch.float32)
    arch = checkpoint_architecture(checkpoints[family])
    assert family_of(model.config) is arch.family
    if family == "qwen3_5_moe":
        assert arch.wrapped and arch.name == "Qwen3_5MoeForConditionalGeneration"
        assert type(model).__name__ == "Qwen3_5MoeForCausalLM"
    router = RouterShape.of(model.config)
    assert router.num_experts == arch.num_experts == (0 if family == "qwen3" else 4)
    batch = _batch(tok, ["ls -la\ntotal 0", "echo hi\nhi"])
    losses = forward_losses(
        model, batch, aux_coef=0.01, router=router, documents=arch.family.recurrent
    )
    losses.total.backward()
    assert losses.num_targets == int(batch.target_mask().sum())
    if router.num_experts:
        # A load-balancing loss near its balanced value (1.0) that reaches the routers.
        assert 0.5 < float(losses.load_balance) < 4.0
        router_grads = [
            p.grad for n, p in model.named_parameters() if n.endswith("mlp.gate.weight")
        ]
        assert router_grads and all(g is not None and g.abs().sum() > 0 for g in router_grads)
    else:
        assert float(losses.load_balance) == 0.0


def test_a_recurrent_model_never_carries_one_packed_document_into_the_next(checkpoints, tok):
    """Qwen3.5-MoE's Gated DeltaNet layers run along the row whatever the position ids
    say; per-document rows make the second document's loss the one it has alone. Red
    with ``documents=False``: the packed loss differs."""
    import torch

    from agentworld.model import load_model
    from agentworld.train.loss import RouterShape, forward_losses

    model = load_model(checkpoints["qwen3_5_moe"], dtype=torch.float32).eval()
    router = RouterShape.of(model.config)
    first, second = "cat notes.txt\nmilk\neggs", "pwd\n/home/user"

    def loss(texts, documents):
        with torch.no_grad():
            out = forward_losses(
                model, _batch(tok, texts), aux_coef=0.0, router=router, documents=documents
            )
        return float(out.lm) * out.num_targets, out.num_targets

    alone = [loss([t], True) for t in (first, second)]
    packed = loss([first, second], True)
    assert packed[1] == alone[0][1] + alone[1][1]
    exact = abs(packed[0] - (alone[0][0] + alone[1][0]))
    leaked = loss([first, second], False)
    assert exact < 1e-4 and abs(leaked[0] - packed[0]) > 100 * max(exact, 1e-6)


def _ids(tok, text: str) -> list[int]:
    return tok(text, add_special_tokens=False)["input_ids"]


def test_sft_masks_exactly_what_inference_feeds_with_the_pretrained_template(tok):
    """The existing check (test_data_units) on the family's tokenizer: prompt tokens are
    the templated prompt encoded whole (it ends by opening a think block), the targets
    are the rest of the answer as the template renders it, through <|im_end|>."""
    layout = ChatLayout.of(tok)
    assert layout.generation == "<|im_start|>assistant\n<think>\n"
    trajs = sample_trajectories(6, seed=5)
    for traj, e in zip(trajs, encode_trajectories(tok, layout, trajs), strict=True):
        for k in range(1, len(traj.turns) + 1):
            s = sft_sample(e, layout, "key", k, seq_len=4096, truncation="left")
            prompt = tok.apply_chat_template(
                predict_turn_messages(traj, k), tokenize=False, add_generation_prompt=True
            )
            assert s.tokens[: np.argmax(s.mask)].tolist() == _ids(tok, prompt)
            answer = "\n</think>\n\n" + traj.turns[k - 1].observation + "<|im_end|>"
            assert tok.decode(s.tokens[s.mask == 1]) == answer
            full = tok.apply_chat_template(
                [
                    *predict_turn_messages(traj, k),
                    {"role": "assistant", "content": traj.turns[k - 1].observation},
                ],
                tokenize=False,
            )
            assert full == prompt + answer + "\n"
            assert json.loads(s.messages_json) == predict_turn_messages(traj, k)


@pytest.mark.parametrize("template", ["family", "chatml"])
def test_a_turn_with_simulator_reasoning_trains_on_its_think_block_and_observation(tok, template):
    """With the family's thinking template the answer after ``<think>\\n`` is the
    reasoning, ``</think>`` and the observation; with this project's ChatML the whole
    ``<think>`` block. The reference stays the observation alone. Red without the
    record's field: the targets were the observation only."""
    from agentworld.model import train_tokenizer

    if template == "chatml":
        tokenizer = train_tokenizer(corpus(), vocab_size=512)
        before = "<think>\n"
    else:
        tokenizer, before = tok, ""
    turns = (
        Turn(action="ls", observation="a.txt", simulator_reasoning="An empty project: one file."),
        Turn(action="cat a.txt", observation="hello"),
    )
    traj = Trajectory(id="r", domain="terminal", source="t", environment="bash", turns=turns)
    layout = ChatLayout.of(tokenizer)
    e = encode_trajectories(tokenizer, layout, [traj])[0]
    s = sft_sample(e, layout, "key", 1, seq_len=4096, truncation="left")
    targets = tokenizer.decode(s.tokens[s.mask == 1])
    assert targets == before + "An empty project: one file.\n</think>\n\na.txt<|im_end|>"
    assert s.reference == "a.txt"
    rendered = tokenizer.apply_chat_template(
        [
            *predict_turn_messages(traj, 1),
            {
                "role": "assistant",
                "content": "<think>\nAn empty project: one file.\n</think>\n\na.txt",
            },
        ],
        tokenize=False,
    )
    assert tokenizer.decode(s.tokens) == rendered
    # The next turn's context holds the observation only, as inference feeds it.
    s2 = sft_sample(e, layout, "key", 2, seq_len=4096, truncation="left")
    assert "An empty project" not in tokenizer.decode(s2.tokens)


@pytest.mark.parametrize("family", FAMILY)
def test_each_member_trains_and_exports_as_itself(family, checkpoints, tok, tmp_path):
    """A few optimizer steps from each member's checkpoint lower its loss, and the export
    (agentworld.train.export, on the trained module as rank 0) declares the original
    architecture under the original weight names and loads with AutoModelForCausalLM.
    Red without keep_declaration / the conversions hand-over: the Qwen3.5-MoE export
    was a Qwen3_5MoeForCausalLM with model.* names."""
    import torch
    from safetensors import safe_open
    from transformers import AutoModelForCausalLM

    from agentworld.model import load_model
    from agentworld.model.family import checkpoint_architecture, family_of
    from agentworld.train.export import export_hf
    from agentworld.train.loss import RouterShape, forward_losses

    original = checkpoints[family]
    model = load_model(original, dtype=torch.float32)
    router, documents = RouterShape.of(model.config), family_of(model.config).recurrent
    batch = _batch(tok, ["ls -la\ntotal 0", "echo hi\nhi", "pwd\n/home/user"])
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(6):
        out = forward_losses(model, batch, aux_coef=0.01, router=router, documents=documents)
        out.total.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(float(out.lm))
    assert losses[-1] < losses[0] - 0.1, losses
    export = str(tmp_path / "hf")
    export_hf(model, tok, export, rank=0, source_url=original)
    before, after = checkpoint_architecture(original), checkpoint_architecture(export)
    assert (after.architectures, after.wrapped, after.family) == (
        before.architectures,
        before.wrapped,
        before.family,
    )

    def names(path):
        with safe_open(f"{path}/model.safetensors", "pt") as f:
            return set(f.keys())

    assert names(export) == names(original)
    config = [json.load(open(f"{path}/config.json")) for path in (export, original)]
    assert config[0] == config[1]  # red before: a dense export gained output_router_logits
    loaded = AutoModelForCausalLM.from_pretrained(export, dtype=torch.float32)
    assert type(loaded) is type(model)
    trained = dict(model.named_parameters())
    for name, param in loaded.named_parameters():
        assert torch.equal(param, trained[name]), name


def test_rule_metrics_and_rewards_score_the_observation_alone():
    """An answer with the world model's think block scores as its observation does."""
    from agentworld.scoring.metrics import rule_metrics

    reference = '{"files": ["a.txt"]}'
    observation = '{"files": ["a.txt", "b.txt"]}'
    # As the family's template leaves it: the prompt opened the block.
    for raw in (
        f"<think>\nlist it\n</think>\n\n{observation}",
        f"list it\n</think>\n\n{observation}",
    ):
        assert rule_metrics(raw, reference) == rule_metrics(observation, reference)
