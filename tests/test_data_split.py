"""Prepare keeps every domain at the demo recipe (the collected corpus holds
mcp-server-git's twelve-tool list, the longest environment the collectors record), holds
out trajectories of every domain, the same ones on every run, and fails naming the
domain when a recipe's sequence leaves a domain without its samples."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pyarrow as pa
import pytest

from agentworld.data.steps.count import eval_thresholds
from agentworld.data.steps.tokenize import DomainDropError
from agentworld.io import list_shards, read_parquet, read_records
from agentworld.recipes import debug_cpu
from agentworld.schema.compact import compact_environment


def _job(inputs: list[str], out: str, recipe=None, **data):
    from agentworld.recipes.jobs import prepare_job

    recipe = recipe or debug_cpu()
    data_cfg = dataclasses.replace(recipe.data, progress_bars=False, **data)
    return prepare_job(dataclasses.replace(recipe, data=data_cfg), inputs=tuple(inputs), out=out)


def _held_out(out: str) -> dict[str, set[str]]:
    rows = pa.concat_tables([read_parquet(s) for s in list_shards(f"{out}/samples/sft")])
    eval_rows = [r for r in rows.to_pylist() if r["split"] == "eval"]
    out_ids: dict[str, set[str]] = {}
    for r in eval_rows:
        out_ids.setdefault(r["domain"], set()).add(r["trajectory_id"])
    return out_ids


@pytest.fixture(scope="module")
def prepared(ray_cluster, collected_corpus, tmp_path_factory):
    from agentworld.data.run import prepare

    out = str(tmp_path_factory.mktemp("split") / "out")
    return {"out": out, "report": prepare(_job([collected_corpus], out))}


def test_every_domain_keeps_its_samples_at_the_demo_recipe(prepared, collected_corpus):
    records = read_records(collected_corpus).records
    assert {"terminal", "mcp", "swe", "search"} <= {t.domain for t in records}
    git = [t for t in records if "git_status" in t.environment]
    assert git and len(git[0].environment) > 4000  # the long tool list is in the corpus
    assert "- git_status(repo_path: string)" in compact_environment(git[0].environment)
    drops = prepared["report"]["sft_drop_rates"]
    assert set(drops) == {t.domain for t in records}
    for domain, e in drops.items():
        assert e["samples"] > 0 and e["share"] <= 0.2, (domain, e)


def test_every_domain_is_held_out_and_the_split_is_stable(prepared, collected_corpus, tmp_path):
    from agentworld.data.run import prepare

    held = _held_out(prepared["out"])
    domains = {t.domain for t in read_records(collected_corpus).records}
    # 10 trajectories per domain at eval_fraction 0.05: a split over the whole corpus
    # gives most domains none; stratified, each gets min_eval_trajectories.
    assert set(held) == domains and all(len(ids) >= 1 for ids in held.values())
    thresholds = prepared["report"]["eval_threshold"]
    # A second run (here one whose short sequence fails at tokenize, after the split is
    # drawn) draws the same split, and the guard names the domain that lost its samples.
    short = dataclasses.replace(
        debug_cpu(), train=dataclasses.replace(debug_cpu().train, seq_len=256)
    )
    out = str(tmp_path / "short")
    with pytest.raises(DomainDropError, match=r"domain 'mcp' lost \d+ of \d+ SFT samples"):
        prepare(_job([collected_corpus], out, short))
    count = json.loads(Path(out, "_work", "count.done.json").read_text())
    assert count["eval_threshold"] == thresholds


def test_split_thresholds_per_domain(ray_cluster):
    import ray

    rows = [("big", i / 100) for i in range(1, 40)] + [("two", 0.5), ("two", 0.7), ("one", 0.01)]
    ds = ray.data.from_arrow(
        pa.table({"domain": [d for d, _ in rows], "split_hash": [h for _, h in rows]})
    )
    cfg = debug_cpu().data
    kept = {"big": 39, "two": 2, "one": 1}
    t = eval_thresholds(ds, cfg, kept)
    assert 0.05 <= t["big"] < 0.06  # eval_fraction already holds out 4 of them
    assert 0.5 < t["two"] <= 0.7  # the smallest hash held out, the other trains
    assert t["one"] <= 0.01  # a single trajectory trains
    t2 = eval_thresholds(ds, dataclasses.replace(cfg, min_eval_trajectories=6), kept)
    assert 0.06 < t2["big"] <= 0.07 and 0.5 < t2["two"] <= 0.7
