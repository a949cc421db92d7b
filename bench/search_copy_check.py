"""Does the world model copy what a search observation repeats from its prompt?

A search observation starts by repeating the action: a result list names its query
(``Results for "<query>"``), a page or a miss names the id it opened. Copying those
spans is the least a simulator of this engine must do; retrieval gets them for free from
a neighbouring turn. This check counts, for one policy of a ``bench_fidelity.py`` run,
the search turns whose prediction repeats the query or the opened id, on the held-out
turns (the run's own predictions) and on training turns the model was fitted on (run
here), so that a miss can be told apart: not copying on held-out turns alone is a
generalization gap, not copying on training turns is a model that never learned to copy.

Run:  python bench/search_copy_check.py RUN_DIR [--policy sft] [--train-turns 24]
      (RUN_DIR: bench_fidelity.py --out; writes bench/results/search_copy.json)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from _results import write_result

os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def copies(row: dict) -> tuple[str, bool] | None:
    """(the action's kind, whether the prediction repeats its query or id); None for a
    turn whose action is not a search-engine call."""
    try:
        action = json.loads(row["messages"][-1]["content"])
        name, args = action["name"], action["arguments"]
    except (ValueError, KeyError, TypeError):
        return None
    head = row["prediction"].split("\n", 1)[0]
    if name == "search":
        return name, f'for "{args.get("query")}"' in head
    if name == "open":
        return name, str(args.get("doc_id")) in head
    return None


def rates(rows: list[dict]) -> dict:
    """Per action kind: turns, and how many predictions (and references) repeat it."""
    out: dict[str, dict] = {}
    for row in rows:
        if row.get("domain") != "search" or (got := copies(row)) is None:
            continue
        kind, ok = got
        ref = copies({**row, "prediction": row["reference"]})
        entry = out.setdefault(kind, {"turns": 0, "prediction_copies": 0, "reference_copies": 0})
        entry["turns"] += 1
        entry["prediction_copies"] += ok
        entry["reference_copies"] += bool(ref and ref[1])
    return out


def training_turns(run: str, n: int, into: str) -> int:
    """The first ``n`` training search samples, written as an eval split under ``into``."""
    import pyarrow as pa

    from agentworld.io import list_shards, read_parquet, write_parquet

    rows = []
    for shard in list_shards(f"{run}/prepared/samples/sft", suffixes=(".parquet",)):
        table = read_parquet(shard).to_pylist()
        rows += [r for r in table if r["domain"] == "search" and r["split"] == "train"]
        if len(rows) >= n:
            break
    rows = [{**r, "split": "eval"} for r in rows[:n]]
    write_parquet(f"{into}/part-00000.parquet", pa.Table.from_pylist(rows))
    return len(rows)


def read_predictions(run_dir: str) -> list[dict]:
    from agentworld.io import read_jsonl

    return read_jsonl(f"{run_dir}/infer/predictions.jsonl")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("run", help="a bench_fidelity.py run directory (--out)")
    p.add_argument("--policy", default="sft", help="sft or rl (the run's <policy>/hf)")
    p.add_argument("--train-turns", type=int, default=24, help="training search turns run")
    p.add_argument("--recipe", default="small_cpu")
    a = p.parse_args(argv)
    run = os.path.abspath(a.run)
    held = Path(run, f"eval-{a.policy}")
    if not held.joinpath("infer", "predictions.jsonl").exists():
        p.error(f"{held}/infer/predictions.jsonl is missing: run bench_fidelity.py --out {run}")

    from agentworld.evaluate.run import infer_stage
    from agentworld.recipes import get_recipe

    with tempfile.TemporaryDirectory(prefix="search-copy-") as tmp:
        n = training_turns(run, a.train_turns, f"{tmp}/in")
        cfg = get_recipe(a.recipe).evaluate.infer
        infer_stage(f"{tmp}/in", f"{tmp}/out", cfg, model_url=f"{run}/{a.policy}/hf",
                    name=a.policy, fmt="samples", split="eval")  # fmt: skip
        train = rates(read_predictions(f"{tmp}/out"))
    result = {
        "run": run,
        "policy": a.policy,
        "training_turns_run": n,
        "heldout": rates(read_predictions(str(held))),
        "train": train,
    }
    print(json.dumps(result, indent=1))
    write_result("search_copy", result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
