"""Demonstrations: the actions of collected trajectories (and of oracle episodes of the
training tasks, recorded in the real environments) as token transcripts with the loss
on the actions only, and the batches that fit them.

The fit runs on the RL learner itself: a ``TrainBatch`` whose advantages are all 1,
taken in one epoch, makes the clipped policy-gradient loss's gradient exactly that of
the token-mean negative log-likelihood of the actions (the ratio is 1 and unclipped),
so no second training loop is needed, at any scale the learner runs at.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterable, Sequence

import numpy as np

from agentworld.agent.policy import INSTRUCTIONS, Renderer, Transcript
from agentworld.console import say
from agentworld.rl.learner import TrainBatch


def conversation_transcript(
    renderer: Renderer,
    domain: str,
    environment: str,
    actions: Sequence[str],
    observations: Sequence[str],
) -> Transcript:
    """The transcript an agent that took ``actions`` would have produced."""
    tr = renderer.start(domain, environment)
    for i, action in enumerate(actions):
        renderer.add_action(tr, renderer.action_ids(action), finished=True)
        if i < len(observations):
            renderer.add_observation(tr, observations[i])
    return tr


def trajectory_transcripts(
    records: Iterable, renderer: Renderer, domains: Iterable[str] | None = None
) -> list[Transcript]:
    """Transcripts of collected trajectories whose domain the agent acts in (of
    ``domains``, the tasks' domains, when given: a run tasked on terminal alone does not
    fit MCP sessions, whose tool lists are 1-3k tokens, every row padded to them)."""
    keep = set(INSTRUCTIONS) & set(INSTRUCTIONS if domains is None else domains)
    out = []
    for traj in records:
        if traj.domain not in keep or not traj.turns:
            continue
        actions = [t.action for t in traj.turns]
        observations = [t.observation for t in traj.turns]
        out.append(
            conversation_transcript(renderer, traj.domain, traj.environment, actions, observations)
        )
    return out


def episode_transcript(ep, renderer: Renderer) -> Transcript:
    """An oracle episode (``episodes.replay``) as a demonstration."""
    return conversation_transcript(
        renderer, ep.task.domain, ep.environment, ep.actions, ep.observations
    )


def transcripts_batch(
    transcripts: Sequence[Transcript],
    advantages: Sequence[float],
    *,
    pad_id: int,
    max_tokens: int | None = None,
) -> TrainBatch:
    """Right-padded rows; loss_mask[t] = 1 where position t predicts an agent token."""
    rows = [(tr.ids[:max_tokens], tr.mask[:max_tokens]) for tr in transcripts]
    length = max(len(ids) for ids, _ in rows)
    input_ids = np.full((len(rows), length), pad_id, dtype=np.int64)
    attention = np.zeros((len(rows), length), dtype=np.int8)
    loss_mask = np.zeros((len(rows), length - 1), dtype=np.float32)
    for r, (ids, mask) in enumerate(rows):
        input_ids[r, : len(ids)] = ids
        attention[r, : len(ids)] = 1
        loss_mask[r, : len(ids) - 1] = mask[1:]
    return TrainBatch(
        input_ids=input_ids,
        attention_mask=attention,
        loss_mask=loss_mask,
        advantages=np.asarray(advantages, dtype=np.float32),
    )


def fit_demonstrations(
    learners,
    transcripts: Sequence[Transcript],
    *,
    steps: int,
    batch: int,
    pad_id: int,
    max_tokens: int,
    seed: int,
    learning_rate: float,
) -> list[dict[str, float]]:
    """``steps`` supervised steps on the learner group at ``learning_rate`` (rows drawn
    with a seeded RNG); returns the learner's statistics per step."""
    rng = random.Random(f"agentworld-demos:{seed}")
    out = []
    t0 = time.perf_counter()
    for step in range(steps):
        picked = [transcripts[rng.randrange(len(transcripts))] for _ in range(batch)]
        batch_rows = transcripts_batch(picked, [1.0] * batch, pad_id=pad_id, max_tokens=max_tokens)
        out.append(learners.train_step(batch_rows, learning_rate=learning_rate))
        if (step + 1) % max(steps // 5, 1) == 0:
            say(f"[agent] demonstrations {step + 1}/{steps} ({time.perf_counter() - t0:.0f}s)")
    return out


def action_nll(learners, transcripts: Sequence[Transcript], *, max_tokens: int) -> float:
    """Mean negative log-likelihood of the action tokens under the learner's weights."""
    total, count = 0.0, 0
    for tr in transcripts:
        ids, mask = tr.ids[:max_tokens], tr.mask[:max_tokens]
        logps = learners.logprobs(ids)  # position t-1 holds log p(token t)
        for t in range(1, len(ids)):
            if mask[t]:
                total -= logps[t - 1]
                count += 1
    return total / max(count, 1)
