"""The tokenizer step: ``tokenizer/``, the recipe's pretrained tokenizer or a byte-level
BPE trained on the kept training trajectories (a stable-hash sample of at most
data.tokenizer_train_docs of them)."""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from agentworld.data.steps.base import Done, Step, StepContext, StepResult
from agentworld.data.steps.count import CountResult
from agentworld.data.text import unit_hash
from agentworld.data.vocab import pretrained_tokenizer, save_tokenizer, train_on_texts
from agentworld.schema.compact import compact_environment


@dataclass(frozen=True)
class TokenizerResult(StepResult):
    vocab: int
    pad_id: int | None
    origin: str
    """The pretrained model's name, or how many texts the tokenizer was trained on."""


def run(ctx: StepContext, done: Done) -> TokenizerResult:
    model, run_dir = ctx.job.model, ctx.run_dir
    if model.pretrained:
        tokenizer = pretrained_tokenizer(model.pretrained)
        origin = model.pretrained
    else:
        texts = _tokenizer_texts(ctx, done[CountResult])
        if not texts:
            raise RuntimeError(
                "no kept training trajectory to train the tokenizer on: see report counts "
                f"under {run_dir.url('_work', 'count.done.json')} (everything removed or held out?)"
            )
        tokenizer = train_on_texts(texts, model.vocab_size)
        origin = f"trained on {len(texts)} texts"
    save_tokenizer(tokenizer, run_dir.url("tokenizer"), run_dir.storage_options)
    ctx.progress("tokenizer", f"{len(tokenizer)} tokens ({origin})")
    # A pretrained tokenizer may have no pad token; the pad tail is never attended to nor
    # a target, so any id does, and the end-of-sequence one is always there.
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    return TokenizerResult(vocab=len(tokenizer), pad_id=pad, origin=origin)


STEP = Step("tokenizer", TokenizerResult, run)


def _texts(block: pa.Table) -> pa.Table:
    out = []
    for record in block.column("record").to_pylist():
        r = json.loads(record)
        out.append(compact_environment(r["environment"]))  # the text the model sees
        out.extend(x for t in r["turns"] for x in (t["action"], t["observation"]))
    return pa.table({"text": out})


def training_sample(block: pa.Table, *, thresholds: dict[str, float], fraction: float) -> pa.Table:
    cut = np.array([thresholds.get(d, 0.0) for d in block.column("domain").to_pylist()])
    train = block.column("split_hash").to_numpy(zero_copy_only=False) >= cut
    picked = np.array(
        [unit_hash("tokenizer:" + t) < fraction for t in block.column("trajectory_id").to_pylist()],
        dtype=bool,
    )
    return block.filter(pa.array(train & picked)).select(["uid", "record"])


def _tokenizer_texts(ctx: StepContext, count: CountResult) -> list[str]:
    """Texts of the kept training trajectories (a stable-hash sample of at most
    tokenizer_train_docs), in uid order whatever the block layout."""
    n_kept = sum(r["n"] for r in count.states if r["state"] == "kept")
    fraction = min(1.0, ctx.job.data.tokenizer_train_docs / max(n_kept, 1))
    sample = ctx.kept(["uid", "record", "domain", "split_hash", "trajectory_id"]).map_batches(
        training_sample,
        batch_format="pyarrow",
        fn_kwargs={"thresholds": count.eval_threshold, "fraction": fraction},
    )
    batches = sample.sort("uid").map_batches(_texts, batch_format="pyarrow")
    return [
        t
        for b in batches.iter_batches(batch_format="pyarrow")
        for t in b.column("text").to_pylist()
    ]
