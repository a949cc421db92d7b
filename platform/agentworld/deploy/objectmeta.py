"""ObjectMeta as the API server treats it on create. A CRD's schema only says
``metadata: {type: object}``; the server checks the metadata itself (apimachinery's
``ValidateObjectMetaAccessor`` with ``NameIsDNSSubdomain``, as for every custom resource):

- ``name``, or ``generateName`` when there is no name: the server then makes the name
  from the first 58 characters of generateName and 5 random characters. Both must be
  DNS-1123 subdomains (generateName with a trailing ``-``, as the server masks it).
- ``namespace`` a DNS-1123 label; ``labels`` and ``annotations`` keys qualified names,
  label values at most 63 characters, annotations at most 256 KiB in all;
  ``finalizers`` qualified names, ``orphan`` and ``foregroundDeletion`` not both;
  ``ownerReferences`` complete, at most one of them the controller.

Every other ObjectMeta field (uid, resourceVersion, creationTimestamp, managedFields...)
is written by the server, so a manifest that sets one is refused as an unknown field.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from agentworld.deploy.problems import Problem, format_path

_STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "generateName": {"type": "string"},
        "namespace": {"type": "string"},
        "labels": _STRING_MAP,
        "annotations": _STRING_MAP,
        "finalizers": {"type": "array", "items": {"type": "string"}},
        "ownerReferences": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["apiVersion", "kind", "name", "uid"],
                "properties": {
                    "apiVersion": {"type": "string"},
                    "kind": {"type": "string"},
                    "name": {"type": "string"},
                    "uid": {"type": "string"},
                    "controller": {"type": "boolean"},
                    "blockOwnerDeletion": {"type": "boolean"},
                },
            },
        },
    },
}
"""The fields a manifest may set, for the schema check (types and unknown fields)."""

GENERATED_SUFFIX = 5
"""Random characters the server appends to generateName."""
MAX_GENERATE_BASE = 63 - GENERATED_SUFFIX
"""The server keeps at most this many characters of generateName."""
_SUFFIX_SAMPLE = "x" * GENERATED_SUFFIX  # the server draws from [bcdfghjklmnpqrstvwxz2456789]
_DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN = re.compile(rf"^{_DNS1123_LABEL}(\.{_DNS1123_LABEL})*$")
_DNS1123_LABEL_RE = re.compile(rf"^{_DNS1123_LABEL}$")
_QUALIFIED_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_ANNOTATIONS_LIMIT = 256 * 1024
_CONFLICTING_FINALIZERS = {"orphan", "foregroundDeletion"}
_BANNED_OWNERS = {("", "v1", "Event")}


def generated_name(generate_name: str) -> str:
    """The shape of the name the server makes from ``generateName`` (its 5 random
    characters shown as ``x``)."""
    return generate_name[:MAX_GENERATE_BASE] + _SUFFIX_SAMPLE


def effective_name(meta: dict[str, Any]) -> tuple[str, str]:
    """(the object's name, or the shape of its generated one; the field it comes from)."""
    if meta.get("name"):
        return meta["name"], "name"
    return generated_name(meta.get("generateName") or ""), "generateName"


def check_object_meta(meta: dict[str, Any]) -> list[Problem]:
    """Problems of ``metadata`` (already of the right types) on create."""
    problems = list(_name_problems(meta))
    if meta.get("namespace"):
        problems += _check("metadata.namespace", _dns1123_label(meta["namespace"]))
    for key, value in (meta.get("labels") or {}).items():
        field = format_path(("metadata", "labels", key))
        problems += _check(field, qualified_name(key))
        problems += _check(field, label_value(value))
    problems += list(_annotation_problems(meta.get("annotations") or {}))
    problems += list(_finalizer_problems(meta.get("finalizers") or []))
    problems += list(_owner_problems(meta.get("ownerReferences") or []))
    return problems


def _check(field: str, messages: list[str]) -> list[Problem]:
    return [Problem(field, m) for m in messages]


def _name_problems(meta: dict[str, Any]) -> Iterator[Problem]:
    name, prefix = meta.get("name"), meta.get("generateName")
    if prefix:
        msgs = [f"{prefix!r} {m}" for m in dns1123_subdomain(_mask_trailing_dash(prefix))]
        if not msgs and not name:
            made = generated_name(prefix)
            msgs = [f"the name made from it, {made!r}, {m}" for m in dns1123_subdomain(made)]
        yield from (Problem("metadata.generateName", m) for m in msgs)
    if name:
        yield from (Problem("metadata.name", f"{name!r} {m}") for m in dns1123_subdomain(name))
    elif not prefix:
        yield Problem("metadata.name", "name or generateName is required")


def _mask_trailing_dash(prefix: str) -> str:
    """The server's mask for a prefix ending in '-': its last two characters become 'a'."""
    return prefix[:-2] + "a" if len(prefix) > 1 and prefix.endswith("-") else prefix


def dns1123_subdomain(value: str) -> list[str]:
    msgs = []
    if len(value) > 253:
        msgs.append("must be no more than 253 characters")
    if not _DNS1123_SUBDOMAIN.match(value):
        msgs.append(
            "is not a DNS-1123 subdomain (lower case alphanumerics, '-' or '.', "
            "starting and ending with an alphanumeric)"
        )
    return msgs


def _dns1123_label(value: str) -> list[str]:
    if len(value) <= 63 and _DNS1123_LABEL_RE.match(value):
        return []
    return [f"{value!r} is not a DNS-1123 label (at most 63 of a-z, 0-9, '-')"]


def qualified_name(key: str) -> list[str]:
    """A label key, annotation key or finalizer: ``[prefix/]name``, the prefix a DNS-1123
    subdomain, the name at most 63 alphanumerics, '-', '_' or '.'."""
    parts = key.split("/")
    if len(parts) > 2:
        return [f"{key!r} is not a qualified name: at most one '/'"]
    msgs = []
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            msgs.append(f"{key!r}: the prefix before '/' is empty")
        else:
            msgs += [f"{key!r}: prefix {m}" for m in dns1123_subdomain(prefix)]
    name = parts[-1]
    if len(name) > 63 or not _QUALIFIED_PART.match(name):
        msgs.append(
            f"{key!r} is not a qualified name (at most 63 alphanumerics, '-', '_' or '.', "
            "starting and ending with an alphanumeric, after an optional DNS prefix and '/')"
        )
    return msgs


def label_value(value: str) -> list[str]:
    if len(value) <= 63 and _LABEL_VALUE.match(value):
        return []
    return [
        f"{value!r} is not a valid label value (at most 63 alphanumerics, '-', '_' or '.', "
        "starting and ending with an alphanumeric)"
    ]


def _annotation_problems(annotations: dict[str, str]) -> Iterator[Problem]:
    for key in annotations:
        # The server checks annotation keys as qualified names, case-insensitively.
        for msg in qualified_name(key.lower()):
            yield Problem(format_path(("metadata", "annotations", key)), msg)
    size = sum(len(k.encode()) + len(v.encode()) for k, v in annotations.items())
    if size > _ANNOTATIONS_LIMIT:
        yield Problem(
            "metadata.annotations", f"{size} bytes in all; the limit is {_ANNOTATIONS_LIMIT}"
        )


def _finalizer_problems(finalizers: list[str]) -> Iterator[Problem]:
    for i, name in enumerate(finalizers):
        for msg in qualified_name(name):
            yield Problem(format_path(("metadata", "finalizers", i)), msg)
    if _CONFLICTING_FINALIZERS <= set(finalizers):
        yield Problem("metadata.finalizers", "orphan and foregroundDeletion cannot both be set")


def _owner_problems(refs: list[dict[str, Any]]) -> Iterator[Problem]:
    controller = None
    for i, ref in enumerate(refs):
        path = ("metadata", "ownerReferences", i)
        for key in ("apiVersion", "kind", "name", "uid"):
            if not ref.get(key):
                yield Problem(format_path((*path, key)), "must not be empty")
        group, _, version = ref.get("apiVersion", "").rpartition("/")
        if ref.get("apiVersion") and ("/" in group or not version):
            yield Problem(
                format_path((*path, "apiVersion")), "must be <group>/<version> or <version>"
            )
        if (group, version, ref.get("kind")) in _BANNED_OWNERS:
            yield Problem(format_path(path), "an Event cannot own other objects")
        if ref.get("controller"):
            if controller is not None:
                yield Problem(
                    format_path((*path, "controller")),
                    f"only one owner reference may be the controller (already ownerReferences[{controller}])",
                )
            else:
                controller = i
