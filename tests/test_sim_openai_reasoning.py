"""The world model's reasoning on the OpenAI-compatible routes, without Ray: vLLM's
``reasoning`` also goes out as OpenAI's ``reasoning_content``, in whole answers and in
streamed chunks, and the parts a reasoning parser split come back together as the answer
the model wrote. The served path (Serve, vLLM's qwen3 parser, the openai client) is
tests/test_model_family.py::test_the_simulator_returns_the_reasoning_apart_from_the_observation."""

from __future__ import annotations

import json

from agentworld.schema import join_reasoning, parse_output
from agentworld.sim.openai_reasoning import sse_with_reasoning_content, with_reasoning_content


def test_a_chat_completion_carries_the_reasoning_under_the_openai_name():
    body = {
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "a.txt", "reasoning": "ls"}},
            {"index": 1, "message": {"role": "assistant", "content": "b.txt", "reasoning": None}},
        ]
    }
    out = with_reasoning_content(body)
    first, second = (c["message"] for c in out["choices"])
    assert first["reasoning_content"] == first["reasoning"] == "ls"
    assert first["content"] == "a.txt"
    assert "reasoning_content" not in second  # no reasoning, nothing added


def test_a_streamed_packet_carries_the_reasoning_in_every_chunk_that_has_it():
    chunks = [
        {"choices": [{"index": 0, "delta": {"reasoning": "the dir"}}]},
        {"choices": [{"index": 0, "delta": {"content": "a.txt"}}]},
    ]
    packet = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    out = sse_with_reasoning_content(packet)
    events = [e for e in out.split("\n\n") if e]
    assert events[-1] == "data: [DONE]" and out.endswith("\n\n")
    deltas = [json.loads(e.removeprefix("data: "))["choices"][0]["delta"] for e in events[:-1]]
    assert deltas == [
        {"reasoning": "the dir", "reasoning_content": "the dir"},
        {"content": "a.txt"},
    ]
    as_bytes = sse_with_reasoning_content(packet.encode())
    assert isinstance(as_bytes, bytes) and as_bytes.decode() == out
    plain = "data: " + json.dumps(chunks[1]) + "\n\n"
    assert sse_with_reasoning_content(plain) is plain  # nothing to add: passed through


def test_the_split_parts_parse_as_the_answer_the_model_wrote():
    answer = join_reasoning('{"files": ["a.txt"]}', "One file in the project.")
    parsed = parse_output(answer)
    assert (parsed.reasoning, parsed.observation) == (
        "One file in the project.",
        '{"files": ["a.txt"]}',
    )
    assert join_reasoning("a.txt", None) == "a.txt" and join_reasoning(None, None) == ""
