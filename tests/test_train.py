"""CPT and SFT on Ray Train + DeepSpeed: held-out loss falls, experts really split
across the 2 workers, a killed worker is replaced and the run resumes from its newest
checkpoint on the uninterrupted run's loss curve, the export generates through
transformers and vLLM, bad recipes fail before any worker starts.

One short CPT run (module fixture) serves several tests; the failure run repeats it
with a worker killed; SFT starts from its export."""

from __future__ import annotations

import dataclasses
import os

from agentworld.recipes import TrainConfig, debug_cpu

SEQ_LEN = 256


def short_recipe():
    """debug_cpu, shortened: 2 workers, experts split 2 ways, 24 steps."""
    train = TrainConfig(
        expert_parallel_size=2,
        seq_len=SEQ_LEN,
        micro_batch_size=2,
        learning_rate=3e-3,
        warmup_steps=3,
        max_steps=24,
        eval_every=8,
        checkpoint_every=8,
        keep_checkpoints=2,
        log_every=1,
    )
    return dataclasses.replace(debug_cpu(), name="debug_cpu_test", train=train)


# --- test-only stand-in for the prepare stage's packed output ---------------------


def _cpt_document(traj, tok) -> tuple[list[int], list[int]]:
    from agentworld.schema import render_messages

    history = [(t.action, t.observation) for t in traj.turns[:-1]]
    messages = render_messages(traj.environment, history, traj.turns[-1].action)
    messages.append({"role": "assistant", "content": traj.turns[-1].observation})
    ids = tok(tok.apply_chat_template(messages, tokenize=False), add_special_tokens=False).input_ids
    return ids, [1] * len(ids)


def _sft_documents(traj, tok) -> list[tuple[list[int], list[int]]]:
    from agentworld.schema import predict_turn_messages

    docs = []
    for k, turn in enumerate(traj.turns, start=1):
        prompt = tok.apply_chat_template(
            predict_turn_messages(traj, k), tokenize=False, add_generation_prompt=True
        )
        p = tok(prompt, add_special_tokens=False).input_ids
        target = tok(turn.observation + "<|im_end|>", add_special_tokens=False).input_ids
        docs.append((p + target, [0] * len(p) + [1] * len(target)))
    return docs


def _pack(docs, seq_len: int, pad_id: int) -> dict[str, list]:
    rows: dict[str, list] = {"input_ids": [], "loss_mask": [], "position_ids": [], "doc_lens": []}
    current: list[tuple[list[int], list[int]]] = []

    def flush():
        ids = [t for d in current for t in d[0]]
        mask = [m for d in current for m in d[1]]
        pad = seq_len - len(ids)
        rows["input_ids"].append(ids + [pad_id] * pad)
        rows["loss_mask"].append(mask + [0] * pad)
        rows["position_ids"].append([p for d in current for p in range(len(d[0]))] + [0] * pad)
        rows["doc_lens"].append([len(d[0]) for d in current])

    for ids, mask in docs:
        ids, mask = ids[:seq_len], mask[:seq_len]
        if current and sum(len(d[0]) for d in current) + len(ids) > seq_len:
            flush()
            current = []
        current.append((ids, mask))
    if current:
        flush()
    return rows


def write_packed(out: str, trajectories, tok, seq_len: int = SEQ_LEN) -> str:
    """tokenizer/ and packed/{cpt,sft}/{train,eval}/part-00000.parquet under ``out``;
    every fifth trajectory is held out."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    tok.save_pretrained(os.path.join(out, "tokenizer"))
    for stage in ("cpt", "sft"):
        for split in ("train", "eval"):
            keep = [t for i, t in enumerate(trajectories) if (i % 5 == 0) == (split == "eval")]
            if stage == "cpt":
                docs = [_cpt_document(t, tok) for t in keep]
            else:
                docs = [d for t in keep for d in _sft_documents(t, tok)]
            rows = _pack(docs, seq_len, tok.pad_token_id)
            schema = pa.schema(
                [
                    ("input_ids", pa.list_(pa.int32())),
                    ("loss_mask", pa.list_(pa.int8())),
                    ("position_ids", pa.list_(pa.int32())),
                    ("doc_lens", pa.list_(pa.int32())),
                ]
            )
            directory = os.path.join(out, "packed", stage, split)
            os.makedirs(directory, exist_ok=True)
            pq.write_table(
                pa.table(rows, schema=schema), os.path.join(directory, "part-00000.parquet")
            )
    return out
