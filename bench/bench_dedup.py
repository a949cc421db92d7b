"""Near-duplicate throughput: prepare's dedup on Ray (its ingest step's tasks read,
featurize and write the records to staging files; its dedup step reads them back and
runs exact + MinHash-LSH near-dup) against datasketch's MinHashLSH in one process, both
starting from the same JSONL files of a generated corpus with planted duplicates; and
1 vs 2 Ray workers on the same files.

Like for like: both sides read and parse the same files inside their timer, shingle
the same words (word 5-grams of the same normalized text), use 128 permutations and
threshold 0.8, and keep the same record of a cluster (the original). datasketch
clusters its LSH candidates without verification; ours verifies every candidate pair
by its actual Jaccard, validates every record, and writes and reads its staging
files inside its timer. The Ray cluster gets as many
CPUs as the machine has cores. Figures: records/s, the ratios, and precision / recall
of the removed records against the planted truth; also the CPU-seconds each side
spent (datasketch's process; ours: the driver and this cluster's workers), which a
shared machine's load does not change, and the ratio they would give on two idle
cores (ours spread over both, datasketch on one). Beside 1 vs 2 workers, the ceiling
this machine sets on it: ingest's kernel (read, validate, featurize; most of the time)
over the same files in one plain process vs two.

Run:  python bench/bench_dedup.py [--base 52000] [--repeat 3] [--quick]   -> bench/results/dedup.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

from _results import goal, write_result

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def datasketch_dedup(
    files: list[str], threshold: float, num_perm: int
) -> tuple[set[str], float, float]:
    """Removed ids, seconds and CPU-seconds: read + parse the files, MinHash + LSH
    insert/query + union-find, one process."""
    import numpy as np
    from datasketch import MinHash, MinHashLSH

    from agentworld.data.components import components_in_memory
    from agentworld.data.text import full_text, words

    t0, c0 = time.perf_counter(), time.process_time()
    records = []
    for path in files:
        with open(path, encoding="utf-8") as f:
            records.extend(json.loads(line) for line in f if line.strip())
    lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)
    hashes = []
    for i, r in enumerate(records):
        w = words(full_text(r))
        shingles = {" ".join(w[j : j + 5]).encode() for j in range(max(1, len(w) - 4))}
        m = MinHash(num_perm=num_perm)
        m.update_batch(list(shingles))
        lsh.insert(i, m)
        hashes.append(m)
    edges = [(i, o) for i, m in enumerate(hashes) for o in lsh.query(m) if o != i]
    labels = components_in_memory(np.array(edges)) if edges else {}
    clusters: dict[int, list[str]] = {}
    for i, root in labels.items():
        clusters.setdefault(root, []).append(records[i]["id"])
    removed = set()
    for members in clusters.values():  # the same preference as ours: keep the original
        members.sort(key=lambda t: (not t.startswith("base-"), t))
        removed.update(members[1:])
    return removed, time.perf_counter() - t0, time.process_time() - c0


def _ingest_kernel(files: list[str]) -> None:
    """What one ingest task does to its files (read, validate, featurize), no Ray."""
    from agentworld.data import DataConfig
    from agentworld.data.features import featurize
    from agentworld.data.ingest_rows import plan_ranges, read_range
    from agentworld.data.steps.ingest import feature_spec, reader_spec

    cfg = DataConfig()
    spec, features = reader_spec(cfg, {}), feature_spec(cfg)
    for r in plan_ranges(files, split_bytes=cfg.split_bytes, storage_options={}):
        for block in read_range(r, spec):
            featurize(block, features, None)


def machine_scaling(files: list[str]) -> dict[str, float]:
    """The ceiling of 1 -> 2 workers on this machine: ingest's kernel over the same
    files in one plain process, then in two forked processes (half the files each).
    What it loses to 2 is the machine's (shared cores, memory bandwidth), not Ray's."""
    import multiprocessing

    _ingest_kernel(files[:1])  # imports and compiled kernels loaded before the fork
    t0 = time.perf_counter()
    _ingest_kernel(files)
    one = time.perf_counter() - t0
    t0 = time.perf_counter()
    procs = [
        multiprocessing.get_context("fork").Process(target=_ingest_kernel, args=(files[i::2],))
        for i in range(2)
    ]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join()
    two = time.perf_counter() - t0
    return {"one_process_seconds": one, "two_processes_seconds": two, "scaling": one / two}


def cluster_cpu_seconds() -> float:
    """CPU-seconds used so far by this process and the processes it started (the
    local Ray cluster: raylet, workers), dead ones excluded."""
    import psutil

    me = psutil.Process()
    total = sum(me.cpu_times()[:2])
    for p in me.children(recursive=True):
        try:
            total += sum(p.cpu_times()[:2])
        except psutil.Error:
            pass
    return total


def ours(url: str, workers: int) -> tuple[set[str], dict[str, float], dict]:
    """Removed ids, seconds (ingest, dedup, total, cpu) and dedup stats, through
    prepare's own path: the ingest step's tasks write the featurized records to staging
    files, and dedup reads them back from there."""
    import pyarrow as pa

    from agentworld.data import DataConfig
    from agentworld.data.duplicates import find_duplicates
    from agentworld.data.labels import label_block
    from agentworld.data.placement import data_context, staging_files
    from agentworld.data.steps.dedup import clean_records_of
    from agentworld.data.steps.ingest import ingest_to_staging
    from agentworld.io import read_parquet

    cfg = DataConfig(num_workers=workers, progress_bars=False)
    staging = tempfile.mkdtemp(prefix="bench-dedup-staging-")
    c0 = cluster_cpu_seconds()
    t0 = time.perf_counter()
    with data_context(cfg):
        ingest_to_staging([url], cfg, {}, None, url=staging, staging_options={}, log=lambda m: None)
        t1 = time.perf_counter()
        labels, stats = find_duplicates(
            clean_records_of(staging, {}, workers=cfg.num_workers), cfg, log=lambda m: None
        )
    t2 = time.perf_counter()
    cpu = cluster_cpu_seconds() - c0
    table = label_block(
        pa.concat_tables([read_parquet(f) for f in staging_files(staging, {})]), labels
    )
    shutil.rmtree(staging, ignore_errors=True)
    removed = {
        t
        for t, s in zip(
            table.column("trajectory_id").to_pylist(),
            table.column("state").to_pylist(),
            strict=True,
        )
        if s.endswith("duplicate")
    }
    seconds = {"ingest": t1 - t0, "dedup": t2 - t1, "total": t2 - t0, "cpu": cpu}
    return removed, seconds, stats.__dict__


def start_ray(attempts: int = 4) -> None:
    """A local cluster with one CPU per core; start-up is retried because a busy
    machine can miss Ray's fixed raylet registration window."""
    import ray

    for attempt in range(attempts):
        try:
            ray.init(
                num_cpus=os.cpu_count(),
                include_dashboard=False,
                log_to_driver=False,
                runtime_env={"env_vars": {"PYTHONPATH": os.path.join(ROOT, "platform")}},
            )
            return
        except Exception:
            ray.shutdown()
            if attempt == attempts - 1:
                raise
            time.sleep(5)


