"""Scoring shared by rl (rewards) and evaluate (reports): judge-free rule metrics
(``metrics``, plain functions), the rubric judge (``rubrics``: instructions per domain;
``judge_client``: prompt, verdict parsing and an async/sync client), the
OpenAI-compatible chat client both the judge and evaluate's endpoint backend use
(``chat_client``) and their typed config (``config``). It sits below both stages: it
imports neither. This module imports nothing heavy, so that ``agentworld.recipes`` can
import its config.
"""

from agentworld.scoring.config import EndpointConfig, JudgeConfig, SamplingConfig

__all__ = ["EndpointConfig", "JudgeConfig", "SamplingConfig"]
