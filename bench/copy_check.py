"""Does a world model copy? (issue 14)

A span of ordinary tokens in random order (drawn with the corpus's frequencies) is put
twice into held-out text of the prepared corpus:
once after the first third of a window, again after the second. The model reads the
whole, teacher-forced, and the check counts the repeat's tokens after its first (the
first cannot be known: nothing marks where the repeat begins) that it predicts. The
control puts a different random span first, so that only the prior remains: a model
that copies scores far above its control, one that does not scores near 0 on both.

Run:  python bench/copy_check.py PREPARED_DIR MODEL_HF_DIR [MODEL_HF_DIR ...]
          [--examples 64] [--span 8] [--window 256]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch

from agentworld.data.samples import copy_tokens
from agentworld.model import load_model, load_tokenizer
from gpu_fidelity_probe import load_rows


def windows(prepared: str, window: int, count: int, seed: int) -> list[np.ndarray]:
    """``count`` windows of real text, one document each, from the held-out CPT rows."""
    rows = load_rows(Path(prepared, "packed", "cpt", "eval"), "cpu")
    rng = np.random.default_rng(seed)
    docs = []
    for r in range(rows.input_ids.shape[0]):
        starts = (rows.position_ids[r] == 0).nonzero().flatten().tolist()
        ends = [*starts[1:], int(rows.valid[r].sum())]
        for a, b in zip(starts, ends, strict=True):
            if b - a >= window:
                at = a + int(rng.integers(0, b - a - window + 1))
                docs.append(rows.input_ids[r, at : at + window].numpy())
    if not docs:
        raise SystemExit(f"no held-out document of {window} tokens in {prepared}")
    picked = rng.choice(len(docs), size=count, replace=len(docs) < count)  # reused: new spans
    return [docs[i] for i in picked]


def copied(model, texts: list[np.ndarray], ordinary: np.ndarray, span: int, seed: int) -> dict:
    """Share of the repeat's tokens (after the first) predicted, with the span seen
    before (``copy``) and with another span in its place (``control``). Span tokens are
    drawn from the texts' ordinary tokens, so with the corpus's frequencies: a span like
    a query, in an order no corpus holds."""
    rng = np.random.default_rng(seed)
    pool = np.concatenate(texts)
    pool = pool[np.isin(pool, ordinary)]
    hits = {"copy": [], "control": []}
    for text in texts:
        first, second = len(text) // 3, 2 * len(text) // 3
        target = rng.choice(pool, size=span)
        for arm in hits:
            seen = target if arm == "copy" else rng.choice(pool, size=span)
            ids = np.concatenate([text[:first], seen, text[first:second], target])
            x = torch.from_numpy(ids.astype(np.int64))[None]
            with torch.no_grad():
                pred = model(input_ids=x, use_cache=False).logits[0].argmax(-1).numpy()
            at = len(ids) - span  # where the repeat starts
            hits[arm].extend(pred[at : len(ids) - 1] == ids[at + 1 :])
    return {arm: round(float(np.mean(h)), 4) for arm, h in hits.items()}


def check(prepared: str, models: dict[str, str], *, examples=64, span=8, window=256, seed=0):
    """{name: copied(...)} for each HF export in ``models``, on the same held-out texts
    and spans of the prepare output ``prepared``."""
    ordinary = copy_tokens(load_tokenizer(str(Path(prepared, "tokenizer")))).ordinary
    texts = windows(prepared, window, examples, seed)
    return {
        name: copied(load_model(path, dtype=torch.float32).eval(), texts, ordinary, span, seed)
        for name, path in models.items()
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("prepared", help="the prepare output (its tokenizer and held-out CPT rows)")
    p.add_argument("models", nargs="+", help="HF exports to check")
    p.add_argument("--examples", type=int, default=64)
    p.add_argument("--span", type=int, default=8)
    p.add_argument("--window", type=int, default=256)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    sizes = {"examples": a.examples, "span": a.span, "window": a.window, "seed": a.seed}
    found = check(a.prepared, {path: path for path in a.models}, **sizes)
    for path, result in found.items():
        print(json.dumps({"model": path, "examples": a.examples, "span": a.span, **result}))


if __name__ == "__main__":
    main()
