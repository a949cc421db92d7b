"""Bad input, fuzzed: hypothesis mixes malformed lines (truncated JSON, wrong types,
deep nesting, invalid UTF-8, NUL bytes, unknown domains, not-an-object, empty ids or
turns) into shards of valid records (huge strings and odd text among them), local and
on S3. Every good record comes back equal to what was written, every bad line comes back
rejected with its line number and a reason, and the counts add up against a count of
the file's lines made with bytes.split alone; one bounded case goes through prepare."""

from __future__ import annotations

import collections
import json
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st

from agentworld.io import get_fs, join, read_records
from agentworld.schema import Trajectory, Turn

DOMAINS = ("terminal", "mcp", "swe", "search", "android", "web", "os")
_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=40)
_FUZZ = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@dataclass(frozen=True)
class Line:
    raw: bytes
    good: Trajectory | None  # None: a malformed line, to be rejected
    kind: str


@st.composite
def good_records(draw, index: int) -> Trajectory:
    huge = draw(st.sampled_from([0, 0, 0, 1 << 20]))  # one in four carries a 1 MiB text
    turns = draw(st.lists(st.tuples(_TEXT, _TEXT), min_size=1, max_size=3))
    return Trajectory(
        id=f"good-{index}-" + draw(st.text("abcdef0123456789", min_size=1, max_size=8)),
        domain=draw(st.sampled_from(DOMAINS)),
        source=draw(_TEXT.filter(str.strip)) or "s",
        environment=draw(_TEXT) + "E" * huge,
        turns=tuple(
            Turn(action=a, observation=o + "\x00" * (i % 2)) for i, (a, o) in enumerate(turns)
        ),
        metadata=draw(st.dictionaries(_TEXT, st.integers() | _TEXT, max_size=3)),
    )


def _base(index: int) -> dict:
    return {
        "id": f"bad-{index}",
        "domain": "terminal",
        "source": "fuzz",
        "environment": "env",
        "turns": [{"action": "ls", "observation": "a.txt"}],
    }


def _dumps(obj) -> bytes:
    return json.dumps(obj, ensure_ascii=False).encode()


