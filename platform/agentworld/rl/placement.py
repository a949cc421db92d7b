"""Ray placement for RL: one placement group holding a bundle per rollout engine and per
learner rank, the two actor groups, and the weight sync between them. Everything that
touches Ray in the RL stage lives here; the algorithm (``loop``, ``loss``, ``rewards``)
calls the groups' plain methods.

Weight sync: learner rank 0 puts the full weights (checkpoint layout, one safetensors
blob) into the Ray object store once; every rollout engine pulls them from there (on its
own node) and loads them into its running vLLM model; the sync succeeds only when every
engine reports the new weight version.

Every wait on the actors is bounded (``rl.call_timeout_s``, ``rl.weight_sync_timeout_s``)
and fails fast: a rank that raised leaves its peers blocked in a collective, so the first
error is raised at once instead of after the others time out.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from agentworld.rl.config import RLConfig
from agentworld.rl.learner import Learner, TrainBatch
from agentworld.rl.rollout import Completion, RolloutEngine, sibling_groups
from agentworld.train.config import TrainConfig


def build_placement_group(rl: RLConfig, *, timeout_s: float = 600.0) -> Any:
    """Bundles: engines first (index i), then learner ranks (index n_engines + r)."""
    import ray
    from ray.util.placement_group import placement_group

    en, le = rl.rollout.engine, rl.learner
    engine = {"CPU": en.cpus_per_replica} | (
        {"GPU": en.gpus_per_replica} if en.gpus_per_replica else {}
    )
    learner = {"CPU": le.cpus_per_learner} | (
        {"GPU": le.gpus_per_learner} if le.gpus_per_learner else {}
    )
    bundles = [dict(engine) for _ in range(en.replicas)] + [
        dict(learner) for _ in range(le.num_learners)
    ]
    pg = placement_group(bundles, strategy=rl.placement_strategy, name="agentworld-rl")
    try:
        gather([pg.ready()], "rl placement group", timeout_s=timeout_s)
    except TimeoutError:
        ray.util.remove_placement_group(pg)
        raise RuntimeError(
            f"rl placement group {bundles} ({rl.placement_strategy}) could not be "
            f"placed within {timeout_s:.0f}s; cluster resources: {ray.cluster_resources()}"
        ) from None
    return pg


def gather(refs: list[Any], what: str, *, timeout_s: float) -> list[Any]:
    """``ray.get(refs)``, but the first actor error raises at once and a call still
    unanswered after ``timeout_s`` raises ``TimeoutError`` naming ``what``. Waits in
    slices of a few seconds, so the driver's signal handlers (Ctrl-C, a test timeout)
    run meanwhile, which they cannot inside one long ``ray.get``."""
    import ray

    deadline = time.monotonic() + timeout_s
    pending = list(refs)
    while pending:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(
                f"{what}: {len(pending)} of {len(refs)} actor calls unanswered after "
                f"{timeout_s:.0f}s (rl.call_timeout_s / rl.weight_sync_timeout_s)"
            )
        done, pending = ray.wait(pending, num_returns=1, timeout=min(left, 5.0))
        ray.get(done)  # an actor's error surfaces here, before its peers time out
    return ray.get(refs)


def _in_bundle(pg: Any, index: int) -> Any:
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    return PlacementGroupSchedulingStrategy(
        placement_group=pg,
        placement_group_bundle_index=index,
        placement_group_capture_child_tasks=True,
    )


def _actor_env() -> dict[str, str]:
    """Variables the actors need from the driver (threads, vLLM's CPU KV cache size)."""
    keys = ("VLLM_CPU_KVCACHE_SPACE", "OMP_NUM_THREADS", "WANDB_MODE", "TOKENIZERS_PARALLELISM")
    return {k: os.environ[k] for k in keys if k in os.environ}


def _check_versions(versions: list[int], version: int) -> list[int]:
    """``versions`` (one per engine) when each is ``version``; else a sync failed."""
    if any(v != version for v in versions):
        raise RuntimeError(f"weight sync to version {version} failed: engines report {versions}")
    return versions


class EngineCalls:
    """The rollout engines' weight-transfer calls, each wait bounded: sent to learner
    rank 0, whose ``NcclSender`` drives them while it broadcasts."""

    def __init__(self, engines: list[Any], timeout_s: float) -> None:
        self.engines, self.timeout_s = engines, timeout_s

    def __len__(self) -> int:
        return len(self.engines)

    def _wait(self, refs: list[Any], what: str) -> Callable[[], list[Any]]:
        return lambda: gather(refs, what, timeout_s=self.timeout_s)

    def init_transfer(self, payloads: list[dict[str, Any]]) -> Callable[[], list[Any]]:
        """Start every engine joining the group; the returned call waits for them."""
        pairs = zip(self.engines, payloads, strict=True)
        return self._wait(
            [e.init_weight_transfer.remote(p) for e, p in pairs], "weight transfer rendezvous"
        )

    def start(self) -> None:
        self._wait([e.start_weight_update.remote() for e in self.engines], "weight update start")()

    def receive(self, info: dict[str, list]) -> Callable[[], list[Any]]:
        """Every engine starts receiving; the returned call waits until all have."""
        return self._wait(
            [e.update_weights.remote(info) for e in self.engines], "weight update receive"
        )

    def finish(self, version: int) -> list[int]:
        refs = [e.finish_weight_update.remote(version) for e in self.engines]
        return self._wait(refs, f"weight update to version {version}")()


class RolloutGroup:
    """N vLLM engines; prompts are spread over them round-robin, siblings together."""

    def __init__(self, pg: Any, rl: RLConfig, model_dir: str) -> None:
        import ray

        ro = rl.rollout
        self.timeout_s = rl.call_timeout_s
        cls = ray.remote(RolloutEngine)
        self.engines = [
            cls.options(
                num_cpus=ro.engine.cpus_per_replica,
                num_gpus=ro.engine.gpus_per_replica,
                runtime_env={"env_vars": _actor_env()},
                scheduling_strategy=_in_bundle(pg, i),
            ).remote(model_dir, ro, seed=rl.seed + i)
            for i in range(ro.engine.replicas)
        ]

    def generate(
        self, prompts: list[list[int]], *, n: int, temperature: float | None = None
    ) -> list[list[Completion]]:
        # Identical prompts (siblings) stay on one engine, which sends them as one request.
        k = len(self.engines)
        groups = sibling_groups(prompts)
        parts = [[i for g in groups[e::k] for i in g] for e in range(k)]
        refs = [
            engine.generate.remote([prompts[i] for i in part], n=n, temperature=temperature)
            for engine, part in zip(self.engines, parts, strict=True)
            if part
        ]
        out: list[list[Completion]] = [[] for _ in prompts]
        answers = gather(refs, "rollout generate", timeout_s=self.timeout_s)
        for part, res in zip([p for p in parts if p], answers, strict=True):
            for i, completions in zip(part, res, strict=True):
                out[i] = completions
        return out

    def load_weights(self, weights_ref: Any, version: int, *, timeout_s: float) -> list[int]:
        """Push the weights to every engine; raise unless each reports ``version``."""
        refs = [e.load_weights.remote(weights_ref, version) for e in self.engines]
        versions = gather(refs, f"weight sync to version {version}", timeout_s=timeout_s)
        return _check_versions(versions, version)

    def versions(self) -> list[int]:
        """The weight version each engine reports (the first call also waits for start-up)."""
        refs = [e.weight_version.remote() for e in self.engines]
        return gather(refs, "rollout weight_version", timeout_s=self.timeout_s)

    def prompt_logprobs(self, token_ids: list[int]) -> list[list[float]]:
        refs = [e.prompt_logprobs.remote(token_ids) for e in self.engines]
        return gather(refs, "rollout prompt_logprobs", timeout_s=self.timeout_s)

    def close(self) -> None:
        import ray

        try:
            gather([e.close.remote() for e in self.engines], "rollout close", timeout_s=60.0)
        except Exception:  # noqa: BLE001 - a dead or stuck engine is killed below anyway
            pass
        for e in self.engines:
            ray.kill(e)


class LearnerGroup:
    """M DeepSpeed ranks rendezvousing over torch.distributed (gloo on CPU)."""

    def __init__(self, pg: Any, rl: RLConfig, train: TrainConfig, model_dir: str) -> None:
        import ray

        le, first = rl.learner, rl.rollout.engine.replicas
        self.timeout_s = rl.call_timeout_s
        cls = ray.remote(Learner)
        addr, port = _rendezvous_address(pg, first, timeout_s=self.timeout_s)
        self.ranks = [
            cls.options(
                num_cpus=le.cpus_per_learner,
                num_gpus=le.gpus_per_learner,
                runtime_env={"env_vars": _actor_env()},
                scheduling_strategy=_in_bundle(pg, first + r),
            ).remote(
                model_dir,
                rl,
                train,
                rank=r,
                world_size=le.num_learners,
                master_addr=addr,
                master_port=port,
            )
            for r in range(le.num_learners)
        ]

    def _all(self, method: str, *args: Any, **kwargs: Any) -> list[Any]:
        refs = [getattr(r, method).remote(*args, **kwargs) for r in self.ranks]
        return gather(refs, f"learner {method}", timeout_s=self.timeout_s)

    def ready(self) -> list[int]:
        return self._all("ready")

    def train_step(
        self, batch: TrainBatch, *, learning_rate: float | None = None
    ) -> dict[str, float]:
        """Every rank takes rows rank::M of each mini-batch; stats are rank means.
        ``learning_rate``: the rate of this step and later ones (``Learner.train_step``)."""
        m = len(self.ranks)
        shards = [batch.rows(_rank_rows(len(batch), r, m)) for r in range(m)]
        refs = [
            r.train_step.remote(s, learning_rate=learning_rate)
            for r, s in zip(self.ranks, shards, strict=True)
        ]
        return gather(refs, "learner train_step", timeout_s=self.timeout_s)[0]

    def weights_ref(self) -> Any:
        """An object ref to rank 0's full weights; every rank is called, as all join a
        ZeRO-3 gather (the others return nothing)."""
        return [r.weights.remote() for r in self.ranks][0]

    def logprobs(self, token_ids: list[int]) -> list[float]:
        return self._all("logprobs", token_ids)[0]

    def connect_engines(self, engines: EngineCalls, workers: int, addr: str, port: int) -> None:
        self._all("connect_engines", engines, workers, addr, port)

    def push_weights(self, version: int) -> list[int]:
        """The weights over NCCL (``Learner.push_weights``); the engines' versions."""
        return self._all("push_weights", version)[0]

    def freeze_reference(self) -> None:
        """The KL term's reference becomes the current weights (``Learner``)."""
        self._all("freeze_reference")

    def save(self, url: str, tag: str) -> None:
        self._all("save", url, tag)

    def load(self, url: str, tag: str) -> None:
        self._all("load", url, tag)

    def export_hf(self, url: str, tokenizer_dir: str) -> str:
        return self._all("export_hf", url, tokenizer_dir)[0]

    def close(self) -> None:
        import ray

        for r in self.ranks:
            ray.kill(r)


def _rank_rows(n: int, rank: int, world: int) -> np.ndarray:
    """Rows of ``rank``: the learner splits its rows into mini-batches in order, so rank
    r takes rows r, r + M, ... of each global mini-batch-sized chunk (same count each)."""
    return np.arange(rank, n, world)


def _free_port_on_node() -> tuple[str, int]:
    import ray

    with socket.socket() as s:
        s.bind(("", 0))
        port = s.getsockname()[1]
    return ray.util.get_node_ip_address(), port


def _rendezvous_address(pg: Any, bundle: int, *, timeout_s: float) -> tuple[str, int]:
    """Address and a free port on the node of learner rank 0's bundle."""
    import ray

    task = ray.remote(num_cpus=0)(_free_port_on_node)
    ref = task.options(scheduling_strategy=_in_bundle(pg, bundle)).remote()
    return gather([ref], "learner rendezvous address", timeout_s=timeout_s)[0]


class RLWorkers:
    """The placement group, the engines and the learner group of one run, and the weight
    sync between them. Build once, use for many steps (and, in tests, several runs)."""

    def __init__(
        self, rl: RLConfig, train: TrainConfig, model_dir: str, *, engines_later: bool = False
    ) -> None:
        """``rl``: the groups and their timeouts; ``train``: the learner's model settings
        (RL's learning rate and expert parallelism replace its own). ``engines_later``:
        return once the learner ranks are up and wait for the engines at the first weight
        sync (``wait_for_engines``), so learner work runs while vLLM starts; with NCCL
        weight sync the engines are waited for here, as the group forms here."""
        self.rl = rl
        self._engines_up = False
        self.pg = build_placement_group(rl)
        try:
            self.rollout = RolloutGroup(self.pg, rl, model_dir)
            self.learners = LearnerGroup(self.pg, rl, train, model_dir)
            # Engines and learner ranks start side by side.
            self.learners.ready()
            nccl = rl.rollout.weight_sync == "nccl"
            if nccl or not engines_later:
                self.wait_for_engines()
            if nccl:
                engines = EngineCalls(self.rollout.engines, rl.weight_sync_timeout_s)
                # learner rank 0 hosts the group's rendezvous on its own node
                addr, port = _rendezvous_address(
                    self.pg, rl.rollout.engine.replicas, timeout_s=rl.call_timeout_s
                )
                tp = rl.rollout.engine.tensor_parallel_size
                self.learners.connect_engines(engines, tp, addr, port)
        except BaseException:
            self.close()
            raise

    def wait_for_engines(self) -> None:
        """Return once every rollout engine has started; an engine's start-up error
        raises here."""
        if not self._engines_up:
            self.rollout.versions()
            self._engines_up = True

    def sync_weights(self, version: int) -> float:
        """Push the learner's weights to every engine; seconds taken (``last_sync``: the
        learner's gather apart from the transfer and the engines' load), after the
        engines have started."""
        import ray

        self.wait_for_engines()
        t0 = time.perf_counter()
        if self.rl.rollout.weight_sync == "nccl":
            _check_versions(self.learners.push_weights(version), version)
            self.last_sync = {"nccl_s": time.perf_counter() - t0}
            return self.last_sync["nccl_s"]
        ref = self.learners.weights_ref()
        ray.wait([ref], timeout=self.rl.weight_sync_timeout_s)
        t1 = time.perf_counter()
        self.rollout.load_weights(ref, version, timeout_s=self.rl.weight_sync_timeout_s)
        t2 = time.perf_counter()
        self.last_sync = {"gather_s": t1 - t0, "push_s": t2 - t1}
        return t2 - t0

    def close(self) -> None:
        import ray

        for group in ("rollout", "learners"):
            if hasattr(self, group):
                getattr(self, group).close()
        ray.util.remove_placement_group(self.pg)
