"""Everything about where prepare's work runs on Ray, in one place: the Ray Data
context (parallelism, shuffle strategy, progress bars), storage options handed to
workers, staging reads and writes, and values broadcast through the object store.

Workers never read driver state: an S3 endpoint configured by environment variables in
the driver is turned into explicit storage options that travel with each task.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from agentworld.data.config import DataConfig

_BROADCAST_CACHE: dict[str, Any] = {}


def storage_options_for(url: str) -> dict[str, Any]:
    """fsspec options for ``url`` built from the driver's AWS_* variables (S3 only)."""
    if not url.startswith(("s3://", "s3a://")):
        return {}
    env = os.environ
    opts: dict[str, Any] = {}
    client: dict[str, Any] = {}
    if env.get("AWS_ENDPOINT_URL"):
        client["endpoint_url"] = env["AWS_ENDPOINT_URL"]
    region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
    if region:
        client["region_name"] = region
    if client:
        opts["client_kwargs"] = client
    if env.get("AWS_ACCESS_KEY_ID") and env.get("AWS_SECRET_ACCESS_KEY"):
        opts["key"] = env["AWS_ACCESS_KEY_ID"]
        opts["secret"] = env["AWS_SECRET_ACCESS_KEY"]
    return opts


def arrow_fs(url: str, storage_options: dict[str, Any]) -> tuple[Any, str]:
    """(pyarrow filesystem, path) for Ray Data's Parquet reads and writes."""
    import pyarrow.fs as pafs

    from agentworld.io import get_fs

    fs, path = get_fs(url, **storage_options)
    return pafs.PyFileSystem(pafs.FSSpecHandler(fs)), path


@contextlib.contextmanager
def data_context(cfg: DataConfig) -> Iterator[None]:
    """Ray Data settings for one prepare run, restored afterwards (tests share a
    process and a cluster with other stages)."""
    from ray.data import DataContext, ExecutionResources

    ctx = DataContext.get_current()
    saved = (ctx.shuffle_strategy, ctx.execution_options.resource_limits, ctx.enable_progress_bars)
    # Sort-based shuffles run as plain tasks; the hash shuffle starts aggregator actors
    # per operation, which costs seconds each on a small cluster.
    ctx.shuffle_strategy = "sort_shuffle_pull_based"
    ctx.execution_options.resource_limits = ExecutionResources(cpu=cfg.num_workers)
    ctx.enable_progress_bars = cfg.progress_bars
    try:
        yield
    finally:
        ctx.shuffle_strategy = saved[0]
        ctx.execution_options.resource_limits = saved[1]
        ctx.enable_progress_bars = saved[2]


def broadcast(value: Any) -> dict[str, Any]:
    """Put ``value`` in the object store once; pass the returned holder to tasks and
    read it there with ``fetch`` (a holder, not a bare ref, so it is never resolved
    early and each worker process reads it once)."""
    import ray

    return {"ref": ray.put(value)}


def fetch(holder: dict[str, Any] | None) -> Any:
    if holder is None:
        return None
    import ray

    key = holder["ref"].hex()
    if key not in _BROADCAST_CACHE:
        if len(_BROADCAST_CACHE) >= 4:  # values of earlier runs: drop the oldest
            _BROADCAST_CACHE.pop(next(iter(_BROADCAST_CACHE)))
        _BROADCAST_CACHE[key] = ray.get(holder["ref"])
    return _BROADCAST_CACHE[key]


def read_staging(url: str, storage_options: dict[str, Any], *, columns: list[str] | None = None):
    """A Ray Dataset over a staging Parquet directory."""
    import ray

    fs, path = arrow_fs(url, storage_options)
    return ray.data.read_parquet(path, filesystem=fs, columns=columns)


def write_staging(ds, url: str, storage_options: dict[str, Any]) -> None:
    fs, path = arrow_fs(url, storage_options)
    ds.write_parquet(path, filesystem=fs)
