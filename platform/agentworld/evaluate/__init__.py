"""AgentWorldBench-compatible evaluation: ``infer`` (local vLLM on Ray Data or any
OpenAI-compatible endpoint), ``judge`` (rubric judge on any OpenAI-compatible endpoint),
``score`` (judge scores and judge-free rule metrics per domain), reports and the
sim-vs-real fidelity report.

Shared with RL rewards: ``agentworld.evaluate.metrics`` (rule metrics, plain functions)
and ``agentworld.evaluate.judge`` (judge prompt, verdict parsing, judge client). This
module imports nothing heavy, so that ``agentworld.recipes`` can import its config.
"""

from agentworld.evaluate.config import (
    EndpointConfig,
    EvaluateConfig,
    InferConfig,
    JudgeConfig,
    SamplingConfig,
    VLLMConfig,
)

__all__ = [
    "EndpointConfig",
    "EvaluateConfig",
    "InferConfig",
    "JudgeConfig",
    "SamplingConfig",
    "VLLMConfig",
]
