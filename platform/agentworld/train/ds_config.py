"""The DeepSpeed configuration a recipe asks for. Pure: a dict, no DeepSpeed import."""

from __future__ import annotations

from typing import Any

from agentworld.train.config import ClusterConfig, TrainConfig


def deepspeed_config(
    train: TrainConfig,
    cluster: ClusterConfig,
    world_size: int,
    *,
    ep_preset: str | None = "qwen3_moe",
) -> dict[str, Any]:
    """ZeRO stage, precision, batch geometry, optimizer and expert parallelism.

    Expert parallelism is DeepSpeed AutoEP with the model family's preset
    (``ep_preset``: ``qwen3_moe``, ``qwen3_5_moe``; None for a dense model, which the
    job's checks refuse to split): it swaps each MoE block for an
    expert-parallel layer that keeps only this rank's slice of the experts and routes
    tokens with all-to-all inside groups of ``expert_parallel_size`` ranks. AutoEP also
    works under ZeRO-3, which DeepSpeed's older ``deepspeed.moe.layer.MoE`` does not.
    """
    ep = train.expert_parallel_size
    zero: dict[str, Any] = {"stage": train.zero_stage}
    if train.zero_stage == 3:
        zero["stage3_gather_16bit_weights_on_model_save"] = True
    return {
        "train_micro_batch_size_per_gpu": train.micro_batch_size,
        "gradient_accumulation_steps": train.grad_accum_steps,
        "train_batch_size": train.micro_batch_size * train.grad_accum_steps * world_size,
        "gradient_clipping": train.grad_clip,
        "zero_optimization": zero,
        "bf16": {"enabled": train.precision == "bf16"},
        "optimizer": {
            "type": "AdamW",
            "params": {
                "lr": train.learning_rate,
                "betas": [0.9, 0.95],
                "eps": 1e-8,
                "weight_decay": train.weight_decay,
                # The fused kernel needs CUDA; on CPU DeepSpeed runs torch's AdamW.
                "torch_adam": not cluster.use_gpu,
            },
        },
        "expert_parallel": {
            "enabled": ep > 1 and ep_preset is not None,
            "autoep_size": ep,
            "preset_model": ep_preset or "qwen3_moe",
            # torch._grouped_mm is a GPU kernel; CPU ranks loop over their experts.
            "use_grouped_mm": cluster.use_gpu,
        },
        "steps_per_print": 1 << 30,
        "wall_clock_breakdown": False,
    }
