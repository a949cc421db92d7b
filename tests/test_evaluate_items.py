"""Evaluation items: messages for turn k (turn 1, a middle turn, the last turn) built
as the published evaluation builds them, from AgentWorldBench rows, records and
prepare's samples; bad and duplicated rows set apart with reasons."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from agentworld.evaluate.items import (
    items_from_row,
    items_from_trajectory,
    load_items,
)
from agentworld.io import write_jsonl, write_parquet
from agentworld.schema import Trajectory, Turn

MARK = "**Environment Observation:**\n"
ENV = "bash 5.2 in /home/user. Task: count the notes."
ACTIONS = ["touch notes.txt", "seq 3 > notes.txt", "wc -l notes.txt"]
OBS = ["$ ", "$ ", "3 notes.txt\n$ "]


def awb_row(turn_idx: int, **changes) -> dict:
    row = {
        "task": "agentworld/terminal",
        "id": "t-1",
        "prompt": ACTIONS,
        "response": [MARK + o for o in OBS],
        "current_prompt": ACTIONS[turn_idx - 1],
        "system_str": ENV,
        "turn_idx": turn_idx,
        "total_turns": 3,
    }
    row.update(changes)
    return row


def expected_messages(k: int) -> list[dict]:
    messages = [{"role": "system", "content": ENV}]
    for action, obs in zip(ACTIONS[: k - 1], OBS[: k - 1], strict=True):
        messages += [{"role": "user", "content": action}, {"role": "assistant", "content": obs}]
    return messages + [{"role": "user", "content": ACTIONS[k - 1]}]


@pytest.mark.parametrize("k", [1, 2, 3])
def test_awb_row_messages_for_turn_k(k):
    item = items_from_row(awb_row(k))
    assert item.messages == expected_messages(k)
    assert item.reference == OBS[k - 1]  # marker stripped
    assert (item.key, item.domain, item.task) == (f"t-1#{k}", "terminal", "agentworld/terminal")


def test_turn_1_has_no_history_and_last_turn_has_all_earlier_turns():
    first, last = items_from_row(awb_row(1)), items_from_row(awb_row(3))
    assert [m["role"] for m in first.messages] == ["system", "user"]
    assert [m["role"] for m in last.messages] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]
    assert last.reference == "3 notes.txt\n$ "


def test_record_items_match_awb_rows():
    traj = Trajectory(
        id="t-1",
        domain="terminal",
        source="hand",
        environment=ENV,
        turns=tuple(Turn(action=a, observation=o) for a, o in zip(ACTIONS, OBS, strict=True)),
    )
    items = items_from_trajectory(traj)
    assert [i.turn_idx for i in items] == [1, 2, 3]
    for item in items:
        assert item.messages == expected_messages(item.turn_idx)
        assert item.reference == OBS[item.turn_idx - 1]


def test_load_awb_dir_quarantines_bad_and_duplicate_rows(tmp_path):
    bench = tmp_path / "awb"
    write_jsonl(str(bench / "terminal_test.jsonl"), [awb_row(1), awb_row(3), awb_row(3)])
    (bench / "mcp_test.jsonl").write_text(
        json.dumps(awb_row(2, task="mcp", id="m-1"))
        + "\n{not json\n"
        + json.dumps({**awb_row(2, id="m-2"), "turn_idx": 7})
        + "\n"
    )
    (bench / "notes.jsonl").write_text("not an AgentWorldBench file\n")
    loaded = load_items(str(bench))
    assert loaded.fmt == "awb"
    assert [i.key for i in loaded.items] == ["m-1#2", "t-1#1", "t-1#3"]
    reasons = {(r["line"], r["field"]): r["reason"] for r in loaded.rejected}
    assert "malformed JSON" in reasons[(2, None)]
    assert "outside 1..3" in reasons[(3, "turn_idx")]
    assert "appears earlier" in reasons[(3, "id")]


def test_load_records_and_samples(tmp_path):
    from agentworld.schema.examples import sample_trajectories

    trajs = sample_trajectories(3)
    write_jsonl(str(tmp_path / "raw" / "part-00000.jsonl"), trajs)
    loaded = load_items(str(tmp_path / "raw"))
    assert loaded.fmt == "record" and len(loaded.items) == sum(len(t.turns) for t in trajs)

    table = pa.table(
        {
            "trajectory_id": ["t-1", "t-1", "t-2"],
            "domain": ["terminal", "terminal", "terminal"],
            "turn_idx": [2, 3, 1],
            "messages_json": [
                json.dumps(expected_messages(2)),
                "[]",
                json.dumps(expected_messages(1)),
            ],
            "reference": [OBS[1], OBS[2], OBS[0]],
            "split": ["eval", "eval", "train"],  # prepare's held-out split: t-2 is trained on
        }
    )
    write_parquet(str(tmp_path / "samples" / "part-00000.parquet"), table)
    loaded = load_items(str(tmp_path / "samples"))
    assert loaded.fmt == "samples"
    assert [i.key for i in loaded.items] == ["t-1#2"]
    assert loaded.items[0].messages == expected_messages(2)
    assert loaded.rejected[0]["field"] == "messages_json" and loaded.rejected[0]["line"] == 2
    assert [i.key for i in load_items(str(tmp_path / "samples"), split=None).items] == [
        "t-1#2",
        "t-2#1",
    ]
