"""What prepare reads under an input: the platform's own shards, and every other file
or claimed folder as one input unit for the adapters.

A folder an adapter claims (a BrowserGym experiment, a ScreenAgent session) is one
unit and is not looked into further. A platform run folder (it holds a ``manifest.json``
naming its stage, as collect writes) gives its shards only: its status files are its
own bookkeeping. Hidden and ``_`` files are skipped, and so are media files (records
point at screenshots; they are never input themselves). Any other file is a unit:
detected per file when read, quarantined when no adapter claims it.
"""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass
from typing import Any, Literal

from agentworld.data.formats.base import MEDIA_SUFFIXES, Head
from agentworld.data.formats.registry import FORMATS
from agentworld.io import get_fs, list_shards
from agentworld.io.manifest import MANIFEST_NAME
from agentworld.io.shards import SHARD_SUFFIXES

Kind = Literal["jsonl", "parquet", "unit"]


@dataclass(frozen=True)
class Listed:
    url: str
    kind: Kind
    label: str
    """The path relative to the input it was found under."""


def shard_kind(url: str) -> Kind:
    return "parquet" if url.endswith(".parquet") else "jsonl"


def list_inputs(url: str, storage_options: dict[str, Any]) -> list[Listed]:
    """Shards and units under ``url`` (a file or a folder), sorted by URL."""
    fs, path = get_fs(url, **storage_options)
    proto = url.split("://", 1)[0] + "://" if "://" in url else ""
    full = lambda p: proto + p if proto and not p.startswith(proto) else p  # noqa: E731
    if fs.isfile(path):
        return [_classify(url, posixpath.basename(path))] if _wanted(path) else []
    out: list[Listed] = []
    root = path.rstrip("/")
    stack = [root]
    while stack:
        folder = stack.pop()
        entries = fs.ls(folder, detail=True)
        names = sorted(posixpath.basename(e["name"].rstrip("/")) for e in entries)
        label = posixpath.relpath(folder, root) if folder != root else posixpath.basename(root)
        if _claimed_folder(folder, names):
            out.append(Listed(full(folder), "unit", label))
            continue
        if MANIFEST_NAME in names and _is_run_manifest(fs, f"{folder}/{MANIFEST_NAME}"):
            shards = list_shards(full(folder), **storage_options)
            out += [Listed(s, shard_kind(s), _rel(s, root, proto)) for s in shards]
            continue
        for e in sorted(entries, key=lambda e: e["name"]):
            p = e["name"].rstrip("/")
            if not _wanted(p):
                continue
            if e["type"] == "directory":
                stack.append(p)
            else:
                out.append(_classify(full(p), posixpath.relpath(p, root)))
    return sorted(out, key=lambda x: x.url)


def _rel(url: str, root: str, proto: str) -> str:
    return posixpath.relpath(url[len(proto) :] if proto else url, root)


def _wanted(path: str) -> bool:
    name = posixpath.basename(path)
    return not (name.startswith((".", "_")) or name.lower().endswith(MEDIA_SUFFIXES))


def _classify(url: str, label: str) -> Listed:
    if url.endswith(SHARD_SUFFIXES):
        return Listed(url, shard_kind(url), label)
    return Listed(url, "unit", label)


def _claimed_folder(path: str, names: list[str]) -> bool:
    head = Head(names=tuple(names), is_dir=True)
    return any(f.folder and f.adapter().detect(path, head) for f in FORMATS.values())


def _is_run_manifest(fs, path: str) -> bool:
    """A manifest this platform wrote (it names its stage), not a file that happens
    to share the name."""
    try:
        with fs.open(path, "rb") as f:
            doc = json.loads(f.read(1 << 20))
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and "stage" in doc
