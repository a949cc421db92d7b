"""Typed configuration of a vLLM engine, shared by every stage that runs one: evaluate's
batch-inference actors, rl's rollout engines and the serve stage's Serve LLM deployment.
Each stage's config holds one as its ``engine`` field, with the stage's own defaults, and
passes ``vllm_kwargs()`` to vLLM; where the replicas run on Ray is the stage's
placement's business."""

from __future__ import annotations

import contextlib
import os
import sys
import typing
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

from agentworld.config import ConfigError, check_fraction, check_non_negative, check_positive
from agentworld.model.family import vllm_cpu_refusal

Dtype = Literal["auto", "float32", "float", "bfloat16", "float16", "half"]
"""vLLM's ``dtype`` choices: ``auto`` takes the checkpoint's."""


@dataclass(frozen=True, kw_only=True)
class EngineConfig:
    """vLLM engines: how many, what each takes from Ray, and vLLM's own arguments."""

    replicas: int = 1
    """Engines, each holding one copy of the model."""
    cpus_per_replica: float = 1.0
    """Ray CPUs per engine."""
    gpus_per_replica: float = 0.0
    """Ray GPUs per engine (0 on the vLLM CPU build)."""
    tensor_parallel_size: int = 1
    max_model_len: int = 2048
    """Prompt + generated tokens per request."""
    gpu_memory_utilization: float = 0.2
    """On the CPU build: the share of RAM for the KV cache."""
    enforce_eager: bool = True
    """True on CPU (no CUDA graphs)."""
    prefix_caching: bool = True
    """Keep the KV cache of computed prompt blocks and reuse it for a later request with
    the same prefix: a session's earlier turns, a GRPO group's shared prompt."""
    dtype: Dtype = "auto"
    language_model_only: bool = False
    """Load only the language model of a checkpoint that declares vision modules (the
    released Qwen3.5-MoE world models: ``...ForConditionalGeneration`` with language
    weights only); vLLM's ``--language-model-only``."""
    reasoning_parser: str | None = None
    """vLLM's reasoning parser (``qwen3`` for the Qwen3 and Qwen3.5 family): served chat
    completions carry the think block as ``reasoning_content``, apart from ``content``."""
    trust_remote_code: bool = False
    """Run a checkpoint's own modelling code (none of the Qwen3 family needs it)."""

    def __post_init__(self) -> None:
        check_positive(
            "engine",
            replicas=self.replicas,
            cpus_per_replica=self.cpus_per_replica,
            tensor_parallel_size=self.tensor_parallel_size,
            max_model_len=self.max_model_len,
        )
        check_non_negative("engine", gpus_per_replica=self.gpus_per_replica)
        check_fraction("engine.gpu_memory_utilization", self.gpu_memory_utilization, low_open=True)
        if self.dtype not in typing.get_args(Dtype):
            raise ConfigError(
                "engine.dtype", f"must be one of {typing.get_args(Dtype)}, got {self.dtype!r}"
            )

    def vllm_kwargs(self) -> dict[str, Any]:
        """The engine arguments of ``vllm.LLM`` (or Serve LLM's ``engine_kwargs``); the
        caller adds the model and what only it knows (seed, worker extension)."""
        kwargs: dict[str, Any] = {
            "dtype": self.dtype,
            "enforce_eager": self.enforce_eager,
            "enable_prefix_caching": self.prefix_caching,
            "gpu_memory_utilization": self.gpu_memory_utilization,
            "max_model_len": self.max_model_len,
            "tensor_parallel_size": self.tensor_parallel_size,
        }
        # Only what is set: vLLM's defaults otherwise, and an older vLLM keeps working.
        if self.language_model_only:
            kwargs["language_model_only"] = True
        if self.reasoning_parser:
            kwargs["reasoning_parser"] = self.reasoning_parser
        if self.trust_remote_code:
            kwargs["trust_remote_code"] = True
        return kwargs

    def on_cpu(self) -> bool:
        """Whether these engines run on the CPU build (no GPUs per replica)."""
        return self.gpus_per_replica == 0


CPU_SHUTDOWN_S = 1.0
"""How long a CPU-build engine's processes get to exit before they are killed. vLLM's
own grace is 5 s, and on this build the engine process outlived every such wait measured
(its worker had exited after 3 s): each close cost 5 s, twice in the agent stage."""


