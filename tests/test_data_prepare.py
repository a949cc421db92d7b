"""The prepare stage end to end on a real local Ray cluster: the collected corpus plus
bad records and an evaluation set; the S3 protocol; a killed run resumed."""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from agentworld.data.synthetic import BAD_LINES, synthetic_corpus
from agentworld.io import (
    get_fs,
    join,
    list_shards,
    read_manifest,
    read_parquet,
    read_records,
    write_jsonl,
)
from agentworld.recipes import debug_cpu
from agentworld.schema import trajectory_to_rows

ROOT = Path(__file__).resolve().parents[1]
CONTRACT = {
    "input_ids": pa.list_(pa.int32()),
    "loss_mask": pa.list_(pa.int8()),
    "position_ids": pa.list_(pa.int32()),
    "doc_lens": pa.list_(pa.int32()),
}


def _job(inputs, out, eval_sets=(), **data):
    import dataclasses

    from agentworld.recipes.jobs import prepare_job

    recipe = debug_cpu()
    recipe = dataclasses.replace(
        recipe, data=dataclasses.replace(recipe.data, progress_bars=False, **data)
    )
    return prepare_job(recipe, inputs=tuple(inputs), out=out, eval_sets=tuple(eval_sets))


@pytest.fixture(scope="module")
def prepared(ray_cluster, collected_corpus, tmp_path_factory):
    """One full run: the collected corpus; a shard where bad records are mixed with
    copies of three collected trajectories; an evaluation set made of two collected
    trajectories (AgentWorldBench rows)."""
    import dataclasses

    from agentworld.data.run import prepare

    root = tmp_path_factory.mktemp("prepare")
    collected = read_records(collected_corpus).records
    leaked = [collected[0], collected[len(collected) // 2]]
    copies = [dataclasses.replace(t, id=f"copy-{t.id}") for t in collected[1:4]]
    lines = [t.to_json() for t in copies]
    for i, bad in enumerate(BAD_LINES):
        lines.insert(2 * i, bad)
    (root / "mixed").mkdir()
    (root / "mixed" / "part-00000.jsonl").write_text("\n".join(lines) + "\n")
    write_jsonl(
        str(root / "eval" / "awb.jsonl"), [r for t in leaked for r in trajectory_to_rows(t)]
    )
    out = str(root / "out")
    log: list[str] = []
    job = _job([collected_corpus, str(root / "mixed")], out, [str(root / "eval")])
    report = prepare(job, log=log.append)
    return {
        "job": job,
        "out": out,
        "report": report,
        "log": log,
        "collected": collected,
        "leaked": leaked,
        "copies": copies,
    }


def _packed(out: str, kind: str, split: str) -> pa.Table:
    shards = list_shards(join(out, "packed", kind, split))
    return pa.concat_tables([read_parquet(s) for s in shards]) if shards else pa.table({})


def _file_lines(inputs: list[str]) -> list[tuple[str, str, dict]]:
    """(shard path, line, parsed object or {} when the line is not a JSON object) for
    every line of the raw shard files, read with json alone (not the pipeline's reader)."""
    lines = []
    for root in inputs:
        for shard in sorted(Path(root).glob("*.jsonl")):
            for line in shard.read_text().splitlines():
                try:
                    obj = json.loads(line)
                except ValueError:
                    obj = None
                lines.append((str(shard), line, obj if isinstance(obj, dict) else {}))
    return lines


def _ids_in(out: str, name: str) -> dict[str, str]:
    """trajectory_id -> state of the rows in one of the run's audit directories."""
    shards = list_shards(join(out, name))
    table = pa.concat_tables([read_parquet(s) for s in shards]) if shards else None
    if table is None:
        return {}
    states = table.column("state").to_pylist() if "state" in table.column_names else None
    ids = table.column("trajectory_id").to_pylist()
    return dict(zip(ids, states or [name] * len(ids), strict=True))


def expected_counts(inputs: list[str], out: str) -> dict[str, collections.Counter]:
    """Every state per domain, source, domain/source and input, counted line by line from
    the raw files and the run's row-level outputs, never from its report: a line of
    BAD_LINES is quarantined, a trajectory listed in contaminated/ is contaminated, one
    listed in duplicates/ has the state written there (its cluster's survivor: kept),
    any other is kept; a trajectory with SFT samples must be a kept one."""
    contaminated = _ids_in(out, "contaminated")
    clustered = _ids_in(out, "duplicates")
    sampled = set(
        pa.concat_tables([read_parquet(s) for s in list_shards(join(out, "samples", "sft"))])
        .column("trajectory_id")
        .to_pylist()
    )
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for shard, line, obj in _file_lines(inputs):
        tid = obj.get("id")
        if line in BAD_LINES:
            state = "quarantined"
        elif tid in contaminated:
            state = "contaminated"
        else:
            state = clustered.get(tid, "kept")
        assert tid not in sampled or state == "kept", (tid, state)  # samples: kept only
        domain, source = obj.get("domain") or "unknown", obj.get("source") or "unknown"
        keys = {"by_domain": domain, "by_source": source}
        keys |= {"by_domain_source": f"{domain}/{source}", "by_input": shard}
        for table, key in keys.items():
            counts[table][key, "read"] += 1
            counts[table][key, state] += 1
    return counts


def check_counts(report: dict, inputs: list[str], out: str) -> None:
    """Every group's figures, every state, equal the independent counts."""
    states = ["kept", "quarantined", "contaminated", "exact_duplicate", "near_duplicate"]
    expected = expected_counts(inputs, out)
    for table, counter in expected.items():
        got = collections.Counter()
        for key, c in report[table].items():
            key = next((k for k, _ in counter if table == "by_input" and key.endswith(k)), key)
            for state in ["read", *states]:
                got[key, state] += c[state]
        assert +got == +counter, (table, +got - +counter, +counter - +got)


def test_counts_are_conserved_per_domain_and_source(prepared):
    report = prepared["report"]
    check_counts(report, list(prepared["job"].inputs), prepared["out"])
    # What the test put in the input, by construction.
    totals = report["totals"]
    assert totals["read"] == len(prepared["collected"]) + len(prepared["copies"]) + len(BAD_LINES)
    assert totals["quarantined"] == len(BAD_LINES)
    assert totals["exact_duplicate"] >= len(prepared["copies"])
    assert totals["contaminated"] >= len(prepared["leaked"])
    quarantine = pa.concat_tables(
        [read_parquet(s) for s in list_shards(join(prepared["out"], "quarantine"))]
    )
    assert quarantine.num_rows == len(BAD_LINES) and all(quarantine.column("reason").to_pylist())
    contaminated = read_parquet(list_shards(join(prepared["out"], "contaminated"))[0])
    assert {t.id for t in prepared["leaked"]} <= set(
        contaminated.column("trajectory_id").to_pylist()
    )
    assert any("TOTAL" in line for line in prepared["log"])  # the printed table


def test_packed_rows_follow_the_contract_and_never_cross_documents(prepared):
    seq_len = prepared["job"].seq_len
    for kind in ("cpt", "sft"):
        for split in ("train", "eval"):
            table = _packed(prepared["out"], kind, split)
            assert {f.name: f.type for f in table.schema} == CONTRACT
            for row in table.to_pylist():
                assert (
                    len(row["input_ids"])
                    == len(row["loss_mask"])
                    == len(row["position_ids"])
                    == seq_len
                )
                starts = np.cumsum([0, *row["doc_lens"]])
                pos = np.array(row["position_ids"])
                for a, b in zip(starts[:-1], starts[1:], strict=True):
                    assert (
                        pos[a:b] == np.arange(b - a)
                    ).all()  # a document's positions restart at 0
                    assert (
                        row["loss_mask"][a] == 0
                    )  # nothing in another document predicts its first token
                assert not any(row["loss_mask"][starts[-1] :])


def test_sft_loss_masks_decode_to_exactly_the_observations(prepared):
    from transformers import AutoTokenizer

    out = prepared["out"]
    tok = AutoTokenizer.from_pretrained(join(out, "tokenizer"))
    samples = pa.concat_tables([read_parquet(s) for s in list_shards(join(out, "samples", "sft"))])
    for split in ("train", "eval"):
        expected = collections.Counter(
            r["reference"] + "<|im_end|>" for r in samples.to_pylist() if r["split"] == split
        )
        decoded = collections.Counter()
        for row in _packed(out, "sft", split).to_pylist():
            ids, mask = np.array(row["input_ids"]), np.array(row["loss_mask"])
            starts = np.cumsum([0, *row["doc_lens"]])
            for a, b in zip(starts[:-1], starts[1:], strict=True):
                decoded[tok.decode(ids[a:b][mask[a:b] == 1])] += 1
        assert decoded == expected and sum(expected.values()) > 0


def test_packing_efficiency_and_splits_on_the_collected_corpus(prepared):
    report, out = prepared["report"], prepared["out"]
    seq_len = prepared["job"].seq_len
    split_min = prepared["job"].data.cpt_split_min
    # CPT documents may be cut, so a row closes only with fewer than split_min tokens
    # free: every row of a shard but its emptiest is at least 1 - 32/1024 full. (The
    # share over all rows is no guarantee on this corpus: 23 rows in two shards, whose
    # last rows are partly empty, gave 0.94 in one local run.)
    shards = [
        s for split in ("train", "eval") for s in list_shards(join(out, "packed", "cpt", split))
    ]
    assert shards
    for shard in shards:
        fills = sorted(sum(x) for x in read_parquet(shard).column("doc_lens").to_pylist())
        assert all(seq_len - f < split_min for f in fills[1:]), (shard, fills)
    for split in ("train", "eval"):
        # SFT samples are never cut, and samples longer than half a row cannot share
        # one; best fit still leaves at most one row half empty or worse.
        fills = [sum(x) for x in _packed(out, "sft", split).column("doc_lens").to_pylist()]
        assert sum(f <= seq_len // 2 for f in fills) <= 1
    samples = pa.concat_tables([read_parquet(s) for s in list_shards(join(out, "samples", "sft"))])
    split_of = collections.defaultdict(set)
    for r in samples.select(["trajectory_id", "split"]).to_pylist():
        split_of[r["trajectory_id"]].add(r["split"])
    assert all(len(s) == 1 for s in split_of.values())  # no trajectory in both splits
    assert {"train", "eval"} <= set().union(*split_of.values())
    assert report["tokens"]["sft"]["train"]["documents"] == sum(
        1 for r in samples.column("split").to_pylist() if r == "train"
    )


def test_rerun_of_a_finished_run_does_nothing(prepared):
    from agentworld.data.run import prepare

    out = prepared["out"]
    before = {p: p.stat().st_mtime_ns for p in Path(out).rglob("*") if p.is_file()}
    log: list[str] = []
    assert prepare(prepared["job"], log=log.append) == prepared["report"]
    after = {p: p.stat().st_mtime_ns for p in Path(out).rglob("*") if p.is_file()}
    assert before == after and any("nothing to do" in line for line in log)
    assert read_manifest(out)["status"] == "complete"


def _wait_for(url: str, proc: subprocess.Popen, timeout: float = 600) -> None:
    fs, path = get_fs(url)
    deadline = time.monotonic() + timeout
    while not fs.exists(path):
        fs.invalidate_cache()
        assert proc.poll() is None, proc.stdout.read()
        assert time.monotonic() < deadline, f"{url} did not appear"
        time.sleep(0.2)


@pytest.mark.slow
def test_s3_run_killed_then_resumed_has_no_duplicate_or_missing_samples(
    ray_cluster, s3_bucket, tmp_path
):
    """jobs/prepare.py reads from and writes to the S3 server; it is killed (SIGKILL)
    right after its first stage, then the run is resumed and completed. One record has
    a custom domain, registered in every worker through the config."""
    from agentworld.data.run import prepare
    from agentworld.schema import Trajectory, Turn, register_domain, unregister_domain

    corpus = synthetic_corpus(40, seed=4, n_exact=5, n_near=5, n_far=3, n_families=1)
    register_domain("robotics")
    try:
        robot = Trajectory(
            id="robot-1",
            domain="robotics",
            source="lab",
            environment="A robot arm over three bins; gripper open.",
            turns=(Turn(action="move_to(bin=3)", observation="arm at bin 3, gripper open"),),
        )
        corpus.records.append(robot)
    finally:
        unregister_domain("robotics")
    raw, out = f"{s3_bucket}/raw", f"{s3_bucket}/prepared"
    write_jsonl(join(raw, "part-00000.jsonl"), corpus.records)
    fs, path = get_fs(join(raw, "part-00001.jsonl"))
    fs.pipe(path, ("\n".join(BAD_LINES) + "\n").encode())
    env = {**os.environ, "RAY_ADDRESS": ray_cluster.get_runtime_context().gcs_address}
    cmd = [
        sys.executable,
        str(ROOT / "jobs" / "prepare.py"),
        "--input",
        raw,
        "--out",
        out,
        "--set",
        "data.progress_bars=False",
        "--set",
        "data.custom_domains=('robotics',)",
    ]
    proc = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        _wait_for(join(out, "_work", "ingest.done.json"), proc)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert read_manifest(out) is None  # killed before the end
    ingest = _objects(fs, join(out, "_work"), "ingest")
    log: list[str] = []
    report = prepare(_job([raw], out, custom_domains=("robotics",)), log=log.append)
    # The finished step was skipped, not redone: its marker and staging files are the
    # objects the killed run wrote.
    assert any("ingest: already done" in line for line in log), log
    assert ingest and _objects(fs, join(out, "_work"), "ingest") == ingest
    n_read = len(corpus.records) + len(BAD_LINES)
    assert report["by_domain"]["robotics"]["kept"] == 1
    assert report["totals"]["read"] == n_read and read_manifest(out)["status"] == "complete"
    samples = pa.concat_tables([read_parquet(s) for s in list_shards(join(out, "samples", "sft"))])
    keys = list(
        zip(
            samples.column("trajectory_id").to_pylist(),
            samples.column("turn_idx").to_pylist(),
            strict=True,
        )
    )
    kept = [t for t in corpus.records if t.id not in corpus.duplicate_ids]
    assert len(keys) == len(set(keys)) == sum(len(t.turns) for t in kept)
    packed_docs = sum(
        len(d)
        for s in ("train", "eval")
        for d in _packed(out, "sft", s).column("doc_lens").to_pylist()
    )
    assert packed_docs == len(keys)
    assert (
        json.loads(fs.cat_file(f"{out.removeprefix('s3://')}/report.json"))["totals"]
        == report["totals"]
    )
    _killed_while_packing_keeps_the_written_shards(fs, raw, out, report, keys)


def _objects(fs, url: str, prefix: str) -> dict[str, tuple]:
    """name -> (content, last modified) of every object under ``url`` whose name starts
    with ``prefix``: a rewrite with the same bytes still changes the time, which lies
    seconds after the first write here."""
    fs.invalidate_cache()
    root = url.removeprefix("s3://")
    names = [p for p in fs.find(root) if p[len(root) + 1 :].startswith(prefix)]
    return {p: (fs.cat_file(p), fs.info(p)["LastModified"]) for p in names}


def _killed_while_packing_keeps_the_written_shards(fs, raw, out, report, keys) -> None:
    """As if killed inside the pack step (one packed shard and one samples shard
    missing, no pack or samples marker, no manifest): the rerun keeps the shards
    already written, writes only the missing ones, and they hold what they held."""
    from agentworld.data.run import prepare

    root = out.removeprefix("s3://")
    kinds = [(k, s) for k in ("cpt", "sft") for s in ("train", "eval")]
    packed = sorted(p for k, s in kinds for p in list_shards(join(out, "packed", k, s)))
    samples = sorted(list_shards(join(out, "samples", "sft")))
    assert len(packed) >= 4 and samples  # shards kept beside the one missing
    before = {**_objects(fs, out, "packed/"), **_objects(fs, out, "samples/")}
    gone = [packed[-1].removeprefix("s3://"), samples[-1].removeprefix("s3://")]
    markers = [f"{root}/_work/{step}.done.json" for step in ("pack", "samples")]
    fs.rm([f"{root}/manifest.json", *markers, *gone])
    time.sleep(1.1)  # S3 times have a one-second resolution
    log: list[str] = []
    assert prepare(_job([raw], out, custom_domains=("robotics",)), log=log.append) == report
    assert any("tokenize: already done" in line for line in log), log
    after = {**_objects(fs, out, "packed/"), **_objects(fs, out, "samples/")}
    assert set(after) == set(before)
    rewritten = {p for p in after if after[p][1] != before[p][1]}
    assert rewritten == set(gone)  # only the missing shards were written again
    assert all(after[p][0] == before[p][0] for p in after)  # with the same bytes
    again = pa.concat_tables([read_parquet(s) for s in list_shards(join(out, "samples", "sft"))])
    pairs = zip(
        again.column("trajectory_id").to_pylist(), again.column("turn_idx").to_pylist(), strict=True
    )
    assert sorted(pairs) == sorted(keys)
