"""The main job on the embedded default: local Ray, local storage directory.

Runs every stage that exists, in order, on a small corpus, writing under --out:
  raw/        trajectory shards (record format)
  awb/        the same trajectories as AgentWorldBench rows
  model/      a tiny Qwen3-MoE + byte-level BPE tokenizer (HF format)

Run:  python jobs/demo.py --out runs/demo      (or `make demo`)
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "platform"))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--out", default="runs/demo", help="run directory (path or fsspec URL)")
    p.add_argument("--recipe", default="debug_cpu")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from agentworld.io import is_complete, join, read_records, write_jsonl, write_manifest
    from agentworld.model import build_tiny_checkpoint, load_model, load_tokenizer
    from agentworld.recipes import get_recipe
    from agentworld.schema import parse_output, predict_turn_messages, trajectory_to_rows
    from agentworld.schema.examples import example_trajectories

    recipe = get_recipe(args.recipe)
    if is_complete(args.out):
        print(f"[demo] {args.out} is complete; nothing to do (delete it to rerun)")
        return 0
    t0 = time.time()
    trajs = example_trajectories(seed=args.seed)
    write_jsonl(join(args.out, "raw", "part-00000.jsonl"), trajs)
    back = read_records(join(args.out, "raw")).records
    rows = [row for t in back for row in trajectory_to_rows(t)]
    write_jsonl(join(args.out, "awb", "demo_test.jsonl"), rows)
    print(f"[demo] wrote {len(back)} trajectories, {len(rows)} AgentWorldBench rows")

    texts = [
        s
        for t in back
        for s in (t.environment, *(x for turn in t.turns for x in (turn.action, turn.observation)))
    ]
    model_url = join(args.out, "model")
    build_tiny_checkpoint(texts, model_url, recipe.model, seed=args.seed)
    tok, model = load_tokenizer(model_url), load_model(model_url)
    n_params = sum(p.numel() for p in model.parameters())
    print(
        f"[demo] built {recipe.model.num_experts}-expert MoE with {n_params / 1e6:.2f}M parameters"
    )

    prompt = tok.apply_chat_template(
        predict_turn_messages(back[0], 2), tokenize=False, add_generation_prompt=True
    )
    ids = tok(prompt, return_tensors="pt")
    out = model.generate(**ids, max_new_tokens=24, do_sample=False)
    raw = tok.decode(out[0, ids["input_ids"].shape[1] :], skip_special_tokens=False)
    print(
        f"[demo] untrained prediction for turn 2 of {back[0].id!r}: {parse_output(raw).observation[:60]!r}"
    )

    write_manifest(
        args.out,
        stage="demo",
        inputs=[],
        config=recipe,
        counts={"trajectories": len(back), "awb_rows": len(rows), "model_parameters": n_params},
        outputs={"raw": join(args.out, "raw"), "awb": join(args.out, "awb"), "model": model_url},
    )
    print(f"[demo] done in {time.time() - t0:.1f}s -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
