"""The rubric-judge reward against a real local OpenAI-compatible server (the evaluate
tests' scripted server): good, malformed and truncated verdicts, retries after server
errors and timeouts; failed judgments are left out of the update and counted."""

from __future__ import annotations

import pytest
import torch

from agentworld.rl.advantages import group_advantages
from agentworld.rl.config import RewardSpec, RLConfig
from agentworld.rl.loop import _reward_metrics
from agentworld.rl.rewards import Failed, Prediction, build_rewards, score, verdict_reward
from agentworld.scoring.config import EndpointConfig, JudgeConfig
from tests.test_evaluate_helpers import GOOD_VERDICT, Reply, ScriptedChatServer

TRUNCATED = '<strengths>ok</strengths><weaknesses>none</weaknesses><scores>{"format": 5, "factuality": 3, "consis'
CTX = [{"role": "system", "content": "A bash shell."}, {"role": "user", "content": "ls"}]


def _prediction_of(body: dict) -> str:
    return body["messages"][1]["content"].split("## Predicted observation\n", 1)[1]


class Script:
    """Answers by the prediction text; counts the asks per prediction."""

    def __init__(self) -> None:
        self.asks: dict[str, int] = {}

    def __call__(self, body: dict, n: int) -> Reply:
        key = _prediction_of(body)
        k = self.asks[key] = self.asks.get(key, 0) + 1
        if key == "good":
            return Reply(text=GOOD_VERDICT)
        if key == "malformed":
            return Reply(text="The prediction looks plausible. 4/5.")
        if key == "truncated":
            return Reply(text=TRUNCATED)  # cut off mid-scores, every time
        if key == "truncated-once":
            return Reply(text=TRUNCATED if k == 1 else GOOD_VERDICT)
        if key == "flaky":
            return Reply(status=503) if k <= 2 else Reply(text=GOOD_VERDICT)
        if key == "slow-once":
            return Reply(text=GOOD_VERDICT, delay_s=3.0 if k == 1 else 0.0)
        if key == "hangs":
            return Reply(text=GOOD_VERDICT, delay_s=3.0)
        return Reply(status=400)


def _config(base_url: str) -> RLConfig:
    endpoint = EndpointConfig(
        base_url=base_url, concurrency=8, max_retries=2, timeout_s=1.0, backoff_s=0.01
    )
    return RLConfig(
        rewards=(RewardSpec(name="format", weight=1.0), RewardSpec(name="judge", weight=1.0)),
        judge=JudgeConfig(endpoint=endpoint, parse_retries=1),
    )


def test_verdict_reward_normalizes_the_five_scores():
    assert verdict_reward({"a": 1, "b": 1, "c": 1, "d": 1, "e": 1}) == 0.0
    assert verdict_reward({"a": 5, "b": 5, "c": 5, "d": 5, "e": 5}) == 1.0
    # GOOD_VERDICT: 5, 3, 4, 4, 4 -> (4 + 2 + 3 + 3 + 3) / 4 / 5
    assert verdict_reward({"a": 5, "b": 3, "c": 4, "d": 4, "e": 4}) == pytest.approx(0.75)


def test_judge_reward_parses_retries_times_out_and_excludes_failures():
    keys = ["good", "malformed", "truncated", "truncated-once", "flaky", "slow-once", "hangs"]
    script = Script()
    with ScriptedChatServer(script) as server:
        cfg = _config(server.base_url)
        preds = [
            Prediction(domain="terminal", messages=CTX, reference="notes.txt", raw=k, finished=True)
            for k in keys
        ]
        batch = score(preds, build_rewards(cfg), {"format": 1.0, "judge": 1.0})
    judge = dict(zip(keys, batch.components["judge"], strict=True))
    print(
        "\njudge rewards:",
        {k: v if not isinstance(v, Failed) else v.reason for k, v in judge.items()},
    )
    for ok in ("good", "truncated-once", "flaky", "slow-once"):
        assert judge[ok] == pytest.approx(0.75)
    assert script.asks["truncated-once"] == 2  # a parse retry, then a good verdict
    assert script.asks["flaky"] == 3  # two 503s retried
    assert script.asks["slow-once"] == 2  # the first ask timed out
    assert "no <scores> block" in judge["malformed"].reason
    assert script.asks["malformed"] == 2  # one parse retry, then given up
    assert "'consistency' is missing" in judge["truncated"].reason
    assert judge["hangs"].reason == "endpoint: request timed out"
    # Retried after a timeout (max_retries=2 allows three asks; the last one may still be
    # on its way into the server when the client gives up, so it is not counted here).
    assert script.asks["hangs"] >= 2
    # Failed judgments are excluded (not zero) and counted.
    assert batch.valid == [True, False, False, True, True, True, False]
    assert batch.total[0] == pytest.approx((1.0 + 0.75) / 2)
    metrics = _reward_metrics(batch, {"format": 1.0, "judge": 1.0}, frozenset())
    assert metrics["reward/judge_failed"] == 3.0 and metrics["predictions/excluded"] == 3.0
    assert metrics["reward/judge"] == pytest.approx(0.75)  # mean over judged predictions
    rewards = torch.tensor([batch.total[:4]])
    adv = group_advantages(rewards, torch.tensor([batch.valid[:4]]))
    assert adv[0, 1] == 0.0 and adv[0, 2] == 0.0
