"""The stage functions pipeline.prepare calls in order. Each takes the job, the run
directory, the results of the stages before it and the progress printer, does its work
on Ray Data, and returns a JSON-able result that is recorded as its marker."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from agentworld.data.labels import Labels, label_block
from agentworld.data.pipeline import PrepareJob, Progress, RunDir
from agentworld.data.ray_env import broadcast, fetch, read_staging, write_staging

State = dict[str, Any]


# ---- datasets shared by several stages ------------------------------------------------


def _label(block: pa.Table, *, holder: dict) -> pa.Table:
    return label_block(block, fetch(holder))


def _in_state(block: pa.Table, *, state: str) -> pa.Table:
    return block.filter(pc.equal(block.column("state"), state))


def labelled(run: RunDir, state: State, columns: list[str] | None = None):
    """Ingest rows with their final state (lazy; labels broadcast once per run)."""
    if "_labels" not in state:
        from agentworld.io import read_parquet

        table = read_parquet(run.url("_work", "labels.parquet"), **run.storage_options)
        state["_labels"] = broadcast(Labels(table))
    ds = read_staging(run.url("_work", "ingest"), run.storage_options, columns=columns)
    return ds.map_batches(_label, batch_format="pyarrow", fn_kwargs={"holder": state["_labels"]})


def kept(run: RunDir, state: State):
    return labelled(run, state).map_batches(
        _in_state, batch_format="pyarrow", fn_kwargs={"state": "kept"}
    )


# ---- stages -------------------------------------------------------------------------------


def run_ingest(job: PrepareJob, run: RunDir, state: State, progress: Progress) -> dict:
    from agentworld.data.ingest import ingest_dataset, read_eval_sets

    index = None
    if job.eval_sets:
        index = read_eval_sets(list(job.eval_sets), job.data, storage_options_of(job.eval_sets))
        progress("ingest", f"eval sets: {len(index.ids)} records, {index.hashes.size} n-grams")
    run.clear("_work", "ingest")
    options = storage_options_of(job.inputs)
    ds = ingest_dataset(list(job.inputs), job.data, options, index)
    rows = write_staging(ds, run.url("_work", "ingest"), run.storage_options)
    progress("ingest", f"{rows} records read")
    return {"rows": rows}


def storage_options_of(urls) -> dict[str, Any]:
    """Storage options for a list of inputs (they share one object store, if any)."""
    from agentworld.data.ray_env import storage_options_for

    for url in urls:
        opts = storage_options_for(url)
        if opts:
            return opts
    return {}


def clean_records(block: pa.Table) -> pa.Table:
    ok = pc.and_(
        pc.equal(block.column("status"), "ok"),
        pc.invert(block.column("contaminated").fill_null(False)),
    )
    return block.filter(ok).select(["uid", "exact_hash", "pkey", "bands", "shingles"])


def run_dedup(job: PrepareJob, run: RunDir, state: State, progress: Progress) -> dict:
    from agentworld.data.dedup import find_duplicates
    from agentworld.io import write_parquet

    cols = ["uid", "status", "contaminated", "exact_hash", "pkey", "bands", "shingles"]
    records = read_staging(run.url("_work", "ingest"), run.storage_options, columns=cols)
    labels, stats = find_duplicates(
        records.map_batches(clean_records, batch_format="pyarrow"),
        job.data,
        lambda m: progress("dedup", m),
    )
    write_parquet(run.url("_work", "labels.parquet"), labels.table, **run.storage_options)
    bands, rows = job.data.lsh_shape()
    return {**stats.__dict__, "clustered": labels.table.num_rows, "bands": bands, "rows": rows}


def _extremes(block: pa.Table, *, k: int) -> pa.Table:
    """Per domain of a block: its k smallest split hashes and its largest one."""
    domains = block.column("domain").to_pylist()
    hashes = block.column("split_hash").to_numpy(zero_copy_only=False)
    rows: dict[str, list[float]] = {}
    for d in set(domains):
        h = np.sort(hashes[np.asarray(domains) == d])
        # Each hash once: the merged list's k smallest must be the domain's.
        rows[d] = h.tolist() if h.size <= k + 1 else [*h[:k].tolist(), float(h[-1])]
    out = [(d, v) for d, vs in rows.items() for v in vs]
    return pa.table({"domain": [d for d, _ in out], "split_hash": [v for _, v in out]})


def _eval_thresholds(ds, cfg, kept_by_domain: dict[str, int]) -> dict[str, float]:
    """Per domain, the split-hash threshold below which a trajectory is held out:
    eval_fraction, raised so that the domain's min_eval_trajectories smallest hashes are
    held out (stratified: every domain is evaluated, however small its share), capped
    so that the domain's largest hash trains (a domain with a single kept trajectory
    trains on it)."""
    k = cfg.min_eval_trajectories
    if not kept_by_domain:
        return {}
    cols = ds.select_columns(["domain", "split_hash"])
    parts = cols.map_batches(_extremes, batch_format="pyarrow", fn_kwargs={"k": k}).take_all()
    hashes: dict[str, list[float]] = {}
    for r in parts:
        hashes.setdefault(r["domain"], []).append(r["split_hash"])
    out = {}
    for domain, n in kept_by_domain.items():
        h = sorted(hashes.get(domain, [1.0]))
        threshold = cfg.eval_fraction
        hold = min(k, n - 1)
        if hold > 0:
            threshold = max(threshold, float(np.nextafter(h[hold - 1], 1.0)))
        out[domain] = min(threshold, h[-1]) if n > 1 else min(threshold, h[0])
    return dict(sorted(out.items()))


def run_count(job: PrepareJob, run: RunDir, state: State, progress: Progress) -> dict:
    from agentworld.data.report import STATE_KEYS, conserved, grouped_counts, state_tables

    rows = grouped_counts(labelled(run, state), STATE_KEYS)
    tables = state_tables(rows)
    if tables["totals"]["read"] != state["ingest"]["rows"] or not conserved(tables["totals"]):
        raise RuntimeError(
            f"counts are not conserved: {tables['totals']} vs {state['ingest']['rows']} read"
        )
    kept_by_domain = {d: c["kept"] for d, c in tables["by_domain"].items() if c["kept"]}
    thresholds = _eval_thresholds(kept(run, state), job.data, kept_by_domain)
    progress("count", " ".join(f"{k}={v}" for k, v in tables["totals"].items()))
    return {"states": rows, "eval_threshold": thresholds}


def run_audit(job: PrepareJob, run: RunDir, state: State, progress: Progress) -> dict:
    from agentworld.data.audit import write_audit
    from agentworld.data.report import state_tables

    totals = state_tables(state["count"]["states"])["totals"]
    shards = write_audit(
        labelled(run, state),
        job.out,
        counts=totals,
        clustered=state["dedup"]["clustered"],
        rows_per_shard=job.data.rows_per_shard,
        storage_options=run.storage_options,
    )
    progress("audit", ", ".join(f"{k}: {v} shards" for k, v in shards.items()))
    return shards


def _texts(block: pa.Table) -> pa.Table:
    import json

    from agentworld.schema.compact import compact_environment

    out = []
    for record in block.column("record").to_pylist():
        r = json.loads(record)
        out.append(compact_environment(r["environment"]))  # the text the model sees
        out.extend(x for t in r["turns"] for x in (t["action"], t["observation"]))
    return pa.table({"text": out})


def _training_sample(block: pa.Table, *, thresholds: dict[str, float], fraction: float) -> pa.Table:
    from agentworld.data.text import unit_hash

    cut = np.array([thresholds.get(d, 0.0) for d in block.column("domain").to_pylist()])
    train = block.column("split_hash").to_numpy(zero_copy_only=False) >= cut
    picked = np.array(
        [unit_hash("tokenizer:" + t) < fraction for t in block.column("trajectory_id").to_pylist()],
        dtype=bool,
    )
    return block.filter(pa.array(train & picked)).select(["uid", "record"])


def _tokenizer_texts(run: RunDir, state: State, cfg) -> list[str]:
    """Texts of the kept training trajectories (a stable-hash sample of at most
    tokenizer_train_docs), in uid order whatever the block layout."""
    n_kept = sum(r["n"] for r in state["count"]["states"] if r["state"] == "kept")
    fraction = min(1.0, cfg.tokenizer_train_docs / max(n_kept, 1))
    sample = kept(run, state).map_batches(
        _training_sample,
        batch_format="pyarrow",
        fn_kwargs={"thresholds": state["count"]["eval_threshold"], "fraction": fraction},
    )
    batches = sample.sort("uid").map_batches(_texts, batch_format="pyarrow")
    return [
        t
        for b in batches.iter_batches(batch_format="pyarrow")
        for t in b.column("text").to_pylist()
    ]


def run_tokenizer(job: PrepareJob, run: RunDir, state: State, progress: Progress) -> dict:
    from agentworld.data.vocab import pretrained_tokenizer, save_tokenizer, train_on_texts

    if job.recipe.model.pretrained:
        tokenizer = pretrained_tokenizer(job.recipe.model.pretrained)
        origin = job.recipe.model.pretrained
    else:
        texts = _tokenizer_texts(run, state, job.data)
        if not texts:
            raise RuntimeError(
                "no kept training trajectory to train the tokenizer on: see report counts "
                f"under {run.url('_work', 'count.done.json')} (everything removed or held out?)"
            )
        tokenizer = train_on_texts(texts, job.recipe.model.vocab_size)
        origin = f"trained on {len(texts)} texts"
    save_tokenizer(tokenizer, run.url("tokenizer"), run.storage_options)
    progress("tokenizer", f"{len(tokenizer)} tokens ({origin})")
    return {"vocab": len(tokenizer), "pad_id": tokenizer.pad_token_id, "origin": origin}


def run_tokenize(job: PrepareJob, run: RunDir, state: State, progress: Progress) -> dict:
    from agentworld.data.report import TOKEN_KEYS, TOKEN_SUMS, grouped_counts
    from agentworld.data.samples import tokenize_block

    run.clear("_work", "samples")
    samples = kept(run, state).map_batches(
        tokenize_block,
        batch_format="pyarrow",
        fn_kwargs={
            "tokenizer_url": run.url("tokenizer"),
            "storage_options": run.storage_options,
            "seq_len": job.recipe.train.seq_len,
            "truncation": job.data.sft_truncation,
            "eval_threshold": state["count"]["eval_threshold"],
            "custom_domains": job.data.custom_domains,
        },
    )
    write_staging(samples, run.url("_work", "samples"), run.storage_options)
    rows = grouped_counts(
        read_staging(run.url("_work", "samples"), run.storage_options), TOKEN_KEYS, TOKEN_SUMS
    )
    n_docs = sum(r["n"] for r in rows if r["drop_reason"] is None)
    progress("tokenize", f"{n_docs} documents, {sum(r['n_tokens'] for r in rows)} tokens")
    check_drop_rates(
        rows,
        job.data.max_domain_drop_share,
        job.recipe.train.seq_len,
        min_samples=job.data.drop_guard_min_samples,
    )
    return {"rows": rows}


class DomainDropError(RuntimeError):
    """A domain lost more of its SFT samples than data.max_domain_drop_share allows."""


def check_drop_rates(
    rows: list[dict], max_share: float, seq_len: int, *, min_samples: int = 1
) -> None:
    """Raise DomainDropError naming every domain (of at least min_samples SFT samples)
    whose dropped share exceeds max_share."""
    from agentworld.data.report import sft_drop_rates

    bad = {
        d: e
        for d, e in sft_drop_rates(rows).items()
        if e["share"] > max_share and e["samples"] >= min_samples
    }
    if not bad:
        return
    lines = [
        f"domain {d!r} lost {e['dropped']} of {e['samples']} SFT samples "
        f"({100 * e['share']:.0f}%: {', '.join(f'{k} {v}' for k, v in e['reasons'].items())})"
        for d, e in bad.items()
    ]
    raise DomainDropError(
        "; ".join(lines) + f", more than data.max_domain_drop_share {max_share} allows at "
        f"train.seq_len {seq_len}: use a recipe with a longer sequence, shorten that "
        "domain's environments or observations, or raise data.max_domain_drop_share"
    )


def run_pack(job: PrepareJob, run: RunDir, state: State, progress: Progress) -> dict:
    from agentworld.data.packing import pack_samples

    counts: dict[tuple[str, str], int] = {}
    for r in state["tokenize"]["rows"]:
        if r["drop_reason"] is None:
            counts[(r["kind"], r["split"])] = counts.get((r["kind"], r["split"]), 0) + r["n"]
    stats = pack_samples(
        read_staging(run.url("_work", "samples"), run.storage_options),
        counts,
        base_url=run.url("packed"),
        seq_len=job.recipe.train.seq_len,
        pad_id=state["tokenizer"]["pad_id"],
        pack_window=job.data.pack_window,
        seed=job.data.seed,
        cpt_split_min=job.data.cpt_split_min,
        storage_options=run.storage_options,
    )
    progress("pack", f"{stats.num_rows} shards, {sum(stats.column('rows').to_pylist())} rows")
    return {"shards": stats.to_pylist()}


def _sft_kept(block: pa.Table) -> pa.Table:
    keep = pc.and_(pc.equal(block.column("kind"), "sft"), pc.is_null(block.column("drop_reason")))
    return block.filter(keep)


def run_samples(job: PrepareJob, run: RunDir, state: State, progress: Progress) -> dict:
    from agentworld.data.samples import SFT_SAMPLE_COLUMNS
    from agentworld.data.shards import write_sharded

    n = sum(
        r["n"] for r in state["tokenize"]["rows"] if r["kind"] == "sft" and r["drop_reason"] is None
    )
    samples = read_staging(run.url("_work", "samples"), run.storage_options).map_batches(
        _sft_kept, batch_format="pyarrow"
    )
    stats = write_sharded(
        samples,
        run.url("samples", "sft"),
        n_rows=n,
        rows_per_shard=job.data.rows_per_shard,
        key="trajectory_id",
        sort_by=["trajectory_id", "turn_idx"],
        columns=SFT_SAMPLE_COLUMNS,
        storage_options=run.storage_options,
        skip_existing=True,
    )
    progress("samples", f"{n} SFT samples in {stats.num_rows} shards")
    return {"sft_samples": n, "shards": stats.num_rows}


def finish(job: PrepareJob, run: RunDir, state: State, progress: Progress) -> dict:
    """report.json, the printed table, manifest.json."""
    import json

    from agentworld.data.report import (
        format_table,
        packing_tables,
        sft_drop_rates,
        state_tables,
        token_tables,
    )
    from agentworld.io import write_bytes, write_manifest

    seq_len = job.recipe.train.seq_len
    report = state_tables(state["count"]["states"])
    report["dedup"] = state["dedup"]
    report["tokens"] = token_tables(state["tokenize"]["rows"])
    report["sft_drop_rates"] = sft_drop_rates(state["tokenize"]["rows"])
    report["packing"] = (
        packing_tables(pa.Table.from_pylist(state["pack"]["shards"]), seq_len)
        if state["pack"]["shards"]
        else {}
    )
    report["eval_threshold"] = state["count"]["eval_threshold"]
    report["tokenizer"] = state["tokenizer"]
    write_bytes(
        run.url("report.json"),
        json.dumps(report, indent=2, sort_keys=True).encode(),
        **run.storage_options,
    )
    progress("report", "per domain/source:\n" + format_table(report))
    outputs = {
        name: run.url(name)
        for name in ("tokenizer", "packed", "samples", "quarantine", "duplicates", "contaminated")
    }
    write_manifest(
        job.out,
        stage="prepare",
        inputs={"inputs": list(job.inputs), "eval_sets": list(job.eval_sets)},
        config={"recipe": job.recipe.name, "seq_len": seq_len, "data": job.data},
        counts={**report["totals"], "tokens": _token_totals(report)},
        outputs={**outputs, "report": run.url("report.json")},
        **run.storage_options,
    )
    return report


def _token_totals(report: dict) -> dict[str, int]:
    out = {}
    for kind, splits in report["tokens"].items():
        out[f"{kind}_tokens"] = sum(s["tokens"] for s in splits.values())
        out[f"{kind}_documents"] = sum(s["documents"] for s in splits.values())
    return out
