"""The survivor of each near-duplicate cluster: the member with the smallest priority
key (see features.priority_key), so the choice depends on the records only, never on
block boundaries or parallelism. Plain functions over Arrow groups."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

# Join rows keyed by uid: a component label (label set, pkey null) or the record's
# priority key (label null, pkey set).
LABEL_ROWS = pa.schema([("uid", pa.int64()), ("label", pa.int64()), ("pkey", pa.string())])
CLUSTER_OUT = pa.schema([("uid", pa.int64()), ("dup_of", pa.int64()), ("cluster", pa.int64())])


def attach_pkey(group: pa.Table) -> pa.Table:
    """Keyed by uid: (uid, label, pkey) when the record is in a component."""
    labels = group.column("label").drop_null()
    pkeys = group.column("pkey").drop_null()
    if len(labels) == 0 or len(pkeys) == 0:
        return LABEL_ROWS.empty_table()
    uid = group.column("uid")[0].as_py()
    return pa.table(
        {"uid": [uid], "label": [labels[0].as_py()], "pkey": [pkeys[0].as_py()]},
        schema=LABEL_ROWS,
    )


def pick_survivor(group: pa.Table) -> pa.Table:
    """Keyed by component label: every member with dup_of = the survivor (null for it)."""
    group = group.sort_by([("pkey", "ascending")])
    uids = group.column("uid").to_numpy()
    dup_of = pa.array([None] + [int(uids[0])] * (uids.size - 1), pa.int64())
    cluster = np.full(uids.size, group.column("label")[0].as_py(), dtype=np.int64)
    return pa.table({"uid": uids, "dup_of": dup_of, "cluster": cluster}, schema=CLUSTER_OUT)


def pick_survivors_local(uids: np.ndarray, labels: np.ndarray, pkeys: pa.Array) -> pa.Table:
    """pick_survivor for every component at once (CLUSTER_OUT rows): within each label,
    the smallest priority key survives and the others point to it."""
    t = pa.table({"uid": uids, "label": labels, "pkey": pkeys})
    t = t.sort_by([("label", "ascending"), ("pkey", "ascending")])
    uid, label = t.column("uid").to_numpy(), t.column("label").to_numpy()
    first = np.r_[True, label[1:] != label[:-1]] if label.size else np.empty(0, bool)
    survivor = uid[np.flatnonzero(first)][np.cumsum(first) - 1]
    return pa.table(
        {"uid": uid, "dup_of": pa.array(survivor, pa.int64(), mask=first), "cluster": label},
        schema=CLUSTER_OUT,
    )
