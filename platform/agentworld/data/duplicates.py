"""Exact and near-duplicate detection on Ray Data.

exact:  one shuffle by normalized-content hash -> runs of equal hashes -> survivor by
        priority
near:   one shuffle of every band key of the exact survivors -> runs of equal keys ->
        candidate pairs -> the shingles of the candidate records only (a semi-join on
        their uids) -> actual Jaccard -> edges at or above the threshold -> connected
        components -> survivor by priority

Each shuffle hashes its key into a few partitions and hands each partition whole to a
vectorized function (no Python call per key). Below a size threshold (candidate pairs
and records that one node holds easily) the pairs are verified and the components
found on the driver; above it the verification is two shuffles of the candidates'
shingles and the components are large/small-star rounds, all distributed. The
algorithms are plain functions in exact.py, lsh.py, components.py, survivor.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from agentworld.data import components, lsh, survivor
from agentworld.data.config import DataConfig
from agentworld.data.exact import EXACT_IN, EXACT_OUT, exact_partition
from agentworld.data.labels import Labels
from agentworld.data.placement import (
    blocks_on_driver,
    broadcast,
    dataset_from_arrow,
    fetch,
    map_blocks,
)

MAX_CC_ROUNDS = 64
Log = Callable[[str], None]


@dataclass(frozen=True, kw_only=True)
class Limits:
    """Where dedup switches from the driver to the cluster, and shuffle partition sizes."""

    local_keys: int = 500_000
    """Records whose dedup keys (content hash, priority key, band keys: ~350 bytes)
    the driver holds at most; it then finds exact runs and band buckets itself."""
    local_pairs: int = 4_000_000
    """Candidate pairs verified on the driver at most (16 bytes each)."""
    local_candidates: int = 200_000
    """Candidate records whose shingle sets the driver holds at most (~2 KB each)."""
    partition_rows: int = 1_000_000
    """Rows per shuffle partition (one vectorized call each), at most about."""
    partitions_per_worker: int = 4


DEFAULT_LIMITS = Limits()
CANDIDATES = pa.schema(
    [("uid", pa.int64()), ("pkey", pa.string()), ("shingles", pa.list_(pa.uint64()))]
)
_MIX = np.uint64(0x9E3779B97F4A7C15)


@dataclass
class DedupStats:
    exact_clusters: int = 0
    candidate_pairs: int = 0
    verified_pairs: int = 0
    cc_rounds: int = 0
    near_clusters: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def _map(ds, fn, **kwargs):
    return ds.map_batches(fn, batch_format="pyarrow", batch_size=None, fn_kwargs=kwargs or None)


def _groups(ds, key: str, fn, **kwargs):
    return ds.groupby(key).map_groups(fn, batch_format="pyarrow", fn_kwargs=kwargs or None)


def _partitioned(ds, key: str, parts: int, fn, **kwargs):
    """``fn`` once per hash partition of ``key``: every row of a key in one call."""
    return _groups(_map(ds, _with_part, key=key, parts=parts), "part", fn, **kwargs)


def _parts(cfg: DataConfig, rows: int, limits: Limits) -> int:
    return max(
        limits.partitions_per_worker * cfg.num_workers, math.ceil(rows / limits.partition_rows)
    )


def _as_table(tables: list[pa.Table], schema: pa.Schema) -> pa.Table:
    """Blocks brought to the driver as one table of ``schema``."""
    if not tables:
        return schema.empty_table()
    return pa.concat_tables([t.select(schema.names).cast(schema) for t in tables])


def _collect(ds, schema: pa.Schema) -> pa.Table:
    return _as_table(blocks_on_driver(ds), schema)


def _gather(ds, schema: pa.Schema, cfg: DataConfig, keep=None, **kwargs) -> pa.Table:
    """``schema``'s columns of the rows of a materialized dataset that ``keep`` (a block
    filter) keeps, all when None, on the driver; the per-block work runs as plain tasks."""
    tables = map_blocks(
        ds, _project, workers=cfg.num_workers, columns=schema.names, keep=keep, **kwargs
    )
    return _as_table(tables, schema)


def _column_sum(ds, column: str) -> int:
    """Sum of a column: one number per block, added on the driver (no shuffle)."""
    partial = ds.map_batches(
        _block_sum, batch_format="pyarrow", batch_size=None, fn_kwargs={"column": column}
    )
    return int(sum(t.column("sum")[0].as_py() or 0 for t in blocks_on_driver(partial)))


# ---- block functions (run in tasks) ---------------------------------------------------


def _project(block: pa.Table, *, columns: list[str], keep=None, **kwargs) -> pa.Table:
    block = block.select(columns)
    return keep(block, **kwargs) if keep is not None else block


def _with_part(block: pa.Table, *, key: str, parts: int) -> pa.Table:
    """Append the shuffle partition of ``key`` (an int64 or a hex content hash)."""
    col = block.column(key)
    if pa.types.is_string(col.type):
        values = np.fromiter((int(h[:16], 16) for h in col.to_pylist()), np.uint64, len(col))
    else:
        values = col.to_numpy().astype(np.int64).view(np.uint64)
    with np.errstate(over="ignore"):
        part = ((values * _MIX) >> np.uint64(40)) % np.uint64(parts)
    return block.append_column("part", pa.array(part.astype(np.int64)))


def _block_sum(block: pa.Table, *, column: str) -> pa.Table:
    return pa.table({"sum": [pc.sum(block.column(column)).as_py() or 0]})


def _with_cluster(block: pa.Table) -> pa.Table:
    return block.filter(pc.is_valid(block.column("cluster")))


def _exact_survivors(block: pa.Table) -> pa.Table:
    return block.filter(pc.is_null(block.column("dup_of")))


def _singletons(block: pa.Table) -> pa.Table:
    """Exact dedup off: every record is its own group."""
    n = block.num_rows
    return pa.table(
        {
            "uid": block.column("uid"),
            "pkey": block.column("pkey"),
            "bands": block.column("bands"),
            "dup_of": pa.nulls(n, pa.int64()),
            "cluster": pa.nulls(n, pa.int64()),
        },
        schema=EXACT_OUT,
    )


def _endpoints(block: pa.Table) -> pa.Table:
    ends = np.concatenate([block.column("a").to_numpy(), block.column("b").to_numpy()])
    return pa.table({"uid": np.unique(ends)})


def _only(block: pa.Table, *, holder: dict) -> pa.Table:
    """The rows whose uid is in the broadcast sorted uid array (a semi-join)."""
    wanted = fetch(holder)
    uids = block.column("uid").to_numpy()
    if wanted.size == 0:
        return block.slice(0, 0)
    pos = np.minimum(np.searchsorted(wanted, uids), wanted.size - 1)
    return block.filter(pa.array(wanted[pos] == uids))


def _as_pair_rows(block: pa.Table) -> pa.Table:
    n = block.num_rows
    return pa.table(
        {
            "key": block.column("a"),
            "other": block.column("b"),
            "shingles": pa.nulls(n, pa.list_(pa.uint64())),
        },
        schema=lsh.VERIFY,
    )


def _as_shingle_rows(block: pa.Table) -> pa.Table:
    n = block.num_rows
    return pa.table(
        {
            "key": block.column("uid"),
            "other": pa.nulls(n, pa.int64()),
            "shingles": block.column("shingles"),
        },
        schema=lsh.VERIFY,
    )


def _passing(block: pa.Table, *, threshold: float) -> pa.Table:
    return block.filter(pc.greater_equal(block.column("jaccard"), threshold))


def _label_rows(block: pa.Table) -> pa.Table:
    labels = components.star_labels(block)
    return pa.table(
        {
            "uid": labels.column("uid"),
            "label": labels.column("label"),
            "pkey": pa.nulls(labels.num_rows, pa.string()),
        },
        schema=survivor.LABEL_ROWS,
    )


def _pkey_rows(block: pa.Table) -> pa.Table:
    n = block.num_rows
    return pa.table(
        {
            "uid": block.column("uid"),
            "label": pa.nulls(n, pa.int64()),
            "pkey": block.column("pkey"),
        },
        schema=survivor.LABEL_ROWS,
    )


# ---- stages (driver) --------------------------------------------------------------------


def exact_stage(records, cfg: DataConfig, limits: Limits = DEFAULT_LIMITS):
    """Materialized (uid, pkey, bands, dup_of, cluster) of every clean record."""
    cols = records.select_columns(["uid", "exact_hash", "pkey", "bands"])
    if not cfg.exact_dedup:
        return _map(cols, _singletons).materialize()
    return _partitioned(cols, "exact_hash", _parts(cfg, 0, limits), exact_partition).materialize()


def candidate_pairs(exact, cfg: DataConfig, limits: Limits):
    """Materialized candidate pairs (a < b) between exact survivors, distinct within
    each partition (a pair found in two bands of two partitions appears twice)."""
    bands, _ = cfg.lsh_shape()
    rows = _map(_map(exact, _exact_survivors), lsh.explode_bands)
    return _partitioned(
        rows,
        "band",
        _parts(cfg, exact.count() * bands, limits),
        lsh.bucket_partition,
        all_pairs_max=cfg.bucket_all_pairs_max,
        anchors=cfg.bucket_anchors,
    ).materialize()


def _pairs_array(table: pa.Table) -> np.ndarray:
    """(k, 2) distinct pairs of a PAIRS table."""
    ab = np.stack([table.column("a").to_numpy(), table.column("b").to_numpy()], axis=1)
    return lsh.unique_pairs(ab.astype(np.int64).reshape(-1, 2))


def _local_clusters(u: np.ndarray, v: np.ndarray, uids: np.ndarray, pkeys: pa.Array) -> pa.Table:
    """Components and survivors of the verified edges on the driver; ``pkeys`` of the
    records ``uids`` (sorted), which hold every edge end."""
    nodes, labels = components.components_local(u, v)
    return survivor.pick_survivors_local(
        nodes, labels, pkeys.take(pa.array(np.searchsorted(uids, nodes)))
    )


def _near_local(pairs: np.ndarray, candidates, records, cfg: DataConfig, stats) -> pa.Table:
    """Verification, components and survivors on the driver (small candidate graph)."""
    rows = _gather(records, CANDIDATES, cfg, _only, holder=broadcast(candidates)).sort_by("uid")
    uids = rows.column("uid").to_numpy()
    flat, offsets = lsh.flat_sets(rows.column("shingles"))
    sims = lsh.pair_jaccards(pairs, uids, flat, offsets)
    edges = pairs[sims >= cfg.near_dup_threshold]
    stats.candidate_pairs, stats.verified_pairs = len(pairs), len(edges)
    stats.extra["verify"] = "driver"
    if len(edges) == 0:
        return survivor.CLUSTER_OUT.empty_table()
    return _local_clusters(edges[:, 0], edges[:, 1], uids, rows.column("pkey").combine_chunks())


def _verified_edges(pairs_ds, candidates, records, cfg: DataConfig, stats, limits: Limits):
    """Materialized verified edges (u, v, jaccard): two shuffles that bring both shingle
    sets of each pair together, over the candidate records only."""
    shingles = records.select_columns(["uid", "shingles"])
    rows = _map(_map(shingles, _only, holder=broadcast(candidates)), _as_shingle_rows)
    rows = rows.materialize()
    parts = _parts(cfg, len(candidates), limits)
    first = _partitioned(_map(pairs_ds, _as_pair_rows).union(rows), "key", parts, lsh.attach_first)
    scored = _partitioned(first.union(rows), "key", parts, lsh.verify_second).materialize()
    # The graph is much smaller than the corpus: few blocks make each later shuffle cheap.
    passing = _map(scored, _passing, threshold=cfg.near_dup_threshold)
    edges = passing.repartition(cfg.num_workers).materialize()
    stats.candidate_pairs, stats.verified_pairs = scored.count(), edges.count()
    stats.extra["verify"] = "cluster"
    return edges


def connected_components(edges, stats: DedupStats, log: Log):
    """(uid, label, pkey=null) rows: label = the smallest uid of the component."""
    current = edges.select_columns(["u", "v"]).materialize()
    for round_no in range(1, MAX_CC_ROUNDS + 1):
        large = _groups(
            _map(current, components.both_directions), "src", components.large_star
        ).materialize()
        small = _groups(
            _map(large, components.towards_smaller), "src", components.small_star
        ).materialize()
        changed = _column_sum(large.union(small), "changed")
        current = small
        stats.cc_rounds = round_no
        log(f"components round {round_no}: {small.count()} edges, {changed} changed")
        if changed == 0:
            return _map(current, _label_rows)
    raise RuntimeError(f"connected components did not converge in {MAX_CC_ROUNDS} rounds")


def _near_distributed(pairs_ds, candidates, records, keys, cfg, stats, log, limits) -> pa.Table:
    """Verification by shuffles; components on the driver when the verified edges are
    few enough, else by star rounds. ``keys``: a Dataset with every record's pkey."""
    edges = _verified_edges(pairs_ds, candidates, records, cfg, stats, limits)
    if stats.verified_pairs == 0:
        return survivor.CLUSTER_OUT.empty_table()
    if stats.verified_pairs <= limits.local_pairs:
        table = _collect(edges, lsh.EDGES)
        u, v = table.column("u").to_numpy(), table.column("v").to_numpy()
        nodes = np.unique(np.concatenate([u, v]))
        keyed = _collect(
            _map(keys.select_columns(["uid", "pkey"]), _only, holder=broadcast(nodes)),
            pa.schema([("uid", pa.int64()), ("pkey", pa.string())]),
        ).sort_by("uid")
        uids = keyed.column("uid").to_numpy()
        return _local_clusters(u, v, uids, keyed.column("pkey").combine_chunks())
    labels = connected_components(edges, stats, log)
    with_pkey = _groups(labels.union(_map(keys, _pkey_rows)), "uid", survivor.attach_pkey)
    return _collect(_groups(with_pkey, "label", survivor.pick_survivor), survivor.CLUSTER_OUT)


