"""Agents trained inside the world model, and agents warm-started from it.

Layout: ``config`` (AgentConfig, imported by the recipes), ``tasks`` (the task record
and its JSONL format), ``tasksets`` (generated families with held-out splits),
``checkers`` and ``table_metrics`` (scores, WideSearch item/row F1), ``world`` (the
world model as an engine: in-process vLLM, the Serve API, group-consistent cache),
``envs`` (real and simulated environments, one Gymnasium-shaped interface, limits),
``policy`` (the agent's prompt and token transcript), ``episodes`` (lockstep
rollouts, replays), ``demos`` (demonstration fitting), ``grpo`` (multi-turn GRPO on
``agentworld.rl``'s workers), ``probes`` (injection probes), ``measures`` (summaries,
WM2Real, steps/s), ``intervals`` (bootstrap intervals on the held-out tasks and the
paired comparisons), ``report``, ``placement`` (Ray), ``run`` (the driver).
Nothing heavy is imported here.
"""

from agentworld.agent.config import AgentConfig, LimitsConfig, SimConfig, TasksConfig

__all__ = ["AgentConfig", "LimitsConfig", "SimConfig", "TasksConfig"]
