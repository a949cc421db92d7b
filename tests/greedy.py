"""Checks shared by the vLLM tests: a greedy vLLM completion is what transformers
computes on the same fp32 weights, token by token; the text transformers writes greedily."""

from __future__ import annotations

import pytest

# fp32 on both sides: logits differ by float error only (kernels, summation order).
TIE = 1e-4
LOGPROB = 1e-3


def assert_greedy_agrees(model, tok, prompt: str, completion) -> None:
    """``completion`` (a vLLM CompletionOutput asked with ``logprobs>=1``, temperature 0)
    against ``model`` run on the prompt plus the tokens vLLM chose: at every position
    vLLM's token is transformers' argmax, or ties it within float error, and both give
    it the same log-probability."""
    import torch

    prompt_ids = tok(prompt, add_special_tokens=False).input_ids
    chosen = list(completion.token_ids)
    assert chosen, "vLLM generated nothing"
    ids = torch.tensor([prompt_ids + chosen])
    with torch.no_grad():
        logits = model(input_ids=ids, use_cache=False).logits[0].float()
    # Row n - 1 + i predicts the i-th generated token.
    rows = logits[len(prompt_ids) - 1 : len(prompt_ids) - 1 + len(chosen)]
    logprobs = torch.log_softmax(rows, dim=-1)
    for i, (row, token) in enumerate(zip(rows, chosen, strict=True)):
        gap = float(row.max() - row[token])
        assert gap < TIE, (i, token, int(row.argmax()), gap)
        vllm_logprob = completion.logprobs[i][token].logprob
        assert vllm_logprob == pytest.approx(float(logprobs[i, token]), abs=LOGPROB), i


def greedy_text(model, tok, ids: list[int], max_new_tokens: int) -> str:
    """What transformers writes greedily after the prompt ``ids``, decoded as vLLM
    decodes its output (special tokens left out)."""
    import torch

    with torch.no_grad():
        out = model.generate(
            torch.tensor([ids]), max_new_tokens=max_new_tokens, do_sample=False, top_p=None
        )
    return tok.decode(out[0, len(ids) :], skip_special_tokens=True)
