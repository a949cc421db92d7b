"""The prepare stage on every real recording of ../shared/realdata beside the small
collected corpus and a folder of broken and fuzzed variants, on a real local Ray
cluster: seven domains in the report, every row of every input counted (per source and
per input, against counts made here), each planted bad input quarantined with its file
and position, SFT samples kept from each ingested domain or their drop named with the
recipe's sequence length as the cause, ingested domains in the held-out split."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pyarrow as pa
import pytest

from agentworld.data.steps.tokenize import DomainDropError, check_drop_rates
from agentworld.io import join, list_shards, read_parquet
from agentworld.schema import BUILTIN_DOMAINS
from tests import test_ingest_formats
from tests.test_data_prepare import _job
from tests.test_ingest_formats import UNITS, _browsergym_copy, _os_system_pickle, rows_of

realdata = test_ingest_formats.realdata  # the one fixture naming ../shared/realdata

SEVEN = {d.name for d in BUILTIN_DOMAINS}
INGESTED_ONLY = {"android", "os", "web"}
"""Domains the collected corpus does not have: their records are all ingested."""


def _plant_bad_inputs(realdata: Path, bad: Path) -> dict[str, int]:
    """Broken inputs of each kind; returns the quarantined rows each must give."""
    tau = (realdata / "function_calling/tau-bench__gpt-4o-airline.first20.json").read_text()
    (bad / "tau_cut.json").write_text(tau[: tau.index('"task_id": 5')])
    cast = (realdata / "asciinema/asciinema-server__welcome.cast").read_text().splitlines()
    (bad / "header.cast").write_text("\n".join(["{not json"] + cast[1:]))
    lines = (realdata / "swe/OpenHands__multi_swe_bench_output.jsonl").read_text().splitlines()
    doc = json.loads(lines[0])
    next(e for e in doc["history"] if e.get("cause") is not None)["cause"] = -7
    (bad / "orphan.jsonl").write_text("\n".join([json.dumps(doc), *lines[1:]]) + "\n")
    exp = _browsergym_copy(realdata, bad)  # bad/exp
    (exp / "step_3.pkl.gz").write_bytes(gzip.compress(_os_system_pickle(bad / "pwned")))
    return {"tau_cut.json": 2, "header.cast": 1, "orphan.jsonl": 1, "exp": 1}


def _fuzzed(realdata: Path, out: Path, seed: int = 0, n: int = 12) -> None:
    """Seeded variants of small real files: cut short, keys removed, values retyped."""
    rng = random.Random(seed)
    sources = [
        u for u in UNITS if (realdata / u).is_file() and (realdata / u).stat().st_size < 60_000
    ]
    for k in range(n):
        unit = rng.choice(sources)
        raw = (realdata / unit).read_text()
        kind = rng.choice(["cut", "drop", "retype"])
        if kind == "cut" or not raw.lstrip().startswith(("{", "[")):
            text = raw[: rng.randrange(len(raw))]
        else:
            doc = json.loads(raw)
            node = doc[0] if isinstance(doc, list) and doc else doc
            if isinstance(node, dict) and node:
                key = rng.choice(sorted(node))
                if kind == "drop":
                    del node[key]
                else:
                    node[key] = rng.choice([7, None, "x", [], {}])
            text = json.dumps(doc)
        (out / f"fuzz{k:02d}{Path(unit).suffix}").write_text(text)


@pytest.fixture(scope="module")
def prepared(ray_cluster, collected_corpus, realdata, tmp_path_factory):
    """One run: all of realdata, the collected corpus, planted and fuzzed inputs. The
    drop guard is off (max_domain_drop_share=1) so that the report shows every domain's
    drops at the demo recipe's seq_len instead of stopping on the first."""
    from agentworld.data.run import prepare  # the pipeline and Ray load only when this runs

    root = tmp_path_factory.mktemp("ingest-prepare")
    bad = root / "bad"
    bad.mkdir()
    planted = _plant_bad_inputs(realdata, bad)
    _fuzzed(realdata, bad)
    out = str(root / "out")
    inputs = [str(realdata), str(bad), collected_corpus]
    report = prepare(_job(inputs, out, max_domain_drop_share=1.0))
    return {"report": report, "out": out, "bad": bad, "planted": planted, "inputs": inputs}


def _table(out: str, name: str) -> pa.Table:
    return pa.concat_tables([read_parquet(s) for s in list_shards(join(out, name))])


def test_seven_domains_are_in_the_report_with_kept_records(prepared):
    by_domain = prepared["report"]["by_domain"]
    assert SEVEN <= {d for d, c in by_domain.items() if c["kept"] > 0}


def test_every_row_of_every_input_is_counted_per_source_and_input(prepared, realdata):
    """read = kept + duplicates + contaminated + quarantined per source and per input;
    per real file, read is what the file holds (episodes and what cannot be one) and
    quarantined what cannot be one, both counted from the raw file; per planted or
    fuzzed file, read is what a plain read (no Ray) gives."""
    report, states = (
        prepared["report"],
        ("kept", "exact_duplicate", "near_duplicate", "contaminated", "quarantined"),
    )
    for table in ("by_source", "by_input", "by_domain"):
        for key, c in report[table].items():
            assert c["read"] == sum(c[s] for s in states), (table, key)
    for unit, (fmt, count) in UNITS.items():
        episodes, _, left_out = count(realdata / unit)
        c = report["by_source"][f"{fmt}:{unit}"]
        assert (c["read"], c["quarantined"]) == (episodes + left_out, left_out), unit
    plain = rows_of([prepared["bad"]])
    for label, rows in plain.items():
        url = str(prepared["bad"] / label)
        assert report["by_input"][url]["read"] == len(rows), label
        quarantined = sum(r["status"] == "quarantined" for r in rows)
        assert report["by_input"][url]["quarantined"] == quarantined, label


