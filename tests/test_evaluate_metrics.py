"""Rule metrics on hand-computed cases."""

from __future__ import annotations

import pytest

from agentworld.scoring.metrics import (
    char_f1,
    exact_match,
    format_valid,
    json_valid,
    lcs_length,
    rouge_l,
    rule_metrics,
)


def test_exact_match_ignores_only_invisible_whitespace():
    assert exact_match("a.txt\r\nb.txt  \n\n", "a.txt\nb.txt") == 1.0
    assert exact_match("a.txt b.txt", "a.txt\nb.txt") == 0.0


def test_char_f1_hand_computed():
    # pred chars {a,b,c,d}, ref {a,b,x}: overlap 2, P = 2/4, R = 2/3, F1 = 4/7.
    assert char_f1("ab cd", "abx") == pytest.approx(4 / 7)
    assert char_f1("", "") == 1.0
    assert char_f1("abc", "") == 0.0


def test_rouge_l_hand_computed():
    # tokens: [the, cat, sat] vs [the, cat, on, mat]: LCS 2, P = 2/3, R = 2/4, F1 = 4/7.
    assert rouge_l("the cat sat", "the cat on mat") == pytest.approx(4 / 7)
    assert rouge_l("", "") == 1.0
    assert rouge_l("x", "y") == 0.0


def test_lcs_matches_dynamic_programming():
    import random

    def dp(a, b):
        m = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
        for i, x in enumerate(a):
            for j, y in enumerate(b):
                m[i + 1][j + 1] = m[i][j] + 1 if x == y else max(m[i][j + 1], m[i + 1][j])
        return m[-1][-1]

    rng = random.Random(0)
    for _ in range(300):
        a = [rng.choice("abcd") for _ in range(rng.randint(0, 25))]
        b = [rng.choice("abcde") for _ in range(rng.randint(0, 25))]
        assert lcs_length(a, b) == dp(a, b)


def test_format_valid():
    assert (
        format_valid("<think>ok</think>\n<predicted_observation>$ ls</predicted_observation>")
        == 1.0
    )
    assert format_valid("<think>never closed") == 0.0
    assert format_valid("<predicted_observation>cut off") == 0.0
    assert format_valid("   ") == 0.0


def test_json_valid_applies_only_to_json_references():
    assert json_valid('{"a": 1}', '{"a": 2}') == 1.0
    assert json_valid("{'a': 1}", '{"a": 2}') == 0.0
    assert json_valid("anything", "plain text") is None
    assert json_valid("[1, 2]") == 1.0


def test_rule_metrics_parse_raw_output_and_strip_marker():
    raw = "<think>the file has 3 lines</think><predicted_observation>3 notes.txt</predicted_observation>"
    m = rule_metrics(raw, "**Environment Observation:**\n3 notes.txt")
    assert m == {
        "exact_match": 1.0,
        "char_f1": 1.0,
        "rouge_l": 1.0,
        "format_valid": 1.0,
        "json_valid": None,
    }
