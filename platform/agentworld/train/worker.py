"""``train_loop_per_worker``: what each Ray Train worker runs. It reads only its
config (a WorkerSpec): builds the model and the DeepSpeed engine, resumes from the
newest checkpoint, takes the planned optimizer steps on its stream of packed rows,
evaluates on the held-out rows, checkpoints, reports, and finally joins the HF export."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from agentworld.model.config import ModelConfig
from agentworld.model.family import family_of
from agentworld.train.batch import PackedBatch, collate
from agentworld.train.checkpoint import restore, save_and_report
from agentworld.train.config import ClusterConfig, TrainConfig
from agentworld.train.engine import ModelSource, build_engine, build_model, expert_placement
from agentworld.train.export import export_hf
from agentworld.train.loss import RouterShape, forward_losses


@dataclass(frozen=True, kw_only=True)
class WorkerSpec:
    """Everything a worker needs; built by the driver, shipped in train_loop_config."""

    stage: str
    model: ModelConfig
    train: TrainConfig
    """The stage's own settings (TrainConfig.for_stage)."""
    cluster: ClusterConfig
    source: ModelSource
    hf_url: str
    """Where rank 0 writes the final HF export."""
    rows_per_worker: int
    """Packed training rows each worker gets per epoch (Ray Data's equal split)."""
    env: dict[str, str] = field(default_factory=dict)
    """Storage settings (AWS_*) from the driver, set in the workers' environment."""


def _all_reduce_sum(values: list[float]) -> list[float]:
    import torch
    import torch.distributed as dist

    # NCCL (Ray Train's backend on GPU workers) reduces only GPU tensors.
    device = "cuda" if dist.get_backend() == "nccl" else "cpu"
    t = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(t)
    return t.cpu().tolist()


def _all_gather_object(obj: Any) -> list[Any]:
    import torch.distributed as dist

    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


EPOCH_KEPT_BYTES = 256 << 20
"""A worker keeps its first epoch of rows and replays it when an epoch is at most this
size (at 32 bytes a token: four int64 columns)."""


