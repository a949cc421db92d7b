"""'Predict turn k' rendering and model-output parsing."""

import pytest

from agentworld.schema import (
    InvalidValueError,
    Trajectory,
    Turn,
    awb_row_messages,
    parse_output,
    predict_turn_messages,
    trajectory_to_rows,
)

TRAJ = Trajectory(
    id="r1",
    domain="terminal",
    source="hand",
    environment="You are a bash shell in /home/u.",
    turns=(
        Turn(action="pwd", observation="/home/u"),
        Turn(action="ls", observation="notes.txt"),
        Turn(action="cat notes.txt", observation="buy milk"),
    ),
)


def test_turn_one_has_no_history():
    assert predict_turn_messages(TRAJ, 1) == [
        {"role": "system", "content": "You are a bash shell in /home/u."},
        {"role": "user", "content": "pwd"},
    ]


def test_last_turn_has_every_earlier_turn():
    assert predict_turn_messages(TRAJ, 3) == [
        {"role": "system", "content": "You are a bash shell in /home/u."},
        {"role": "user", "content": "pwd"},
        {"role": "assistant", "content": "/home/u"},
        {"role": "user", "content": "ls"},
        {"role": "assistant", "content": "notes.txt"},
        {"role": "user", "content": "cat notes.txt"},
    ]


def test_awb_rows_render_like_the_record():
    # A hand-written AWB row: history observations carry the marker, which the model
    # sees stripped, exactly as the published evaluation feeds them.
    row = {
        "task": "awb/terminal",
        "id": "r1",
        "prompt": ["pwd", "ls", "cat notes.txt"],
        "response": [
            "**Environment Observation:**\n/home/u",
            "**Environment Observation:**\nnotes.txt",
            "**Environment Observation:**\nbuy milk",
        ],
        "current_prompt": "ls",
        "system_str": "You are a bash shell in /home/u.",
        "turn_idx": 2,
        "total_turns": 3,
    }
    assert awb_row_messages(row) == predict_turn_messages(TRAJ, 2)
    for row in trajectory_to_rows(TRAJ):
        assert awb_row_messages(row) == predict_turn_messages(TRAJ, row["turn_idx"])


@pytest.mark.parametrize("k", [0, 4])
def test_turn_out_of_range(k):
    with pytest.raises(InvalidValueError, match="turn_idx"):
        predict_turn_messages(TRAJ, k)


@pytest.mark.parametrize(
    "raw, observation, reasoning",
    [
        ("plain output", "plain output", None),
        ("<think>hmm</think>\nfile.txt", "file.txt", "hmm"),
        (
            "<think>outer <think>inner</think> still</think>result",
            "result",
            "outer <think>inner</think> still",
        ),
        ("<think>never closed and no answer", "", "never closed and no answer"),
        ("I was thinking</think>\nthe answer", "the answer", "I was thinking"),
        (
            "<predicted_observation>first</predicted_observation> text <predicted_observation>second</predicted_observation>",
            "second",
            None,
        ),
        (
            "<think>x</think><predicted_observation>**Environment Observation:**\nok</predicted_observation>",
            "ok",
            "x",
        ),
        ("**Environment Observation:**\n$ ls\na b", "$ ls\na b", None),
        ("<think>t</think><predicted_observation>partial", "partial", "t"),
        (
            "<think>a <predicted_observation>fake</predicted_observation></think>real",
            "real",
            "a <predicted_observation>fake</predicted_observation>",
        ),
    ],
)
def test_parse_output(raw, observation, reasoning):
    parsed = parse_output(raw)
    assert parsed.observation == observation
    assert parsed.reasoning == reasoning


def test_parse_flags_incomplete():
    assert not parse_output("<think>cut off").complete
    assert not parse_output("<predicted_observation>cut").complete
    assert parse_output("<predicted_observation>done</predicted_observation>").complete