_IN_PROCESS: set[int] = set()
"""The ``id`` of every engine that ``start_llm`` started in this process and
``close_engine`` has not closed."""


_MULTIPROCESSING = "VLLM_ENABLE_V1_MULTIPROCESSING"


def runs_in_process(engine: EngineConfig) -> bool:
    """Whether ``start_llm`` would start ``engine`` in this process now."""
    import torch.distributed

    return (
        engine.on_cpu()
        and _MULTIPROCESSING not in os.environ
        and not _IN_PROCESS
        and not torch.distributed.is_initialized()
    )


def unscannable_modules() -> list[str]:
    """The loaded modules that vLLM's CPU worker fails on when it starts in process.
    Starting, the worker rebinds its kernels in every loaded module and reads each
    attribute's ``vars()`` as a dict; an object whose ``__dict__`` is something else
    fails the start, as does one whose ``__dict__`` raises. llvmlite's ``lib`` is the
    first kind (numba loads it, and bm25s loads numba): its ``__getattr__`` wraps every
    name, ``__dict__`` included. Flask's ``current_app`` is the second: read outside an
    application context, it raises RuntimeError."""
    found = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecated attributes warn when read
        for name, module in list(sys.modules.items()):
            for value in list((getattr(module, "__dict__", None) or {}).values()):
                try:
                    unscannable = hasattr(value, "__dict__") and not hasattr(vars(value), "get")
                except Exception:  # vLLM's scan would raise it too
                    unscannable = True
                if unscannable:
                    found.append(name)
                    break
    return found


@contextlib.contextmanager
def _in_process_start() -> Iterator[None]:
    """Around an in-process start: vLLM's switch; the modules its worker cannot scan
    (``unscannable_modules``) out of ``sys.modules`` for the start's few seconds, then
    back (another thread importing one of them by name meanwhile would load it again);
    and the calling thread's CPUs as they were (the worker binds it to its core)."""
    hidden = {name: sys.modules.pop(name) for name in unscannable_modules()}
    cpus = os.sched_getaffinity(0)
    os.environ[_MULTIPROCESSING] = "0"
    try:
        yield
    finally:
        del os.environ[_MULTIPROCESSING]
        sys.modules.update(hidden)
        os.sched_setaffinity(0, cpus)


def start_llm(path: str, engine: EngineConfig, **extra: Any) -> Any:
    """A ``vllm.LLM`` on the checkpoint at ``path`` (a local folder), with ``engine``'s
    arguments and ``extra`` (the seed, a worker extension).

    On the CPU build the engine runs in this process where it is the process's only one.
    vLLM's default starts an engine-core process and a worker process, each importing
    torch and vLLM afresh: 40 s to ready on an idle 2-core machine, against 5 s in
    process (docs/experiments.md). A second engine in the same process, or one beside
    torch.distributed already set up, keeps vLLM's processes: engines in one process
    share vLLM's process-wide parallel state, which the first to close tears down. A
    ``VLLM_ENABLE_V1_MULTIPROCESSING`` set by the user is left as it is."""
    import vllm.envs
    from vllm import LLM

    in_process = runs_in_process(engine)
    # vLLM caches its environment once an engine core is up in this process.
    vllm.envs.disable_envs_cache()
    with _in_process_start() if in_process else contextlib.nullcontext():
        llm = LLM(model=path, **engine.vllm_kwargs(), **extra)
    if in_process:
        _IN_PROCESS.add(id(llm))
    return llm


def close_engine(llm: Any, engine: EngineConfig) -> None:
    """Stop the engine of ``llm`` (a vLLM ``LLM`` that ``start_llm`` started with
    ``engine``): vLLM's processes on the CPU build after ``CPU_SHUTDOWN_S`` (no device
    memory to release), on GPUs after vLLM's own grace; an in-process engine at once."""
    llm.llm_engine.engine_core.shutdown(timeout=CPU_SHUTDOWN_S if engine.on_cpu() else None)
    _IN_PROCESS.discard(id(llm))


def check_engine_can_run(engine: EngineConfig, model_url: str, *, field: str = "model") -> None:
    """Before any work: ConfigError naming ``field`` (a job prints it as one line and
    exits 2) where these engines are the CPU build and the checkpoint's architecture is
    one it cannot run. Nothing falls back to a slower or different engine."""
    if engine.on_cpu():
        reason = vllm_cpu_refusal(model_url)
        if reason:
            raise ConfigError(field, reason)
