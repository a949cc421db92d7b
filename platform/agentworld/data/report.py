"""Counts and the per-domain / per-source report: aggregated block by block on Ray Data
(each block is reduced to a few rows before anything reaches the driver), written as
``report.json`` and printed as a table."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from agentworld.data.labels import STATES
from agentworld.data.placement import blocks_on_driver

STATE_KEYS = ["domain", "source", "input", "state"]
TOKEN_KEYS = ["kind", "split", "domain", "source", "drop_reason"]
TOKEN_SUMS = ["n_tokens", "n_targets", "truncated"]


def _named(table: pa.Table, names: dict[str, str]) -> pa.Table:
    return table.rename_columns([names.get(c, c) for c in table.column_names])


def _partial(block: pa.Table, *, keys: list[str], sums: list[str]) -> pa.Table:
    if "truncated" in sums and "truncated" not in block.column_names:
        flag = pc.cast(pc.greater(block.column("truncated_turns").fill_null(0), 0), pa.int64())
        block = block.append_column("truncated", flag)
    aggs = [(c, "sum") for c in sums] + [([], "count_all")]
    out = block.select(keys + sums).group_by(keys, use_threads=False).aggregate(aggs)
    return _named(out, {"count_all": "n"})


def grouped_counts(ds, keys: list[str], sums: list[str] = ()) -> list[dict[str, Any]]:
    """Rows of (keys..., sums..., n) over the whole dataset."""
    sums = list(sums)
    partial = ds.map_batches(
        _partial, batch_format="pyarrow", fn_kwargs={"keys": keys, "sums": sums}
    )
    tables = blocks_on_driver(partial)
    if not tables:
        return []
    total = pa.concat_tables(tables)
    cols = [f"{c}_sum" for c in sums] + ["n"]
    out = total.group_by(keys, use_threads=False).aggregate([(c, "sum") for c in cols])
    out = _named(out, {"n_sum": "n", **{f"{c}_sum_sum": c for c in sums}})
    return sorted(out.to_pylist(), key=lambda r: tuple(str(r[k]) for k in keys))


def _empty_states() -> dict[str, int]:
    return {"read": 0, **{s: 0 for s in STATES}}


def state_tables(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """totals, by_domain, by_source, by_domain_source, by_input from state counts."""
    tables: dict[str, dict] = {
        k: defaultdict(_empty_states)
        for k in ("by_domain", "by_source", "by_domain_source", "by_input")
    }
    totals = _empty_states()
    for r in rows:
        for name, key in (
            ("by_domain", r["domain"]),
            ("by_source", r["source"]),
            ("by_domain_source", f"{r['domain']}/{r['source']}"),
            ("by_input", r["input"]),
        ):
            tables[name][key][r["state"]] += r["n"]
            tables[name][key]["read"] += r["n"]
        totals[r["state"]] += r["n"]
        totals["read"] += r["n"]
    out: dict[str, Any] = {"totals": totals}
    out.update({k: dict(sorted(v.items())) for k, v in tables.items()})
    return out


def conserved(counts: dict[str, int]) -> bool:
    """read = kept + exact + near duplicates + contaminated + quarantined."""
    return counts["read"] == sum(counts[s] for s in STATES)


def token_tables(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per kind/split, and within it per domain and per domain/source: documents,
    tokens, target tokens, truncated samples, dropped samples by reason."""
    out: dict[str, Any] = {}
    for r in rows:
        entry = out.setdefault(r["kind"], {}).setdefault(r["split"], _token_entry(nested=True))
        dom = entry["by_domain"].setdefault(r["domain"], _token_entry())
        pair = entry["by_domain_source"].setdefault(f"{r['domain']}/{r['source']}", _token_entry())
        for e in (entry, dom, pair):
            if r["drop_reason"] is not None:
                e["dropped"][r["drop_reason"]] = e["dropped"].get(r["drop_reason"], 0) + r["n"]
                continue
            e["documents"] += r["n"]
            e["tokens"] += r["n_tokens"]
            e["target_tokens"] += r["n_targets"]
            e["truncated"] += r["truncated"]
    return out


def sft_drop_rates(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per domain, over both splits: SFT samples, those dropped (by reason) and the
    dropped share, from the tokenize step's grouped rows."""
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        if r["kind"] != "sft":
            continue
        e = out.setdefault(r["domain"], {"samples": 0, "dropped": 0, "reasons": {}})
        e["samples"] += r["n"]
        if r["drop_reason"] is not None:
            e["dropped"] += r["n"]
            e["reasons"][r["drop_reason"]] = e["reasons"].get(r["drop_reason"], 0) + r["n"]
    for e in out.values():
        e["share"] = e["dropped"] / e["samples"] if e["samples"] else 0.0
    return dict(sorted(out.items()))


def _token_entry(nested: bool = False) -> dict[str, Any]:
    e: dict[str, Any] = {
        "documents": 0,
        "tokens": 0,
        "target_tokens": 0,
        "truncated": 0,
        "dropped": {},
    }
    if nested:
        e["by_domain"], e["by_domain_source"] = {}, {}
    return e


def packing_tables(stats: pa.Table, seq_len: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for r in stats.to_pylist():
        e = out.setdefault(r["kind"], {}).setdefault(
            r["split"], {"shards": 0, "rows": 0, "documents": 0, "tokens": 0}
        )
        e["shards"] += 1
        e["rows"] += r["rows"]
        e["documents"] += r["docs"]
        e["tokens"] += r["tokens"]
    for splits in out.values():
        for e in splits.values():
            e["efficiency"] = e["tokens"] / (e["rows"] * seq_len) if e["rows"] else 0.0
    return out


def format_table(report: dict[str, Any]) -> str:
    """Per domain/source: record counts, CPT tokens and SFT target tokens."""
    cols = ["read", "kept", "exact_duplicate", "near_duplicate", "contaminated", "quarantined"]
    heads = ["read", "kept", "exact", "near", "contam", "quarant", "cpt tok", "sft tgt"]
    lines = [f"{'domain/source':>28} " + " ".join(f"{h:>9}" for h in heads)]
    tokens = report.get("tokens", {})
    cpt, sft = tokens.get("cpt", {}).values(), tokens.get("sft", {}).values()
    for key, c in report["by_domain_source"].items():
        n_cpt = sum(s["by_domain_source"].get(key, {}).get("tokens", 0) for s in cpt)
        n_sft = sum(s["by_domain_source"].get(key, {}).get("target_tokens", 0) for s in sft)
        lines.append(_line(key, [c[x] for x in cols], n_cpt, n_sft))
    t = report["totals"]
    n_cpt, n_sft = sum(s["tokens"] for s in cpt), sum(s["target_tokens"] for s in sft)
    lines.append(_line("TOTAL", [t[x] for x in cols], n_cpt, n_sft))
    drops = report.get("sft_drop_rates", {})
    if drops:
        lines.append("SFT samples dropped as too long, per domain:")
        lines += [
            f"{d:>28} {e['dropped']:>9} of {e['samples']:<9} ({100 * e['share']:.1f}%)"
            for d, e in drops.items()
        ]
    return "\n".join(lines)


def _line(label: str, counts: list[int], cpt: int, sft: int) -> str:
    return f"{label[:28]:>28} " + " ".join(f"{v:>9}" for v in [*counts, cpt, sft])
