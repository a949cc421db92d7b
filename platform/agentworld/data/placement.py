"""All of prepare's Ray code, in one place: the Ray Data context (parallelism, shuffle
strategy, progress bars), storage options handed to workers, plain Ray tasks with a
bounded number in flight (ingest, dedup's reads and passes), the datasets read from
staging, staging writes, blocks brought to the driver, and values broadcast through the
object store. The other modules of agentworld.data only call methods on the datasets
built here, or hand functions to run_tasks, with block functions that are plain Arrow
code.

Workers never read driver state: an S3 endpoint configured by environment variables in
the driver is turned into explicit storage options that travel with each task.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from agentworld.data.config import DataConfig
from agentworld.io import exists, get_fs, join, list_shards, write_parquet
from agentworld.io.storage import makedirs, remove

_BROADCAST_CACHE: dict[str, Any] = {}
TARGET_BLOCK_BYTES = 8 * 1024 * 1024
"""Ray Data's cap on the blocks a task hands on: with data.block_records, what bounds a
worker's memory whatever the size of the input."""
STAGING_FILE_BYTES = 32 * 1024 * 1024
"""Ingest gathers its blocks into staging files of about this size (a Parquet row group
per block): dedup reads them one task per file, and fewer files keep its shuffles to
fewer pieces, while later steps still read them a row group (a block) at a time."""


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


@contextlib.contextmanager
def data_context(cfg: DataConfig) -> Iterator[None]:
    """Ray Data settings for one prepare run, restored afterwards (tests share a
    process and a cluster with other stages)."""
    from ray.data import DataContext, ExecutionResources

    ctx = DataContext.get_current()
    saved = (
        ctx.shuffle_strategy,
        ctx.execution_options.resource_limits,
        ctx.enable_progress_bars,
        ctx.read_op_min_num_blocks,
        ctx.target_max_block_size,
    )
    # Sort-based shuffles run as plain tasks; the hash shuffle starts aggregator actors
    # per operation, which costs seconds each on a small cluster.
    ctx.shuffle_strategy = "sort_shuffle_pull_based"
    ctx.execution_options.resource_limits = ExecutionResources(cpu=cfg.num_workers)
    ctx.enable_progress_bars = cfg.progress_bars
    # Reads make one block per task (a file or byte range, split by block_records), not
    # the default 200: every block multiplies the pieces of each later shuffle.
    ctx.read_op_min_num_blocks = 1
    # A task buffers its output up to this size before it hands a block on (128 MiB by
    # default): smaller blocks keep a worker's memory flat as the input grows.
    ctx.target_max_block_size = TARGET_BLOCK_BYTES
    try:
        with _executor_timings():
            yield
    finally:
        ctx.shuffle_strategy = saved[0]
        ctx.execution_options.resource_limits = saved[1]
        ctx.enable_progress_bars = saved[2]
        ctx.read_op_min_num_blocks = saved[3]
        ctx.target_max_block_size = saved[4]


@contextlib.contextmanager
def _executor_timings() -> Iterator[None]:
    """Two private timings of Ray Data's streaming executor, shortened for the run
    (left alone where a Ray version no longer has them):

    - The CPUs an execution may use come from the autoscaling coordinator, and its
      first answer is the coordinator's empty cache: until the next refresh (1 s by
      default) every execution runs one task at a time. Measured on 2 CPUs: 8 tasks of
      0.3 s took 2.2 s, 1.3 s with a 0.05 s refresh; a dedup runs several executions.
    - Each scheduling step waits for all running tasks, or 0.1 s, before it looks at
      the finished ones: with two tasks running, a worker that finished sat idle up to
      0.1 s per look, and a task's end takes two (its last block, then its end). The
      ingest timeline on 2 workers showed 0.1-0.4 s gaps between one worker's tasks, none
      on 1 worker. At 0.03 s the dedup bench's 2-worker run went 3.83 -> 3.42 s (best of
      3; 1 worker 5.61 -> 5.56 s).
    """
    patches = []
    try:
        from ray.data._internal.execution import streaming_executor_state
        from ray.data._internal.execution.resource_manager import ResourceManager

        patches = [
            (ResourceManager, "GLOBAL_LIMITS_UPDATE_INTERVAL_S", 0.05),
            (streaming_executor_state, "WAIT_FOR_TASK_COMPLETION_TIMEOUT_S", 0.03),
        ]
    except ImportError:
        pass
    patches = [(owner, name, value) for owner, name, value in patches if hasattr(owner, name)]
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in patches]
    for owner, name, value in patches:
        setattr(owner, name, value)
    try:
        yield
    finally:
        for owner, name, value in saved:
            setattr(owner, name, value)


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


