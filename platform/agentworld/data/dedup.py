"""Exact and near-duplicate detection on Ray Data.

exact:  group by normalized-content hash -> survivor by priority
near:   explode MinHash band keys -> group by band key -> candidate pairs ->
        two group-bys that bring both shingle sets of a pair together -> actual Jaccard
        -> edges at or above the threshold -> connected components (large/small star
        group-bys until stable) -> group by component -> survivor by priority

Every step is a group-by over the cluster; nothing gathers pairs or edges on one node.
The algorithms are plain functions in exact.py, lsh.py, components.py, survivor.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from agentworld.data import components, lsh, survivor
from agentworld.data.config import DataConfig
from agentworld.data.exact import exact_group
from agentworld.data.labels import Labels

MAX_CC_ROUNDS = 64
Log = Callable[[str], None]


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


def _collect(ds, schema: pa.Schema) -> pa.Table:
    import ray

    tables = [t for t in ray.get(ds.to_arrow_refs()) if t.num_rows]
    return (
        pa.concat_tables([t.select(schema.names).cast(schema) for t in tables])
        if tables
        else schema.empty_table()
    )


def _column_sum(ds, column: str) -> int:
    """Sum of a column: one number per block, added on the driver (no shuffle)."""
    import ray

    partial = ds.map_batches(
        _block_sum, batch_format="pyarrow", batch_size=None, fn_kwargs={"column": column}
    )
    return int(
        sum(t.column("sum")[0].as_py() or 0 for t in ray.get(partial.to_arrow_refs()) if t.num_rows)
    )


# ---- block functions (run in tasks) ---------------------------------------------------


def _block_sum(block: pa.Table, *, column: str) -> pa.Table:
    return pa.table({"sum": [pc.sum(block.column(column)).as_py() or 0]})


def _with_cluster(block: pa.Table) -> pa.Table:
    return block.filter(pc.is_valid(block.column("cluster")))


def _exact_survivors(block: pa.Table) -> pa.Table:
    return block.filter(pc.is_null(block.column("dup_of")))


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


def exact_stage(records, cfg: DataConfig):
    """Materialized (uid, pkey, bands, dup_of, cluster) of every clean record."""
    cols = records.select_columns(["uid", "exact_hash", "pkey", "bands"])
    if not cfg.exact_dedup:
        # Each record is its own group: group by uid instead of content.
        return _groups(
            cols.map_batches(_uid_as_hash, batch_format="pyarrow"), "exact_hash", exact_group
        ).materialize()
    return _groups(cols, "exact_hash", exact_group).materialize()


def _uid_as_hash(block: pa.Table) -> pa.Table:
    i = block.schema.get_field_index("exact_hash")
    return block.set_column(i, "exact_hash", pc.cast(block.column("uid"), pa.string()))


def candidate_edges(exact, shingles, cfg: DataConfig, stats: DedupStats):
    """Verified edges (u, v, jaccard) between exact survivors."""
    survivors = _map(exact, _exact_survivors)
    pairs = _groups(
        _map(survivors, lsh.explode_bands),
        "band",
        lsh.bucket_group,
        all_pairs_max=cfg.bucket_all_pairs_max,
        anchors=cfg.bucket_anchors,
    )
    shingle_rows = _map(shingles, _as_shingle_rows)
    first = _groups(_map(pairs, _as_pair_rows).union(shingle_rows), "key", lsh.attach_first)
    scored = _groups(first.union(shingle_rows), "key", lsh.verify_second).materialize()
    # The graph is much smaller than the corpus: few blocks make each later shuffle cheap.
    passing = _map(scored, _passing, threshold=cfg.near_dup_threshold)
    edges = passing.repartition(cfg.num_workers).materialize()
    stats.candidate_pairs, stats.verified_pairs = scored.count(), edges.count()
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


def near_stage(exact, shingles, cfg: DataConfig, stats: DedupStats, log: Log) -> pa.Table:
    """(uid, dup_of, cluster) of every member of a near-duplicate cluster."""
    edges = candidate_edges(exact, shingles, cfg, stats)
    log(f"near: {stats.candidate_pairs} candidate pairs, {stats.verified_pairs} verified")
    if stats.verified_pairs == 0:
        return survivor.CLUSTER_OUT.empty_table()
    labels = connected_components(edges, stats, log)
    pkeys = _map(_map(exact, _exact_survivors), _pkey_rows)
    with_pkey = _groups(labels.union(pkeys), "uid", survivor.attach_pkey)
    return _collect(_groups(with_pkey, "label", survivor.pick_survivor), survivor.CLUSTER_OUT)


def find_duplicates(records, cfg: DataConfig, log: Log = print) -> tuple[Labels, DedupStats]:
    """Dedup clean records (a Dataset with uid, exact_hash, pkey, bands, shingles)."""
    stats = DedupStats()
    exact = exact_stage(records, cfg)
    exact_rows = _collect(_map(exact, _with_cluster), survivor.CLUSTER_OUT)
    stats.exact_clusters = len(pc.unique(exact_rows.column("cluster")))
    log(f"exact: {exact_rows.num_rows} records in {stats.exact_clusters} clusters")
    near_rows = survivor.CLUSTER_OUT.empty_table()
    if cfg.near_dedup:
        shingles = records.select_columns(["uid", "shingles"])
        near_rows = near_stage(exact, shingles, cfg, stats, log)
        stats.near_clusters = len(pc.unique(near_rows.column("cluster")))
    return Labels.merge(exact_rows, near_rows), stats
