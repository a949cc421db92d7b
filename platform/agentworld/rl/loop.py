"""The GRPO loop. Each step: draw contexts, sample G predictions per context from the
rollout engines, score them, normalize advantages within each group, update the learner,
push the new weights to every engine (which must report the new version), log, and
checkpoint at intervals. Free of Ray: it calls the plain methods of ``RLWorkers``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from agentworld.rl.config import RLConfig
from agentworld.rl.data import Context, choose_contexts
from agentworld.rl.learner import TrainBatch
from agentworld.rl.rewards import (
    Prediction,
    RewardBatch,
    RewardFn,
    combine,
    component_means,
    score,
)
from agentworld.rl.rollout import Completion


def build_batch(
    contexts: Sequence[Context],
    completions: Sequence[Sequence[Completion]],
    advantages: np.ndarray,
    valid: np.ndarray,
    *,
    pad_id: int,
) -> TrainBatch:
    """Rows context-major (context i's G predictions together), right-padded.
    advantages, valid: (N, G). The loss mask covers completion tokens of valid rows."""
    seqs, masks, advs = [], [], []
    for i, (ctx, group) in enumerate(zip(contexts, completions, strict=True)):
        for g, comp in enumerate(group):
            ids = list(ctx.prompt_ids) + list(comp.token_ids)
            m = [0.0] * (len(ctx.prompt_ids) - 1) + [float(valid[i, g])] * len(comp.token_ids)
            seqs.append(ids)
            masks.append(m)
            advs.append(advantages[i, g])
    length = max(len(s) for s in seqs)
    input_ids = np.full((len(seqs), length), pad_id, dtype=np.int64)
    attention = np.zeros((len(seqs), length), dtype=np.int8)
    loss_mask = np.zeros((len(seqs), length - 1), dtype=np.float32)
    for r, (s, m) in enumerate(zip(seqs, masks, strict=True)):
        input_ids[r, : len(s)] = s
        attention[r, : len(s)] = 1
        loss_mask[r, : len(m)] = m
    return TrainBatch(
        input_ids=input_ids,
        attention_mask=attention,
        loss_mask=loss_mask,
        advantages=np.asarray(advs, dtype=np.float32),
    )


def predictions_of(
    contexts: Sequence[Context], completions: Sequence[Sequence[Completion]]
) -> list[Prediction]:
    return [
        Prediction(
            domain=c.domain,
            messages=c.messages,
            reference=c.reference,
            raw=comp.text,
            finished=comp.finished,
        )
        for c, group in zip(contexts, completions, strict=True)
        for comp in group
    ]


def advantage_arrays(
    batch: RewardBatch, n: int, g: int, *, scale_by_std: bool
) -> tuple[np.ndarray, np.ndarray]:
    import torch

    # not at the top: it brings torch into this light module
    from agentworld.rl.advantages import group_advantages

    rewards = torch.tensor(batch.total, dtype=torch.float32).view(n, g)
    valid = torch.tensor(batch.valid).view(n, g)
    adv = group_advantages(rewards, valid, scale_by_std=scale_by_std)
    return adv.numpy(), valid.numpy()


@dataclass
class Trainer:
    """One RL run over ``workers`` (an ``RLWorkers`` or anything with its methods)."""

    rl: RLConfig
    workers: Any
    contexts: Sequence[Context]
    rewards: dict[str, RewardFn]
    pad_id: int
    log: Callable[[int, dict[str, float]], None]
    checkpoint: Callable[[int], None] | None = None

    def run(self, start_step: int, end_step: int) -> None:
        rl = self.rl
        for step in range(start_step, end_step):
            metrics = self.step(step)
            self.log(step, metrics)
            done = step + 1
            if self.checkpoint and (done % rl.checkpoint_every == 0 or done == end_step):
                self.checkpoint(done)

    def step(self, step: int) -> dict[str, float]:
        rl = self.rl
        t0 = time.perf_counter()
        ctxs = choose_contexts(self.contexts, rl.contexts_per_step, seed=rl.seed, step=step)
        completions = self.workers.rollout.generate(
            [list(c.prompt_ids) for c in ctxs], n=rl.group_size
        )
        t_roll = time.perf_counter()
        weights, gates = self._weights()
        rb = score(predictions_of(ctxs, completions), self.rewards, weights, gates)
        adv, valid = advantage_arrays(rb, len(ctxs), rl.group_size, scale_by_std=rl.scale_by_std)
        t_reward = time.perf_counter()
        stats = self.workers.learners.train_step(
            build_batch(ctxs, completions, adv, valid, pad_id=self.pad_id)
        )
        t_train = time.perf_counter()
        sync_s = self.workers.sync_weights(step + 1)
        t_end = time.perf_counter()
        times = {
            "time/rollout_s": t_roll - t0,
            "time/reward_s": t_reward - t_roll,
            "time/train_s": t_train - t_reward,
            "time/sync_s": sync_s,
            "time/step_s": t_end - t0,
            "time/sync_share": sync_s / (t_end - t0),
        }
        return {
            **_reward_metrics(rb, weights, gates),
            **_advantage_metrics(adv, valid),
            **_rollout_metrics(completions, t_roll - t0),
            **{f"learner/{k}": v for k, v in stats.items()},
            **times,
        }

    def _weights(self) -> tuple[dict[str, float], frozenset[str]]:
        """The rewards' weights, and the names of the gates."""
        specs = self.rl.rewards
        return {s.name: s.weight for s in specs}, frozenset(s.name for s in specs if s.gate)


def _reward_metrics(
    rb: RewardBatch, weights: dict[str, float], gates: frozenset[str]
) -> dict[str, float]:
    ok = [t for t, v in zip(rb.total, rb.valid, strict=True) if v]
    rules = {n: c for n, c in rb.components.items() if n != "judge"}
    rule_totals = [
        combine({n: c[i] for n, c in rules.items()}, weights, gates) for i in range(len(rb.total))
    ]
    out = {
        "reward/total": float(np.mean(ok)) if ok else 0.0,
        "reward/rules": float(np.mean(rule_totals)) if rules else 0.0,
        "predictions/excluded": float(sum(not v for v in rb.valid)),
    }
    out.update({f"reward/{k}": v for k, v in component_means(rb).items()})
    out.update({f"reward/{k}_failed": float(len(r)) for k, r in rb.failures.items()})
    return out


def _advantage_metrics(adv: np.ndarray, valid: np.ndarray) -> dict[str, float]:
    a = adv[valid]
    flat_groups = np.all(np.abs(adv) < 1e-8, axis=1)
    return {
        "adv/mean": float(a.mean()) if a.size else 0.0,
        "adv/std": float(a.std()) if a.size else 0.0,
        "adv/abs_mean": float(np.abs(a).mean()) if a.size else 0.0,
        "adv/flat_group_share": float(flat_groups.mean()),
    }


def _rollout_metrics(
    completions: Sequence[Sequence[Completion]], seconds: float
) -> dict[str, float]:
    flat = [c for group in completions for c in group]
    tokens = sum(len(c.token_ids) for c in flat)
    return {
        "rollout/response_len": tokens / len(flat),
        "rollout/finished_share": sum(c.finished for c in flat) / len(flat),
        "rollout/tokens": float(tokens),
        "rollout/tokens_per_s": tokens / max(seconds, 1e-9),
    }
