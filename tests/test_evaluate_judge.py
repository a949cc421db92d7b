"""Judge: verdict parsing (good, malformed, missing tag, out of range), prompt building,
and the client against a real HTTP endpoint that retries, times out and answers badly."""

from __future__ import annotations

import pytest

from agentworld.scoring.config import EndpointConfig, JudgeConfig
from agentworld.scoring.judge_client import (
    JudgeRequest,
    VerdictError,
    build_judge_messages,
    judge_sync,
    parse_verdict,
)
from agentworld.scoring.rubrics import judge_instructions
from tests.test_evaluate_helpers import GOOD_VERDICT, Reply, ScriptedChatServer

SCORES = {"format": 5, "factuality": 3, "consistency": 4, "realism": 4, "quality": 4}


def test_parse_good_verdict():
    v = parse_verdict(GOOD_VERDICT)
    assert v.scores == SCORES
    assert (v.strengths, v.weaknesses) == ("right layout", "wrong count")
    assert v.total == pytest.approx(4.0)


def test_parse_tolerates_reasoning_fences_and_name_value_lines():
    text = (
        "<think>compare counts</think><strengths>s</strengths><weaknesses>w</weaknesses>"
        "<scores>\n```\nformat: 5\nfactuality = 3\n\"consistency\": 4.0\nrealism: '4'\nquality: 4\n```\n</scores>"
    )
    assert parse_verdict(text).scores == SCORES


def test_parse_missing_tag():
    bare = 'Scores: {"format": 5, "factuality": 3, "consistency": 4, "realism": 4, "quality": 4}'
    assert parse_verdict(bare).scores == SCORES  # a bare JSON object with all five names
    with pytest.raises(VerdictError, match="no <scores> block"):
        parse_verdict("<strengths>fine</strengths><weaknesses>none</weaknesses> I give it a 4.")


@pytest.mark.parametrize(
    "scores, reason",
    [
        (
            '{"format": 6, "factuality": 3, "consistency": 4, "realism": 4, "quality": 4}',
            "'format' is 6, outside 1..5",
        ),
        (
            '{"format": 5, "factuality": 0, "consistency": 4, "realism": 4, "quality": 4}',
            "'factuality' is 0, outside",
        ),
        (
            '{"format": 5, "factuality": 3, "consistency": 4.5, "realism": 4, "quality": 4}',
            "'consistency' is not an integer",
        ),
        ('{"format": 5, "factuality": 3, "consistency": 4, "realism": 4}', "'quality' is missing"),
        (
            '{"format": "good", "factuality": 3, "consistency": 4, "realism": 4, "quality": 4}',
            "'format' is not a number",
        ),
        ("all fine", "holds no scores"),
    ],
)
def test_parse_malformed_and_out_of_range(scores, reason):
    with pytest.raises(VerdictError, match=reason.replace("(", r"\(")):
        parse_verdict(
            f"<strengths>a</strengths><weaknesses>b</weaknesses><scores>{scores}</scores>"
        )


def test_instructions_name_the_three_kinds_per_domain():
    text = judge_instructions("prefix/terminal")
    assert "Fixed by the session (must match)" in text and "line counts" in text
    assert "Pre-existing environment content (plausibility)" in text
    assert "Runtime metadata (format only)" in text and "PIDs" in text
    assert "timestamps" in judge_instructions("my_custom_domain")  # generic rubric


def test_prompt_keeps_latest_turns_within_budget():
    context = [{"role": "system", "content": "E" * 50}]
    for i in range(1, 6):
        context += [
            {"role": "user", "content": f"cmd{i}"},
            {"role": "assistant", "content": "o" * 40},
        ]
    context.append({"role": "user", "content": "cmd6"})
    req = JudgeRequest(domain="terminal", context=context, reference="real", prediction="pred")
    user = build_judge_messages(req, max_context_chars=250)[1]["content"]
    assert "### Turn 5 action\ncmd5" in user and "cmd1" not in user
    assert "earlier turns omitted" in user
    assert user.endswith("## Real observation\nreal\n\n## Predicted observation\npred")


def _cfg(server: ScriptedChatServer, **kw) -> JudgeConfig:
    endpoint = EndpointConfig(
        base_url=server.base_url,
        concurrency=4,
        max_retries=2,
        timeout_s=kw.pop("timeout_s", 30),
        backoff_s=0.01,
    )
    return JudgeConfig(endpoint=endpoint, **kw)


def _request(key: str) -> JudgeRequest:
    context = [{"role": "system", "content": "bash"}, {"role": "user", "content": key}]
    return JudgeRequest(key=key, domain="terminal", context=context, reference="r", prediction="p")


def test_client_retries_server_errors_and_timeouts():
    def script(body: dict, n: int) -> Reply:
        key = body["messages"][1]["content"].split("## Current action\n")[1].split("\n")[0]
        if key == "flaky" and n <= 2:
            return Reply(status=503)
        if key == "slow" and sum(key in r["messages"][1]["content"] for r in server.requests) == 1:
            return Reply(text=GOOD_VERDICT, delay_s=2.0)  # first ask outlives the timeout
        return Reply(text=GOOD_VERDICT)

    with ScriptedChatServer(script) as server:
        flaky, slow = judge_sync(_cfg(server, timeout_s=1.0), [_request("flaky"), _request("slow")])
    assert flaky.ok and flaky.attempts >= 2 and flaky.verdict.scores == SCORES
    assert slow.ok and slow.attempts == 2


def test_client_counts_malformed_and_failed_judgments():
    def script(body: dict, n: int) -> Reply:
        content = body["messages"][1]["content"]
        asks = sum(content == r["messages"][1]["content"] for r in server.requests)
        if "retry-me" in content and asks == 1:  # this item's first ask
            return Reply(text='<scores>{"format": 9}</scores>')
        if "always-bad" in content:
            return Reply(text="looks fine to me")
        if "down" in content:
            return Reply(status=500)
        if "rejected" in content:
            return Reply(status=400)
        return Reply(text=GOOD_VERDICT)

    with ScriptedChatServer(script) as server:
        keys = ["retry-me", "always-bad", "down", "rejected"]
        results = judge_sync(_cfg(server, parse_retries=1), [_request(k) for k in keys])
    by_key = {r.key: r for r in results}
    assert by_key["retry-me"].ok and by_key["retry-me"].attempts == 2
    assert not by_key["always-bad"].ok and "no <scores> block" in by_key["always-bad"].error
    assert by_key["always-bad"].attempts == 2 and by_key["always-bad"].raw == "looks fine to me"
    assert not by_key["down"].ok and by_key["down"].error.startswith("endpoint: HTTP 500")
    assert by_key["down"].attempts == 3  # max_retries=2: three tries
    assert not by_key["rejected"].ok and by_key["rejected"].attempts == 1  # 4xx is final
    assert sum(not r.ok for r in results) == 3
    row = by_key["down"].to_dict()
    assert row["ok"] is False and row["scores"] is None and row["key"] == "down"
