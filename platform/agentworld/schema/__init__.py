"""The trajectory record, its adapters, prompt rendering and output parsing."""

from agentworld.schema.awb import (
    OBSERVATION_MARKER,
    row_to_trajectory,
    rows_to_trajectories,
    trajectory_to_rows,
    validate_row,
)
from agentworld.schema.chat import chat_to_trajectory, render_tool_call, trajectory_to_chat
from agentworld.schema.domains import (
    BUILTIN_DOMAINS,
    Domain,
    get_domain,
    known_domains,
    register_domain,
    unregister_domain,
)
from agentworld.schema.errors import (
    InvalidValueError,
    MalformedJSONError,
    MissingFieldError,
    RecordError,
    UnknownDomainError,
    WrongTypeError,
)
from agentworld.schema.parse import (
    ParsedOutput,
    extract_observation,
    join_reasoning,
    parse_output,
)
from agentworld.schema.record import Outcome, ToolCall, Trajectory, Turn, loads_json
from agentworld.schema.render import (
    awb_row_messages,
    predict_turn_messages,
    reference_messages,
    render_messages,
)

__all__ = [
    "BUILTIN_DOMAINS",
    "OBSERVATION_MARKER",
    "Domain",
    "InvalidValueError",
    "MalformedJSONError",
    "MissingFieldError",
    "Outcome",
    "ParsedOutput",
    "RecordError",
    "ToolCall",
    "Trajectory",
    "Turn",
    "UnknownDomainError",
    "WrongTypeError",
    "awb_row_messages",
    "chat_to_trajectory",
    "extract_observation",
    "get_domain",
    "known_domains",
    "join_reasoning",
    "loads_json",
    "parse_output",
    "predict_turn_messages",
    "reference_messages",
    "register_domain",
    "render_messages",
    "render_tool_call",
    "row_to_trajectory",
    "rows_to_trajectories",
    "trajectory_to_chat",
    "trajectory_to_rows",
    "unregister_domain",
    "validate_row",
]
