"""Typed configuration of the agent stage: tasks, episode limits, the simulator, the
agent's training (demonstrations, then multi-turn GRPO on ``agentworld.rl``'s workers)
and what the report compares. Free of heavy imports: ``agentworld.recipes`` imports it.
Invalid values raise ConfigError naming the field, before any work starts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from agentworld.config import ConfigError, check_positive, check_prompt_style
from agentworld.model.engine import EngineConfig
from agentworld.rl.config import LearnerConfig, RLConfig, RolloutConfig

TaskFamily = Literal["search", "table", "terminal", "mcp", "web"]
FAMILIES: tuple[str, ...] = ("search", "table", "terminal", "mcp", "web")
Variant = Literal["untrained", "sim", "sim_uncontrolled", "real", "cold_sim"]
VARIANTS: tuple[str, ...] = ("untrained", "sim", "sim_uncontrolled", "real", "cold_sim")
PERTURBATIONS: tuple[str, ...] = ("tool_errors", "paginate", "hide_fields")


@dataclass(frozen=True, kw_only=True)
class TasksConfig:
    """The task set: generated per family (with a held-out split) or read from a file."""

    families: tuple[TaskFamily, ...] = ("search", "table", "terminal", "mcp")
    per_family: int = 6
    """Tasks generated per family (train and held-out together)."""
    eval_fraction: float = 0.25
    """Share of each family held out (at least one task per family), by a stable hash
    of the task id: the same task is held out whatever the set's size."""
    seed: int = 0
    task_file: str | None = None
    """A JSONL task file (``agentworld.agent.tasks``); replaces generation when set."""

    def __post_init__(self) -> None:
        if not self.families:
            raise ConfigError("agent.tasks.families", "must name at least one family")
        for f in self.families:
            if f not in FAMILIES:
                raise ConfigError(
                    "agent.tasks.families", f"unknown family {f!r}; known: {FAMILIES}"
                )
        if len(set(self.families)) != len(self.families):
            raise ConfigError("agent.tasks.families", f"repeated family in {list(self.families)}")
        if self.per_family < 2:
            raise ConfigError(
                "agent.tasks.per_family", f"must be >= 2 (train + held out), got {self.per_family}"
            )
        if not 0 < self.eval_fraction < 1:
            raise ConfigError(
                "agent.tasks.eval_fraction", f"must be in (0, 1), got {self.eval_fraction}"
            )


@dataclass(frozen=True, kw_only=True)
class LimitsConfig:
    """Per-episode limits; an episode that reaches one ends with it as its reason."""

    max_turns: int = 4
    """Agent actions per episode (the final answer included)."""
    max_tokens: int = 3584
    """Tokens of the agent's whole context (prompt, actions, observations)."""
    max_wall_s: float = 120.0
    """Wall-clock seconds per episode."""
    max_observation_tokens: int = 128
    """An observation is cut to this many tokens before the agent sees it."""

    def __post_init__(self) -> None:
        check_positive(
            "agent.limits",
            max_turns=self.max_turns,
            max_tokens=self.max_tokens,
            max_wall_s=self.max_wall_s,
            max_observation_tokens=self.max_observation_tokens,
        )


@dataclass(frozen=True, kw_only=True)
class SimConfig:
    """The world model as the environment."""

    backend: Literal["engine", "serve"] = "engine"
    """``engine``: an in-process vLLM engine on ``--world-model``; ``serve``: the
    simulator API at ``serve_url`` (stateless ``/v1/simulate`` with the history)."""
    serve_url: str | None = None
    api_key_env: str = "AGENTWORLD_API_KEY"
    temperature: float = 0.7
    """Sampling temperature of simulated observations (siblings differ only where their
    action prefixes do, see ``consistent``)."""
    max_new_tokens: int = 96
    engine: EngineConfig = field(
        default_factory=lambda: EngineConfig(max_model_len=4096, dtype="float32")
    )
    """The in-process vLLM engine of the ``engine`` backend (replicas are not used)."""
    consistent: bool = True
    """Group-consistent worlds: an observation is cached by (task, seed, action prefix),
    so siblings that took the same actions see the same world."""
    perturb: bool = True
    """Apply each task's perturbations (tool errors, pagination, hidden fields)."""
    batch_wait_s: float = 0.005
    """How long the engine's batcher waits for more concurrent requests."""
    start_early: bool = True
    """``engine`` backend: start the engine in a background thread as the run begins, so
    that its start-up (about 30 s of a 2-core machine) overlaps the agents' workers
    starting and the demonstration fit; False starts it on first use (a run short of
    memory then holds it only while a simulated step needs it)."""
    prompt_style: Literal["native", "awb"] = "native"
    """How the ``engine`` backend renders a session: ``native`` (this project's models) or
    ``awb`` (the reference's format, for its released model; see
    ``agentworld.sim.config.ServeConfig.prompt_style``). The ``serve`` backend uses the
    served application's own style."""
    prompts_dir: str | None = None
    """The reference's ``prompts/`` folder (``<domain>/system_prompt.txt``); ``awb`` only."""

    def __post_init__(self) -> None:
        check_positive(
            "agent.sim",
            max_new_tokens=self.max_new_tokens,
        )
        if self.backend == "serve" and not self.serve_url:
            raise ConfigError("agent.sim.serve_url", "the serve backend needs the simulator's URL")
        check_prompt_style("agent.sim", self.prompt_style, self.prompts_dir)
        if self.backend == "serve" and self.prompt_style != "native":
            raise ConfigError(
                "agent.sim.prompt_style", "the serve backend renders with the served app's style"
            )
        if self.temperature < 0:
            raise ConfigError("agent.sim.temperature", f"must be >= 0, got {self.temperature}")
        if self.batch_wait_s < 0:
            raise ConfigError("agent.sim.batch_wait_s", f"must be >= 0, got {self.batch_wait_s}")


