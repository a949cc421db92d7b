"""Typed configuration of the model: the shape of a Qwen3-MoE causal LM, or a
pretrained checkpoint to start from."""

from __future__ import annotations

from dataclasses import dataclass

from agentworld.config import ConfigError, check_positive


@dataclass(frozen=True, kw_only=True)
class ModelConfig:
    """Shape of a Qwen3-MoE causal LM, or a pretrained checkpoint to start from."""

    pretrained: str | None = None
    """URL or path of an HF checkpoint; when set, the shape fields below are ignored."""
    vocab_size: int = 2048
    """Size of the byte-level BPE trained on the corpus (tiny models only)."""
    hidden_size: int = 128
    intermediate_size: int = 256
    """Width of dense MLPs (unused when every layer is sparse)."""
    moe_intermediate_size: int = 128
    """Width of each expert's MLP."""
    num_layers: int = 2
    num_attention_heads: int = 2
    num_kv_heads: int = 1
    head_dim: int = 64
    """64: vLLM's CPU attention rejects smaller heads."""
    num_experts: int = 4
    experts_per_token: int = 2
    """Top-k routing."""
    router_aux_loss_coef: float = 0.01
    """Weight of the load-balancing loss added to the LM loss."""
    max_position_embeddings: int = 4096

    def __post_init__(self) -> None:
        check_positive(
            "model",
            vocab_size=self.vocab_size,
            hidden_size=self.hidden_size,
            num_layers=self.num_layers,
            num_attention_heads=self.num_attention_heads,
            num_kv_heads=self.num_kv_heads,
            head_dim=self.head_dim,
            num_experts=self.num_experts,
            experts_per_token=self.experts_per_token,
            moe_intermediate_size=self.moe_intermediate_size,
        )
        if self.num_attention_heads % self.num_kv_heads:
            raise ConfigError(
                "model.num_kv_heads",
                f"{self.num_kv_heads} does not divide num_attention_heads {self.num_attention_heads}",
            )
        if self.experts_per_token > self.num_experts:
            raise ConfigError(
                "model.experts_per_token",
                f"{self.experts_per_token} exceeds num_experts {self.num_experts}",
            )
