"""Credentials (object storage keys, wandb, judge and team API keys) reach pods only
from Secrets: an environment variable whose name looks like a credential may not carry a
literal value, in a container, in a runtime env, in a Serve config or on a command line."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from agentworld.deploy.problems import FieldPath, Problem, format_path

_CREDENTIAL_WORDS = {
    "KEY",
    "APIKEY",
    "SECRET",
    "TOKEN",
    "PASSWORD",
    "PASSWD",
    "CREDENTIAL",
    "CREDENTIALS",
}
_PLACE_WORDS = {"FILE", "PATH", "DIR", "ENV", "NAME"}  # AWS_SHARED_CREDENTIALS_FILE names a place
_SECRET_FLAG = re.compile(r"^--[\w-]*(api-key|token|secret|password)(=.*)?$")


def looks_like_credential(name: str) -> bool:
    words = name.upper().split("_")
    return bool(_CREDENTIAL_WORDS.intersection(words)) and words[-1] not in _PLACE_WORDS


def container_env_problems(node: Any, path: FieldPath = ()) -> Iterator[Problem]:
    """Literal values of credential-named variables anywhere in a manifest's ``env`` lists."""
    if isinstance(node, list):
        for i, item in enumerate(node):
            yield from container_env_problems(item, (*path, i))
    elif isinstance(node, dict):
        for key, value in node.items():
            if key == "env" and isinstance(value, list):
                for i, var in enumerate(value):
                    if (
                        isinstance(var, dict)
                        and looks_like_credential(str(var.get("name", "")))
                        and var.get("value")
                    ):
                        yield Problem(
                            format_path((*path, "env", i, "value")),
                            f"{var['name']} must come from a Secret (valueFrom.secretKeyRef or envFrom)",
                        )
            else:
                yield from container_env_problems(value, (*path, key))


def env_vars_problems(env_vars: dict[str, Any], field: str) -> list[Problem]:
    """Credential-named keys of a Ray runtime env's ``env_vars`` (their values are plain text)."""
    return [
        Problem(
            f"{field}.env_vars.{name}",
            "credentials may not be written into a runtime env; put them in a Secret the pods load",
        )
        for name in env_vars
        if looks_like_credential(name)
    ]


def argument_problems(args: tuple[str, ...], field: str) -> list[Problem]:
    return [
        Problem(
            field,
            f"{arg.split('=')[0]} passes a credential on the command line; read it from the environment",
        )
        for arg in args
        if _SECRET_FLAG.match(arg)
    ]


def literal_config_problems(node: Any, field: str) -> Iterator[Problem]:
    """Credential-named keys with a non-empty value anywhere in a config (a Serve
    application's ``args``): ``auth.api_keys: {team: key}`` belongs in a Secret."""
    if isinstance(node, dict):
        for key, value in node.items():
            sub = f"{field}.{key}"
            if looks_like_credential(str(key)) and value:
                yield Problem(
                    sub,
                    "credentials may not be written into a Serve config; load them from a Secret",
                )
            else:
                yield from literal_config_problems(value, sub)
    elif isinstance(node, list):
        for i, item in enumerate(node):
            yield from literal_config_problems(item, f"{field}[{i}]")
