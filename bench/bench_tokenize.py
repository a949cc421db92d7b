"""Tokenization throughput: prepare's tokenize step (chat template, per-message
encoding, CPT document + every SFT sample with its loss mask) against a bare
``tokenizers`` ``encode_batch`` loop over the same trajectories, already rendered to
text, in one process. Tokens counted: the CPT tokens (the whole trajectory), the same
on both sides.

Run:  python bench/bench_tokenize.py [--records 2000]   -> bench/results/tokenize.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

from _results import write_result

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(ROOT, "platform"))


def bare_loop(tokenizer, texts: list[str], batch: int) -> tuple[int, float]:
    backend = tokenizer.backend_tokenizer
    t0 = time.perf_counter()
    tokens = 0
    for i in range(0, len(texts), batch):
        tokens += sum(
            len(e.ids) for e in backend.encode_batch(texts[i : i + batch], add_special_tokens=False)
        )
    return tokens, time.perf_counter() - t0


def ours(url: str, block, seq_len: int, batch: int) -> tuple[int, int, float]:
    from agentworld.data.samples import tokenize_block

    t0 = time.perf_counter()
    cpt = sft = 0
    for i in range(0, block.num_rows, batch):
        out = tokenize_block(
            block.slice(i, batch),
            tokenizer_url=url,
            storage_options={},
            seq_len=seq_len,
            truncation="left",
            eval_threshold=0.0,
        ).to_pylist()
        cpt += sum(r["n_tokens"] for r in out if r["kind"] == "cpt")
        sft += sum(1 for r in out if r["kind"] == "sft" and r["drop_reason"] is None)
    return cpt, sft, time.perf_counter() - t0


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--records", type=int, default=2000)
    p.add_argument("--batch", type=int, default=256)
    args = p.parse_args()
    import pyarrow as pa

    from agentworld.data.synthetic import synthetic_corpus
    from agentworld.data.tokenize import render, trajectory_messages
    from agentworld.data.vocab import load_tokenizer, save_tokenizer, train_on_texts

    trajs = synthetic_corpus(args.records, n_exact=0, n_near=0, n_far=0, n_families=0).records
    trajs = [t for t in trajs if t.id.startswith("base-")]
    texts = [
        s
        for t in trajs[:300]
        for s in (t.environment, *(x for u in t.turns for x in (u.action, u.observation)))
    ]
    url = tempfile.mkdtemp(prefix="bench-tok-")
    save_tokenizer(train_on_texts(texts, 4096), url, {})
    tokenizer = load_tokenizer(url, {})
    block = pa.table(
        {
            "uid": list(range(len(trajs))),
            "record": [t.to_json() for t in trajs],
            "split_hash": [0.5] * len(trajs),
        }
    )
    rendered = [render(tokenizer, trajectory_messages(t)) for t in trajs]
    ours(url, block.slice(0, 8), 1024, args.batch)  # load the tokenizer and layout once
    base_tokens, base_s = bare_loop(tokenizer, rendered, args.batch)
    our_tokens, sft, our_s = ours(url, block, 1 << 20, args.batch)
    result = {
        "records": len(trajs),
        "tokens": base_tokens,
        "same_token_count": base_tokens == our_tokens,
        "sft_samples": sft,
        "bare_encode_batch_tokens_per_s": base_tokens / base_s,
        "ours_tokens_per_s": our_tokens / our_s,
        "ratio_ours_vs_bare": base_s / our_s,
        "note": "ours also renders the chat template, checks it per trajectory and builds every SFT sample and mask",
    }
    write_result("tokenize", result)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