def near_stage(pairs, records, keys, cfg: DataConfig, stats, log: Log, limits: Limits):
    """(uid, dup_of, cluster) of every member of a near-duplicate cluster, from the
    candidate pairs (a (k, 2) array, or a Dataset of PAIRS when there are many)."""
    if not isinstance(pairs, np.ndarray) and pairs.count() <= limits.local_pairs:
        pairs = _pairs_array(_collect(pairs, lsh.PAIRS))
    if isinstance(pairs, np.ndarray):
        if len(pairs) == 0:
            stats.extra["verify"] = "driver"
            return survivor.CLUSTER_OUT.empty_table()
        candidates = np.unique(pairs)
        if len(pairs) <= limits.local_pairs and candidates.size <= limits.local_candidates:
            rows = _near_local(pairs, candidates, records, cfg, stats)
            log(f"near: {stats.candidate_pairs} candidate pairs, {stats.verified_pairs} verified")
            return rows
        pairs = dataset_from_arrow(pa.table({"a": pairs[:, 0], "b": pairs[:, 1]}))
    else:
        ends = _collect(_map(pairs, _endpoints), pa.schema([("uid", pa.int64())]))
        candidates = np.unique(ends.column("uid").to_numpy())
    rows = _near_distributed(pairs, candidates, records, keys, cfg, stats, log, limits)
    log(f"near: {stats.candidate_pairs} candidate pairs, {stats.verified_pairs} verified")
    return rows


