"""Checkpoints through Ray Train. Each rank writes its DeepSpeed files (rank 0 the
dense weights, every expert-parallel rank its own experts, every rank its optimizer
partition) into a local directory and reports it; Ray Train puts all ranks' files in
one ``<out>/checkpoints/step-NNNNNN/`` directory, keeps the newest N and hands the
newest back after a restart (of a worker group or of the whole job)."""

from __future__ import annotations

import tempfile
from typing import Any

TAG = "deepspeed"
"""DeepSpeed's checkpoint tag: the sub-directory inside each Ray Train checkpoint."""


def checkpoint_name(step: int) -> str:
    return f"step-{step:06d}"


def save_and_report(engine, step: int, metrics: dict[str, Any], events=None) -> None:
    """Save (collective) and report with the checkpoint (every rank must call it)."""
    # not at the top: it brings ray into this light module
    from agentworld.train.placement import report

    with tempfile.TemporaryDirectory(prefix="agentworld-ckpt-") as tmp:
        engine.save_checkpoint(tmp, tag=TAG, client_state={"step": step})
        report(metrics, events=events, checkpoint_dir=tmp, name=checkpoint_name(step))


def restore(engine) -> int:
    """Load the newest reported checkpoint, if any, into ``engine`` (weights, optimizer,
    schedule); returns the step it was taken at (0 when starting fresh)."""
    # not at the top: it brings ray into this light module
    from agentworld.train.placement import latest_checkpoint

    checkpoint = latest_checkpoint()
    if checkpoint is None:
        return 0
    with checkpoint.as_directory() as path:
        loaded, client_state = engine.load_checkpoint(path, tag=TAG)
    if loaded is None:
        raise RuntimeError(f"checkpoint {checkpoint.path} holds no DeepSpeed state under {TAG}/")
    return int(client_state["step"])
