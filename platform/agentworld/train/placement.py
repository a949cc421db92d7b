"""Where training runs on Ray, in one place: the cluster-size check, storage for Ray
Data and Ray Train, the packed datasets, and the TorchTrainer itself."""

from __future__ import annotations

import os
from typing import Any

from agentworld.config import ConfigError
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
    import pyarrow.fs as pafs

    from agentworld.io import get_fs

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
    """The packed rows under ``url`` as a Ray Data dataset (read lazily, streamed)."""
    import ray.data

    path, fs = arrow_storage(url)
    dataset = ray.data.read_parquet(path, filesystem=fs, columns=PACKED_COLUMNS)
    dataset.context.enable_progress_bars = False  # the driver prints its own progress line
    return dataset


def read_held_out(url: str):
    """The held-out packed rows as one pyarrow Table, read on the driver: they are few,
    every worker evaluates on them many times, and one Ray Data pipeline per worker
    would compete with the training stream for the cluster's spare CPUs."""
    import pyarrow.parquet as pq

    path, fs = arrow_storage(url)
    return pq.read_table(path, filesystem=fs, columns=PACKED_COLUMNS)


def build_trainer(train_fn, spec, *, train_data, held_out, out_url: str, callbacks: list):
    """A TorchTrainer with the recipe's worker group, failure handling (replace the
    group, resume from the newest checkpoint) and checkpoint retention under
    ``<out>/checkpoints``. The training rows stream to the workers through Ray Data,
    split between them in a fixed order; ``held_out`` (an object ref) reaches every
    worker whole."""
    from ray.train import CheckpointConfig, DataConfig, FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchConfig, TorchTrainer

    cluster, train = spec.recipe.cluster, spec.recipe.train
    resources = {"CPU": cluster.cpus_per_worker}
    if cluster.use_gpu:
        resources["GPU"] = cluster.gpus_per_worker
    ingest = DataConfig.default_ingest_options()
    ingest.preserve_order = True
    storage_path, storage_fs = arrow_storage(out_url)
    return TorchTrainer(
        train_fn,
        train_loop_config={"spec": spec, "held_out": held_out},
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
