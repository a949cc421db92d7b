"""Filesystem access for any fsspec URL (local path, file://, s3://, gs://, memory://).

S3-compatible endpoints are configured the usual way: AWS_ENDPOINT_URL,
AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_DEFAULT_REGION, or explicit
``storage_options``.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from typing import IO, Any

import fsspec
from fsspec.implementations.local import LocalFileSystem


def get_fs(url: str, **storage_options: Any) -> tuple[fsspec.AbstractFileSystem, str]:
    """Return (filesystem, path inside it) for a URL or local path."""
    fs, path = fsspec.core.url_to_fs(url, **storage_options)
    return fs, path


def absolute_url(url: str) -> str:
    """``url`` with a relative local path made absolute against the current directory;
    URLs with a scheme (``s3://``, ``memory://``, ``file:///abs``) pass unchanged.

    Jobs call this once on every path they receive, before any Ray task or actor sees
    it: Ray Train workers and Ray Data tasks run in other working directories, where a
    relative path resolves elsewhere (transformers then takes it for a hub repo id)."""
    if not url:
        return url
    if url.startswith("file://"):
        rest = url.removeprefix("file://")
        return url if rest.startswith("/") else "file://" + os.path.abspath(rest)
    if "://" in url:
        return url
    return os.path.abspath(os.path.expanduser(url))


def join(url: str, *parts: str) -> str:
    """Join URL parts with '/', whatever the protocol."""
    if "://" in url:
        proto, rest = url.split("://", 1)
        return f"{proto}://{posixpath.join(rest, *parts)}"
    return os.path.join(url, *parts)


def exists(url: str, **storage_options: Any) -> bool:
    fs, path = get_fs(url, **storage_options)
    return fs.exists(path)


def makedirs(url: str, **storage_options: Any) -> None:
    fs, path = get_fs(url, **storage_options)
    if isinstance(fs, LocalFileSystem):
        os.makedirs(path, exist_ok=True)


@contextlib.contextmanager
def atomic_write(url: str, mode: str = "wb", **storage_options: Any) -> Iterator[IO]:
    """Open ``url`` for writing so that nothing appears under its name until the block
    finishes without error.

    Local files are written beside the target and renamed into place (rename is atomic
    on POSIX). Object stores get one upload of a finished local temporary file: an
    object becomes visible only when its upload completes, so a writer killed midway
    leaves no object under the final name.
    """
    if mode not in ("wb", "w"):
        raise ValueError(f"atomic_write mode must be 'wb' or 'w', not {mode!r}")
    fs, path = get_fs(url, **storage_options)
    if isinstance(fs, LocalFileSystem):
        directory = os.path.dirname(path) or "."
        os.makedirs(directory, exist_ok=True)
        tmp = os.path.join(directory, f".{os.path.basename(path)}.tmp-{uuid.uuid4().hex}")
        try:
            with open(tmp, mode, encoding=None if "b" in mode else "utf-8") as f:
                yield f
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        return
    with tempfile.NamedTemporaryFile(mode, suffix=".part", delete=False, **_text_kwargs(mode)) as f:
        tmp = f.name
    try:
        with open(tmp, mode, **_text_kwargs(mode)) as f:
            yield f
        fs.put_file(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def _text_kwargs(mode: str) -> dict[str, Any]:
    return {} if "b" in mode else {"encoding": "utf-8"}


def write_bytes(url: str, data: bytes, **storage_options: Any) -> None:
    with atomic_write(url, "wb", **storage_options) as f:
        f.write(data)


def read_bytes(url: str, **storage_options: Any) -> bytes:
    fs, path = get_fs(url, **storage_options)
    return fs.cat_file(path)


def remove(url: str, *, recursive: bool = False, **storage_options: Any) -> None:
    fs, path = get_fs(url, **storage_options)
    if fs.exists(path):
        fs.rm(path, recursive=recursive)


def copy_local_dir_to(local_dir: str, url: str, **storage_options: Any) -> None:
    """Upload a local directory tree to ``url`` (files are each written atomically)."""
    fs, path = get_fs(url, **storage_options)
    if isinstance(fs, LocalFileSystem):
        shutil.copytree(local_dir, path, dirs_exist_ok=True)
        return
    for root, _, files in os.walk(local_dir):
        for name in files:
            rel = os.path.relpath(os.path.join(root, name), local_dir)
            fs.put_file(os.path.join(root, name), posixpath.join(path, rel.replace(os.sep, "/")))


def download_dir(url: str, local_dir: str, **storage_options: Any) -> str:
    """Make a local copy of a directory at ``url``; a local URL is returned as is."""
    fs, path = get_fs(url, **storage_options)
    if isinstance(fs, LocalFileSystem):
        return path
    os.makedirs(local_dir, exist_ok=True)
    fs.get(path.rstrip("/") + "/", local_dir, recursive=True)
    return local_dir
