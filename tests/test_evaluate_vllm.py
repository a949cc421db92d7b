"""Local batch inference: vLLM (CPU build) engines on Ray Data over the tiny checkpoint,
through the job, then rule-metric scoring; and how over-long prompts are cut."""

from __future__ import annotations

import json

import pytest

from agentworld.evaluate.placement import fit_prompt
from agentworld.io import read_jsonl, write_jsonl
from agentworld.schema import trajectory_to_rows
from agentworld.schema.examples import sample_trajectories
from tests.test_evaluate_score import load_job


def test_fit_prompt_drops_oldest_turns_first(tiny_checkpoint):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_checkpoint)
    messages = [{"role": "system", "content": "A bash shell."}]
    for i in range(4):
        messages += [
            {"role": "user", "content": f"echo {i}"},
            {"role": "assistant", "content": f"{i}\n$ "},
        ]
    messages.append({"role": "user", "content": "ls"})

    def n_tokens(msgs):
        text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        return len(tok(text, add_special_tokens=False)["input_ids"])

    full, _ = fit_prompt(tok, messages, 10_000)
    assert len(full) == n_tokens(messages)
    two_turns = [messages[0], *messages[5:]]  # turns 1 and 2 dropped, 3 and 4 kept
    ids, err = fit_prompt(tok, messages, n_tokens(two_turns))
    assert err is None and len(ids) == n_tokens(two_turns)
    ids, err = fit_prompt(tok, messages, 3)
    assert ids == [] and "exceeds max_model_len - max_tokens = 3" in err


@pytest.mark.slow
def test_vllm_on_ray_data_infer_and_score(ray_cluster, tiny_checkpoint, tmp_path):
    rows = [r for t in sample_trajectories(4, seed=5) for r in trajectory_to_rows(t)]
    write_jsonl(str(tmp_path / "awb" / "terminal_test.jsonl"), rows)
    run = str(tmp_path / "run")
    job = load_job()
    args = ["infer", "--input", str(tmp_path / "awb"), "--model", tiny_checkpoint, "--out", run]
    args += [
        "--set",
        "evaluate.infer.sampling.max_tokens=8",
        "--set",
        "evaluate.infer.flush_every=4",
    ]
    assert job.main(args) == 0

    predictions = read_jsonl(f"{run}/infer/predictions.jsonl")
    assert [p["key"] for p in predictions] == [f"{r['id']}#{r['turn_idx']}" for r in rows]
    assert all(p["finish_reason"] in ("length", "stop") for p in predictions)
    assert any(p["output"] for p in predictions)
    manifest = json.loads((tmp_path / "run" / "infer" / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["counts"]["predicted"] == len(rows)
    assert job.main(args) == 0  # complete: nothing redone
    assert json.loads((tmp_path / "run" / "infer" / "manifest.json").read_text()) == manifest

    assert job.main(["score", "--out", run]) == 0
    summary = json.loads((tmp_path / "run" / "score" / "summary.json").read_text())
    assert summary["model"] == "/".join(tiny_checkpoint.rstrip("/").split("/")[-2:])
    rule = summary["domains"]["terminal"]["rule"]
    assert summary["domains"]["all"]["predictions"] == len(rows)
    assert 0.0 <= rule["rouge_l"] <= 100.0 and rule["json_valid"] is None
