"""Model kit: tokenizer training, Qwen3-MoE building, HF-format save and load."""

from agentworld.model.build import (
    build_model,
    build_tiny_checkpoint,
    load_model,
    load_tokenizer,
    local_model_dir,
    qwen3_moe_config,
    save_pretrained,
)
from agentworld.model.tokenizer import CHAT_TEMPLATE, SPECIAL_TOKENS, train_tokenizer

__all__ = [
    "CHAT_TEMPLATE",
    "SPECIAL_TOKENS",
    "build_model",
    "build_tiny_checkpoint",
    "load_model",
    "load_tokenizer",
    "local_model_dir",
    "qwen3_moe_config",
    "save_pretrained",
    "train_tokenizer",
]
