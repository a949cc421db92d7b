"""Adapters are identity on generated data: AWB rows and chat-with-tool-calls."""

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from agentworld.schema import (
    ToolCall,
    Trajectory,
    Turn,
    chat_to_trajectory,
    rows_to_trajectories,
    trajectory_to_chat,
    trajectory_to_rows,
)
from agentworld.schema.arrow import from_arrow_table, to_arrow_table

text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)
domains = st.sampled_from(["mcp", "search", "terminal", "swe", "android", "web", "os"])


@st.composite
def awb_rows(draw):
    n_traj = draw(st.integers(1, 3))
    rows = []
    for t in range(n_traj):
        total = draw(st.integers(1, 5))
        prompts = draw(st.lists(text, min_size=total, max_size=total))
        responses = [
            "**Environment Observation:**\n" + r
            for r in draw(st.lists(text, min_size=total, max_size=total))
        ]
        task = draw(st.sampled_from(["", "awb/", "v2/"])) + draw(domains)
        system = draw(text)
        idxs = sorted(draw(st.sets(st.integers(1, total), min_size=1)))
        for k in idxs:
            rows.append(
                {
                    "task": task,
                    "id": f"traj-{t}",
                    "prompt": prompts,
                    "response": responses,
                    "current_prompt": prompts[k - 1],
                    "system_str": system,
                    "turn_idx": k,
                    "total_turns": total,
                }
            )
    return rows


@settings(max_examples=150, deadline=None)
@given(awb_rows())
def test_awb_rows_round_trip(rows):
    trajs = rows_to_trajectories(rows)
    back = [row for t in trajs for row in trajectory_to_rows(t)]
    assert back == rows


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | text,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(text, children, max_size=3),
    max_leaves=6,
)


@st.composite
def chats(draw):
    messages = []
    if draw(st.booleans()):
        messages.append({"role": "system", "content": draw(text)})
    messages.append({"role": "user", "content": draw(text)})
    n_calls = 0
    for _ in range(draw(st.integers(1, 4))):
        k = draw(st.integers(1, 3))
        calls = []
        for _ in range(k):
            call_id = f"call_{n_calls}"
            n_calls += 1
            args = draw(st.dictionaries(st.text(min_size=1, max_size=8), json_values, max_size=3))
            calls.append(
                {
                    "id": call_id,
                    "type": "function",
                    "function": {
                        "name": draw(st.sampled_from(["read_file", "git_status", "get_time"])),
                        "arguments": json.dumps(args, ensure_ascii=False),
                    },
                }
            )
        messages.append(
            {
                "role": "assistant",
                "content": draw(st.none() | text.filter(bool)),
                "tool_calls": calls,
            }
        )
        for c in calls:
            messages.append({"role": "tool", "tool_call_id": c["id"], "content": draw(text)})
    if draw(st.booleans()):
        messages.append({"role": "assistant", "content": draw(text)})
    return messages


@settings(max_examples=150, deadline=None)
@given(chats())
def test_chat_round_trip(messages):
    traj = chat_to_trajectory(messages, id="c1", domain="mcp")
    assert len(traj.turns) == sum(len(m.get("tool_calls") or []) for m in messages)
    assert trajectory_to_chat(traj) == messages
    # The JSON form of the record round-trips too.
    assert Trajectory.from_json(traj.to_json()) == traj


def _sample_trajectory() -> Trajectory:
    return Trajectory(
        id="t-1",
        domain="terminal",
        source="unit",
        environment="bash in /tmp/x",
        turns=(
            Turn(action="echo hi", observation="hi\n$ ", exit_code=0, duration_s=0.01),
            Turn(
                action='{"name": "ls", "arguments": {}}',
                observation="a b",
                tool_call=ToolCall(name="ls", arguments={"path": "."}, call_id="c1"),
                metadata={"truncated": False},
            ),
        ),
        metadata={"seed": 3},
    )


def test_arrow_round_trip():
    traj = _sample_trajectory()
    table = to_arrow_table([traj, traj])
    assert table.num_rows == 2
    assert from_arrow_table(table) == [traj, traj]


def test_json_round_trip():
    traj = _sample_trajectory()
    assert Trajectory.from_json(traj.to_json()) == traj
