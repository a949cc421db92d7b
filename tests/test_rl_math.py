"""RL math on hand-computed cases: group-normalized advantages, the clipped surrogate
(token level and GSPO's sequence level), masking, token-mean, k3 KL, batch building."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from agentworld.rl.advantages import group_advantages
from agentworld.rl.loss import entropy, kl_k3, policy_loss, token_logprobs

S3 = 1 / math.sqrt(1 / 3)  # 1 / std of {+.5, -.5, -.5, +.5} (Bessel): 1.7320...


def test_group_advantages_normalize_within_each_group():
    rewards = torch.tensor([[1.0, 0.0, 0.0, 1.0], [0.3, 0.3, 0.3, 0.3]])
    valid = torch.ones_like(rewards, dtype=torch.bool)
    adv = group_advantages(rewards, valid)
    assert adv[0].tolist() == pytest.approx([0.5 * S3, -0.5 * S3, -0.5 * S3, 0.5 * S3], rel=1e-5)
    assert adv[1].tolist() == [0.0] * 4  # a flat group teaches nothing
    unscaled = group_advantages(rewards, valid, scale_by_std=False)  # Dr. GRPO
    assert unscaled[0].tolist() == pytest.approx([0.5, -0.5, -0.5, 0.5])


def test_group_advantages_leave_out_invalid_members():
    # Member 2 failed (its reward 9 must not move the mean): mean 1/3 over the rest,
    # centered (2/3, -1/3, -1/3), std sqrt((4/9 + 1/9 + 1/9) / 2) = sqrt(1/3).
    rewards = torch.tensor([[1.0, 0.0, 9.0, 0.0], [1.0, 0.0, 0.0, 0.0]])
    valid = torch.tensor([[True, True, False, True], [True, False, False, False]])
    adv = group_advantages(rewards, valid)
    expected = [2 / 3 * S3, -1 / 3 * S3, 0.0, -1 / 3 * S3]
    assert adv[0].tolist() == pytest.approx(expected, rel=1e-5)
    assert adv[1].tolist() == [0.0] * 4  # one valid member: no group to compare with


def _case():
    ratios = torch.tensor([[1.5, 0.9, 5.0], [0.5, 1.1, 1.3]])
    old = torch.log(torch.tensor([[0.2, 0.3, 0.1], [0.4, 0.1, 0.2]]))
    logp = (old + torch.log(ratios)).requires_grad_(True)
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])  # row 0's last token is pad
    adv = torch.tensor([1.0, -1.0])
    return logp, old, mask, adv


def test_token_level_clipped_loss_and_gradients():
    logp, old, mask, adv = _case()
    out = policy_loss(logp, old, adv, mask, clip_low=0.2, clip_high=0.2)
    # Per token -min(rA, clip(r, .8, 1.2)A): row 0 (A=1): -1.2 (clipped), -0.9;
    # row 1 (A=-1): 0.8 (clipped), 1.1, 1.3 (unclipped: min picks -1.3); token-mean over 5.
    assert out.policy.item() == pytest.approx((-1.2 - 0.9 + 0.8 + 1.1 + 1.3) / 5)
    assert out.clip_frac.item() == pytest.approx(3 / 5)  # 1.5, 0.5, 1.3 lie outside
    out.loss.backward()
    # d/dlogp of -rA is -rA; clipped-and-chosen tokens and the pad token get none.
    expected = torch.tensor([[0.0, -0.9, 0.0], [0.0, 1.1, 1.3]]) / 5
    assert torch.allclose(logp.grad, expected, atol=1e-6)


def test_token_mean_uses_global_count_and_asymmetric_clip():
    logp, old, mask, adv = _case()
    local = policy_loss(logp, old, adv, mask, clip_low=0.2, clip_high=0.2).policy.item()
    shard = policy_loss(logp, old, adv, mask, clip_low=0.2, clip_high=0.2, n_units=10.0)
    assert shard.policy.item() == pytest.approx(local * 5 / 10)
    # clip-higher 0.6: row 0's 1.5 is no longer clipped (-1.5), the rest as before.
    dapo = policy_loss(logp, old, adv, mask, clip_low=0.2, clip_high=0.6)
    assert dapo.policy.item() == pytest.approx((-1.5 - 0.9 + 0.8 + 1.1 + 1.3) / 5)


def test_sequence_level_ratio_gspo():
    logp, old, mask, adv = _case()
    out = policy_loss(logp, old, adv, mask, clip_low=0.2, clip_high=0.2, ratio_level="sequence")
    r0 = math.sqrt(1.5 * 0.9)  # geometric mean over row 0's two counted tokens: 1.1619
    r1 = (0.5 * 1.1 * 1.3) ** (1 / 3)  # 0.8943, inside [0.8, 1.2]
    assert out.policy.item() == pytest.approx((-r0 + r1) / 2, rel=1e-5)
    assert out.clip_frac.item() == 0.0


def test_k3_kl_and_its_place_in_the_loss():
    logp = torch.log(torch.tensor([[0.5, 0.25]]))
    ref = torch.log(torch.tensor([[0.25, 0.25]]))
    # exp(ref - logp) - (ref - logp) - 1 = 0.5 + ln 2 - 1 for token 0, 0 for token 1.
    assert kl_k3(logp, ref).tolist()[0] == pytest.approx([0.5 + math.log(2) - 1, 0.0])
    out = policy_loss(
        logp,
        logp.detach(),
        torch.zeros(1),
        torch.ones(1, 2),
        clip_low=0.2,
        clip_high=0.2,
        ref_logp=ref,
        kl_coef=0.1,
    )
    assert out.kl.item() == pytest.approx((0.5 + math.log(2) - 1) / 2)
    assert out.loss.item() == pytest.approx(0.1 * out.kl.item())  # zero advantages


def test_token_logprobs_and_entropy():
    logits = torch.log(torch.tensor([[[0.5, 0.25, 0.25], [1 / 3, 1 / 3, 1 / 3]]]))
    targets = torch.tensor([[1, 2]])
    assert token_logprobs(logits, targets).tolist()[0] == pytest.approx(
        [math.log(0.25), math.log(1 / 3)], rel=1e-6
    )
    ent = entropy(logits)[0].tolist()
    assert ent == pytest.approx([1.5 * math.log(2), math.log(3)], rel=1e-6)


def test_build_batch_masks_only_completions_of_valid_predictions():
    from agentworld.rl.data import Context
    from agentworld.rl.loop import build_batch
    from agentworld.rl.rollout import Completion

    ctx = Context(
        trajectory_id="t",
        domain="terminal",
        turn_idx=1,
        messages=[],
        reference="r",
        prompt_ids=(5, 6, 7),
    )
    comps = [
        Completion(token_ids=(8, 9), text="", finished=True),
        Completion(token_ids=(10,), text="", finished=False),
    ]
    batch = build_batch(
        [ctx], [comps], np.array([[0.5, -0.5]]), np.array([[True, False]]), pad_id=0
    )
    assert batch.input_ids.tolist() == [[5, 6, 7, 8, 9], [5, 6, 7, 10, 0]]
    assert batch.attention_mask.tolist() == [[1, 1, 1, 1, 1], [1, 1, 1, 1, 0]]
    # Position t predicts token t + 1: positions 2 and 3 predict 8 and 9. Row 1 failed.
    assert batch.loss_mask.tolist() == [[0, 0, 1, 1], [0, 0, 0, 0]]
    assert batch.advantages.tolist() == [0.5, -0.5]
