"""The tokenize step: the kept trajectories as CPT documents and SFT samples in
``_work/samples/`` (agentworld.data.sample_rows.tokenize_block, block by block), their
token counts, and the guard that fails a run whose sequence leaves a domain without
its SFT samples."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentworld.data.placement import read_staging, write_staging
from agentworld.data.report import TOKEN_KEYS, TOKEN_SUMS, grouped_counts, sft_drop_rates
from agentworld.data.sample_rows import tokenize_block
from agentworld.data.steps.base import Done, Step, StepContext, StepResult
from agentworld.data.steps.count import CountResult


@dataclass(frozen=True)
class TokenizeResult(StepResult):
    rows: list[dict[str, Any]]
    """Samples and tokens per (kind, split, domain, source, drop_reason)
    (agentworld.data.report.TOKEN_KEYS and TOKEN_SUMS)."""


def run(ctx: StepContext, done: Done) -> TokenizeResult:
    job, run_dir = ctx.job, ctx.run_dir
    run_dir.clear("_work", "samples")
    samples = ctx.kept(["uid", "record", "split_hash"]).map_batches(
        tokenize_block,
        batch_format="pyarrow",
        batch_size=TOKENIZE_BATCH,
        fn_kwargs={
            "tokenizer_url": run_dir.url("tokenizer"),
            "storage_options": run_dir.storage_options,
            "seq_len": job.seq_len,
            "truncation": job.data.sft_truncation,
            "sft_rows": job.data.sft_rows,
            "eval_threshold": done[CountResult].eval_threshold,
            "custom_domains": job.data.custom_domains,
        },
    )
    write_staging(samples, run_dir.url("_work", "samples"), run_dir.storage_options)
    rows = grouped_counts(
        read_staging(run_dir.url("_work", "samples"), run_dir.storage_options),
        TOKEN_KEYS,
        TOKEN_SUMS,
    )
    n_docs = sum(r["n"] for r in rows if r["drop_reason"] is None)
    ctx.progress("tokenize", f"{n_docs} documents, {sum(r['n_tokens'] for r in rows)} tokens")
    check_drop_rates(
        rows,
        job.data.max_domain_drop_share,
        job.seq_len,
        min_samples=job.data.drop_guard_min_samples,
    )
    return TokenizeResult(rows=rows)


STEP = Step("tokenize", TokenizeResult, run)
TOKENIZE_BATCH = 256
"""Trajectories tokenized per call: every turn makes an SFT sample of up to seq_len
tokens, so a call's samples are several times its records; batches of this size keep a
worker's memory the same whatever the size of the staging blocks."""


class DomainDropError(RuntimeError):
    """A domain lost more of its SFT samples than data.max_domain_drop_share allows."""


def check_drop_rates(
    rows: list[dict], max_share: float, seq_len: int, *, min_samples: int = 1
) -> None:
    """Raise DomainDropError naming every domain (of at least min_samples SFT samples)
    whose dropped share exceeds max_share."""

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
