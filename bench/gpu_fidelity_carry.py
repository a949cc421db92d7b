"""The folder bench/gpu_fidelity_probe.py reads (carried to a GPU machine), from a prepared
run: tokenizer, packed rows, held-out items and the baselines' predictions and scores, with the project's own evaluate code (what
evaluate.run.score_stage does for prepare's eval samples: items from the eval split,
retrieval over the train split, baseline_rows, summarize).

Run:  python bench/gpu_fidelity_carry.py PREPARED_DIR CARRY_DIR [MAX_SHARDS_PER_FOLDER]
"""

import json
import shutil
import sys
from pathlib import Path

from agentworld.evaluate.baselines import Retrieval, baseline_rows
from agentworld.evaluate.items import load_items
from agentworld.evaluate.score import summarize

prepared, carry = Path(sys.argv[1]), Path(sys.argv[2])
max_shards = int(sys.argv[3]) if len(sys.argv) > 3 else None  # per packed folder
carry.mkdir(parents=True, exist_ok=True)
samples = str(prepared / "samples" / "sft")
loaded = load_items(samples, fmt="samples", split="eval")
assert not loaded.rejected, loaded.rejected[:3]
items = loaded.items
train = load_items(samples, fmt="samples", split="train").items
retrieval = Retrieval((i.messages, i.reference) for i in train)
rows = baseline_rows([i.to_dict() for i in items], retrieval)
scores = {name: summarize(r, model=name)["domains"] for name, r in rows.items()}

with open(carry / "heldout_items.jsonl", "w") as f:
    for i in items:
        f.write(json.dumps(i.to_dict()) + "\n")
slim = {
    n: [{k: x[k] for k in ("key", "domain", "reference", "output")} for x in r]
    for n, r in rows.items()
}
(carry / "baseline_predictions.json").write_text(json.dumps(slim))
(carry / "baseline_scores.json").write_text(
    json.dumps({"items": len(items), "train_examples": len(train), "scores": scores}, indent=1)
)
shutil.copytree(prepared / "tokenizer", carry / "tokenizer", dirs_exist_ok=True)
for src, dst in (
    ("cpt/train", "cpt_train"),
    ("cpt/eval", "cpt_eval"),
    ("sft/train", "sft_train"),
    ("sft/eval", "sft_eval"),
):
    shards = sorted((prepared / "packed" / src).glob("*.parquet"))[:max_shards]
    (carry / dst).mkdir(exist_ok=True)
    for s in shards:
        shutil.copy(s, carry / dst / s.name)
shutil.copy(prepared / "report.json", carry / "prepare_report.json")
print(f"items {len(items)}, train examples {len(train)}")
for d in scores["copy_previous"]:
    print(
        f"{d:10} n={scores['copy_previous'][d]['predictions']:4d} "
        + " ".join(
            f"{n}: charF1 {s[d]['rule']['char_f1']:.1f} rougeL {s[d]['rule']['rouge_l']:.1f} "
            f"EM {s[d]['rule']['exact_match']:.1f}"
            for n, s in scores.items()
        )
    )
