"""A GRPO step whose groups all scored their siblings alike has no gradient and is not
taken; one group with different rewards is enough to take it."""

from __future__ import annotations

import numpy as np

from agentworld.agent.grpo import all_flat


def test_a_step_is_skipped_only_when_every_group_is_flat():
    assert all_flat(np.zeros((4, 4)))
    assert all_flat(np.full((2, 3), 1e-10))
    mixed = np.zeros((4, 4))
    mixed[2] = [0.87, -0.29, -0.29, -0.29]  # one sibling of one group succeeded
    assert not all_flat(mixed)
