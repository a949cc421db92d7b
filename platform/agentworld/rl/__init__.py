"""RL for simulation fidelity: GRPO-family training with vLLM rollout engines and a
DeepSpeed learner group on Ray, and hybrid rewards (rules + a rubric LLM judge).

Layout: ``config`` (RLConfig, imported by the recipes; the rollout engines are an
``agentworld.model.engine.EngineConfig``), ``run`` (the driver: ``run(RLJob) ->
manifest``), ``placement`` (all of the stage's Ray code: placement groups, actor
groups, weight sync), ``data`` (contexts from prepare's per-turn samples), ``rewards``
(named reward functions, the rubric judge among them), ``advantages`` / ``loss`` (the math),
``rollout`` (a vLLM engine), ``learner`` (a DeepSpeed rank), ``loop`` (one step),
``checkpoint``, ``metrics_log`` (metrics.jsonl and wandb). Nothing heavy is imported
here.
"""

from agentworld.rl.config import LearnerConfig, RewardSpec, RLConfig, RolloutConfig

__all__ = ["LearnerConfig", "RLConfig", "RewardSpec", "RolloutConfig"]
