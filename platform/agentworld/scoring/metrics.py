"""Judge-free rule metrics: plain functions, no Ray, no model, shared with RL rewards.

Every metric takes the predicted observation and the real one as text (markers, think
blocks and <predicted_observation> wrappers already removed: see ``rule_metrics`` for the
version that takes a raw model output) and returns a float in [0, 1], or None where it
does not apply (``json_valid`` when the real observation is not JSON).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from agentworld.schema import extract_observation, parse_output
from agentworld.schema.awb import strip_marker

METRIC_NAMES = ("exact_match", "char_f1", "rouge_l", "format_valid", "json_valid")

# Word runs, single CJK characters and single punctuation marks: ROUGE-L over these
# works for code, shell output and Chinese text alike.
_TOKEN_RE = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]|\w+|[^\w\s]")
_TAGS = ("<think>", "</think>", "<predicted_observation>", "</predicted_observation>")


def normalize(text: str) -> str:
    """Line endings unified, trailing spaces per line and surrounding blank lines dropped:
    differences a reader of the observation would not see."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return "\n".join(line.rstrip() for line in lines).strip()


def exact_match(prediction: str, reference: str) -> float:
    """1.0 when the texts are equal after ``normalize``, else 0.0."""
    return float(normalize(prediction) == normalize(reference))


def char_f1(prediction: str, reference: str) -> float:
    """F1 of the character multisets (whitespace ignored), as SQuAD's token F1 but on
    characters: partial credit for near-misses such as a wrong number or timestamp."""
    pred = Counter(c for c in prediction if not c.isspace())
    ref = Counter(c for c in reference if not c.isspace())
    return _f1(sum((pred & ref).values()), sum(pred.values()), sum(ref.values()))


def tokenize(text: str) -> list[str]:
    return _TOKEN_RE.findall(text)


def lcs_length(a: list[str], b: list[str]) -> int:
    """Length of the longest common subsequence, bit-parallel (Hyyrö 2004): O(len(b))
    big-integer operations instead of an O(len(a) * len(b)) table, so long observations
    stay cheap."""
    if not a or not b:
        return 0
    masks: dict[str, int] = {}
    for i, tok in enumerate(a):
        masks[tok] = masks.get(tok, 0) | (1 << i)
    full = (1 << len(a)) - 1
    v = full
    for tok in b:
        u = v & masks.get(tok, 0)
        v = ((v + u) | (v - u)) & full
    return len(a) - v.bit_count()


def rouge_l(prediction: str, reference: str) -> float:
    """ROUGE-L F1 over tokens (word runs, CJK characters, punctuation marks)."""
    pred, ref = tokenize(prediction), tokenize(reference)
    return _f1(lcs_length(pred, ref), len(pred), len(ref))


def format_valid(raw_output: str) -> float:
    """1.0 when a raw model output has the expected shape: reasoning closed, an opened
    <predicted_observation> block closed, a non-empty observation and no stray tags."""

    parsed = parse_output(raw_output)
    ok = parsed.complete and bool(parsed.observation.strip())
    return float(ok and not any(tag in parsed.observation for tag in _TAGS))


def parse_json(text: str) -> tuple[bool, Any]:
    """(True, value) when ``text`` is a JSON object or array, else (False, None)."""
    body = text.strip()
    if not body.startswith(("{", "[")):
        return False, None
    try:
        return True, json.loads(body)
    except ValueError:
        return False, None


def json_valid(prediction: str, reference: str | None = None) -> float | None:
    """1.0 when ``prediction`` is a JSON object or array, else 0.0. With a ``reference``
    that is not JSON itself the check does not apply and the result is None."""
    if reference is not None and not parse_json(reference)[0]:
        return None
    return float(parse_json(prediction)[0])


def rule_metrics(raw_output: str, reference: str) -> dict[str, float | None]:
    """All five metrics for one raw model output against the real observation."""

    prediction = extract_observation(raw_output)
    reference = strip_marker(reference)
    return {
        "exact_match": exact_match(prediction, reference),
        "char_f1": char_f1(prediction, reference),
        "rouge_l": rouge_l(prediction, reference),
        "format_valid": format_valid(raw_output),
        "json_valid": json_valid(prediction, reference),
    }


def _f1(overlap: int, n_pred: int, n_ref: int) -> float:
    if n_pred == 0 and n_ref == 0:
        return 1.0
    if overlap == 0:
        return 0.0
    precision, recall = overlap / n_pred, overlap / n_ref
    return 2 * precision * recall / (precision + recall)
