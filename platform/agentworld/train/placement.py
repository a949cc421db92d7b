"""Where training runs on Ray, in one place (the only module of the package that
imports Ray): the cluster-size check, storage for Ray Data and Ray Train, the packed
datasets, the TorchTrainer, the queue that carries reports from Ray Train's controller
to the driver, and what a worker asks of Ray Train (its rank, its data shard,
reports, checkpoints)."""

from __future__ import annotations

import os
from typing import Any

import pyarrow.fs as pafs
import pyarrow.parquet as pq
from ray.train import UserCallback

from agentworld.config import ConfigError
from agentworld.io import get_fs
from agentworld.train.config import ClusterConfig

# S3-compatible endpoints are configured by these variables on the driver; workers get
# the same values so that their reads, checkpoint uploads and the export reach it.
STORAGE_ENV = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_DEFAULT_REGION",
    "AWS_REGION",
    "AWS_ENDPOINT_URL",
)


PACKED_COLUMNS = ["input_ids", "loss_mask", "position_ids", "doc_lens"]
# Packed rows up to this much Parquet reach Ray Data from one read on the driver. Every
# read task needs a worker process, and on a small machine starting them costs more
# than reading a few megabytes: 25 s before the first batch of a 4-step run on 2 cores.
# The rows take seven to nine times their Parquet size in memory, as one block; the
# demo's are 0.3-0.4 MiB.
DRIVER_READ_BYTES = 8 << 20


def storage_env() -> dict[str, str]:
    return {k: os.environ[k] for k in STORAGE_ENV if os.environ.get(k)}


def check_resources(cluster: ClusterConfig) -> None:
    """Fail before any worker starts when the Ray cluster cannot hold the worker group
    (Ray Train would otherwise wait for resources forever). One CPU beyond the
    workers' stays free for Ray Data's read tasks."""
    import ray

    total = ray.cluster_resources()
    need_cpu = cluster.num_workers * cluster.cpus_per_worker + 1
    need_gpu = cluster.num_workers * cluster.gpus_per_worker
    if total.get("CPU", 0) < need_cpu:
        raise ConfigError(
            "cluster.num_workers",
            f"{cluster.num_workers} workers x {cluster.cpus_per_worker} CPU (+1 for Ray Data) "
            f"need {need_cpu} CPUs; the Ray cluster has {total.get('CPU', 0):g}",
        )
    if total.get("GPU", 0) < need_gpu:
        raise ConfigError(
            "cluster.num_workers",
            f"{cluster.num_workers} workers x {cluster.gpus_per_worker} GPU need {need_gpu} GPUs; "
            f"the Ray cluster has {total.get('GPU', 0):g}",
        )


def arrow_storage(url: str) -> tuple[str, Any]:
    """(path, pyarrow filesystem or None) for Ray Data and Ray Train. Local paths go as
    absolute paths; other URLs through fsspec, so that they honour AWS_ENDPOINT_URL."""
    if "://" not in url or url.startswith("file://"):
        return os.path.abspath(url.removeprefix("file://")), None

    # Resolved here and pickled with the filesystem: Ray Data's read tasks do not see
    # the driver's environment.
    env = storage_env()
    options: dict[str, Any] = {}
    if url.startswith("s3"):
        client = {"endpoint_url": env.get("AWS_ENDPOINT_URL"), "region_name": env.get("AWS_REGION")}
        options["client_kwargs"] = {k: v for k, v in client.items() if v}
        if "AWS_ACCESS_KEY_ID" in env and "AWS_SECRET_ACCESS_KEY" in env:
            options.update(key=env["AWS_ACCESS_KEY_ID"], secret=env["AWS_SECRET_ACCESS_KEY"])
    fs, path = get_fs(url, **options)
    return path, pafs.PyFileSystem(pafs.FSSpecHandler(fs))


def read_packed(url: str):
    """The packed rows under ``url`` as a Ray Data dataset: streamed through Ray Data's
    read tasks, or, up to ``DRIVER_READ_BYTES`` of Parquet, read once on the driver."""
    import ray.data

    sizer, sized_path = get_fs(url)
    if sizer.du(sized_path) <= DRIVER_READ_BYTES:
        dataset = ray.data.from_arrow(read_packed_table(url))
    else:
        path, fs = arrow_storage(url)
        dataset = ray.data.read_parquet(path, filesystem=fs, columns=PACKED_COLUMNS)
    dataset.context.enable_progress_bars = False  # the driver prints its own progress line
    return dataset


def read_packed_table(url: str):
    """The packed rows under ``url`` as one pyarrow Table, read on the driver: small
    training sets (above), and the held-out rows, which are few, every worker evaluates
    on many times, and would otherwise need one Ray Data pipeline per worker competing
    with the training stream for the cluster's spare CPUs."""

    path, fs = arrow_storage(url)
    return pq.read_table(path, filesystem=fs, columns=PACKED_COLUMNS, use_threads=False)


