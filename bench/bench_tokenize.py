"""Tokenization throughput: prepare's tokenize step (parse the record, encode every
message once, assemble the CPT document and every SFT sample with its loss mask and
message list) against a bare ``tokenizers`` ``encode_batch`` over the same trajectories
rendered by the chat template, in one process.

Timed the same way: both start from the same block of record JSON lines, in the same
batches, inside their timer (the baseline parses each record, renders it with
``apply_chat_template`` and encodes the text; ours runs ``tokenize_block`` and reads
its counts with Arrow compute, no Python lists). Each side runs three times, alternated,
and its best time counts. Tokens counted: the CPT tokens (the whole trajectory), the
same on both sides. Also given: the ratio against the encode alone (text rendered
before the timer), a lower bound that ignores the template.

Threads: the goal's ratio is measured with the tokenizer on one thread on both sides,
as prepare runs it (one Ray worker per core, TOKENIZERS_PARALLELISM=false in every job:
agentworld.cluster.ENV_DEFAULTS). The same ratio with the tokenizer's own threads on
every core is also given: there the bare loop is almost all parallel encode while ours
keeps its serial Python (parse, samples, masks), so it is lower on 2 cores.

Run:  python bench/bench_tokenize.py [--records 2000] [--quick]   -> bench/results/tokenize.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

from _results import goal, write_result

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def _messages(record: dict) -> list[dict[str, str]]:
    out = [{"role": "system", "content": record["environment"]}]
    for t in record["turns"]:
        out += [
            {"role": "user", "content": t["action"]},
            {"role": "assistant", "content": t["observation"]},
        ]
    return out


def bare(tokenizer, lines: list[str], batch: int) -> tuple[int, float]:
    """Parse, render with the chat template, encode_batch: tokens and seconds."""
    backend = tokenizer.backend_tokenizer
    t0 = time.perf_counter()
    tokens = 0
    for i in range(0, len(lines), batch):
        texts = [
            tokenizer.apply_chat_template(_messages(json.loads(r)), tokenize=False)
            for r in lines[i : i + batch]
        ]
        tokens += sum(len(e.ids) for e in backend.encode_batch(texts, add_special_tokens=False))
    return tokens, time.perf_counter() - t0


def encode_only(tokenizer, texts: list[str], batch: int) -> tuple[int, float]:
    backend = tokenizer.backend_tokenizer
    t0 = time.perf_counter()
    tokens = 0
    for i in range(0, len(texts), batch):
        tokens += sum(
            len(e.ids) for e in backend.encode_batch(texts[i : i + batch], add_special_tokens=False)
        )
    return tokens, time.perf_counter() - t0


def ours(url: str, block, seq_len: int, batch: int) -> tuple[int, int, float]:
    """CPT tokens, SFT samples, seconds."""
    import pyarrow.compute as pc

    from agentworld.data.sample_rows import tokenize_block

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
        )
        is_cpt = pc.equal(out.column("kind"), "cpt")
        cpt += pc.sum(out.filter(is_cpt).column("n_tokens")).as_py() or 0
        kept_sft = pc.and_(pc.invert(is_cpt), pc.is_null(out.column("drop_reason")))
        sft += pc.sum(kept_sft.cast("int64")).as_py() or 0
    return cpt, sft, time.perf_counter() - t0


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--records", type=int, default=2000)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--quick", action="store_true", help="300 records")
    args = p.parse_args()
    n_records = 300 if args.quick else args.records
    import pyarrow as pa

    from agentworld.data.chat_tokens import render, trajectory_messages
    from agentworld.data.synthetic import synthetic_corpus
    from agentworld.data.vocab import load_tokenizer, save_tokenizer, train_on_texts

    trajs = synthetic_corpus(n_records, n_exact=0, n_near=0, n_far=0, n_families=0).records
    trajs = [t for t in trajs if t.id.startswith("base-")]
    texts = [
        s
        for t in trajs[:300]
        for s in (t.environment, *(x for u in t.turns for x in (u.action, u.observation)))
    ]
    url = tempfile.mkdtemp(prefix="bench-tok-")
    save_tokenizer(train_on_texts(texts, 4096), url, {})
    tokenizer = load_tokenizer(url, {})
    lines = [t.to_json() for t in trajs]
    block = pa.table(
        {"uid": list(range(len(trajs))), "record": lines, "split_hash": [0.5] * len(trajs)}
    )
    rendered = [render(tokenizer, trajectory_messages(t)) for t in trajs]
    ours(url, block.slice(0, 8), 1024, args.batch)  # load the tokenizer and layout once

    def best_of_three() -> tuple[float, float, float]:
        nonlocal base_tokens, enc_tokens, our_tokens, sft
        base_s = enc_s = our_s = float("inf")
        for _ in range(3):
            base_tokens, s = bare(tokenizer, lines, args.batch)
            base_s = min(base_s, s)
            enc_tokens, s = encode_only(tokenizer, rendered, args.batch)
            enc_s = min(enc_s, s)
            our_tokens, sft, s = ours(url, block, 1 << 20, args.batch)
            our_s = min(our_s, s)
        return base_s, enc_s, our_s

    base_tokens = enc_tokens = our_tokens = sft = 0
    saved = os.environ.get("TOKENIZERS_PARALLELISM")
    os.environ["TOKENIZERS_PARALLELISM"] = "true"  # read by tokenizers at each batch call
    all_threads = best_of_three()
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    base_s, enc_s, our_s = best_of_three()
    if saved is None:
        os.environ.pop("TOKENIZERS_PARALLELISM")
    else:
        os.environ["TOKENIZERS_PARALLELISM"] = saved
    ratio = base_s / our_s
    result = {
        "records": len(trajs),
        "quick": args.quick,
        "tokens": base_tokens,
        "same_token_count": base_tokens == our_tokens == enc_tokens,
        "sft_samples": sft,
        "bare_tokens_per_s": base_tokens / base_s,
        "encode_only_tokens_per_s": enc_tokens / enc_s,
        "ours_tokens_per_s": our_tokens / our_s,
        "ratio_ours_vs_bare": ratio,
        "ratio_ours_vs_encode_only": enc_s / our_s,
        "tokenizer_threads": 1,
        "all_threads": {
            "cores": os.cpu_count(),
            "bare_tokens_per_s": base_tokens / all_threads[0],
            "ours_tokens_per_s": our_tokens / all_threads[2],
            "ratio_ours_vs_bare": all_threads[0] / all_threads[2],
        },
    }
    goals = [
        goal(
            "tokenize_vs_bare_encode",
            ratio,
            ">=",
            0.9,
            "tokenize throughput vs parse+render+encode_batch, one tokenizer thread each "
            f"as in prepare's workers (all {os.cpu_count()} cores' threads: "
            f"{all_threads[0] / all_threads[2]:.2f})",
        )
    ]
    write_result("tokenize", result, goals)
    print(json.dumps({**result, "goals": goals}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
