"""The outcome of dedup for the records that belong to a cluster, and the final state of
every ingest row. Plain numpy/Arrow (no Ray): the arrays are broadcast to the tasks
that label blocks; a record in no cluster is simply absent from them.

Memory: about 40 bytes per clustered record, on the driver and in the object store.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

STATES = ("kept", "quarantined", "contaminated", "exact_duplicate", "near_duplicate")
LABEL_SCHEMA = pa.schema(
    [
        ("uid", pa.int64()),
        ("exact_dup_of", pa.int64()),
        ("exact_cluster", pa.int64()),
        ("near_dup_of", pa.int64()),
        ("near_cluster", pa.int64()),
    ]
)
STATE_FIELDS = [
    ("state", pa.string()),
    ("dup_of", pa.int64()),
    ("kept_uid", pa.int64()),
    ("exact_cluster", pa.int64()),
    ("near_cluster", pa.int64()),
]


@dataclass(frozen=True)
class Labels:
    """Cluster membership of clustered records, sorted by uid; a null ``*_dup_of``
    marks the survivor of its cluster."""

    table: pa.Table  # LABEL_SCHEMA, sorted by uid

    @classmethod
    def merge(cls, exact: pa.Table, near: pa.Table) -> Labels:
        """exact: (uid, dup_of, cluster) of exact clusters; near: the same of near ones."""
        e = exact.rename_columns(["uid", "exact_dup_of", "exact_cluster"])
        n = near.rename_columns(["uid", "near_dup_of", "near_cluster"])
        joined = e.join(n, keys="uid", join_type="full outer", coalesce_keys=True)
        return cls(joined.select(LABEL_SCHEMA.names).cast(LABEL_SCHEMA).sort_by("uid"))

    @classmethod
    def empty(cls) -> Labels:
        return cls(LABEL_SCHEMA.empty_table())

    def _find(self, uids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        keys = self.table.column("uid").to_numpy()
        if keys.size == 0:
            return np.zeros(uids.size, dtype=np.int64), np.zeros(uids.size, dtype=bool)
        pos = np.minimum(np.searchsorted(keys, uids), keys.size - 1)
        return pos, keys[pos] == uids

    def _col(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        col = self.table.column(name)
        return col.fill_null(0).to_numpy(), col.is_valid().to_numpy(zero_copy_only=False)

    def lookup(self, uids: np.ndarray) -> dict[str, np.ndarray]:
        """Per uid: state code (0 kept, 3 exact, 4 near), dup_of, kept_uid, clusters
        (with validity masks, ``*_ok``)."""
        pos, found = self._find(uids)
        out: dict[str, np.ndarray] = {}
        for name in LABEL_SCHEMA.names[1:]:
            values, valid = self._col(name)
            out[name] = values[pos] if values.size else np.zeros(uids.size, np.int64)
            out[name + "_ok"] = (valid[pos] if valid.size else np.zeros(uids.size, bool)) & found
        state = np.where(out["exact_dup_of_ok"], 3, np.where(out["near_dup_of_ok"], 4, 0))
        dup_of = np.where(out["exact_dup_of_ok"], out["exact_dup_of"], out["near_dup_of"])
        kept = np.where(state == 0, uids, dup_of)
        # An exact duplicate's survivor may itself be a near duplicate: follow it once.
        hop, hop_found = self._find(kept)
        near_of, near_ok = self._col("near_dup_of")
        if near_of.size:
            follow = hop_found & near_ok[hop] & (state == 3)
            kept = np.where(follow, near_of[hop], kept)
        out.update(state=state, dup_of=dup_of, kept_uid=kept)
        return out


def label_block(block: pa.Table, labels: Labels) -> pa.Table:
    """Append STATE_FIELDS to a block of ingest rows with features."""
    uids = block.column("uid").to_numpy()
    found = labels.lookup(uids)
    status = block.column("status").to_numpy(zero_copy_only=False)
    contaminated = block.column("contaminated").fill_null(False).to_numpy(zero_copy_only=False)
    code = np.where(status != "ok", 1, np.where(contaminated, 2, found["state"]))
    removed_early = (code == 1) | (code == 2)  # never reached dedup
    fields = {
        "state": pa.array(np.array(STATES, dtype=object)[code], pa.string()),
        "dup_of": pa.array(found["dup_of"], pa.int64(), mask=code < 3),
        "kept_uid": pa.array(found["kept_uid"], pa.int64(), mask=removed_early),
        "exact_cluster": pa.array(
            found["exact_cluster"], pa.int64(), mask=~found["exact_cluster_ok"] | removed_early
        ),
        "near_cluster": pa.array(
            found["near_cluster"], pa.int64(), mask=~found["near_cluster_ok"] | removed_early
        ),
    }
    for name, typ in STATE_FIELDS:
        block = block.append_column(pa.field(name, typ), fields[name])
    return block


def state_counts(block: pa.Table) -> pa.Table:
    """(domain, source, state, n) counts of a labelled block."""
    keys = ["domain", "source", "state"]
    return block.group_by(keys).aggregate([("uid", "count")]).rename_columns([*keys, "n"])


def only_state(block: pa.Table, state: str) -> pa.Table:
    return block.filter(pc.equal(block.column("state"), state))