def _agent_rl() -> RLConfig:
    """GRPO settings for the tiny CPU agent: tasks_per_step = contexts_per_step."""
    return RLConfig(
        contexts_per_step=2,
        group_size=4,
        max_steps=3,
        # mcp-server-git's tool list alone is 1-3k tokens for a tiny corpus-trained BPE.
        rollout=RolloutConfig(
            max_new_tokens=48,
            max_prompt_tokens=4000,
            engine=EngineConfig(max_model_len=4096, dtype="float32"),
        ),
        learner=LearnerConfig(learning_rate=1e-3),
        # The KL term to the agent after its demonstrations, not to the world model: without
        # it 40 RL steps in the real sandbox turned the turns after the answer into noise
        # and lost 16 points of held-out success; with it they gained 7 (no signal).
        kl_coef=0.1,
        kl_reference="frozen",
        checkpoint_every=100,
        call_timeout_s=900,
        wandb=False,
    )


@dataclass(frozen=True, kw_only=True)
class AgentConfig:
    """An agent trained in the simulator or the real environments, and the report."""

    tasks: TasksConfig = field(default_factory=TasksConfig)
    limits: LimitsConfig = field(default_factory=LimitsConfig)
    sim: SimConfig = field(default_factory=SimConfig)
    rl: RLConfig = field(default_factory=_agent_rl)
    """The GRPO loop and its workers (``agentworld.rl``): ``contexts_per_step`` tasks
    per step, ``group_size`` siblings each (same task, same seed); the RL steps run at
    ``rl.learner.learning_rate``, the demonstration fit at ``demo_learning_rate``."""
    variants: tuple[Variant, ...] = ("untrained", "sim", "real")
    """Agents to train and compare: ``untrained`` (demonstrations only), ``sim``
    (controlled simulation), ``sim_uncontrolled``, ``real``, ``cold_sim`` (as ``sim``
    from a checkpoint of the same architecture without world-model training)."""
    demo_steps: int = 30
    """Supervised steps on demonstration actions before RL (through the RL learner): on
    the tiny model 4 steps took the actions' NLL from 6.6 to 5.5, 60 steps to 0.55."""
    demo_batch: int = 8
    demo_learning_rate: float | None = None
    """The demonstration fit's learning rate (None: ``rl.learner.learning_rate``, the RL
    steps' rate). The learner's one optimizer switches between the two, keeping its
    Adam moments: a fit needs a high rate (at 3e-4 300 steps left the tiny agent at
    0 of 43 held-out terminal tasks, at 1e-3 60 steps reached 40%), RL a lower one."""
    demo_max_tokens: int = 2048
    """Demonstrations are cut to this many tokens."""
    nll_tasks: int = 32
    """Held-out tasks whose oracle actions' NLL the report gives per agent (the
    warm-start measure that shows a difference where success is low)."""
    eval_temperature: float = 0.0
    """Sampling temperature of the agent at evaluation (0: greedy)."""
    concurrency: int = 4
    """Episodes stepped at once (thread pool); also the concurrency of the steps/s figure."""
    speed_steps: int = 16
    """Environment steps measured per mode for the steps/s figure."""
    probes: bool = True
    """Run the injection probes against the simulator at every evaluation."""
    mcp_available: bool = True
    """False drops the mcp family where its servers cannot run."""

    @property
    def fit_learning_rate(self) -> float:
        """The demonstration fit's learning rate, ``rl.learner.learning_rate`` unless set."""
        return self.demo_learning_rate or self.rl.learner.learning_rate

    def __post_init__(self) -> None:
        if not self.variants:
            raise ConfigError("agent.variants", "must name at least one agent")
        for v in self.variants:
            if v not in VARIANTS:
                raise ConfigError("agent.variants", f"unknown variant {v!r}; known: {VARIANTS}")
        if len(set(self.variants)) != len(self.variants):
            raise ConfigError("agent.variants", f"repeated variant in {list(self.variants)}")
        check_positive(
            "agent",
            demo_batch=self.demo_batch,
            demo_learning_rate=self.demo_learning_rate,
            demo_max_tokens=self.demo_max_tokens,
            nll_tasks=self.nll_tasks,
            concurrency=self.concurrency,
            speed_steps=self.speed_steps,
        )
        if self.demo_steps < 0:
            raise ConfigError("agent.demo_steps", f"must be >= 0, got {self.demo_steps}")
        if self.eval_temperature < 0:
            raise ConfigError(
                "agent.eval_temperature", f"must be >= 0, got {self.eval_temperature}"
            )
        le = self.rl.learner
        if (
            self.demo_batch % le.num_learners
            or self.demo_batch // le.num_learners < le.mini_batches
        ):
            raise ConfigError(
                "agent.demo_batch",
                f"{self.demo_batch} must split over rl.learner.num_learners {le.num_learners}, "
                f"each rank getting at least rl.learner.mini_batches {le.mini_batches} rows",
            )
        ro = self.rl.rollout
        if self.limits.max_tokens + ro.max_new_tokens > ro.engine.max_model_len:
            raise ConfigError(
                "agent.limits.max_tokens",
                f"{self.limits.max_tokens} + rl.rollout.max_new_tokens {ro.max_new_tokens} "
                f"exceeds the rollout engines' max_model_len {ro.engine.max_model_len}",
            )