def blocks_on_driver(ds) -> list:
    """The non-empty blocks of ``ds`` as Arrow tables on the driver (for datasets
    already reduced to a few rows per block)."""
    import ray

    return [t for t in ray.get(ds.to_arrow_refs()) if t.num_rows]


def map_blocks(ds, fn, *, workers: int, **kwargs) -> list:
    """``fn(block, **kwargs)`` on every block of a materialized dataset, as plain Ray
    tasks (``run_tasks``); the non-empty Arrow results on the driver, in block order.

    For light work on blocks already in the object store (dedup's projections and
    semi-joins): a Ray Data execution of the same map schedules its tasks through its
    executor loop, 0.15-0.3 s for 25 small blocks on 2 CPUs, where these tasks took 0.05 s.
    """
    tables = run_tasks(fn, ds.to_arrow_refs(), workers=workers, fn_kwargs=kwargs)
    return [t for t in tables if t.num_rows]


def run_tasks(
    fn,
    items: list,
    *,
    workers: int,
    fn_kwargs: dict[str, Any] | None = None,
    progress: Callable[[int, int], None] | None = None,
    refs: bool = False,
) -> list:
    """``fn(item, **fn_kwargs)`` for every item, each a plain Ray task of one CPU with
    at most ``workers`` in flight; the results, in item order (their object refs with
    ``refs``: blocks that stay in the object store). ``progress(done, total)`` is
    called as tasks finish. An item may be an object ref (a block): the task gets its
    value. A task that fails raises here as soon as it is seen (without ``refs``: with
    them, where its block is read), and no further task is started.

    Ray Data runs a stage's tasks from an executor loop on the driver that polls and
    reshapes blocks; on a small cluster that loop takes CPU from the workers it feeds
    (ingest on 2 CPUs: 2.7 s through Ray Data, 2.2 s as these tasks, 1.9 s for the same
    kernel in two plain processes)."""
    import ray

    task, kwargs = _task(), fn_kwargs or {}
    results, in_flight, values = [], [], {}

    def wait() -> None:
        nonlocal in_flight
        ready, in_flight = ray.wait(in_flight, num_returns=1)
        if not refs:  # fetched once, as it finishes: a failed task stops the run here
            values[ready[0]] = ray.get(ready[0])
        if progress is not None:
            progress(len(results) - len(in_flight), len(items))

    for item in items:
        if len(in_flight) >= workers:
            wait()
        results.append(task.remote(item, fn, kwargs))
        in_flight.append(results[-1])
    while in_flight:
        wait()
    return results if refs else [values[r] for r in results]


@functools.cache
def _task():
    """The remote function of ``run_tasks`` (made once, when first needed: Ray is
    imported there, not at this module's import)."""
    import ray

    @ray.remote(num_cpus=1)
    def run_one(item, fn, kwargs):
        return fn(item, **kwargs)

    return run_one


def dataset_from_refs(refs: list):
    """A materialized Ray Dataset of Arrow blocks already in the object store."""
    import ray

    return ray.data.from_arrow_refs(refs) if refs else ray.data.from_items([])


def dataset_from_arrow(table):
    """A Ray Dataset of one Arrow table held by the driver."""
    import ray

    return ray.data.from_arrow(table)


def staging_files(url: str, storage_options: dict[str, Any]) -> list[str]:
    if not exists(url, **storage_options):
        return []
    return list_shards(url, suffixes=(".parquet",), **storage_options)


def _read_parquet_file(url: str, columns: list[str] | None, storage_options: dict[str, Any]):
    fs, path = get_fs(url, **storage_options)
    with fs.open(path, "rb") as f:
        for batch in pq.ParquetFile(f).iter_batches(columns=columns, use_threads=False):
            yield pa.Table.from_batches([batch])


def read_staging(url: str, storage_options: dict[str, Any], *, columns: list[str] | None = None):
    """A Ray Dataset over a staging Parquet directory: one read task per file, row
    group by row group. (Our own Datasource: files are listed once on the driver, with
    the run's storage options, and no listing tasks run on the cluster.)"""

    import ray
    from ray.data import Datasource, ReadTask
    from ray.data.block import BlockMetadata

    files = staging_files(url, storage_options)

    class StagingDatasource(Datasource):
        def estimate_inmemory_data_size(self):
            return None

        def get_read_tasks(self, parallelism: int, per_task_row_limit=None, data_context=None):
            return [
                ReadTask(
                    functools.partial(_read_parquet_file, f, columns, storage_options),
                    BlockMetadata(num_rows=None, size_bytes=None, input_files=[f], exec_stats=None),
                )
                for f in files
            ]

    if not files:
        return ray.data.from_items([])
    return ray.data.read_datasource(StagingDatasource(), override_num_blocks=len(files))


