"""Near-duplicate throughput: prepare's MinHash-LSH on Ray Data (features at ingest, then
bucket/verify/components group-bys) against datasketch's MinHashLSH in one process,
on the same generated corpus with planted duplicates; and 1 vs 2 Ray workers.

Both sides shingle the same words (5-grams) with 128 permutations at threshold 0.8;
datasketch clusters its LSH candidates without verification, ours verifies each
candidate pair by its actual Jaccard. Figures: records/s, the ratios, and precision /
recall of the removed records against the planted truth.

Run:  python bench/bench_dedup.py [--base 8000]   -> bench/results/dedup.json
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


def datasketch_dedup(records, threshold: float, num_perm: int) -> tuple[set[str], float]:
    """Removed ids and seconds: MinHash + LSH insert/query + union-find, one process."""
    import numpy as np
    from datasketch import MinHash, MinHashLSH

    from agentworld.data.components import components_in_memory
    from agentworld.data.text import words

    t0 = time.perf_counter()
    lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)
    hashes = {}
    for r in records:
        w = words(r.text())
        shingles = {" ".join(w[i : i + 5]).encode() for i in range(max(1, len(w) - 4))}
        m = MinHash(num_perm=num_perm)
        m.update_batch(list(shingles))
        lsh.insert(r.id, m)
        hashes[r.id] = m
    index = {r.id: i for i, r in enumerate(records)}
    edges = [(index[r.id], index[o]) for r in records for o in lsh.query(hashes[r.id]) if o != r.id]
    labels = components_in_memory(np.array(edges)) if edges else {}
    clusters: dict[int, list[str]] = {}
    for i, root in labels.items():
        clusters.setdefault(root, []).append(records[i].id)
    removed = set()
    for members in clusters.values():  # the same preference as ours: keep the original
        members.sort(key=lambda t: (not t.startswith("base-"), t))
        removed.update(members[1:])
    return removed, time.perf_counter() - t0


def ours(url: str, workers: int) -> tuple[set[str], float, dict]:
    import ray

    from agentworld.data import DataConfig
    from agentworld.data.dedup import find_duplicates
    from agentworld.data.ingest import ingest_dataset
    from agentworld.data.labels import label_block
    from agentworld.data.ray_env import data_context
    from agentworld.data.stages import clean_records

    cfg = DataConfig(num_workers=workers, progress_bars=False)
    t0 = time.perf_counter()
    with data_context(cfg):
        rows = ingest_dataset([url], cfg, {}, None).materialize()
        labels, stats = find_duplicates(
            rows.map_batches(clean_records, batch_format="pyarrow"), cfg, log=lambda m: None
        )
    seconds = time.perf_counter() - t0
    import pyarrow as pa

    table = label_block(pa.concat_tables(ray.get(rows.to_arrow_refs())), labels)
    removed = {
        t
        for t, s in zip(
            table.column("trajectory_id").to_pylist(),
            table.column("state").to_pylist(),
            strict=True,
        )
        if s.endswith("duplicate")
    }
    return removed, seconds, stats.__dict__


def start_ray(attempts: int = 4) -> None:
    """A local cluster; start-up is retried because a busy 2-core machine can miss
    Ray's fixed 30 s raylet registration window."""
    import ray

    for attempt in range(attempts):
        try:
            ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False)
            return
        except Exception:
            ray.shutdown()
            if attempt == attempts - 1:
                raise
            time.sleep(5)


def scores(removed: set[str], truth: set[str]) -> dict[str, float]:
    tp = len(removed & truth)
    return {"precision": tp / max(len(removed), 1), "recall": tp / max(len(truth), 1)}


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--base", type=int, default=8000, help="original trajectories (copies are added)"
    )
    args = p.parse_args()
    import ray

    from agentworld.data.synthetic import synthetic_corpus
    from agentworld.io import write_jsonl

    corpus = synthetic_corpus(
        args.base,
        n_exact=args.base // 20,
        n_near=args.base // 10,
        n_far=args.base // 20,
        n_families=10,
    )
    n = len(corpus.records)
    tmp = tempfile.mkdtemp(prefix="bench-dedup-")
    for i in range(4):
        write_jsonl(os.path.join(tmp, "corpus", f"part-{i:05d}.jsonl"), corpus.records[i::4])
    warm = os.path.join(tmp, "warm")
    write_jsonl(os.path.join(warm, "part-00000.jsonl"), corpus.records[:200])
    start_ray()
    ours(warm, 2)  # start the workers once: both measured runs find them warm
    base_removed, base_s = datasketch_dedup(corpus.records, 0.8, 128)
    one_removed, one_s, _ = ours(os.path.join(tmp, "corpus"), 1)
    two_removed, two_s, stats = ours(os.path.join(tmp, "corpus"), 2)
    ray.shutdown()
    result = {
        "records": n,
        "datasketch_records_per_s": n / base_s,
        "ours_1_worker_records_per_s": n / one_s,
        "ours_2_workers_records_per_s": n / two_s,
        "ratio_ours_2_workers_vs_datasketch": base_s / two_s,
        "ratio_2_vs_1_workers": one_s / two_s,
        "datasketch_scores": scores(base_removed, corpus.duplicate_ids),
        "ours_scores": scores(two_removed, corpus.duplicate_ids),
        "same_removed_1_vs_2_workers": one_removed == two_removed,
        "dedup_stats": stats,
        "cpus": os.cpu_count(),
    }
    write_result("dedup", result)
    print(json.dumps(result, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