@st.composite
def bad_lines(draw, index: int) -> tuple[str, bytes]:
    base = _base(index)
    kind = draw(
        st.sampled_from(
            ["truncated", "wrong_type", "deep", "utf8", "nul", "domain", "not_object", "empty"]
        )
    )
    if kind == "truncated":
        text = _dumps(base)
        return kind, text[: draw(st.integers(1, len(text) - 1))]
    if kind == "wrong_type":
        key = draw(st.sampled_from(["id", "domain", "source", "environment", "turns"]))
        value = draw(st.sampled_from([3, 2.5, True, ["x"], {"a": 1}, None, "x"]))
        if key != "turns" and isinstance(value, str):
            value = [value]
        if key == "turns":
            value = draw(st.sampled_from([value, [{"action": 1, "observation": "o"}], [[]]]))
        return kind, _dumps({**base, key: value})
    if kind == "deep":
        depth = draw(st.integers(5_000, 200_000))
        return kind, _dumps(base)[
            :-1
        ] + b', "metadata": {"x": ' + b"[" * depth + b"]" * depth + b"}}"
    if kind in ("utf8", "nul"):
        text = _dumps(base)
        at = text.index(b'"env"') + 2
        junk = draw(st.sampled_from([b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\x80"]))
        return kind, text[:at] + (junk if kind == "utf8" else b"\x00") + text[at:]
    if kind == "domain":
        return kind, _dumps({**base, "domain": "zz-" + draw(st.text("abcxyz", max_size=6))})
    if kind == "not_object":
        return kind, _dumps(draw(st.sampled_from([[1, 2], "text", 7, None, [base]])))
    field = draw(st.sampled_from(["id", "turns"]))
    return kind, _dumps({**base, field: " " if field == "id" else []})


@st.composite
def shard(draw, min_size: int = 1, max_size: int = 12) -> list[Line]:
    n = draw(st.integers(min_size, max_size))
    lines = []
    for i in range(n):
        if draw(st.booleans()):
            t = draw(good_records(i))
            lines.append(Line(t.to_json().encode(), t, "good"))
        else:
            kind, raw = draw(bad_lines(i))
            lines.append(Line(raw, None, kind))
    return lines


def _write(url: str, lines: list[Line]) -> None:
    fs, path = get_fs(url)
    fs.pipe(path, b"\n".join(line.raw for line in lines) + b"\n")


def _independent_count(url: str) -> int:
    """Non-blank lines of the file as stored, by bytes.split (no reader involved)."""
    fs, path = get_fs(url)
    return sum(1 for raw in fs.cat_file(path).split(b"\n") if raw.strip())


def _check(url: str, lines: list[Line]) -> None:
    result = read_records(url, errors="collect")
    assert len(result.records) + len(result.rejected) == _independent_count(url) == len(lines)
    assert result.records == [line.good for line in lines if line.good is not None]
    bad = [(n, line.kind) for n, line in enumerate(lines, start=1) if line.good is None]
    assert [r.line for r in result.rejected] == [n for n, _ in bad]
    for r, (_, kind) in zip(result.rejected, bad, strict=True):
        event(f"rejected {kind}: {r.error.reason.split(':')[0]}")
        reason = r.to_dict()
        assert reason["source"] == url and reason["reason"].strip() and reason["error"], (
            kind,
            reason,
        )


@_FUZZ
@given(lines=shard())
def test_fuzzed_local_shards(tmp_path_factory, lines):
    url = str(tmp_path_factory.mktemp("fuzz") / "part-00000.jsonl")
    _write(url, lines)
    _check(url, lines)


@settings(_FUZZ, max_examples=15)
@given(lines=shard(max_size=6))
def test_fuzzed_s3_shards(s3_bucket, lines):
    import uuid

    url = join(s3_bucket, f"fuzz-{uuid.uuid4().hex[:8]}", "part-00000.jsonl")
    _write(url, lines)
    get_fs(url)[0].invalidate_cache()
    _check(url, lines)


def _domain_of(raw: bytes) -> str:
    """The report's bucket for a line: its domain field as written, "unknown" when the
    line has none to read (not JSON, not an object, not a string)."""
    try:
        obj = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError):
        return "unknown"
    value = obj.get("domain") if isinstance(obj, dict) else None
    if not isinstance(value, str) or not value.strip():
        return "unknown"
    return value.strip().lower().rsplit("/", 1)[-1]


@pytest.mark.slow
# Two cases, never shrunk, each a whole prepare run: Hypothesis' simplest one (every
# fuzzed line bad) and a random one.
@settings(_FUZZ, max_examples=2, derandomize=True, database=None, phases=[Phase.generate])
@given(lines=shard(min_size=12, max_size=12), more=shard(min_size=8, max_size=8))
def test_fuzzed_shards_through_prepare(ray_cluster, tmp_path_factory, lines, more):
    """Generated shards through the whole prepare stage, beside a shard of ordinary
    trajectories (so that there is always something to train the tokenizer on): every
    line read, every bad one quarantined with a reason, every good one accounted for
    (kept or a duplicate of another good one), per domain as counted from the files."""
    from agentworld.data.run import prepare
    from agentworld.io import list_shards, read_parquet
    from agentworld.schema.examples import sample_trajectories
    from tests.test_data_prepare import _job

    root = tmp_path_factory.mktemp("fuzz-prepare")
    (root / "raw").mkdir()
    plain = [Line(t.to_json().encode(), t, "good") for t in sample_trajectories(8, seed=2)]
    shards = (lines, more, plain)
    for k, shard_lines in enumerate(shards):
        _write(str(root / "raw" / f"part-{k:05d}.jsonl"), shard_lines)
    everything = [line for shard_lines in shards for line in shard_lines]
    n_bad = sum(line.good is None for line in everything)
    out = str(root / "out")
    report = prepare(_job([str(root / "raw")], out, min_eval_trajectories=0))
    totals = report["totals"]
    files = [str(root / "raw" / f"part-{k:05d}.jsonl") for k in range(len(shards))]
    assert totals["read"] == sum(_independent_count(f) for f in files) == len(everything)
    assert totals["quarantined"] == n_bad
    assert totals["read"] - n_bad == sum(
        totals[s] for s in ("kept", "exact_duplicate", "near_duplicate", "contaminated")
    )
    by_domain = collections.Counter(_domain_of(line.raw) for line in everything)
    assert {d: c["read"] for d, c in report["by_domain"].items()} == dict(by_domain)
    quarantine = [read_parquet(s) for s in list_shards(join(out, "quarantine"))]
    reasons = [r for t in quarantine for r in t.column("reason").to_pylist()]
    assert len(reasons) == n_bad and all(r and r.strip() for r in reasons)