def _dedup_local(records, cfg: DataConfig) -> tuple[pa.Table, np.ndarray | None]:
    """Exact clusters and candidate pairs on the driver (few records)."""
    table = _gather(records, EXACT_IN, cfg)
    exact = exact_partition(table) if cfg.exact_dedup else _singletons(table)
    pairs = None
    if cfg.near_dedup:
        bands = lsh.explode_bands(_exact_survivors(exact))
        part = lsh.bucket_partition(
            bands, all_pairs_max=cfg.bucket_all_pairs_max, anchors=cfg.bucket_anchors
        )
        pairs = _pairs_array(part)
    return _with_cluster(exact).select(survivor.CLUSTER_OUT.names), pairs


def find_duplicates(
    records, cfg: DataConfig, log: Log = print, limits: Limits = DEFAULT_LIMITS
) -> tuple[Labels, DedupStats]:
    """Dedup clean records (a Dataset with uid, exact_hash, pkey, bands, shingles).

    The records are materialized once, in the object store: every later pass (keys,
    the candidates' shingles) reads those blocks instead of reading and filtering the
    input again."""
    stats = DedupStats()
    records = records.materialize()
    keys = records.select_columns(EXACT_IN.names)
    if records.count() <= limits.local_keys:
        exact_rows, pairs = _dedup_local(records, cfg)
        stats.extra["keys"] = "driver"
    else:
        exact = exact_stage(keys, cfg, limits)
        exact_rows = _collect(_map(exact, _with_cluster), survivor.CLUSTER_OUT)
        pairs = candidate_pairs(exact, cfg, limits) if cfg.near_dedup else None
        stats.extra["keys"] = "cluster"
    stats.exact_clusters = len(pc.unique(exact_rows.column("cluster")))
    log(f"exact: {exact_rows.num_rows} records in {stats.exact_clusters} clusters")
    near_rows = survivor.CLUSTER_OUT.empty_table()
    if cfg.near_dedup:
        near_rows = near_stage(pairs, records, keys, cfg, stats, log, limits)
        stats.near_clusters = len(pc.unique(near_rows.column("cluster")))
    return Labels.merge(exact_rows, near_rows), stats
