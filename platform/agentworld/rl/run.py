"""One RL run, end to end: load and tokenize the contexts, start (or take) the workers,
resume from the newest checkpoint, train, export the policy as an HF checkpoint under
``<out>/hf/`` and write the manifest. A rerun of a finished run does nothing."""

from __future__ import annotations

from typing import Any

from agentworld.console import say
from agentworld.io import is_complete, join, read_manifest, write_jsonl, write_manifest
from agentworld.model import load_tokenizer
from agentworld.model.card import card_data, trained_on, write_card
from agentworld.rl import checkpoint
from agentworld.rl.config import RolloutConfig
from agentworld.rl.data import load_contexts, tokenize_contexts
from agentworld.rl.job import RLJob
from agentworld.rl.loop import Trainer
from agentworld.rl.metrics_log import MetricsLog
from agentworld.rl.placement import RLWorkers
from agentworld.rl.rewards import build_rewards


def prepare_contexts(
    data_url: str, tokenizer: Any, rollout: RolloutConfig, out_url: str
) -> tuple[list[Any], int]:
    """Valid, tokenized contexts and the count left out (bad rows, over-long prompts and
    observations longer than a rollout may write, written to quarantine/)."""

    loaded = load_contexts(data_url)
    contexts = tokenize_contexts(
        loaded.contexts,
        tokenizer,
        max_prompt_tokens=rollout.max_prompt_tokens,
        max_new_tokens=rollout.max_new_tokens,
        result=loaded,
    )
    if loaded.rejected:
        write_jsonl(join(out_url, "quarantine", "contexts.jsonl"), loaded.rejected)
    if not contexts:
        raise ValueError(f"--data {data_url}: no usable contexts ({len(loaded.rejected)} rejected)")
    say(
        f"[rl] {len(contexts)} contexts, {len(loaded.rejected)} rejected, "
        f"{loaded.held_out} held out (eval split)"
    )
    return contexts, len(loaded.rejected)


def run(job: RLJob, *, workers: Any = None, stop_after: int | None = None) -> dict[str, Any]:
    """Train to ``rl.max_steps`` and return the manifest (or stop early after step
    ``stop_after``, as a killed run would). ``workers``: an ``RLWorkers`` to reuse,
    holding the weights of ``job.init`` or of this run's newest checkpoint; by default
    one is started and closed."""

    data_url, init_url, out_url, rl = job.data, job.init, job.out, job.rl
    if is_complete(out_url):
        say(f"[rl] {out_url} is complete; nothing to do")
        return read_manifest(out_url)
    tokenizer = load_tokenizer(init_url)
    contexts, rejected = prepare_contexts(data_url, tokenizer, rl.rollout, out_url)
    rewards = build_rewards(rl)
    own = workers is None
    workers = workers or RLWorkers(rl, job.train, init_url)
    log = None
    try:
        start = checkpoint.latest_step(out_url)
        if start:
            checkpoint.load(workers, out_url, start)
            workers.sync_weights(start)
            say(f"[rl] resumed from step {start}")
        log = MetricsLog(
            out_url, config=job.config, max_steps=rl.max_steps, use_wandb=rl.wandb, start_step=start
        )
        trainer = Trainer(
            rl=rl,
            workers=workers,
            contexts=contexts,
            rewards=rewards,
            pad_id=tokenizer.pad_token_id,
            log=log,
            checkpoint=lambda step: checkpoint.save(
                workers, out_url, step, keep=rl.keep_checkpoints, state={"contexts": len(contexts)}
            ),
        )
        end = rl.max_steps if stop_after is None else min(stop_after, rl.max_steps)
        trainer.run(start, end)
        if end < rl.max_steps:
            return {"status": "stopped", "step": end}
        hf = workers.learners.export_hf(join(out_url, "hf"), init_url)
        recipe = job.config.get("name", "custom")
        card = card_data(stage="rl", name=f"agentworld-{recipe}-rl", base_model=init_url,
                         domains=trained_on(data_url), recipe=recipe, steps=rl.max_steps)  # fmt: skip
        write_card(join(out_url, "hf"), card)
    finally:
        if log is not None:
            log.close()
        if own:
            workers.close()
    return _finish(job, log.rows, len(contexts), rejected, hf)


def _finish(job: RLJob, rows, n_contexts, rejected, hf) -> dict[str, Any]:
    first, last, rl = rows[0], rows[-1], job.rl
    return write_manifest(
        job.out,
        stage="rl",
        inputs={"data": job.data, "init": job.init},
        config=job.config,
        counts={
            "steps": len(rows),
            "contexts": n_contexts,
            "rejected_contexts": rejected,
            "predictions": len(rows) * rl.contexts_per_step * rl.group_size,
            "excluded_predictions": sum(r["predictions/excluded"] for r in rows),
            "reward_first": first["reward/total"],
            "reward_last": last["reward/total"],
        },
        outputs={
            "hf": hf,
            "metrics": join(job.out, "metrics.jsonl"),
            "checkpoints": join(job.out, "checkpoints"),
        },
    )
