"""Checks one KubeRay custom resource against its CRD schema (``ray.io/v1``) the way
the API server admits it: YAML nulls pruned, schema defaults applied, then the OpenAPI v3
schema (types, required fields, enums, patterns, int32/int64 ranges, list-map keys), then
ObjectMeta, which the CRD leaves to the server (``agentworld.deploy.objectmeta``).

Unlike the API server, which silently drops fields its schema does not know, every
unknown field is an error here: an object schema with ``properties`` and without
``x-kubernetes-preserve-unknown-fields`` is treated as closed. CEL rules
(``x-kubernetes-validations``) are not evaluated.
"""

from __future__ import annotations

import copy
import difflib
import functools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from agentworld.deploy.objectmeta import SCHEMA as OBJECT_META
from agentworld.deploy.objectmeta import check_object_meta
from agentworld.deploy.problems import FieldPath, Problem, format_path

API_VERSION = "ray.io/v1"
CRD_FILES = {
    "RayCluster": "ray.io_rayclusters.yaml",
    "RayJob": "ray.io_rayjobs.yaml",
    "RayService": "ray.io_rayservices.yaml",
    "RayCronJob": "ray.io_raycronjobs.yaml",
}
CRD_DIR_ENV = "AGENTWORLD_KUBERAY_CRDS"
_INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}


def default_crd_dir(repo_root: Path) -> Path:
    """``$AGENTWORLD_KUBERAY_CRDS``, else ``shared/kuberay-crds`` beside the repository
    (CI clones the repository with shared/ next to it)."""
    override = os.environ.get(CRD_DIR_ENV)
    return Path(override) if override else repo_root.resolve().parent / "shared" / "kuberay-crds"


@functools.cache
def load_schema(crd_dir: Path, kind: str) -> dict[str, Any]:
    """The ``v1`` OpenAPI schema of ``kind`` with the ObjectMeta fields a manifest may
    set filled in (cached)."""

    path = crd_dir / CRD_FILES[kind]
    if not path.is_file():
        raise FileNotFoundError(
            f"KubeRay CRD {path} not found; set {CRD_DIR_ENV} to the folder holding {CRD_FILES[kind]}"
        )
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    crd = yaml.load(path.read_text(), Loader=loader)
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    schema = version["schema"]["openAPIV3Schema"]
    schema["properties"]["metadata"] = OBJECT_META
    return schema


def check_resource(doc: dict[str, Any], crd_dir: Path) -> list[Problem]:
    """Problems of one ray.io resource; ``doc`` is normalized in place (nulls pruned,
    defaults applied) so that later checks see what the API server would store."""
    kind = doc.get("kind")
    if doc.get("apiVersion") != API_VERSION:
        return [Problem("apiVersion", f"must be {API_VERSION}, got {doc.get('apiVersion')!r}")]
    if kind not in CRD_FILES:
        return [Problem("kind", f"must be one of {sorted(CRD_FILES)}, got {kind!r}")]
    if "status" in doc:
        return [Problem("status", "is written by the operator; remove it from the manifest")]
    schema = load_schema(crd_dir, kind)
    problems: list[Problem] = []
    normalize(doc, schema, (), problems)
    problems.extend(schema_problems(doc, schema))
    if not any(p.field.startswith("metadata") for p in problems):
        # The CRD leaves metadata to the API server, which checks it after the schema.
        problems.extend(check_object_meta(doc.get("metadata") or {}))
    return _unique(problems)


def normalize(value: Any, schema: dict[str, Any], path: FieldPath, problems: list[Problem]) -> None:
    """Prune nulls, apply defaults and report unknown fields, recursively."""
    if isinstance(value, dict) and schema.get("type") == "object":
        _normalize_object(value, schema, path, problems)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            normalize(item, schema["items"], (*path, i), problems)
        problems.extend(_list_type_problems(value, schema, path))


def _normalize_object(
    obj: dict, schema: dict[str, Any], path: FieldPath, problems: list[Problem]
) -> None:
    props = schema.get("properties", {})
    extra = schema.get("additionalProperties")
    open_ = schema.get("x-kubernetes-preserve-unknown-fields") or extra is True
    for key in list(obj):
        sub = props.get(key, extra if isinstance(extra, dict) else None)
        if obj[key] is None and not (sub or {}).get("nullable"):
            del obj[key]  # the API server prunes nulls of non-nullable fields
        elif sub is not None:
            normalize(obj[key], sub, (*path, key), problems)
        elif not open_:
            problems.append(Problem(format_path((*path, key)), _unknown(key, props)))
    for key, sub in props.items():
        if key not in obj and "default" in sub:
            obj[key] = copy.deepcopy(sub["default"])


def _unknown(key: str, props: dict) -> str:
    close = difflib.get_close_matches(key, props, n=1)
    return f"unknown field; did you mean {close[0]!r}?" if close else "unknown field"


def _list_type_problems(items: list, schema: dict[str, Any], path: FieldPath) -> Iterator[Problem]:
    list_type = schema.get("x-kubernetes-list-type")
    if list_type == "map":
        keys = schema.get("x-kubernetes-list-map-keys", [])
        ids = [
            tuple(item.get(k) for k in keys) if isinstance(item, dict) else None for item in items
        ]
    elif list_type == "set":
        ids = [repr(item) for item in items]
    else:
        return
    seen: set = set()
    for i, ident in enumerate(ids):
        if ident is not None and ident in seen:
            yield Problem(
                format_path((*path, i)), f"duplicate entry {ident!r} in a list of type {list_type}"
            )
        seen.add(ident)


def schema_problems(doc: dict[str, Any], schema: dict[str, Any]) -> list[Problem]:
    """The OpenAPI v3 schema's verdict, one Problem per error, each naming its field."""

    checker = jsonschema.FormatChecker(formats=())
    for fmt, (lo, hi) in _INT_RANGES.items():
        checker.checks(fmt)(functools.partial(_in_range, lo=lo, hi=hi))
    validator = jsonschema.Draft4Validator(schema, format_checker=checker)
    return [_describe(e) for e in validator.iter_errors(doc)]


def _in_range(value: object, *, lo: int, hi: int) -> bool:
    return not isinstance(value, int) or isinstance(value, bool) or lo <= value <= hi


def _describe(error) -> Problem:
    path = tuple(error.absolute_path)
    kind, schema, value = error.validator, error.schema, error.instance
    if kind == "required":
        missing = [n for n in error.validator_value if n not in value]
        return Problem(format_path((*path, missing[0])), "required field is missing")
    if kind == "anyOf" and schema.get("x-kubernetes-int-or-string"):
        return Problem(format_path(path), f"must be an integer or a string, got {value!r}")
    if kind == "pattern" and schema.get("x-kubernetes-int-or-string"):
        return Problem(
            format_path(path), f"{value!r} is not a Kubernetes quantity (e.g. 2, 500m, 4Gi)"
        )
    if kind == "type":
        return Problem(format_path(path), f"must be of type {schema['type']}, got {value!r}")
    if kind == "format":
        return Problem(format_path(path), f"{value} is out of range for {schema['format']}")
    if kind == "enum":
        return Problem(format_path(path), f"must be one of {schema['enum']}, got {value!r}")
    return Problem(format_path(path), error.message)


def _unique(problems: list[Problem]) -> list[Problem]:
    return list(dict.fromkeys(problems))
