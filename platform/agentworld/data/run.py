"""The driver of the prepare stage: the steps in order (agentworld.data.steps), each
recorded by a marker under ``<out>/_work/`` when it finishes, so that a killed run
resumes at the first unfinished step (redoing it from a clean state) and a finished run
(``manifest.json`` complete) does nothing. Then report.json, the printed table and
manifest.json.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from agentworld.console import say
from agentworld.data.job import PrepareJob, Progress, RunDir
from agentworld.data.placement import data_context, storage_options_for
from agentworld.data.report import (
    format_table,
    packing_tables,
    sft_drop_rates,
    state_tables,
    token_tables,
)
from agentworld.data.steps import (
    audit,
    count,
    dedup,
    ingest,
    pack,
    samples,
    tokenize,
    train_tokenizer,
)
from agentworld.data.steps.base import Done, Step, StepContext
from agentworld.io import exists, is_complete, read_bytes, write_bytes, write_manifest

STEPS: tuple[Step, ...] = (
    ingest.STEP,
    dedup.STEP,
    count.STEP,
    audit.STEP,
    train_tokenizer.STEP,
    tokenize.STEP,
    pack.STEP,
    samples.STEP,
)


def prepare(job: PrepareJob, *, log: Callable[[str], None] = say) -> dict[str, Any]:
    """Run (or resume, or skip) the prepare stage; returns the report."""

    check_inputs(job)
    run_dir = RunDir(job.out, storage_options_for(job.out))
    if is_complete(job.out, **run_dir.storage_options):
        run_dir.check_fingerprint(job)
        log(f"[prepare] {job.out} is complete; nothing to do")
        return json.loads(read_bytes(run_dir.url("report.json"), **run_dir.storage_options))
    run_dir.check_fingerprint(job)
    ctx = StepContext(job, run_dir, Progress(log, tuple(s.name for s in STEPS)))
    done = Done()
    with data_context(job.data):
        for step in STEPS:
            marker = run_dir.done(step.name)
            if marker is None:
                result = step.run(ctx, done)
                run_dir.mark(step.name, result.to_json())
            else:
                ctx.progress(step.name, "already done")
                result = step.result.from_json(marker)
            done.add(result)
    return write_report(ctx, done)


def check_inputs(job: PrepareJob) -> None:
    """Every input and evaluation set exists: fail before any work, naming the URL."""

    for kind, urls in (("input", job.inputs), ("eval set", job.eval_sets)):
        for url in urls:
            if not exists(url, **storage_options_for(url)):
                raise FileNotFoundError(f"{kind} {url!r} does not exist")


def write_report(ctx: StepContext, done: Done) -> dict[str, Any]:
    """report.json, the printed table, manifest.json; returns the report."""

    job, run_dir = ctx.job, ctx.run_dir
    seq_len = job.seq_len
    tokens, shards = done[tokenize.TokenizeResult].rows, done[pack.PackResult].shards
    report = state_tables(done[count.CountResult].states)
    report["dedup"] = done[dedup.DedupResult].to_json()
    report["tokens"] = token_tables(tokens)
    report["sft_drop_rates"] = sft_drop_rates(tokens)
    report["packing"] = packing_tables(pa.Table.from_pylist(shards), seq_len) if shards else {}
    report["eval_threshold"] = done[count.CountResult].eval_threshold
    report["tokenizer"] = done[train_tokenizer.TokenizerResult].to_json()
    write_bytes(
        run_dir.url("report.json"),
        json.dumps(report, indent=2, sort_keys=True).encode(),
        **run_dir.storage_options,
    )
    ctx.progress("report", "per domain/source:\n" + format_table(report))
    outputs = {
        name: run_dir.url(name)
        for name in ("tokenizer", "packed", "samples", "quarantine", "duplicates", "contaminated")
    }
    write_manifest(
        job.out,
        stage="prepare",
        inputs={"inputs": list(job.inputs), "eval_sets": list(job.eval_sets)},
        config={"recipe": job.recipe_name, "seq_len": seq_len, "data": job.data},
        counts={**report["totals"], "tokens": _token_totals(report)},
        outputs={**outputs, "report": run_dir.url("report.json")},
        **run_dir.storage_options,
    )
    return report


def _token_totals(report: dict) -> dict[str, int]:
    out = {}
    for kind, splits in report["tokens"].items():
        out[f"{kind}_tokens"] = sum(s["tokens"] for s in splits.values())
        out[f"{kind}_documents"] = sum(s["documents"] for s in splits.values())
    return out
