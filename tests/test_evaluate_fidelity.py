"""Sim-vs-real fidelity on trajectories recorded from real environments: a simulator
endpoint that reproduces the real terminal observations exactly and answers the other
domains wrongly gets exactly that, per domain, in the report (and judge scores)."""

from __future__ import annotations

import json

import pytest

from agentworld.evaluate.items import load_items
from tests.greedy import greedy_text
from tests.test_evaluate_helpers import GOOD_VERDICT, Reply, ScriptedChatServer
from tests.test_evaluate_judge import SCORES
from tests.test_evaluate_score import load_job


@pytest.mark.slow
def test_fidelity_report_on_collected_trajectories(collected_corpus, tmp_path):
    items = load_items(collected_corpus).items
    real = {json.dumps(i.messages, sort_keys=True): i for i in items}
    domains = {i.domain for i in items}
    assert "terminal" in domains and len(domains) > 1

    def simulator(body: dict, n: int) -> Reply:
        if body["messages"][0]["content"].startswith("You judge"):
            return Reply(text=GOOD_VERDICT)
        item = real[json.dumps(body["messages"], sort_keys=True)]
        return Reply(text=item.reference if item.domain == "terminal" else "no such thing")

    run = tmp_path / "fidelity"
    with ScriptedChatServer(simulator) as server:
        args = ["fidelity", "--input", collected_corpus, "--endpoint", server.base_url]
        args += ["--out", str(run), "--name", "sim", "--judge-url", server.base_url]
        assert load_job().main(args) == 0

    summary = json.loads((run / "score" / "summary.json").read_text())
    assert set(summary["domains"]) == domains | {"all"} and summary["model"] == "sim"
    for domain in domains:
        entry = summary["domains"][domain]
        assert entry["rule"]["exact_match"] == (100.0 if domain == "terminal" else 0.0)
        assert entry["judge"]["valid"] == entry["predictions"] > 0
    assert summary["domains"]["all"]["predictions"] == len(items)
    assert summary["domains"]["all"]["judge"]["factuality"] == (SCORES["factuality"] - 1) * 25
    table = (run / "score" / "table.md").read_text()
    assert table.startswith("## Sim-vs-real fidelity: sim")
    assert (run / "score" / "chart.png").exists()


@pytest.mark.parametrize("name", ["debug_cpu", "small_cpu", "medium_cpu"])
def test_cpu_recipes_evaluate_as_long_as_sft_trains(name):
    """An observation SFT trains on can be nearly ``seq_len`` tokens; evaluation must be
    able to write it whole, after any prompt SFT trains on (at 512 new tokens the demo's
    web observations, 603 tokens at the median, were all cut short)."""
    from agentworld.recipes import get_recipe

    r = get_recipe(name)
    infer = r.evaluate.infer
    assert infer.sampling.max_tokens >= r.train.seq_len
    assert infer.sampling.max_tokens + r.train.seq_len <= infer.vllm.engine.max_model_len


def test_the_fidelity_recipe_rolls_out_whatever_sft_trains_on():
    """small_cpu's RL takes every prompt SFT trains on and writes observations of half a
    sequence: at 768 prompt and 48 new tokens it left out 1104 of bench_fidelity's 2304
    training contexts (every long search page), and trained on short answers only."""
    from agentworld.recipes import get_recipe

    r = get_recipe("small_cpu")
    rollout = r.rl.rollout
    assert rollout.max_prompt_tokens >= r.train.seq_len
    assert rollout.max_new_tokens >= r.train.seq_len // 2
    assert rollout.max_prompt_tokens + rollout.max_new_tokens <= rollout.engine.max_model_len


@pytest.mark.slow
def test_fidelity_of_a_real_checkpoint_through_vllm(
    ray_cluster, collected_corpus, tiny_checkpoint, tmp_path
):
    """The tiny checkpoint predicts held-out collected trajectories through vLLM on Ray
    Data: the report holds every domain, the baselines beside the model (retrieval from
    the other half of the corpus), and scores that are those of the predictions the
    checkpoint made (recomputed here from the predictions file; the first predictions
    regenerated greedily in transformers)."""
    import torch

    from agentworld.evaluate.placement import fit_prompt
    from agentworld.io import read_jsonl, read_records, write_jsonl
    from agentworld.model import load_model, load_tokenizer
    from agentworld.scoring.metrics import rule_metrics

    records = read_records(collected_corpus).records
    held_out, train = str(tmp_path / "held-out"), str(tmp_path / "train")
    write_jsonl(f"{held_out}/part-00000.jsonl", records[::4])
    write_jsonl(f"{train}/part-00000.jsonl", [r for i, r in enumerate(records) if i % 4])
    run, max_tokens, max_len = tmp_path / "fidelity", 8, 1024
    args = ["fidelity", "--input", held_out, "--model", tiny_checkpoint, "--out", str(run)]
    args += ["--name", "tiny", "--baseline-train", train]
    args += ["--set", f"evaluate.infer.sampling.max_tokens={max_tokens}"]
    args += ["--set", "evaluate.infer.max_items=16"]
    args += ["--set", f"evaluate.infer.vllm.engine.max_model_len={max_len}"]
    assert load_job().main(args) == 0

    predictions = read_jsonl(str(run / "infer" / "predictions.jsonl"))
    summary = json.loads((run / "score" / "summary.json").read_text())
    domains = {p["domain"] for p in predictions}
    assert summary["model"] == "tiny" and set(summary["domains"]) == domains | {"all"}
    assert len(predictions) == summary["domains"]["all"]["predictions"] == 16
    assert set(summary["baselines"]) == {"copy_previous", "retrieval"}
    table = (run / "score" / "table.md").read_text()
    assert "### Against baselines" in table and "retrieval" in table
    for name, scored in [("model", summary["domains"]), *summary["baselines"].items()]:
        rows = predictions
        if name != "model":
            rows = read_jsonl(str(run / "score" / "baselines" / f"{name}.jsonl"))
        for domain in domains | {"all"}:
            mine = [r for r in rows if domain in ("all", r["domain"])]
            per_item = [rule_metrics(r["output"], r["reference"]) for r in mine]
            for metric in ("exact_match", "char_f1", "rouge_l"):
                expected = 100 * sum(m[metric] for m in per_item) / len(per_item)
                got = scored[domain]["rule"][metric]
                assert got == pytest.approx(expected), (name, domain, metric)
    assert (
        summary["margin"]["all"]["char_f1"]["model"] == summary["domains"]["all"]["rule"]["char_f1"]
    )

    # The predictions are the checkpoint's own: greedy decoding in transformers on the
    # same prompt (as infer fits it) writes the same text.
    tok, model = load_tokenizer(tiny_checkpoint), load_model(tiny_checkpoint, dtype=torch.float32)
    model.eval()
    for p in predictions[:3]:
        ids, err = fit_prompt(tok, p["messages"], max_len - max_tokens)
        assert err is None
        assert p["output"] == greedy_text(model, tok, ids, max_tokens), p["key"]