def test_planted_bad_inputs_are_quarantined_naming_file_and_position(prepared):
    q = _table(prepared["out"], "quarantine").to_pylist()
    by_input: dict[str, list[dict]] = {}
    for r in q:
        by_input.setdefault(Path(r["input"]).name, []).append(r)
    for name, n in prepared["planted"].items():
        rows = by_input[name]
        assert len(rows) == n, name
        assert all(r["reason"].startswith(f"{name}, ") and "\n" not in r["reason"] for r in rows)
    assert any(
        "os.system" in r["reason"] and "step_3.pkl.gz" in r["reason"] for r in by_input["exp"]
    )
    assert "line 1: broken asciicast header" in by_input["header.cast"][0]["reason"]
    assert "refers to no action (cause -7)" in by_input["orphan.jsonl"][0]["reason"]
    assert not (prepared["bad"] / "pwned").exists()


def test_sft_samples_from_each_ingested_domain_or_the_seq_len_named(prepared, realdata):
    """Each ingested domain keeps SFT samples at the demo recipe, or every sample it
    loses was too long for train.seq_len; the guard (on by default) says so, naming
    the domain and the seq_len."""
    report = prepared["report"]
    sft = report["tokens"]["sft"]
    for domain in SEVEN:
        kept = sum(split["by_domain"].get(domain, {}).get("documents", 0) for split in sft.values())
        drops = report["sft_drop_rates"][domain]["reasons"]
        assert kept > 0 or set(drops) <= {"too_long", "too_long_after_truncation"}, domain
    kept_ingested = {
        key.split("/", 1)[0]
        for split in sft.values()
        for key, e in split["by_domain_source"].items()
        if e["documents"]
        and key.split("/", 1)[1].split(":", 1)[0] in {f for f, _ in UNITS.values()}
    }
    assert {"terminal", "search", "os", "android"} <= kept_ingested
    rows = [
        {"kind": "sft", "domain": d, "n": n, "drop_reason": reason}
        for d, e in report["sft_drop_rates"].items()
        for reason, n in [(None, e["samples"] - e["dropped"]), *e["reasons"].items()]
    ]
    lossy = [
        d for d, e in report["sft_drop_rates"].items() if e["share"] > 0.2 and e["samples"] >= 10
    ]
    if lossy:
        with pytest.raises(DomainDropError, match=r"train\.seq_len 1024") as err:
            check_drop_rates(rows, 0.2, 1024, min_samples=10)
        assert all(f"domain {d!r}" in str(err.value) for d in lossy)


def test_ingested_domains_are_in_the_held_out_split(prepared):
    held_out = prepared["report"]["tokens"]["cpt"]["eval"]["by_domain"]
    assert {"android", "os"} <= set(held_out)


def test_a_jsonl_line_adapter_and_the_shards_of_a_run_folder_read_side_by_side(prepared, realdata):
    """The collected corpus is a run folder: its shards are read, its manifest and
    status files are not inputs; OpenHands lines are read line by line."""
    by_input = prepared["report"]["by_input"]
    corpus = prepared["inputs"][2]
    assert not any(
        k.endswith(("manifest.json", ".json")) and k.startswith(corpus) for k in by_input
    )
    lines = realdata / "swe/OpenHands__multi_swe_bench_output.jsonl"
    assert by_input[str(lines)]["read"] == 3


@pytest.mark.slow
def test_cpt_then_sft_train_on_collected_and_ingested_data(prepared, tmp_path):
    """The packed rows of collected plus ingested recordings train: CPT from a fresh
    model, SFT from its export, held-out loss falling in each; the export's card counts
    the ingested domains among what it was trained on."""
    import dataclasses

    from agentworld.model.card import read_card
    from agentworld.recipes import get_recipe
    from agentworld.recipes.jobs import train_job
    from agentworld.train.run import run

    recipe = get_recipe("debug_cpu")
    short = dataclasses.replace(recipe.train, max_steps=6, sft_max_steps=6, warmup_steps=1,
                                eval_every=3, checkpoint_every=6)  # fmt: skip
    recipe = dataclasses.replace(recipe, train=short)
    data, quiet = prepared["out"], lambda _: None
    cpt = run(train_job(recipe, stage="cpt", data=data, out=str(tmp_path / "cpt")), log=quiet)
    init = str(tmp_path / "cpt" / "hf")
    sft = run(train_job(recipe, stage="sft", data=data, out=str(tmp_path / "sft"), init=init),
              log=quiet)  # fmt: skip
    for manifest in (cpt, sft):
        evals = [
            v for _, v in sorted(manifest["counts"]["eval_loss"].items(), key=lambda kv: int(kv[0]))
        ]
        assert manifest["counts"]["steps"] == 6 and evals[-1] < evals[0], evals
    trained = read_card(str(tmp_path / "sft" / "hf"))["agentworld"]["trained_on"]
    assert INGESTED_ONLY <= set(trained["trajectories_per_domain"])
