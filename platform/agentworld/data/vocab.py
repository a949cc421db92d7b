"""The run's tokenizer under ``<out>/tokenizer/``: the pretrained model's when the recipe
names one, otherwise a byte-level BPE trained on the kept training trajectories
(agentworld.model.train_tokenizer). Also loads it in workers, from any URL."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
from typing import Any

from fsspec.implementations.local import LocalFileSystem

from agentworld.io import get_fs
from agentworld.io.storage import copy_local_dir_to
from agentworld.model import load_tokenizer as load_model_tokenizer
from agentworld.model import train_tokenizer


def save_tokenizer(tokenizer, url: str, storage_options: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        tokenizer.save_pretrained(tmp)
        copy_local_dir_to(tmp, url, **storage_options)


def _local_copy(url: str, storage_options: dict[str, Any]) -> str:
    fs, path = get_fs(url, **storage_options)
    if isinstance(fs, LocalFileSystem):
        return path
    key = hashlib.blake2b(url.encode(), digest_size=8).hexdigest()
    target = os.path.join(tempfile.gettempdir(), "agentworld-tokenizers", key)
    if not os.path.isdir(target):
        partial = f"{target}.tmp-{os.getpid()}"
        fs.get(path.rstrip("/") + "/", partial, recursive=True)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        try:
            os.replace(partial, target)
        except OSError:  # another process finished first
            pass
    return target


# Tokenizer classes that are the tokenizers library's JSON file and nothing more: the
# one prepare trains saves as the first.
_PLAIN_CLASSES = ("TokenizersBackend", "PreTrainedTokenizerFast")


@functools.lru_cache(maxsize=4)
def _load_cached(url: str, options_key: str) -> Any:
    path = _local_copy(url, json.loads(options_key))
    config_path = os.path.join(path, "tokenizer_config.json")
    config = {}
    if os.path.exists(config_path):
        with open(config_path) as f:
            config = json.load(f)
    if config.get("tokenizer_class") in _PLAIN_CLASSES:
        # Loaded by its class: AutoTokenizer's import brings in torch (through
        # transformers' auto factories), about 200 MiB more in every prepare worker
        # that tokenizes, for a tokenizer that needs none of it.
        from transformers import PreTrainedTokenizerFast

        return PreTrainedTokenizerFast.from_pretrained(path)
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path)


def load_tokenizer(url: str, storage_options: dict[str, Any]):
    """The tokenizer saved at ``url`` (cached per process)."""

    return _load_cached(url, json.dumps(storage_options, sort_keys=True))


def pretrained_tokenizer(model_url: str):
    return load_model_tokenizer(model_url)


def train_on_texts(texts: list[str], vocab_size: int):
    """A BPE trained on ``texts`` in a fixed order, so the vocabulary is the same
    whatever order the blocks arrived in."""

    return train_tokenizer(sorted(texts), vocab_size=vocab_size)
