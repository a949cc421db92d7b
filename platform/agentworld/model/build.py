"""Build, save and load Qwen3-MoE causal LMs in HF format."""

from __future__ import annotations

import os
import tempfile
from typing import Any

from fsspec.implementations.local import LocalFileSystem

from agentworld.io.storage import copy_local_dir_to, download_dir, get_fs
from agentworld.model.config import ModelConfig


def qwen3_moe_config(
    cfg: ModelConfig,
    *,
    vocab_size: int,
    pad_token_id: int | None = None,
    eos_token_id: int | None = None,
):
    from transformers import Qwen3MoeConfig

    return Qwen3MoeConfig(
        vocab_size=vocab_size,
        hidden_size=cfg.hidden_size,
        intermediate_size=cfg.intermediate_size,
        moe_intermediate_size=cfg.moe_intermediate_size,
        num_hidden_layers=cfg.num_layers,
        num_attention_heads=cfg.num_attention_heads,
        num_key_value_heads=cfg.num_kv_heads,
        head_dim=cfg.head_dim,
        num_experts=cfg.num_experts,
        num_experts_per_tok=cfg.experts_per_token,
        decoder_sparse_step=1,
        norm_topk_prob=True,
        router_aux_loss_coef=cfg.router_aux_loss_coef,
        output_router_logits=True,
        max_position_embeddings=cfg.max_position_embeddings,
        rope_theta=10000.0,
        tie_word_embeddings=False,
        pad_token_id=pad_token_id,
        eos_token_id=eos_token_id,
        bos_token_id=None,
    )


def build_model(cfg: ModelConfig, tokenizer, *, seed: int = 0):
    """A freshly initialized Qwen3-MoE causal LM (fp32) sized by ``cfg``."""
    import torch
    from transformers import Qwen3MoeForCausalLM

    config = qwen3_moe_config(
        cfg,
        vocab_size=len(tokenizer),
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(seed)
    return Qwen3MoeForCausalLM(config)


def save_pretrained(model, tokenizer, url: str) -> str:
    """Save model (safetensors) and tokenizer (with chat template) to a local path or
    any fsspec URL; returns ``url``."""

    fs, path = get_fs(url)
    if isinstance(fs, LocalFileSystem):
        model.save_pretrained(path, safe_serialization=True)
        tokenizer.save_pretrained(path)
        model.generation_config.save_pretrained(path)
        return url
    with tempfile.TemporaryDirectory() as tmp:
        save_pretrained(model, tokenizer, tmp)
        copy_local_dir_to(tmp, url)
    return url


def local_model_dir(url: str, cache_dir: str | None = None) -> str:
    """A local directory holding the HF checkpoint at ``url`` (downloaded if remote)."""

    if "://" not in url or url.startswith("file://"):
        return url.removeprefix("file://")
    cache_dir = cache_dir or os.path.join(tempfile.gettempdir(), "agentworld-models")
    target = os.path.join(cache_dir, url.replace("://", "_").replace("/", "_"))
    return download_dir(url, target)


def load_model(url: str, *, dtype: Any = None, **kwargs: Any):
    """Load any HF-format causal LM from a local path or URL."""
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(
        local_model_dir(url), dtype=dtype or "auto", **kwargs
    )


def load_tokenizer(url: str):
    """The tokenizer at ``url`` (a local path or any fsspec URL)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(local_model_dir(url))


def build_tiny_checkpoint(
    texts: list[str], out_url: str, cfg: ModelConfig | None = None, *, seed: int = 0
) -> str:
    """Train a tokenizer on ``texts``, build the MoE from ``cfg`` and save both to ``out_url``."""
    # not at the top: agentworld.model imports this module (a cycle)
    from agentworld.model.tokenizer import train_tokenizer

    cfg = cfg or ModelConfig()  # the debug_cpu recipe's shape
    tokenizer = train_tokenizer(texts, vocab_size=cfg.vocab_size)
    model = build_model(cfg, tokenizer, seed=seed)
    return save_pretrained(model, tokenizer, out_url)
