"""Connected components by alternating large-star and small-star steps (Kiveris et al.,
"Connected Components in MapReduce and Beyond", 2014). Each step is a group-by on a
node over an edge list, so it runs distributed; the graph converges in O(log^2 n)
rounds to one star per component centred on its smallest node. Plain functions over
Arrow groups here; the Ray Data loop lives in dedup.py.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

STEP_IN = pa.schema([("src", pa.int64()), ("dst", pa.int64())])
STEP_OUT = pa.schema([("u", pa.int64()), ("v", pa.int64()), ("changed", pa.int64())])


def both_directions(edges: pa.Table) -> pa.Table:
    """Large-star input: every edge seen from both of its ends."""
    u, v = edges.column("u").to_numpy(), edges.column("v").to_numpy()
    return pa.table({"src": np.concatenate([u, v]), "dst": np.concatenate([v, u])}, schema=STEP_IN)


def towards_smaller(edges: pa.Table) -> pa.Table:
    """Small-star input: every edge seen from its larger end."""
    u, v = edges.column("u").to_numpy(), edges.column("v").to_numpy()
    return pa.table({"src": np.maximum(u, v), "dst": np.minimum(u, v)}, schema=STEP_IN)


def _out(u: np.ndarray, v: np.ndarray, changed: bool) -> pa.Table:
    flag = np.full(u.size, int(changed), dtype=np.int64)
    return pa.table({"u": u, "v": v, "changed": flag}, schema=STEP_OUT)


def large_star(group: pa.Table) -> pa.Table:
    """Node u with neighbours N: link every larger neighbour to min(N + u). The graph
    changes iff u has a larger neighbour and a smaller one."""
    u = group.column("src")[0].as_py()
    nbrs = np.unique(group.column("dst").to_numpy())
    m = min(int(nbrs[0]), u)
    larger = nbrs[nbrs > u]
    return _out(larger, np.full(larger.size, m, dtype=np.int64), bool(larger.size and m != u))


def small_star(group: pa.Table) -> pa.Table:
    """Node u with smaller neighbours N: link N + u to min(N). The graph changes iff
    u has two or more smaller neighbours."""
    u = group.column("src")[0].as_py()
    nbrs = np.unique(group.column("dst").to_numpy())
    m = int(nbrs[0])
    members = np.append(nbrs, u)
    members = members[members != m]
    return _out(members, np.full(members.size, m, dtype=np.int64), nbrs.size >= 2)


def star_labels(edges: pa.Table) -> pa.Table:
    """(uid, label) of every node of a converged star graph: label = component minimum."""
    u, v = edges.column("u").to_numpy(), edges.column("v").to_numpy()
    centre = np.minimum(u, v)
    return pa.table(
        {
            "uid": np.concatenate([np.maximum(u, v), centre]),
            "label": np.concatenate([centre, centre]),
        }
    )


def components_local(u: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(uids, labels) of every node of the edge list (u, v), label = the smallest uid
    of its component: what the star rounds converge to, in one scipy call on one node
    (for graphs below dedup's size threshold)."""

    nodes, index = np.unique(np.concatenate([u, v]), return_inverse=True)
    n, k = nodes.size, u.size
    graph = coo_matrix((np.ones(k, dtype=np.int8), (index[:k], index[k:])), shape=(n, n))
    _, comp = connected_components(graph, directed=True, connection="weak")
    smallest = np.full(comp.max() + 1 if n else 0, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(smallest, comp, nodes)
    return nodes, smallest[comp]


def components_in_memory(edges: np.ndarray) -> dict[int, int]:
    """Reference union-find on one node, for tests: node -> smallest node of its component."""
    parent: dict[int, int] = {}

    def find(x: int) -> int:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in edges.tolist():
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return {x: find(x) for x in list(parent)}
