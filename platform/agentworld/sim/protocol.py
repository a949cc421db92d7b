"""Request bodies of the simulator API. Every model forbids unknown fields, so a typo is
an error naming the field rather than a silently ignored option."""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agentworld.sim.errors import SimError

_TEXT = 256 * 1024


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ToolErrorRule(_Strict):
    """Answer matching actions with a fixed error instead of asking the model."""

    tool: str | None = Field(default=None, max_length=256)
    """Tool name the action must call (a JSON tool call); None matches every action."""
    turns: list[int] | None = Field(default=None, max_length=1024)
    """1-based turn numbers the rule applies to; None means every turn."""
    message: str = Field(min_length=1, max_length=_TEXT)
    """The observation returned, e.g. an error payload in the tool's format."""


class Pagination(_Strict):
    page_size: int = Field(gt=0, le=10_000)
    """Most items a list-like observation may hold; the model mentions further pages."""


class Control(_Strict):
    """Instructions that shape the simulated environment."""

    tool_errors: list[ToolErrorRule] = Field(default_factory=list, max_length=64)
    paginate: Pagination | None = None
    hide_fields: list[str] = Field(default_factory=list, max_length=64)
    """Fields never shown: the model is told, and keys of JSON observations are removed."""
    world_facts: list[str] = Field(default_factory=list, max_length=256)
    """A fictional world as reference facts every observation must agree with."""
    instructions: str | None = Field(default=None, max_length=_TEXT)
    """Free-form extra instructions for the simulator."""


class Sampling(_Strict):
    max_tokens: int | None = Field(default=None, gt=0)
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    seed: int | None = 0


class ToolCallAction(_Strict):
    """An action given as a tool call; rendered as the training data renders tool calls."""

    name: str = Field(min_length=1, max_length=256)
    arguments: dict[str, Any] = Field(default_factory=dict)


Action = str | ToolCallAction


class EnvironmentSpec(_Strict):
    """What the simulator pretends to be."""

    domain: str = Field(min_length=1, max_length=128)
    environment: str | None = Field(default=None, max_length=_TEXT)
    """System text: the environment description as in the training data."""
    tools: list[dict[str, Any]] | None = Field(default=None, max_length=512)
    """Tool definitions (MCP / OpenAI style); rendered into the system text."""
    initial_state: str | dict[str, Any] | list[Any] | None = None
    control: Control | None = None
    sampling: Sampling | None = None


class CreateSession(EnvironmentSpec):
    metadata: dict[str, str] | None = Field(default=None, max_length=32)
    """Free labels kept with the session (e.g. the agent run it belongs to)."""


class ServerIdentity(_Strict):
    """How a simulated MCP server introduces itself in ``initialize`` (a twin: the real
    server's own ``serverInfo`` and instructions)."""

    name: str = Field(min_length=1, max_length=256)
    version: str = Field(default="", max_length=128)
    title: str | None = Field(default=None, max_length=256)
    instructions: str | None = Field(default=None, max_length=_TEXT)


class RegisterEnvironment(EnvironmentSpec):
    """A named environment a team serves as a simulated MCP server (and opens sessions
    of in the playground): the session fields, plus what MCP clients are shown."""

    domain: str = Field(default="mcp", min_length=1, max_length=128)
    description: str | None = Field(default=None, max_length=4096)
    """One line for people: what this environment is (shown in the playground)."""
    mcp_tools: list[dict[str, Any]] | None = Field(default=None, max_length=512)
    """The tool definitions ``tools/list`` answers, verbatim (a twin: the real server's,
    output schemas and annotations included); None answers ``tools``. They are not
    rendered into the system text: ``environment`` says what the model sees."""
    error_patterns: list[str] | None = Field(default=None, max_length=32)
    """Regular expressions: a simulated result of a tool without an output schema that
    matches one is an ``isError`` result; None keeps the default patterns."""
    server: ServerIdentity | None = None

    @field_validator("error_patterns")
    @classmethod
    def _patterns_compile(cls, patterns: list[str] | None) -> list[str] | None:
        for pattern in patterns or []:
            try:
                re.compile(pattern)
            except re.error as e:
                raise ValueError(f"{pattern!r} is not a regular expression: {e}") from None
        return patterns

    def session_spec(self) -> EnvironmentSpec:
        """The fields a session is opened with."""
        return EnvironmentSpec.model_validate(
            self.model_dump(include=set(EnvironmentSpec.model_fields), exclude_none=True)
        )


ENVIRONMENT_NAME = re.compile(r"^[a-z0-9][a-z0-9_\-]{0,63}$")
"""Names of registered environments: they appear in URLs and file names."""


class ForkRequest(_Strict):
    turn: int = Field(ge=0)
    """Turns of the source session the fork keeps (0: none, only its environment)."""


class StepRequest(_Strict):
    action: Action
    sampling: Sampling | None = None
    """Overrides the session's sampling for this step."""


class HistoryTurn(_Strict):
    action: Action
    observation: str = Field(max_length=_TEXT)


class SimulateRequest(EnvironmentSpec):
    history: list[HistoryTurn] = Field(default_factory=list, max_length=1024)
    action: Action


def parse_body(model: type[BaseModel], raw: bytes) -> Any:
    """Parse and validate a request body; raises SimError (400 for bad JSON, 422 naming
    the first offending field otherwise)."""
    if not raw.strip():
        raise SimError(400, "empty_body", "the request body is empty; send a JSON object")
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise SimError(400, "malformed_json", f"the request body is not valid JSON: {e}") from None
    except RecursionError:  # json's nesting limit: no request body nests that deep
        raise SimError(400, "malformed_json", "the request body nests too deeply") from None
    if not isinstance(data, dict):
        raise SimError(400, "malformed_json", "the request body must be a JSON object")
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise _validation_error(e) from None


def _validation_error(e: ValidationError) -> SimError:
    first = e.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "body"
    if first["type"] == "extra_forbidden":
        return SimError(422, "unknown_field", f"unknown field {where!r}", field=where)
    if first["type"] == "missing":
        return SimError(422, "missing_field", f"field {where!r} is required", field=where)
    return SimError(422, "invalid_field", f"field {where!r}: {first['msg']}", field=where)
