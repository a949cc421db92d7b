"""Prompt construction shared by training, evaluation, RL and serving.

"Predict turn k" is rendered exactly as the published AgentWorldBench evaluation does:
system = the environment text; for each earlier turn, a user message with the action
and an assistant message with the observation; then the current action as a user
message. The answer is the observation of turn k.

The environment text goes through ``compact_environment`` (JSON tool definitions as
one signature line each) here and only here, so that every stage that renders a prompt
(prepare, evaluate, RL, serve) gives the model the same text.
"""

from __future__ import annotations

from agentworld.schema.awb import add_marker, strip_marker, turn_prompt, validate_row
from agentworld.schema.compact import compact_environment
from agentworld.schema.errors import InvalidValueError
from agentworld.schema.record import Trajectory

Message = dict[str, str]


def render_messages(environment: str, history: list[tuple[str, str]], action: str) -> list[Message]:
    """Messages for predicting the observation that follows ``action``."""
    messages: list[Message] = [{"role": "system", "content": compact_environment(environment)}]
    for past_action, past_observation in history:
        messages.append({"role": "user", "content": past_action})
        messages.append({"role": "assistant", "content": past_observation})
    messages.append({"role": "user", "content": action})
    return messages


def reference_messages(system: str, history: list[tuple[str, str]], action: str) -> list[Message]:
    """The same prediction in the reference's own format (the ``awb`` prompt style), as
    its released model was trained on and as AgentWorldBench rows hold it: ``system`` as
    given (the domain's template, see ``awb.reference_system``), user turns headed
    ``### Turn N`` / ``**Action:**``, observations after ``**Environment Observation:**``."""
    messages: list[Message] = [{"role": "system", "content": system}]
    for n, (past_action, past_observation) in enumerate(history, start=1):
        messages.append({"role": "user", "content": turn_prompt(n, past_action)})
        messages.append({"role": "assistant", "content": add_marker(past_observation)})
    messages.append({"role": "user", "content": turn_prompt(len(history) + 1, action)})
    return messages


def predict_turn_messages(traj: Trajectory, k: int) -> list[Message]:
    """Messages that ask for turn ``k`` (1-based) of ``traj``; the target is
    ``traj.turns[k-1].observation``."""
    if not 1 <= k <= len(traj.turns):
        raise InvalidValueError(f"turn {k} is outside 1..{len(traj.turns)}", field="turn_idx")
    history = [(t.action, t.observation) for t in traj.turns[: k - 1]]
    return render_messages(traj.environment, history, traj.turns[k - 1].action)


def awb_row_messages(row: dict) -> list[Message]:
    """Messages for an AgentWorldBench row, built from the row's own fields."""
    row = validate_row(row)
    k = row["turn_idx"]
    history = [(row["prompt"][i], strip_marker(row["response"][i])) for i in range(k - 1)]
    return render_messages(row["system_str"], history, row["current_prompt"])