def scores(removed: set[str], truth: set[str]) -> dict[str, float]:
    tp = len(removed & truth)
    return {"precision": tp / max(len(removed), 1), "recall": tp / max(len(truth), 1)}


def write_corpus(base: int, root: str, files: int = 8):
    from agentworld.data.synthetic import synthetic_corpus
    from agentworld.io import write_jsonl

    corpus = synthetic_corpus(
        base, n_exact=base // 20, n_near=base // 10, n_far=base // 20, n_families=10
    )
    paths = [os.path.join(root, "corpus", f"part-{i:05d}.jsonl") for i in range(files)]
    for i, path in enumerate(paths):
        write_jsonl(path, corpus.records[i::files])
    for i in range(files):  # one file per read task, so that every worker is warmed
        write_jsonl(os.path.join(root, "warm", f"part-{i:05d}.jsonl"), corpus.records[i:800:files])
    return corpus, paths


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--base",
        type=int,
        default=52000,
        help="originals (copies are added; 52000 makes about 62k records, on which datasketch "
        "runs past the 20 s the comparison asks for)",
    )
    p.add_argument("--quick", action="store_true", help="a small corpus (2000 originals), one run")
    p.add_argument("--repeat", type=int, default=3, help="runs of each side; the fastest counts")
    args = p.parse_args()
    if args.quick:
        args.repeat = 1
    base = 2000 if args.quick else args.base
    import ray

    tmp = tempfile.mkdtemp(prefix="bench-dedup-")
    corpus, files = write_corpus(base, tmp)
    n = len(corpus.records)
    ceiling = machine_scaling(files)  # before Ray starts: nothing else of ours runs
    start_ray()
    # Start both workers and import what a task needs in each: the measured runs find
    # them warm (one warmed worker left the 2-worker run paying the other's start-up).
    ours(os.path.join(tmp, "warm"), 2)
    # Each side runs --repeat times, interleaved, and keeps its fastest run (as timeit
    # does): on a shared machine the slower runs measure the neighbours.
    runs: dict[str, list] = {"datasketch": [], "one": [], "two": []}
    for _ in range(args.repeat):
        runs["datasketch"].append(datasketch_dedup(files, 0.8, 128))
        runs["one"].append(ours(os.path.join(tmp, "corpus"), 1))
        runs["two"].append(ours(os.path.join(tmp, "corpus"), 2))
    base_removed, base_s, base_cpu = min(runs["datasketch"], key=lambda r: r[1])
    one_removed, one_s, _ = min(runs["one"], key=lambda r: r[1]["total"])
    two_removed, two_s, stats = min(runs["two"], key=lambda r: r[1]["total"])
    same_removed = all(r[0] == one_removed for r in runs["one"] + runs["two"])
    ray.shutdown()
    shutil.rmtree(tmp, ignore_errors=True)
    ratio, scaling = base_s / two_s["total"], one_s["total"] / two_s["total"]
    ours_scores = scores(two_removed, corpus.duplicate_ids)
    result = {
        "records": n,
        "quick": args.quick,
        "datasketch_seconds": base_s,
        "datasketch_records_per_s": n / base_s,
        "ours_1_worker_seconds": one_s,
        "ours_2_workers_seconds": two_s,
        "ours_1_worker_records_per_s": n / one_s["total"],
        "ours_2_workers_records_per_s": n / two_s["total"],
        "ratio_ours_2_workers_vs_datasketch": ratio,
        "ratio_2_vs_1_workers": scaling,
        "datasketch_cpu_seconds": base_cpu,
        "ours_cpu_seconds_1_worker": one_s["cpu"],
        "ours_cpu_seconds_2_workers": two_s["cpu"],
        "ratio_on_two_idle_cores_from_cpu_seconds": base_cpu / (two_s["cpu"] / 2),
        "datasketch_scores": scores(base_removed, corpus.duplicate_ids),
        "ours_scores": ours_scores,
        "same_removed_1_vs_2_workers": same_removed,
        "repeat": args.repeat,
        "all_seconds": {
            "datasketch": [r[1] for r in runs["datasketch"]],
            "ours_1_worker": [r[1]["total"] for r in runs["one"]],
            "ours_2_workers": [r[1]["total"] for r in runs["two"]],
        },
        "machine_ingest_kernel_2_vs_1_processes": ceiling,
        "ray_2_vs_1_workers_vs_machine_ceiling": scaling / ceiling["scaling"],
        "dedup_stats": stats,
        "ray_cpus": os.cpu_count(),
    }
    goals = [
        goal(
            "near_dup_vs_datasketch",
            ratio,
            ">=",
            5.0,
            "near-dup records/s vs datasketch MinHashLSH, same files",
        ),
        goal(
            "near_dup_precision",
            ours_scores["precision"],
            ">=",
            0.95,
            "removed records are planted duplicates",
        ),
        goal(
            "near_dup_recall", ours_scores["recall"], ">=", 0.95, "planted duplicates are removed"
        ),
        goal(
            "dedup_2_vs_1_workers",
            scaling,
            ">=",
            1.7,
            "dedup scales with workers (the same machine's ceiling, ingest's kernel in two "
            f"plain processes vs one: {ceiling['scaling']:.2f})",
        ),
        goal(
            "datasketch_seconds",
            base_s,
            ">=",
            20.0,
            "the corpus is large enough that fixed costs do not decide the ratio",
        ),
    ]
    write_result("dedup", result, goals)
    print(json.dumps({**result, "goals": goals}, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
