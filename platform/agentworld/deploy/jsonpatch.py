"""RFC 6902 JSON Patch (the ``op``/``path`` lists that kustomize ``patches`` accept)."""

from __future__ import annotations

import copy
from typing import Any


class PatchError(ValueError):
    """An operation cannot be applied; the message names the operation and path."""


def apply_patch(doc: Any, ops: list[dict[str, Any]]) -> Any:
    """A patched deep copy of ``doc``."""
    doc = copy.deepcopy(doc)
    for i, op in enumerate(ops):
        try:
            doc = _apply_one(doc, op)
        except (KeyError, IndexError, TypeError, ValueError) as e:
            raise PatchError(f"operation {i} ({op.get('op')} {op.get('path')}): {e}") from None
    return doc


def _apply_one(doc: Any, op: dict[str, Any]) -> Any:
    name = op.get("op")
    if name == "test":
        if _get(doc, _pointer(op["path"])) != op["value"]:
            raise ValueError("test failed: value differs")
        return doc
    if name in ("move", "copy"):
        value = _get(doc, _pointer(op["from"]))
        if name == "move":
            doc = _remove(doc, _pointer(op["from"]))
        return _put(doc, _pointer(op["path"]), copy.deepcopy(value))
    if name == "add":
        return _put(doc, _pointer(op["path"]), copy.deepcopy(op["value"]))
    if name == "remove":
        return _remove(doc, _pointer(op["path"]))
    if name == "replace":
        return _put(doc, _pointer(op["path"]), copy.deepcopy(op["value"]), replace=True)
    raise ValueError(f"unknown op {name!r}")


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise ValueError(f"path {path!r} must start with '/'")
    return [t.replace("~1", "/").replace("~0", "~") for t in path[1:].split("/")]


def _index(container: list, token: str, *, append: bool = False) -> int:
    if append and token == "-":
        return len(container)
    if not token.isdigit():
        raise ValueError(f"{token!r} is not a list index")
    i = int(token)
    if i > len(container) or (i == len(container) and not append):
        raise IndexError(f"index {i} is past the end of a list of {len(container)}")
    return i


def _get(doc: Any, tokens: list[str]) -> Any:
    for t in tokens:
        doc = doc[_index(doc, t)] if isinstance(doc, list) else doc[t]
    return doc


def _put(doc: Any, tokens: list[str], value: Any, *, replace: bool = False) -> Any:
    """``add`` (insert into a list, set a key) or ``replace`` (the target must exist; it
    is set in place, so a replaced key keeps its position in the mapping)."""
    if not tokens:
        return value
    parent, key = _get(doc, tokens[:-1]), tokens[-1]
    if isinstance(parent, list):
        if replace:
            parent[_index(parent, key)] = value
        else:
            parent.insert(_index(parent, key, append=True), value)
    elif isinstance(parent, dict):
        if replace and key not in parent:
            raise KeyError(f"{key!r} does not exist")
        parent[key] = value
    else:
        raise TypeError(f"cannot add into a {type(parent).__name__}")
    return doc


def _remove(doc: Any, tokens: list[str]) -> Any:
    if not tokens:
        return None
    parent = _get(doc, tokens[:-1])
    if isinstance(parent, list):
        del parent[_index(parent, tokens[-1])]
    else:
        del parent[tokens[-1]]
    return doc
