"""AgentWorldBench-compatible evaluation: ``infer`` (local vLLM on Ray Data or any
OpenAI-compatible endpoint), ``judge`` (rubric judge on any OpenAI-compatible endpoint),
``score`` (judge scores and judge-free rule metrics per domain), reports and the
sim-vs-real fidelity report. The driver is ``run``; its Ray code is in ``placement``.

The metrics, the judge client, the rubrics and the endpoint and judge config are
``agentworld.scoring``'s, shared with RL rewards. This module imports nothing heavy, so
that ``agentworld.recipes`` can import its config.
"""

from agentworld.evaluate.config import EvaluateConfig, InferConfig, VLLMConfig

__all__ = ["EvaluateConfig", "InferConfig", "VLLMConfig"]