def micro_batches(shard, spec: WorkerSpec, *, skip: int) -> Iterator[PackedBatch]:
    """Endless micro-batches over epochs of this worker's shard, after skipping ``skip``
    micro-batches (what the steps before a resume consumed). The order is the same on
    every pass (preserve_order), which is what makes a resumed run repeat the original.

    Each ``iter_batches`` starts a new streaming execution of the split (about 12 s on
    2 cores): on a small corpus, with an epoch of a few micro-batches, that was most of
    a step's time. So an epoch of at most EPOCH_KEPT_BYTES is read once and replayed
    from memory. Every rank decides from the same figures (the equal split's
    ``rows_per_worker``), so either all ranks read each epoch or none does."""
    micro = spec.train.micro_batch_size
    offset = skip % (spec.rows_per_worker // micro)  # whole epochs are skipped unread
    keep = spec.rows_per_worker * spec.train.seq_len * 32 <= EPOCH_KEPT_BYTES
    kept: list[dict[str, Any]] | None = None
    while True:
        read: list[dict[str, Any]] | None = None  # the first epoch, when it is kept
        if kept is None:
            epoch = shard.iter_batches(batch_size=micro, batch_format="numpy", drop_last=True)
            read = [] if keep else None
        else:
            epoch = kept
        for i, rows in enumerate(epoch):
            if read is not None:
                read.append(rows)
            if i >= offset:
                yield collate(rows)
        if read is not None:
            kept = read
        offset = 0


def _losses(engine, batch: PackedBatch, aux_coef: float):
    config = engine.module.config
    return forward_losses(
        engine,
        batch.to(engine.device),
        aux_coef=aux_coef,
        router=RouterShape.of(config),
        documents=family_of(config).recurrent,
    )


def train_step(
    engine, batches: Iterator[PackedBatch], accum: int, aux_coef: float
) -> dict[str, float]:
    """One optimizer step: ``accum`` micro-batches (DeepSpeed steps the optimizer and
    the schedule at the accumulation boundary); ``aux_coef`` weighs the router's
    load-balancing loss. Metrics are global."""
    start = time.perf_counter()
    lm = lb = tokens = 0.0
    for _ in range(accum):
        batch = next(batches)
        losses = _losses(engine, batch, aux_coef)
        engine.backward(losses.total)
        engine.step()
        lm, lb = lm + float(losses.lm.detach()), lb + float(losses.load_balance.detach())
        tokens += batch.num_tokens
    lm, lb, tokens = _all_reduce_sum([lm, lb, tokens])
    world = engine.world_size
    seconds = time.perf_counter() - start
    metrics = {
        "loss": lm / (accum * world),
        "load_balance_loss": lb / (accum * world),
        "lr": float(engine.get_lr()[0]),
        "grad_norm": float(engine.get_global_grad_norm() or 0.0),
        "tokens": int(tokens),
        "tokens_per_s": tokens / seconds,
    }
    return metrics


def held_out_batches(table, micro: int) -> list[dict[str, list]]:
    """The held-out rows (a pyarrow Table the driver read once) as micro-batches."""
    return [table.slice(i, micro).to_pydict() for i in range(0, table.num_rows, micro)]


def evaluate(engine, batches: list[Any], aux_coef: float, rank: int, world: int) -> float:
    """Token-mean held-out loss. Every rank holds all held-out batches and takes batch i
    when i % world == rank; a rank left without a batch in the last round runs a
    zero-weight one, because expert-parallel (and ZeRO-3) forwards are collective."""
    import torch

    total = count = 0.0
    engine.eval()
    with torch.no_grad():
        for first in range(0, len(batches), world):
            group = batches[first : first + world]
            batch = collate(group[rank] if rank < len(group) else group[0])
            losses = _losses(engine, batch, aux_coef)
            if rank < len(group):
                total += float(losses.lm) * losses.num_targets
                count += losses.num_targets
    engine.train()
    total, count = _all_reduce_sum([total, count])
    return total / max(count, 1.0)


def train_loop_per_worker(config: dict[str, Any]) -> None:
    import torch

    # not at the top: it brings ray into this light module
    from agentworld.train.placement import report, worker_inputs, worker_rank

    spec: WorkerSpec = config["spec"]
    events = config.get("events")
    train, aux_coef = spec.train, spec.model.router_aux_loss_coef
    rank, world = worker_rank()
    torch.manual_seed(train.seed)
    model, tokenizer = build_model(spec.model, train, spec.source)
    engine = build_engine(model, train, spec.cluster, world)
    start = restore(engine)
    info = {"stage": spec.stage, "resumed_from_step": start, "max_steps": train.max_steps}
    info["placement"] = _all_gather_object(expert_placement(engine.module))
    shard, held_out_table = worker_inputs(config)
    batches = micro_batches(shard, spec, skip=start * train.grad_accum_steps)
    held_out = held_out_batches(held_out_table, train.micro_batch_size)
    if start == 0:
        held_out_loss = evaluate(engine, held_out, aux_coef, rank, world)
        report({**info, "step": 0, "eval_loss": held_out_loss}, events=events)
    for step in range(start + 1, train.max_steps + 1):
        metrics = {
            **info,
            "step": step,
            **train_step(engine, batches, train.grad_accum_steps, aux_coef),
        }
        last = step == train.max_steps
        if last or step % train.eval_every == 0:
            metrics["eval_loss"] = evaluate(engine, held_out, aux_coef, rank, world)
        if last or step % train.checkpoint_every == 0:
            save_and_report(engine, step, metrics, events)
        elif step % train.log_every == 0:
            report(metrics, events=events)
    export_hf(engine.module, tokenizer, spec.hf_url, rank=rank, source_url=spec.source.init_url)
