"""RL contexts: "predict turn k" messages with the real next observation as reference,
read from prepare's per-turn SFT samples (``samples/sft/part-XXXXX.parquet``: columns
trajectory_id, domain, turn_idx, messages_json, reference, and ``split``: rows of the
held-out split are skipped). Plain Python, no Ray.

Bad rows are kept apart with a reason naming the shard, row and field; they never stop
a load.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa

from agentworld.io import exists, join, list_shards, read_parquet, write_parquet
from agentworld.schema import predict_turn_messages

SAMPLE_COLUMNS = ("trajectory_id", "domain", "turn_idx", "messages_json", "reference")


@dataclass(frozen=True, kw_only=True)
class Context:
    trajectory_id: str
    domain: str
    turn_idx: int
    messages: list[dict[str, str]]
    reference: str
    prompt_ids: tuple[int, ...] = ()
    """Token ids of the chat-templated prompt (filled by ``tokenize_contexts``)."""

    @property
    def key(self) -> str:
        return f"{self.trajectory_id}:{self.turn_idx}"


@dataclass(kw_only=True)
class LoadResult:
    contexts: list[Context] = field(default_factory=list)
    rejected: list[dict[str, Any]] = field(default_factory=list)
    """{"source", "row", "field", "reason"} per bad row or over-long prompt."""
    held_out: int = 0
    """Rows of prepare's held-out split (``split == "eval"``): never trained on."""


def samples_dir(url: str) -> str:
    """Where the per-turn samples are: a prepare run's ``samples/sft``, else ``url``."""

    return join(url, "samples", "sft") if exists(join(url, "samples", "sft")) else url


def load_contexts(url: str) -> LoadResult:
    """Every valid context under ``url`` (see ``samples_dir``), in shard order."""

    result = LoadResult()
    shards = list_shards(samples_dir(url), suffixes=(".parquet",))
    if not shards:
        raise FileNotFoundError(f"--data {url}: no samples/sft parquet shards found")
    for shard in shards:
        for n, row in enumerate(read_parquet(shard).to_pylist(), start=1):
            if row.get("split") == "eval":
                result.held_out += 1
                continue
            try:
                result.contexts.append(context_from_row(row))
            except ValueError as e:
                field_name = getattr(e, "field", "row")
                result.rejected.append(
                    {"source": shard, "row": n, "field": field_name, "reason": str(e)}
                )
    return result


class RowError(ValueError):
    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


def context_from_row(row: dict[str, Any]) -> Context:
    for name in SAMPLE_COLUMNS:
        if row.get(name) is None:
            raise RowError(name, "required column is missing or null")
    try:
        messages = json.loads(row["messages_json"])
    except ValueError as e:
        raise RowError("messages_json", f"not JSON: {e}") from None
    if not _is_context(messages):
        raise RowError(
            "messages_json", "must be system, (user, assistant)*, user messages with text"
        )
    return Context(
        trajectory_id=str(row["trajectory_id"]),
        domain=str(row["domain"]),
        turn_idx=int(row["turn_idx"]),
        messages=messages,
        reference=str(row["reference"]),
    )


def _is_context(messages: Any) -> bool:
    if not isinstance(messages, list) or len(messages) < 2 or len(messages) % 2:
        return False
    roles = ["system"] + ["user", "assistant"] * ((len(messages) - 2) // 2) + ["user"]
    return all(
        isinstance(m, dict) and m.get("role") == r and isinstance(m.get("content"), str)
        for m, r in zip(messages, roles, strict=True)
    )


def sample_rows(trajectories: Iterable[Any]) -> list[dict[str, Any]]:
    """Per-turn sample rows in prepare's format, one per turn of each trajectory."""

    rows = []
    for traj in trajectories:
        for k, turn in enumerate(traj.turns, start=1):
            rows.append(
                {
                    "trajectory_id": traj.id,
                    "domain": traj.domain,
                    "turn_idx": k,
                    "messages_json": json.dumps(predict_turn_messages(traj, k)),
                    "reference": turn.observation,
                    "split": "train",
                }
            )
    return rows


def write_samples(url: str, trajectories: Iterable[Any]) -> int:
    """Write trajectories as one ``samples/sft`` shard under ``url`` (prepare's layout)."""

    rows = sample_rows(trajectories)
    return write_parquet(
        join(url, "samples", "sft", "part-00000.parquet"), pa.Table.from_pylist(rows)
    )


def tokenize_contexts(
    contexts: Sequence[Context],
    tokenizer: Any,
    *,
    max_prompt_tokens: int,
    result: LoadResult,
    max_new_tokens: int | None = None,
) -> list[Context]:
    """Attach prompt token ids (chat template with the generation prompt, as the model
    is asked at inference); over-long prompts are left out and recorded in ``result``.

    With ``max_new_tokens``, so are contexts whose real observation (and the end-of-turn
    token) does not fit in it: every rollout there is cut, the format gate scores it 0
    however faithful it is, and the only answers rewarded are ones shorter than the
    real observation. In the demo's RL run (48 new tokens, half the observations
    longer) the policy learned exactly that: it stopped earlier at every step."""

    kept = []
    for c in contexts:
        text = tokenizer.apply_chat_template(c.messages, tokenize=False, add_generation_prompt=True)
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        reason = None
        if len(ids) > max_prompt_tokens:
            reason = (
                f"prompt has {len(ids)} tokens > rl.rollout.max_prompt_tokens {max_prompt_tokens}"
            )
        elif max_new_tokens is not None:
            need = len(tokenizer(c.reference, add_special_tokens=False)["input_ids"]) + 1
            if need > max_new_tokens:
                reason = (
                    f"observation needs {need} tokens > rl.rollout.max_new_tokens {max_new_tokens}"
                )
        if reason is not None:
            result.rejected.append(
                {"source": c.key, "row": c.turn_idx, "field": "messages_json", "reason": reason}
            )
            continue
        kept.append(replace(c, prompt_ids=tuple(ids)))
    return kept


def choose_contexts(contexts: Sequence[Context], n: int, *, seed: int, step: int) -> list[Context]:
    """The contexts of one step: a function of (seed, step) only, so a resumed run draws
    exactly what the uninterrupted run would have."""
    rng = random.Random(seed * 1_000_003 + step)
    if n <= len(contexts):
        return rng.sample(list(contexts), n)
    return [rng.choice(contexts) for _ in range(n)]
