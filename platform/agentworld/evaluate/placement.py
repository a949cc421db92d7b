"""The evaluate stage's Ray code, and its only module that imports ``ray``: local
batch inference with vLLM engines as a Ray Data actor pool over the items.

Each actor loads the checkpoint once and generates for batches of items; the driver
streams the finished rows back (``iter_rows``) and hands each one on as it arrives, so
an interrupted run keeps what was already written. Prompts longer than the engine's
window lose their oldest turns first (the environment text and the current action are
always kept); an item whose prompt still does not fit fails with that reason.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from agentworld.evaluate.config import InferConfig
from agentworld.evaluate.items import EvalItem, failure_row, prediction_row
from agentworld.model import local_model_dir
from agentworld.model.engine import EngineConfig, start_llm

# Engine settings the actors must see even when the cluster was started elsewhere.
_FORWARDED_ENV = (
    "VLLM_CPU_KVCACHE_SPACE",
    "VLLM_CPU_OMP_THREADS_BIND",
    "OMP_NUM_THREADS",
    "HF_HUB_OFFLINE",
)


class VLLMPredictor:
    """A Ray Data callable class: ``{"key", "messages_json"}`` batches in,
    ``{"key", "output", "finish_reason", "error"}`` batches out."""

    def __init__(self, model_url: str, engine: EngineConfig, sampling: dict[str, Any]) -> None:
        from transformers import AutoTokenizer

        path = local_model_dir(model_url)
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.llm = start_llm(path, engine, seed=sampling["seed"] or 0)
        self.params = sampling_params(sampling)
        self.budget = engine.max_model_len - sampling["max_tokens"]

    @classmethod
    def around(cls, llm: Any, sampling: dict[str, Any]) -> VLLMPredictor:
        """A predictor on an engine that is already running (closed-loop rollouts in
        the process that holds it); its window is the engine's own."""
        self = cls.__new__(cls)
        self.llm, self.tokenizer = llm, llm.get_tokenizer()
        self.params = sampling_params(sampling)
        self.budget = llm.llm_engine.model_config.max_model_len - sampling["max_tokens"]
        return self

    def __call__(self, batch: dict[str, Any]) -> dict[str, list]:
        contexts = [json.loads(m) for m in batch["messages_json"]]
        prompts = [self.prompt_ids(m) for m in contexts]
        fits = [ids for ids, err in prompts if err is None]
        outs = iter(
            self.llm.generate(
                [{"prompt_token_ids": ids} for ids in fits], self.params, use_tqdm=False
            )
            if fits
            else []
        )
        out: dict[str, list] = {
            "key": list(batch["key"]),
            "output": [],
            "finish_reason": [],
            "error": [],
        }
        for _, err in prompts:
            completion = None if err else next(outs).outputs[0]
            out["output"].append(completion.text if completion else "")
            out["finish_reason"].append(completion.finish_reason if completion else None)
            out["error"].append(err)
        return out

    def prompt_ids(self, messages: list[dict[str, str]]) -> tuple[list[int], str | None]:
        return fit_prompt(self.tokenizer, messages, self.budget)


def sampling_params(sampling: dict[str, Any]) -> Any:
    """vLLM's SamplingParams for ``asdict(SamplingConfig)``."""
    from vllm import SamplingParams

    return SamplingParams(
        temperature=sampling["temperature"],
        top_p=sampling["top_p"],
        max_tokens=sampling["max_tokens"],
        seed=sampling["seed"],
        frequency_penalty=sampling["frequency_penalty"],
        repetition_penalty=sampling["repetition_penalty"],
    )


def fit_prompt(
    tokenizer, messages: list[dict[str, str]], budget: int
) -> tuple[list[int], str | None]:
    """Token ids of the chat-templated prompt with the oldest (action, observation) pairs
    dropped until it fits ``budget`` tokens; ``([], reason)`` when even the environment
    text and the current action alone do not fit."""
    while True:
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        if len(ids) <= budget:
            return ids, None
        if len(messages) <= 2:
            return [], f"prompt of {len(ids)} tokens exceeds max_model_len - max_tokens = {budget}"
        messages = [messages[0], *messages[3:]]


def infer_vllm(
    items: list[EvalItem],
    cfg: InferConfig,
    model_url: str,
    emit: Callable[[dict[str, Any]], None],
) -> list[dict[str, Any]]:
    """Generate for every item on a pool of ``cfg.vllm.engine.replicas`` engine actors."""
    import ray

    if not ray.is_initialized():
        ray.init()
    by_key = {i.key: i for i in items}
    rows = [{"key": i.key, "messages_json": json.dumps(i.messages)} for i in items]
    batch = cfg.vllm.batch_size
    # Blocks of about one batch each: results stream back, and get written, batch by batch.
    ds = ray.data.from_items(rows, override_num_blocks=max(1, min(len(rows) // batch, 1000)))
    ds = ds.map_batches(
        VLLMPredictor,
        fn_constructor_kwargs={
            "model_url": model_url,
            "engine": cfg.vllm.engine,
            "sampling": asdict(cfg.sampling),
        },
        batch_size=batch,
        batch_format="numpy",
        concurrency=cfg.vllm.engine.replicas,
        num_cpus=cfg.vllm.engine.cpus_per_replica,
        num_gpus=cfg.vllm.engine.gpus_per_replica,
        runtime_env={"env_vars": {k: os.environ[k] for k in _FORWARDED_ENV if k in os.environ}},
    )
    failures = []
    for row in ds.iter_rows():
        item = by_key[row["key"]]
        if row["error"]:
            failures.append(failure_row(item, row["error"], 1))
        else:
            emit(prediction_row(item, row["output"], row["finish_reason"]))
    return failures
