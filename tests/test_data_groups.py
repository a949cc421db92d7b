"""The shuffle through storage that the pack, samples and audit steps group with
(agentworld.data.placement.map_groups_via_storage): every row reaches the call of its
key exactly once, a group is never split across calls, whatever the blocks, and the
spill directory is gone afterwards. The plain tasks ingest and dedup run on
(placement.run_tasks): results in item order, and a failure stops the run."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest


def _summary(group: pa.Table) -> pa.Table:
    keys = set(group.column("key").to_pylist())
    return pa.table(
        {
            "key": [",".join(sorted(keys))],
            "rows": [group.num_rows],
            "ids": [sorted(group.column("id").to_pylist())],
        }
    )


@pytest.mark.parametrize("blocks", [1, 7])
def test_every_row_reaches_its_group_once(ray_cluster, tmp_path, blocks):
    from agentworld.data import DataConfig
    from agentworld.data.placement import data_context, map_groups_via_storage

    n = 2000
    table = pa.table(
        {
            "id": list(range(n)),
            "key": [f"g{(i * 7919) % 13:02d}" for i in range(n)],
            "payload": [b"x" * (i % 50) for i in range(n)],
        }
    )
    spill = str(tmp_path / "spill")
    with data_context(DataConfig(num_workers=2, progress_bars=False)):
        ds = ray_cluster.data.from_arrow(table).repartition(blocks)
        out = pa.concat_tables(
            map_groups_via_storage(ds, "key", _summary, spill_url=spill, storage_options={})
        )
    keys = out.column("key").to_pylist()
    assert sorted(keys) == sorted(set(table.column("key").to_pylist()))  # one call per key
    ids = [i for row in out.column("ids").to_pylist() for i in row]
    assert sorted(ids) == list(range(n))  # every row once
    for key, rows in zip(keys, out.column("rows").to_pylist(), strict=True):
        assert rows == table.column("key").to_pylist().count(key)
    assert not os.path.exists(spill)


def test_an_empty_dataset_calls_nothing(ray_cluster, tmp_path):
    from agentworld.data import DataConfig
    from agentworld.data.placement import data_context, map_groups_via_storage

    empty = pa.table({"id": pa.array([], pa.int64()), "key": pa.array([], pa.string())})
    with data_context(DataConfig(num_workers=2, progress_bars=False)):
        out = map_groups_via_storage(
            ray_cluster.data.from_arrow(empty),
            "key",
            _summary,
            spill_url=str(tmp_path / "spill"),
            storage_options={},
        )
    assert out == []


def _mark(item: int, *, root: str) -> int:
    open(os.path.join(root, f"item-{item}"), "w").close()
    if item == 1:
        raise OSError(f"cannot read item {item}")
    return item * item


def test_plain_tasks_keep_item_order_and_a_failure_stops_the_run(ray_cluster, tmp_path):
    from agentworld.data.placement import run_tasks

    seen = []
    ok = tmp_path / "ok"
    ok.mkdir()
    squares = run_tasks(
        _mark,
        [0, 2, 3, 4, 5, 6, 7],
        workers=2,
        fn_kwargs={"root": str(ok)},
        progress=lambda done, total: seen.append((done, total)),
    )
    assert squares == [0, 4, 9, 16, 25, 36, 49]
    assert seen[-1] == (7, 7) and [d for d, _ in seen] == sorted(d for d, _ in seen)
    bad = tmp_path / "bad"
    bad.mkdir()
    with pytest.raises(Exception, match="cannot read item 1"):
        run_tasks(_mark, list(range(1, 40)), workers=1, fn_kwargs={"root": str(bad)})
    assert sorted(os.listdir(bad)) == ["item-1"]  # nothing started after the failure
