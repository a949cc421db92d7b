"""Bad input raises typed errors naming the line and the field; shards can be read
with bad lines set aside."""

import json

import pytest

from agentworld.io import read_records
from agentworld.io.shards import iter_records
from agentworld.schema import (
    InvalidValueError,
    MalformedJSONError,
    MissingFieldError,
    RecordError,
    Trajectory,
    UnknownDomainError,
    WrongTypeError,
    register_domain,
    unregister_domain,
    validate_row,
)

GOOD = {
    "id": "g1",
    "domain": "mcp",
    "source": "unit",
    "environment": "tools: []",
    "turns": [{"action": "a", "observation": "o"}],
}
GOOD_ROW = {
    "task": "mcp",
    "id": "x",
    "prompt": ["a", "b"],
    "response": ["**Environment Observation:**\n1", "**Environment Observation:**\n2"],
    "current_prompt": "b",
    "system_str": "s",
    "turn_idx": 2,
    "total_turns": 2,
}


def _with(d, path, value):
    d = json.loads(json.dumps(d))
    target = d
    for key in path[:-1]:
        target = target[key]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return d


@pytest.mark.parametrize(
    "record, error, field",
    [
        (_with(GOOD, ["id"], KeyError), MissingFieldError, "id"),
        (
            _with(GOOD, ["turns", 0, "observation"], KeyError),
            MissingFieldError,
            "turns[0].observation",
        ),
        (_with(GOOD, ["domain"], "fax"), UnknownDomainError, "domain"),
        (_with(GOOD, ["turns", 0, "action"], 7), WrongTypeError, "turns[0].action"),
        (_with(GOOD, ["turns"], "nope"), WrongTypeError, "turns"),
        (_with(GOOD, ["turns"], []), InvalidValueError, "turns"),
        (_with(GOOD, ["turns", 0, "exit_code"], True), WrongTypeError, "turns[0].exit_code"),
    ],
)
def test_record_errors_name_the_field(record, error, field):
    with pytest.raises(error) as info:
        Trajectory.from_dict(record)
    assert info.value.field == field
    assert field in str(info.value)


@pytest.mark.parametrize(
    "row, error, field",
    [
        (_with(GOOD_ROW, ["turn_idx"], 3), InvalidValueError, "turn_idx"),
        (_with(GOOD_ROW, ["turn_idx"], 0), InvalidValueError, "turn_idx"),
        (_with(GOOD_ROW, ["turn_idx"], "2"), WrongTypeError, "turn_idx"),
        (_with(GOOD_ROW, ["system_str"], KeyError), MissingFieldError, "system_str"),
        (_with(GOOD_ROW, ["prompt"], ["a"]), InvalidValueError, "total_turns"),
    ],
)
def test_awb_row_errors(row, error, field):
    with pytest.raises(error) as info:
        validate_row(row)
    assert info.value.field == field


def test_custom_domain_registry():
    with pytest.raises(UnknownDomainError):
        Trajectory.from_dict(_with(GOOD, ["domain"], "spreadsheet"))
    register_domain("spreadsheet", "a spreadsheet app")
    try:
        assert Trajectory.from_dict(_with(GOOD, ["domain"], "spreadsheet")).domain == "spreadsheet"
    finally:
        unregister_domain("spreadsheet")
    with pytest.raises(ValueError, match="built-in"):
        unregister_domain("terminal")


def _shard(tmp_path):
    lines = [
        json.dumps(GOOD).encode(),
        b"{not json",
        json.dumps(_with(GOOD, ["turns", 0, "observation"], KeyError)).encode(),
        json.dumps(_with(GOOD, ["domain"], "fax")).encode(),
        json.dumps(_with(GOOD, ["id"], 5)).encode(),
        json.dumps(GOOD).encode()[:-1] + b', "source": "\xff\xfe"}',
        json.dumps(_with(GOOD, ["id"], "g2")).encode(),
    ]
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def test_strict_read_names_line_and_field(tmp_path):
    path = _shard(tmp_path)
    with pytest.raises(MalformedJSONError) as info:
        list(iter_records(str(path)))
    assert info.value.line == 2
    assert "line 2" in str(info.value) and "mixed.jsonl" in str(info.value)


def test_collecting_read_keeps_good_and_explains_bad(tmp_path):
    result = read_records(str(_shard(tmp_path)), errors="collect")
    assert [t.id for t in result.records] == ["g1", "g2"]
    reasons = {r.line: (type(r.error), r.error.field) for r in result.rejected}
    assert reasons == {
        2: (MalformedJSONError, None),
        3: (MissingFieldError, "turns[0].observation"),
        4: (UnknownDomainError, "domain"),
        5: (WrongTypeError, "id"),
        6: (MalformedJSONError, None),
    }
    assert "UTF-8" in result.rejected[4].error.reason
    assert all(isinstance(r.error, RecordError) for r in result.rejected)