def _write_block(block, *, url: str, storage_options: dict[str, Any]):
    if block.num_rows:
        write_parquet(join(url, f"part-{uuid.uuid4().hex}.parquet"), block, **storage_options)
    return pa.table({"rows": [block.num_rows]})


def write_staging(ds, url: str, storage_options: dict[str, Any]) -> int:
    """Write every block of ``ds`` as one Parquet file under ``url``; returns rows.
    File names are random: a step clears its staging directory before it runs."""
    written = ds.map_batches(
        _write_block,
        batch_format="pyarrow",
        batch_size=None,
        fn_kwargs={"url": url, "storage_options": storage_options},
    )
    return int(written.sum("rows") or 0)


def map_groups_via_storage(
    ds,
    key: str,
    fn,
    *,
    spill_url: str,
    storage_options: dict[str, Any],
    fn_kwargs: dict[str, Any] | None = None,
) -> list:
    """``fn(group, **fn_kwargs)`` once per distinct value of column ``key``, with every
    row of that value; the non-empty Arrow tables it returned.

    A shuffle through storage instead of Ray Data's groupby: each block is sorted by
    ``key`` and written by its own task as one Parquet file under ``spill_url`` with
    one row group per key value; then one task per key value reads its row groups from
    every file and calls ``fn``. A task holds one block, or one group, never a sort
    partition of several groups (whose size grows with the input: this is what keeps
    a worker's memory flat). ``spill_url`` is cleared before and removed after."""

    import ray

    remove(spill_url, recursive=True, **storage_options)
    index = blocks_on_driver(
        ds.map_batches(
            _spill_block,
            batch_format="pyarrow",
            batch_size=None,
            fn_kwargs={"key": key, "url": spill_url, "storage_options": storage_options},
        )
    )
    pieces: dict[str, list] = {}
    for table in index:
        for value, url, group in zip(
            table.column("value").to_pylist(),
            table.column("file").to_pylist(),
            table.column("row_group").to_pylist(),
            strict=True,
        ):
            pieces.setdefault(value, []).append((url, group))
    if not pieces:
        return []
    items = [{"pieces": json.dumps(sorted(p))} for _, p in sorted(pieces.items())]
    groups = ray.data.from_items(items, override_num_blocks=len(items))
    out = groups.map_batches(
        _group_task,
        batch_format="pyarrow",
        batch_size=1,
        fn_kwargs={"fn": fn, "fn_kwargs": fn_kwargs or {}, "storage_options": storage_options},
    )
    tables = blocks_on_driver(out)
    remove(spill_url, recursive=True, **storage_options)
    return tables


def _spill_block(block, *, key: str, url: str, storage_options: dict[str, Any]):
    """Write one block sorted by ``key``, a row group per value; (value, file,
    row_group) per value."""

    index = pa.schema([("value", pa.string()), ("file", pa.string()), ("row_group", pa.int64())])
    if block.num_rows == 0:
        return index.empty_table()
    block = block.sort_by(key)
    values = block.column(key).to_pylist()
    starts = [0] + [i for i in range(1, len(values)) if values[i] != values[i - 1]]
    ends = starts[1:] + [len(values)]
    makedirs(url, **storage_options)
    file_url = join(url, f"part-{uuid.uuid4().hex}.parquet")
    fs, path = get_fs(file_url, **storage_options)
    with fs.open(path, "wb") as f, pq.ParquetWriter(f, block.schema) as writer:
        for start, end in zip(starts, ends, strict=True):
            writer.write_table(block.slice(start, end - start), row_group_size=end - start)
    return pa.table(
        {
            "value": [str(values[s]) for s in starts],
            "file": [file_url] * len(starts),
            "row_group": np.arange(len(starts), dtype=np.int64),
        },
        schema=index,
    )


def _group_task(batch, *, fn, fn_kwargs: dict[str, Any], storage_options: dict[str, Any]):
    """One group: its row groups read from every spilled file, then ``fn``."""

    out = []
    for pieces in batch.column("pieces").to_pylist():
        parts = []
        for file_url, row_group in json.loads(pieces):
            fs, path = get_fs(file_url, **storage_options)
            with fs.open(path, "rb") as f:
                parts.append(pq.ParquetFile(f).read_row_group(row_group, use_threads=False))
        out.append(fn(pa.concat_tables(parts, promote_options="permissive"), **fn_kwargs))
    return pa.concat_tables(out)
