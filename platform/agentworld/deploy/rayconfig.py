"""The Ray configs embedded in manifests as strings: a RayJob's ``runtimeEnvYAML`` and a
RayService's ``serveConfigV2``. The schema only sees strings; these checks parse them
with Ray's own rules (``RuntimeEnv`` fields, Serve's ``ServeDeploySchema``) and import
every Serve application's ``import_path``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from agentworld.deploy.problems import Problem

SERVE_SOURCE_ANNOTATION = "agentworld.dev/serve-config"
"""Annotation on a RayService naming the file under serve/ its serveConfigV2 copies."""


def parse_yaml_mapping(text: str, field: str) -> tuple[dict[str, Any] | None, list[Problem]]:
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError as e:
        return None, [Problem(field, f"is not valid YAML: {e}")]
    if not isinstance(value, dict):
        return None, [Problem(field, f"must be a YAML mapping, got {type(value).__name__}")]
    return value, []


def check_runtime_env(
    text: str, field: str = "spec.runtimeEnvYAML"
) -> tuple[dict[str, Any] | None, list[Problem]]:
    """The runtime env as a dict, and its problems: unknown fields, wrong types."""
    from ray.runtime_env import RuntimeEnv

    env, problems = parse_yaml_mapping(text, field)
    if env is None:
        return None, problems
    for key in env:
        if key not in RuntimeEnv.known_fields:
            problems.append(
                Problem(
                    f"{field}.{key}",
                    f"not a runtime_env field (known: {', '.join(sorted(RuntimeEnv.known_fields))})",
                )
            )
    for key, value in (env.get("env_vars") or {}).items():
        if not isinstance(value, str):
            problems.append(Problem(f"{field}.env_vars.{key}", f"must be a string, got {value!r}"))
    working_dir = env.get("working_dir")
    if working_dir is not None and not (
        isinstance(working_dir, str) and (working_dir.startswith("/") or "://" in working_dir)
    ):
        problems.append(
            Problem(f"{field}.working_dir", "must be an absolute path in the image or a remote URI")
        )
    if not problems:
        # Ray's validators for the rest (pip, env_vars, ...); paths are image paths
        # that do not exist here, so they are left out.
        try:
            RuntimeEnv(**{k: v for k, v in env.items() if k not in ("working_dir", "py_modules")})
        except (TypeError, ValueError) as e:
            problems.append(Problem(field, f"rejected by ray.runtime_env.RuntimeEnv: {e}"))
    return env, problems


def check_serve_config(
    text: str, repo_root: Path, field: str = "spec.serveConfigV2"
) -> list[Problem]:
    """Validate with ``ray.serve.schema.ServeDeploySchema`` and import each application."""
    from ray.serve.schema import ServeDeploySchema

    config, problems = parse_yaml_mapping(text, field)
    if config is None:
        return problems
    try:
        schema = ServeDeploySchema.model_validate(config)
    except ValidationError as e:
        return [Problem(f"{field}.{_loc(err['loc'])}", err["msg"]) for err in e.errors()]
    host = (config.get("http_options") or {}).get("host")
    if host not in (None, "0.0.0.0", "::"):
        problems.append(
            Problem(
                f"{field}.http_options.host",
                f"{host!r}: the RayService's Kubernetes Service reaches only a proxy listening on all interfaces (0.0.0.0)",
            )
        )
    for i, app in enumerate(schema.applications):
        problem = _import_problem(app.import_path)
        if problem:
            problems.append(Problem(f"{field}.applications[{i}].import_path", problem))
    return problems


def _loc(loc: tuple) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")


def _import_problem(import_path: str) -> str | None:
    """Why Serve could not import ``import_path`` (from the installed package, as on
    the cluster's image), or None."""
    from ray._common.utils import import_attr
    from ray.serve import Application

    try:
        target = import_attr(import_path)
    except Exception as e:  # any import-time failure is what Serve would hit too
        return f"cannot import {import_path!r}: {type(e).__name__}: {e}"
    if not isinstance(target, Application) and not callable(target):
        return f"{import_path!r} is a {type(target).__name__}, not a Serve Application or an app builder"
    return None


def check_serve_source(doc: dict[str, Any], repo_root: Path) -> list[Problem]:
    """serveConfigV2 must equal the serve/ file its annotation names (parsed, not as text)."""

    annotations = doc["metadata"].get("annotations") or {}
    source = annotations.get(SERVE_SOURCE_ANNOTATION)
    field = f"metadata.annotations[{SERVE_SOURCE_ANNOTATION}]"
    if not source:
        return [Problem(field, "must name the serve/ file that serveConfigV2 copies")]
    path = repo_root / source
    if not path.is_file() or not source.startswith("serve/"):
        return [Problem(field, f"{source!r} is not a file under serve/")]
    try:
        embedded = yaml.safe_load(doc["spec"].get("serveConfigV2") or "")
    except yaml.YAMLError:
        return []  # reported by check_serve_config
    if embedded != yaml.safe_load(path.read_text()):
        return [
            Problem(
                "spec.serveConfigV2",
                f"differs from {source}; run `python -m agentworld.deploy sync-serve`",
            )
        ]
    return []


def sync_serve_configs(repo_root: Path) -> list[Path]:
    """Rewrite the ``serveConfigV2`` block of every RayService manifest under k8s/ from
    the serve/ file its annotation names; returns the files changed. The rest of each
    manifest (comments included) is kept as written."""

    changed = []
    for path in sorted((repo_root / "k8s").rglob("*.yaml")):
        text = path.read_text()
        docs = [
            d
            for d in yaml.safe_load_all(text)
            if isinstance(d, dict) and d.get("kind") == "RayService"
        ]
        sources = [
            ((d.get("metadata") or {}).get("annotations") or {}).get(SERVE_SOURCE_ANNOTATION)
            for d in docs
        ]
        if len(docs) != 1 or not sources[0] or not (repo_root / sources[0]).is_file():
            continue
        new = _replace_block(text, "serveConfigV2", (repo_root / sources[0]).read_text())
        if new != text:
            path.write_text(new)
            changed.append(path)
    return changed


def _replace_block(text: str, key: str, content: str) -> str:
    """Replace the literal block scalar ``key: |`` (and its indented lines) by ``content``."""
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        stripped = line.lstrip()
        if stripped.startswith(f"{key}:") and stripped.split(":", 1)[1].strip().startswith("|"):
            indent = len(line) - len(stripped)
            end = i + 1
            while end < len(lines) and (
                not lines[end].strip() or len(lines[end]) - len(lines[end].lstrip()) > indent
            ):
                end += 1
            pad = " " * (indent + 2)
            body = [
                pad + c if c.strip() else "\n"
                for c in content.rstrip("\n").splitlines(keepends=True)
            ]
            body[-1] = body[-1].rstrip("\n") + "\n"
            return "".join([*lines[:i], " " * indent + f"{key}: |\n", *body, *lines[end:]])
    return text