def build_trainer(train_fn, spec, *, train_data, held_out, events, out_url: str, callbacks: list):
    """A TorchTrainer with the recipe's worker group, failure handling (replace the
    group, resume from the newest checkpoint) and checkpoint retention under
    ``<out>/checkpoints``. The training rows stream to the workers through Ray Data,
    split between them in a fixed order; ``held_out`` (an object ref) reaches every
    worker whole, and ``events`` (the driver's queue) rank 0's reports."""
    from ray.train import CheckpointConfig, DataConfig, FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchConfig, TorchTrainer

    cluster, train = spec.cluster, spec.train
    resources = {"CPU": cluster.cpus_per_worker}
    if cluster.use_gpu:
        resources["GPU"] = cluster.gpus_per_worker
    ingest = DataConfig.default_ingest_options()
    ingest.preserve_order = True
    storage_path, storage_fs = arrow_storage(out_url)
    return TorchTrainer(
        train_fn,
        train_loop_config={"spec": spec, "held_out": held_out, "events": events},
        torch_config=TorchConfig(backend="nccl" if cluster.use_gpu else "gloo"),
        scaling_config=ScalingConfig(
            num_workers=cluster.num_workers, use_gpu=cluster.use_gpu, resources_per_worker=resources
        ),
        run_config=RunConfig(
            name="checkpoints",
            storage_path=storage_path,
            storage_filesystem=storage_fs,
            failure_config=FailureConfig(max_failures=train.max_failures),
            checkpoint_config=CheckpointConfig(num_to_keep=train.keep_checkpoints),
            callbacks=callbacks,
            worker_runtime_env={"env_vars": spec.env} if spec.env else None,
        ),
        datasets={"train": train_data},
        dataset_config=DataConfig(datasets_to_split=["train"], execution_options=ingest),
    )


class ForwardReports(UserCallback):
    """Runs in the Ray Train controller: puts each kept checkpoint and each worker
    failure on ``queue``. Per-step metrics do not pass through here: rank 0 sends them
    itself (``report``), because the controller takes one report per worker per poll
    (every 2 s), and a worker that reports faster than that waits for it."""

    def __init__(self, queue) -> None:
        self.queue = queue

    def after_report(self, run_context, metrics: list[dict[str, Any]], checkpoint) -> None:
        if checkpoint is not None:  # kept: a restarted worker group resumes from it
            event = {"kind": "checkpoint", "metrics": metrics[0] if metrics else {}}
            event["checkpoint"] = checkpoint.path
            self.queue.actor.put_nowait.remote(event)  # fire and forget: never block

    def after_exception(self, run_context, worker_exceptions: dict[int, Exception]) -> None:
        ranks = sorted(worker_exceptions)
        error = repr(worker_exceptions[ranks[0]])[:300] if ranks else ""
        self.queue.actor.put_nowait.remote({"kind": "failure", "ranks": ranks, "error": error})


def event_queue():
    """The queue rank 0 and ForwardReports fill and the driver drains (an actor on no
    CPU)."""
    from ray.util.queue import Queue

    return Queue(actor_options={"num_cpus": 0})


def next_event(queue, *, block: bool) -> dict[str, Any] | None:
    """The next event on ``queue``; None when it is empty (after 0.2 s when blocking)."""
    from ray.util.queue import Empty

    try:
        return queue.get(block=block, timeout=0.2) if block else queue.get_nowait()
    except Empty:
        return None


def put(value: Any):
    """An object ref of ``value``: every worker gets it whole."""
    import ray

    return ray.put(value)


# What a worker of the TorchTrainer asks of Ray Train.


def worker_rank() -> tuple[int, int]:
    """(world rank, world size) of this worker."""
    import ray.train

    context = ray.train.get_context()
    return context.get_world_rank(), context.get_world_size()


def worker_inputs(config: dict[str, Any]) -> tuple[Any, Any]:
    """This worker's shard of the training rows, and the held-out table."""
    import ray
    import ray.train

    return ray.train.get_dataset_shard("train"), ray.get(config["held_out"])


def report(
    metrics: dict[str, Any],
    *,
    events=None,
    checkpoint_dir: str | None = None,
    name: str | None = None,
) -> None:
    """Report ``metrics`` (every rank calls it): from rank 0 to the driver's ``events``
    queue, without waiting; with a checkpoint, also to Ray Train, which keeps the files
    of ``checkpoint_dir`` (ForwardReports tells the driver once they are kept)."""
    import ray.train

    if events is not None and worker_rank()[0] == 0:
        events.actor.put_nowait.remote({"kind": "report", "metrics": metrics})
    if checkpoint_dir is not None:
        checkpoint = ray.train.Checkpoint.from_directory(checkpoint_dir)
        ray.train.report(metrics, checkpoint=checkpoint, checkpoint_dir_name=name)


def latest_checkpoint():
    """The newest reported checkpoint (after a restart), or None."""
    import ray.train

    return ray.train.get_checkpoint()
