"""Named run configurations. ``get_recipe(name)`` returns a fresh, validated Recipe;
variants copy one and change a few fields with ``dataclasses.replace``."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from agentworld.agent.config import VARIANTS, AgentConfig, LimitsConfig, SimConfig, TasksConfig
from agentworld.config import ConfigError, set_overrides
from agentworld.evaluate.config import EvaluateConfig, InferConfig, VLLMConfig
from agentworld.model.config import ModelConfig
from agentworld.model.engine import EngineConfig
from agentworld.recipes.config import Recipe
from agentworld.rl.config import LearnerConfig, RLConfig, RolloutConfig
from agentworld.scoring.config import SamplingConfig
from agentworld.train.config import ClusterConfig, TrainConfig


def debug_cpu() -> Recipe:
    """The tiny MoE (0.4M parameters, 4 experts, top-2) on 2 CPU workers, its experts
    split between them (expert parallel size 2): tests, the demo. Sequences of 1024
    tokens: the longest environment the collectors record (mcp-server-git's twelve
    tools, about 460 tokens once compacted) leaves room for a turn and its history; at
    512 prepare dropped every MCP sample. RL takes prompts as long as SFT trains on
    (at 768 it left out a third of the contexts, the MCP and SWE ones). SFT runs 100
    steps after CPT's 40: on the demo's data held-out SFT loss went 5.31, 4.03 (25),
    3.61 (50), 3.40 (75), 3.35 (100), 3.31 (150), and at 40 it was still falling fast."""

    engine = EngineConfig(max_model_len=1024 + 64, dtype="float32")
    rollout = RolloutConfig(max_prompt_tokens=1024, engine=engine)
    return Recipe(
        name="debug_cpu",
        train=TrainConfig(expert_parallel_size=2, seq_len=1024, sft_max_steps=100),
        evaluate=_cpu_evaluate(seq_len=1024),
        rl=RLConfig(rollout=rollout),
    )


def small_cpu() -> Recipe:
    """A 6M-parameter MoE (hidden 256, 4 layers, 8 experts) that a 2-core CPU trains to
    beat the parameter-free baselines on held-out turns: CPT 800 + SFT 1000 steps of 4
    packed rows, about 37 minutes (``bench_fidelity.py``: char F1 78.1 after SFT, above
    retrieval on MCP, SWE and terminal). At CPT 330 it scored 75.6 (every domain but
    search lower); CPT's held-out loss levels off near 0.92 from step 650.
    At CPT 330 + SFT 670, measured on a GPU, it scored 75.5 overall where the 23M
    ``medium_cpu`` shape reached 42.9 in the same CPU time (its steps cost 3x as much).

    RL rolls out up to 512 new tokens after prompts of up to 1024, so every context SFT
    trains on is one RL can score (the longest observation of that corpus is under 512
    tokens). At the default 48 new tokens and 768-token prompts RL left out 1104 of the
    2304 training contexts, every long search page and most tool results among them,
    and so trained only on short answers: after RL search fell 63.0 -> 57.4 (char F1)."""

    engine = EngineConfig(max_model_len=1024 + 512, dtype="float32")
    rollout = RolloutConfig(max_prompt_tokens=1024, max_new_tokens=512, engine=engine)
    return Recipe(
        name="small_cpu",
        model=ModelConfig(
            vocab_size=4096,
            hidden_size=256,
            intermediate_size=512,
            moe_intermediate_size=128,
            num_layers=4,
            num_attention_heads=4,
            num_kv_heads=2,
            head_dim=64,
            num_experts=8,
            experts_per_token=2,
        ),
        train=TrainConfig(
            seq_len=1024,
            micro_batch_size=2,
            max_steps=800,
            sft_max_steps=1000,
            learning_rate=1e-3,
            eval_every=50,
            checkpoint_every=50,
        ),
        evaluate=_cpu_evaluate(seq_len=1024),
        rl=RLConfig(rollout=rollout),
    )


def medium_cpu() -> Recipe:
    """A 27M-parameter MoE (hidden 512, 6 layers, 8 experts): throughput benchmarks
    (CPU and GPU) where engine overheads no longer dominate."""
    return Recipe(
        name="medium_cpu",
        model=ModelConfig(
            vocab_size=4096,
            hidden_size=512,
            intermediate_size=1024,
            moe_intermediate_size=256,
            num_layers=6,
            num_attention_heads=8,
            num_kv_heads=2,
            head_dim=64,
            num_experts=8,
            experts_per_token=2,
        ),
        train=TrainConfig(seq_len=1024, micro_batch_size=2, max_steps=100, learning_rate=5e-4),
        evaluate=_cpu_evaluate(seq_len=1024),
    )


def qwen35_a3b() -> Recipe:
    """The shape of a 35B-total / 3B-active MoE run on 8 nodes x 8 GPUs: ZeRO-3, bf16,
    experts split over 8 ranks. A CPT run sets ``model.pretrained`` to the base
    checkpoint's path or URL (``dataclasses.replace``); without it the model is built
    from this shape."""
    return Recipe(
        name="qwen35_a3b",
        model=ModelConfig(
            vocab_size=151936,
            hidden_size=2048,
            intermediate_size=6144,
            moe_intermediate_size=768,
            num_layers=56,
            num_attention_heads=32,
            num_kv_heads=4,
            head_dim=128,
            num_experts=128,
            experts_per_token=8,
            router_aux_loss_coef=0.001,
            max_position_embeddings=40960,
        ),
        cluster=ClusterConfig(num_workers=64, use_gpu=True, cpus_per_worker=8, gpus_per_worker=1),
        train=TrainConfig(
            zero_stage=3,
            precision="bf16",
            expert_parallel_size=8,
            seq_len=32768,
            micro_batch_size=1,
            grad_accum_steps=4,
            learning_rate=2e-5,
            min_lr_ratio=0.1,
            warmup_steps=200,
            max_steps=20000,
            weight_decay=0.1,
            eval_every=500,
            checkpoint_every=1000,
            keep_checkpoints=3,
            log_every=10,
            # 32k-token packed rows: variable-length attention, not a (T, T) mask.
            attn_implementation="flash_attention_2",
        ),
        evaluate=_gpu_evaluate(),
        rl=_gpu_rl(),
        agent=_gpu_agent(),
    )


def _cpu_evaluate(*, seq_len: int):
    """Evaluation that can write any observation SFT trains on (up to ``seq_len``
    tokens) after any prompt it trains on. At 512 new tokens every web observation of
    the demo (median 603 tokens) and the longest search results were cut short."""

    vllm = VLLMConfig(engine=EngineConfig(max_model_len=2 * seq_len))
    return EvaluateConfig(infer=InferConfig(sampling=SamplingConfig(max_tokens=seq_len), vllm=vllm))


def _gpu_evaluate():
    """Evaluation on GPUs: one bf16 vLLM engine per GPU, eight of them."""

    engine = EngineConfig(
        replicas=8,
        cpus_per_replica=8,
        gpus_per_replica=1,
        max_model_len=40960,
        gpu_memory_utilization=0.9,
        enforce_eager=False,
        dtype="bfloat16",
    )
    vllm = VLLMConfig(engine=engine, batch_size=64)
    return EvaluateConfig(infer=InferConfig(sampling=SamplingConfig(max_tokens=4096), vllm=vllm))


def _gpu_rl():
    """GRPO on the RL RayJob's 80 GPUs: 64 learner ranks (ZeRO-3, experts split over
    8), 4 rollout engines of 4-way tensor parallelism; 64 contexts x 8 predictions per
    step in 4 optimizer steps."""

    engine = EngineConfig(
        replicas=4,
        cpus_per_replica=8,
        gpus_per_replica=4,
        tensor_parallel_size=4,
        max_model_len=40960,
        gpu_memory_utilization=0.85,
        enforce_eager=False,
        dtype="bfloat16",
    )
    rollout = RolloutConfig(engine=engine, max_new_tokens=4096, max_prompt_tokens=32768)
    learner = LearnerConfig(
        num_learners=64,
        cpus_per_learner=8,
        gpus_per_learner=1,
        learning_rate=1e-6,
        mini_batches=4,
        expert_parallel_size=8,
    )
    return RLConfig(
        contexts_per_step=64,
        group_size=8,
        max_steps=1000,
        kl_coef=0.001,
        rollout=rollout,
        learner=learner,
        checkpoint_every=50,
        keep_checkpoints=3,
    )


def _gpu_agent():
    """The agent stage on the agent RayJob's 24 GPUs: 16 learner ranks (experts split
    over 8), 2 rollout engines of 4-way tensor parallelism; the simulator is the
    agentworld-sim RayService (the serve backend); 16 tasks x 8 siblings per step."""

    # The RL stage's engines and learner settings, on this job's smaller gang.
    gpu = _gpu_rl()
    engine = dataclasses.replace(gpu.rollout.engine, replicas=2)
    rollout = dataclasses.replace(gpu.rollout, engine=engine, max_new_tokens=2048)
    learner = dataclasses.replace(gpu.learner, num_learners=16, mini_batches=2)
    rl = RLConfig(
        contexts_per_step=16,
        group_size=8,
        max_steps=300,
        kl_coef=0.001,
        rollout=rollout,
        learner=learner,
        checkpoint_every=50,
        call_timeout_s=3600,
        wandb=False,
    )
    sim = SimConfig(
        backend="serve",
        serve_url="http://agentworld-sim-serve-svc:8000",
        max_new_tokens=2048,
        engine=EngineConfig(max_model_len=40960, dtype="bfloat16"),
    )
    return AgentConfig(
        tasks=TasksConfig(per_family=512, eval_fraction=0.1),
        limits=LimitsConfig(
            max_turns=30, max_tokens=32768, max_wall_s=1800, max_observation_tokens=4096
        ),
        sim=sim,
        rl=rl,
        variants=VARIANTS,
        demo_steps=200,
        demo_batch=64,
        demo_max_tokens=32768,
        concurrency=64,
        speed_steps=512,
    )


RECIPES: dict[str, Callable[[], Recipe]] = {
    "debug_cpu": debug_cpu,
    "small_cpu": small_cpu,
    "medium_cpu": medium_cpu,
    "qwen35_a3b": qwen35_a3b,
}


def get_recipe(name: str) -> Recipe:
    if name not in RECIPES:
        raise ConfigError("recipe", f"unknown recipe {name!r}; known: {', '.join(sorted(RECIPES))}")
    return RECIPES[name]()


def load(name: str, overrides: list[str] | tuple[str, ...] = ()) -> Recipe:
    """The recipe ``name`` with dotted ``KEY=VALUE`` overrides applied (a job's
    ``--recipe`` and ``--set``); every changed section, and the recipe, is validated
    again, so a bad value raises ConfigError naming its full key."""
    return set_overrides(get_recipe(name), list(overrides))


__all__ = [
    "RECIPES",
    "Recipe",
    "debug_cpu",
    "get_recipe",
    "load",
    "medium_cpu",
    "qwen35_a3b",
    "small_cpu",
]
