"""From a session to the model's prompt and from the model's text to an observation.

In the ``native`` style (this project's models) the messages come from
``agentworld.schema.render_messages``, the code that renders training and evaluation
samples: system = the environment text, then (action, observation) pairs, then the new
action. Without control instructions or an initial state the system text is exactly the
environment text, as in training; control instructions are appended after it. In the
``awb`` style (the reference's released model) they come from
``agentworld.schema.reference_messages``: the domain's system prompt from the reference's
``prompts/`` folder before that text, turns as AgentWorldBench rows hold them. Tool
errors and hidden fields are also enforced here, without the model, so that agents can
rely on them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal

from agentworld.schema import get_domain, parse_output, reference_messages, render_messages
from agentworld.schema.awb import load_system_prompt, reference_system
from agentworld.schema.chat import render_tool_call
from agentworld.schema.errors import RecordError
from agentworld.schema.record import ToolCall
from agentworld.sim.errors import SimError
from agentworld.sim.protocol import Action, Control, EnvironmentSpec, ToolCallAction

_CHATML_LEFTOVERS = re.compile(r"<\|(?:im_end|im_start|endoftext|pad)\|>")

PromptStyleName = Literal["native", "awb"]


@dataclass(frozen=True, kw_only=True)
class PromptStyle:
    """How a session becomes the model's prompt (each owner's config holds the two
    fields and checks them; see ``ServeConfig.prompt_style``)."""

    name: PromptStyleName = "native"
    prompts_dir: str | None = None
    """The reference's ``prompts/`` folder (``<domain>/system_prompt.txt``); ``awb`` only."""


def resolve_domain(name: str) -> str:
    """The registered domain's canonical name; 422 naming ``domain`` otherwise."""
    try:
        return get_domain(name).name
    except RecordError as e:
        raise SimError(422, "unknown_domain", e.reason, field="domain") from None


def system_text(spec: EnvironmentSpec) -> str:
    """The system message for a session: environment text (or the tool definitions, or
    the domain's own description), then the initial state and control instructions."""
    domain = get_domain(spec.domain)
    parts = [_environment_text(spec) or f"Environment: {domain.description}."]
    if spec.initial_state is not None:
        state = spec.initial_state
        state = (
            state
            if isinstance(state, str)
            else json.dumps(state, ensure_ascii=False, sort_keys=True)
        )
        parts.append(f"Initial state:\n{state}")
    if spec.control is not None:
        rules = control_text(spec.control)
        if rules:
            parts.append(rules)
    return "\n\n".join(parts)


def _environment_text(spec: EnvironmentSpec) -> str:
    tools = json.dumps(spec.tools, ensure_ascii=False) if spec.tools else ""
    # The chat adapter renders tool definitions the same way when there is no system text.
    if spec.environment and tools:
        return f"{spec.environment}\n\nTools: {tools}"
    return spec.environment or tools


def control_text(control: Control) -> str:
    lines = []
    if control.world_facts:
        lines.append("Facts of this world; every observation must agree with them:")
        lines += [f"- {fact}" for fact in control.world_facts]
    if control.paginate is not None:
        lines.append(
            f"Paginate results: show at most {control.paginate.page_size} items per observation "
            "and say how to request the next page."
        )
    if control.hide_fields:
        lines.append(
            f"Never show these fields in an observation: {', '.join(control.hide_fields)}."
        )
    if control.instructions:
        lines.append(control.instructions)
    return "Simulator instructions:\n" + "\n".join(lines) if lines else ""


def action_text(action: Action) -> str:
    if isinstance(action, ToolCallAction):
        return render_tool_call(ToolCall(name=action.name, arguments=action.arguments))
    return action


def step_messages(
    system: str,
    turns: list[dict[str, Any]],
    action: str,
    *,
    domain: str | None = None,
    style: PromptStyle | None = None,
) -> list[dict[str, str]]:
    """The prompt of one simulator step; ``awb`` needs the session's ``domain`` (its
    system prompt file), a missing file is a 422 naming it."""
    history = [(t["action"], t["observation"]) for t in turns]
    if style is None or style.name == "native":
        return render_messages(system, history, action)
    if domain is None or style.prompts_dir is None:
        raise ValueError("the awb prompt style needs the domain and the prompts directory")
    try:
        template = load_system_prompt(style.prompts_dir, domain)
    except RecordError as e:
        raise SimError(422, "no_system_prompt", e.reason, field="domain") from None
    return reference_messages(reference_system(template, system), history, action)


def injected_error(control: Control | None, action: Action, turn: int) -> str | None:
    """The fixed error observation a control rule prescribes for this action, if any."""
    if control is None:
        return None
    tool = _tool_name(action)
    for rule in control.tool_errors:
        if rule.tool is not None and rule.tool != tool:
            continue
        if rule.turns is not None and turn not in rule.turns:
            continue
        return rule.message
    return None


def _tool_name(action: Action) -> str | None:
    if isinstance(action, ToolCallAction):
        return action.name
    try:
        data = json.loads(action)
    except ValueError:
        return None
    name = data.get("name") if isinstance(data, dict) else None
    return name if isinstance(name, str) else None


@dataclass(frozen=True, kw_only=True)
class Prediction:
    observation: str
    reasoning: str | None
    complete: bool


def read_prediction(text: str, control: Control | None) -> Prediction:
    """Parse the model's text with the shared parser, then enforce hidden fields."""
    parsed = parse_output(_CHATML_LEFTOVERS.sub("", text))
    observation = parsed.observation
    if control is not None and control.hide_fields:
        observation = hide_fields(observation, set(control.hide_fields))
    return Prediction(observation=observation, reasoning=parsed.reasoning, complete=parsed.complete)


def hide_fields(observation: str, fields: set[str]) -> str:
    """Remove ``fields`` at any depth of a JSON observation; other text is returned as is
    (the model was told not to show them)."""
    try:
        data = json.loads(observation)
    except ValueError:
        return observation
    kept = _drop(data, fields)
    # Re-serialize only when something was removed: keep the model's formatting otherwise.
    return observation if kept == data else json.dumps(kept, ensure_ascii=False)


def _drop(value: Any, fields: set[str]) -> Any:
    if isinstance(value, dict):
        return {k: _drop(v, fields) for k, v in value.items() if k not in fields}
    if isinstance(value, list):
        return [_drop(v, fields) for v in value]
    return value
