"""Waits on RL actors are bounded and fail fast (agentworld.rl.placement.gather)."""

from __future__ import annotations

import time

import pytest


@pytest.fixture(scope="module")
def ranks(ray_cluster):
    """Two threaded actors, started before the tests, so that ``ping`` answers while
    ``work`` sleeps."""
    ray = ray_cluster

    @ray.remote(num_cpus=0, max_concurrency=4)
    class Rank:
        def ping(self, value: int = 1) -> int:
            return value

        def work(self, fail: bool) -> int:
            if fail:
                raise ValueError("rank 1 broke")
            time.sleep(10**6)
            return 0

    actors = [Rank.remote(), Rank.remote()]
    ray.get([a.ping.remote() for a in actors])
    yield actors
    for a in actors:
        ray.kill(a)


def test_first_error_is_raised_without_waiting_for_a_stuck_peer(ranks):
    from agentworld.rl.placement import gather

    stuck, failing = ranks
    refs = [stuck.work.remote(False), failing.work.remote(True)]
    # Waiting for every call would end in TimeoutError; the error comes first instead.
    with pytest.raises(ValueError, match="rank 1 broke"):
        gather(refs, "learner train_step", timeout_s=60)


def test_unanswered_call_raises_naming_it(ranks):
    from agentworld.rl.placement import gather

    stuck, _ = ranks
    with pytest.raises(TimeoutError, match=r"learner ready: 1 of 2 actor calls unanswered"):
        gather([stuck.ping.remote(), stuck.work.remote(False)], "learner ready", timeout_s=2)


def test_answers_keep_the_order_of_the_calls(ranks):
    from agentworld.rl.placement import gather

    refs = [ranks[1].ping.remote(2), ranks[0].ping.remote(1), ranks[1].ping.remote(3)]
    assert gather(refs, "rollout weight_version", timeout_s=60) == [2, 1, 3]
