"""Ingest on Ray Data: a Datasource with one read task per file or byte range,
streaming blocks of parsed-or-quarantined rows, then the per-record features.

The result (one staging Parquet dataset) holds every input line exactly once, which is
what the conservation of counts rests on.
"""

from __future__ import annotations

import functools
from typing import Any

from agentworld.data.config import DataConfig
from agentworld.data.decontam import EvalIndex, build_eval_index
from agentworld.data.features import FeatureSpec, featurize
from agentworld.data.ray_env import broadcast, fetch
from agentworld.data.reader import INGEST_SCHEMA, ReaderSpec, ReadRange, plan_ranges, read_range


def reader_spec(cfg: DataConfig, storage_options: dict[str, Any]) -> ReaderSpec:
    return ReaderSpec(
        fmt=cfg.input_format,
        block_records=cfg.block_records,
        min_turns=cfg.min_turns,
        max_record_chars=cfg.max_record_chars,
        custom_domains=cfg.custom_domains,
        storage_options=storage_options,
    )


def feature_spec(cfg: DataConfig) -> FeatureSpec:
    bands, rows = cfg.lsh_shape()
    return FeatureSpec(
        shingle_size=cfg.shingle_size,
        num_perm=cfg.num_perm,
        bands=bands,
        rows=rows,
        seed=cfg.seed,
        priority=cfg.survivor_priority,
        decontam_threshold=cfg.decontam_threshold,
    )


def make_datasource(ranges: list[ReadRange], spec: ReaderSpec):
    from ray.data import Datasource, ReadTask
    from ray.data.block import BlockMetadata

    class ShardDatasource(Datasource):
        """One read task per range; each streams blocks of ``block_records`` rows."""

        def estimate_inmemory_data_size(self) -> int:
            return sum(r.end - r.start for r in ranges)

        def get_read_tasks(self, parallelism: int, per_task_row_limit=None, data_context=None):
            tasks = []
            for r in ranges:
                meta = BlockMetadata(
                    num_rows=None, size_bytes=r.end - r.start, input_files=[r.url], exec_stats=None
                )
                tasks.append(
                    ReadTask(functools.partial(read_range, r, spec), meta, schema=INGEST_SCHEMA)
                )
            return tasks

    return ShardDatasource()


def read_eval_sets(urls: list[str], cfg: DataConfig, storage_options: dict[str, Any]) -> EvalIndex:
    """The n-gram index of the evaluation sets (read on the driver: they are small)."""
    from agentworld.schema import Trajectory

    spec = reader_spec(cfg, storage_options)
    trajs = []
    for r in plan_ranges(urls, split_bytes=cfg.split_bytes, storage_options=storage_options):
        for block in read_range(r, spec):
            for status, record in zip(
                block.column("status").to_pylist(), block.column("record").to_pylist(), strict=True
            ):
                if status == "ok":
                    trajs.append(Trajectory.from_json(record))
    return build_eval_index(trajs, cfg.decontam_ngram)


def _featurize_block(block, *, spec: FeatureSpec, index_holder: dict | None):
    return featurize(block, spec, fetch(index_holder))


def ingest_dataset(
    inputs: list[str], cfg: DataConfig, storage_options: dict[str, Any], index: EvalIndex | None
):
    """The lazy Ray Dataset of ingest rows with features (INGEST_SCHEMA + FEATURE_FIELDS)."""
    import ray

    ranges = plan_ranges(inputs, split_bytes=cfg.split_bytes, storage_options=storage_options)
    if not ranges:
        raise FileNotFoundError(f"no shards (.jsonl, .jsonl.gz, .parquet) under {inputs}")
    source = make_datasource(ranges, reader_spec(cfg, storage_options))
    ds = ray.data.read_datasource(source, override_num_blocks=len(ranges))
    holder = broadcast(index) if index is not None and not index.empty else None
    return ds.map_batches(
        _featurize_block,
        batch_format="pyarrow",
        batch_size=None,
        fn_kwargs={"spec": feature_spec(cfg), "index_holder": holder},
    )
