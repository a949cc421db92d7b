"""The learner: one data-parallel rank of a DeepSpeed engine that takes GRPO steps.

Each rank gets its shard of the rollout batch (``TrainBatch``), splits it into the
recipe's mini-batches (one optimizer step each, the same count on every rank) and
divides its loss by global token counts, so that DeepSpeed's gradient averaging gives
the token-mean over the whole batch. Used as a Ray actor by ``agentworld.rl.placement``;
this module itself knows nothing of Ray.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import shutil
import tempfile
from dataclasses import dataclass
from typing import Any

import numpy as np

from agentworld.io.storage import copy_local_dir_to, download_dir
from agentworld.model import load_model, load_tokenizer
from agentworld.model.family import family_of
from agentworld.rl.config import RLConfig
from agentworld.train.config import ClusterConfig, TrainConfig
from agentworld.train.ds_config import deepspeed_config
from agentworld.train.export import export_hf, full_state_dict


@dataclass(frozen=True, kw_only=True)
class TrainBatch:
    """Prompt + completion sequences, right-padded."""

    input_ids: np.ndarray
    """(B, L) int64."""
    attention_mask: np.ndarray
    """(B, L) int8: 1 on prompt and completion tokens, 0 on pad."""
    loss_mask: np.ndarray
    """(B, L - 1) float32: 1 where position t predicts a completion token t + 1 of a
    prediction that counts (0 for predictions left out)."""
    advantages: np.ndarray
    """(B,) float32."""

    def rows(self, idx: Any) -> TrainBatch:
        return TrainBatch(
            input_ids=self.input_ids[idx],
            attention_mask=self.attention_mask[idx],
            loss_mask=self.loss_mask[idx],
            advantages=self.advantages[idx],
        )

    def __len__(self) -> int:
        return len(self.advantages)


def learner_deepspeed_config(
    rl: RLConfig, train: TrainConfig, *, ep_preset: str | None = "qwen3_moe"
) -> dict[str, Any]:
    """The training stage's DeepSpeed config (ZeRO stage, precision, clipping, AdamW
    from the recipe's ``train``) with RL's learning rate and expert parallelism, and a
    nominal batch geometry: the learner calls backward/step itself, once per mini-batch."""

    le = rl.learner
    gpus = int(le.gpus_per_learner) if le.gpus_per_learner >= 1 else 0
    cluster = ClusterConfig(num_workers=le.num_learners, use_gpu=gpus > 0, gpus_per_worker=gpus)
    geometry = dataclasses.replace(
        train,
        learning_rate=le.learning_rate,
        micro_batch_size=1,
        grad_accum_steps=1,
        expert_parallel_size=le.expert_parallel_size,
    )
    return deepspeed_config(geometry, cluster, le.num_learners, ep_preset=ep_preset)


class CheckpointLayout:
    """Converts transformers' in-memory tensors (e.g. fused experts) to checkpoint names
    and layout, which vLLM's loader reads, packed as one safetensors blob: one buffer to
    send, which the engine writes out as it is. (A dict of tensors went through Ray's
    pickling tensor by tensor, each per-expert slice carrying its whole fused tensor:
    6x the weights' bytes at small_cpu.)"""

    def __init__(self, config: Any) -> None:
        import torch
        from transformers import AutoModelForCausalLM

        with torch.device("meta"):
            self.model = AutoModelForCausalLM.from_config(config)

    def __call__(self, state: dict[str, Any]) -> bytes:
        from safetensors.torch import save

        return save(self.tensors({k: v.cpu() for k, v in state.items()}))

    def tensors(self, state: dict[str, Any]) -> dict[str, Any]:
        """The checkpoint's names and layout, contiguous, where ``state`` lies."""
        from transformers.core_model_loading import revert_weight_conversion

        tensors = revert_weight_conversion(self.model, dict(state))
        return {k: v.contiguous() for k, v in tensors.items()}


class Learner:
    def __init__(
        self,
        model_dir: str,
        rl: RLConfig,
        train: TrainConfig,
        *,
        rank: int = 0,
        world_size: int = 1,
        master_addr: str = "127.0.0.1",
        master_port: int = 29500,
    ) -> None:
        import torch

        self.rl, self.train_cfg, self.rank, self.world_size = rl, train, rank, world_size
        _init_distributed(rank, world_size, master_addr, master_port)
        torch.manual_seed(train.seed)
        dtype = torch.bfloat16 if train.precision == "bf16" else torch.float32
        model = load_model(model_dir, dtype=dtype)
        self._model_dir, self._dtype = model_dir, dtype
        self.ref = _frozen_copy(model) if rl.kl_coef > 0 and rl.kl_reference == "start" else None
        self.engine = _build_engine(model, rl, train)
        self.device = self.engine.device
        self._layout: CheckpointLayout | None = None
        self._sender: Any = None

    def ready(self) -> int:
        return self.rank

    # ---- forward ---------------------------------------------------------------------

    def _forward(self, b: TrainBatch, model: Any) -> tuple[Any, Any, Any]:
        """Log-probabilities of every next token (B, L-1), logits (B, L-1, V), aux loss."""
        import torch

        # not at the top: it brings torch into this light module
        from agentworld.rl.loss import token_logprobs

        ids = torch.as_tensor(b.input_ids, device=self.device)
        attn = torch.as_tensor(b.attention_mask, device=self.device).long()
        out = model(input_ids=ids, attention_mask=attn)
        logits = out.logits[:, :-1]
        return token_logprobs(logits, ids[:, 1:]), logits, getattr(out, "aux_loss", None)

    def logprobs(self, token_ids: list[int]) -> list[float]:
        """log p(token t | tokens < t) for t >= 1 under the current weights."""
        import torch

        b = TrainBatch(
            input_ids=np.asarray([token_ids], dtype=np.int64),
            attention_mask=np.ones((1, len(token_ids)), dtype=np.int8),
            loss_mask=np.zeros((1, len(token_ids) - 1), dtype=np.float32),
            advantages=np.zeros(1, dtype=np.float32),
        )
        self.engine.eval()
        with torch.no_grad():
            logp, _, _ = self._forward(b, self.engine.module)
        return logp[0].tolist()

    # ---- one RL step -----------------------------------------------------------------

    def train_step(
        self, shard: TrainBatch, *, learning_rate: float | None = None
    ) -> dict[str, float]:
        """Epochs x mini-batches of clipped policy-gradient updates on this rank's shard,
        at ``learning_rate`` when given (else the rate the optimizer holds: at first
        ``rl.learner.learning_rate``); ``lr`` in the result is the rate the updates used."""
        import torch

        if learning_rate is not None:
            self._set_learning_rate(learning_rate)
        minis = np.array_split(np.arange(len(shard)), self.rl.learner.mini_batches)
        old = self._old_logprobs(shard, minis)
        sums: dict[str, float] = {}
        for _ in range(self.rl.learner.epochs):
            for m, idx in enumerate(minis):
                stats = self._update(shard.rows(idx), old[m] if old else None)
                for k, v in stats.items():
                    sums[k] = sums.get(k, 0.0) + v
        n = self.rl.learner.epochs * len(minis)
        out = {k: v / n for k, v in sums.items()}
        out["grad_norm"] = float(self.engine.get_global_grad_norm() or 0.0)
        return _mean_over_ranks(out, torch)

    def _set_learning_rate(self, lr: float) -> None:
        """Set the live optimizer's rate (the agent stage fits demonstrations and takes
        RL steps on one optimizer, at different rates). The learner's DeepSpeed config
        has no scheduler; one would overwrite this at its next step, so it is refused."""
        if self.engine.lr_scheduler is not None:
            raise RuntimeError("a learning rate set per step needs a learner without a scheduler")
        for group in self.engine.optimizer.param_groups:
            group["lr"] = lr

    def _old_logprobs(self, shard: TrainBatch, minis: list[np.ndarray]) -> list[Any] | None:
        """The behaviour policy's log-probabilities, before any update of this step. With
        one epoch of one mini-batch they equal the detached current ones: skip the pass."""
        import torch

        if self.rl.learner.epochs == 1 and len(minis) == 1:
            return None
        self.engine.eval()
        with torch.no_grad():
            return [self._forward(shard.rows(idx), self.engine.module)[0] for idx in minis]

    def _update(self, b: TrainBatch, old_logp: Any) -> dict[str, float]:
        import torch

        # not at the top: it brings torch into this light module
        from agentworld.rl.loss import entropy, policy_loss

        self.engine.train()
        mask = torch.as_tensor(b.loss_mask, device=self.device)
        n_tokens, n_seqs = _global_counts(mask, torch)
        logp, logits, aux = self._forward(b, self.engine)
        ref_logp = None
        if self.ref is not None:
            with torch.no_grad():
                ref_logp = self._forward(b, self.ref)[0]
        # DeepSpeed averages gradients over ranks: scale the global means back up.
        ws = float(self.world_size)
        terms = policy_loss(
            logp,
            logp.detach() if old_logp is None else old_logp,
            torch.as_tensor(b.advantages, device=self.device),
            mask,
            clip_low=self.rl.clip_low,
            clip_high=self.rl.clip_high,
            ratio_level=self.rl.ratio_level,
            ref_logp=ref_logp,
            kl_coef=self.rl.kl_coef,
            n_units=(n_tokens if self.rl.ratio_level == "token" else n_seqs) / ws,
            n_tokens=n_tokens / ws,
        )
        loss = terms.loss
        coef = float(getattr(self.engine.module.config, "router_aux_loss_coef", 0.0) or 0.0)
        if aux is not None and coef:
            loss = loss + coef * aux
        self.engine.backward(loss)
        lr = float(self.engine.get_lr()[0])  # read before the step that uses it
        self.engine.step()
        with torch.no_grad():
            ent = (entropy(logits.detach()) * mask).sum() / max(n_tokens / ws, 1.0)
        # Each value is this rank's share scaled by ws: their mean over ranks is global.
        return {
            "loss": loss.item(),
            "policy_loss": terms.policy.item(),
            "kl": terms.kl.item(),
            "clip_frac": terms.clip_frac.item(),
            "entropy": float(ent),
            "aux_loss": float(aux) if aux is not None else 0.0,
            "lr": lr,
        }

    # ---- weights and checkpoints -----------------------------------------------------

    def freeze_reference(self) -> None:
        """Hold the current weights as the KL term's reference from now on (collective:
        every rank joins the gather of ZeRO-3 partitions). A no-op at ``kl_coef`` 0."""
        if self.rl.kl_coef <= 0:
            return
        state = full_state_dict(self.engine.module)
        ref = load_model(self._model_dir, dtype=self._dtype)
        ref.load_state_dict(state, strict=True)
        self.ref = _frozen(ref.to(self.device))

    def weights(self) -> bytes:
        """Full weights in checkpoint layout on rank 0, as a safetensors blob (every rank
        joins the gather of ZeRO-3 partitions and expert-parallel slices; the others
        return nothing)."""

        state = full_state_dict(self.engine.module)
        if self.rank != 0:
            return b""
        return self._checkpoint_layout()(state)

    def connect_engines(self, engines: Any, workers_per_replica: int, addr: str, port: int) -> None:
        """Rank 0 opens the NCCL weight-transfer group with ``engines`` (the engines'
        calls, ``placement.EngineCalls``) at ``addr``:``port``; the other ranks keep no
        part in it."""
        # not at the top: it imports vLLM's NCCL transfer, which only GPU runs need
        from agentworld.rl.nccl_sync import NcclSender

        if self.rank == 0:
            self._sender = NcclSender(engines, workers_per_replica, addr, port)

    def push_weights(self, version: int) -> list[int] | None:
        """Gather the full weights (collective) and broadcast them from rank 0 over the
        group ``connect_engines`` opened; rank 0 returns the engines' versions."""
        state = full_state_dict(self.engine.module)
        if self.rank != 0:
            return None
        return self._sender.send(self._checkpoint_layout().tensors(state), version)

    def _checkpoint_layout(self) -> CheckpointLayout:
        """Built on first use (a meta-device copy of the model) and kept."""
        if self._layout is None:
            self._layout = CheckpointLayout(self.engine.module.config)
        return self._layout

    def save(self, url: str, tag: str) -> None:
        """DeepSpeed checkpoint (model, optimizer, ZeRO partitions) at ``url``/``tag``."""
        with _staged(url, tag, upload=True) as local:
            self.engine.save_checkpoint(local, tag=tag, save_latest=False)

    def load(self, url: str, tag: str) -> None:
        with _staged(url, tag, upload=False) as local:
            path, _ = self.engine.load_checkpoint(local, tag=tag)
        if path is None:
            raise FileNotFoundError(f"no learner checkpoint {tag!r} under {url}")

    def export_hf(self, url: str, tokenizer_dir: str) -> str | None:
        """Save the current policy as an HF checkpoint (collective; rank 0 writes)."""

        return export_hf(self.engine.module, load_tokenizer(tokenizer_dir), url, rank=self.rank)


def _init_distributed(rank: int, world_size: int, addr: str, port: int) -> None:
    import deepspeed
    import torch

    os.environ.update(
        {
            "RANK": str(rank),
            "WORLD_SIZE": str(world_size),
            "LOCAL_RANK": "0",
            "MASTER_ADDR": addr,
            "MASTER_PORT": str(port),
        }
    )
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    deepspeed.init_distributed(dist_backend=backend, auto_mpi_discovery=False)


def _frozen_copy(model: Any) -> Any:
    return _frozen(copy.deepcopy(model))


def _frozen(model: Any) -> Any:
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def _build_engine(model: Any, rl: RLConfig, train: TrainConfig) -> Any:
    import deepspeed

    engine, *_ = deepspeed.initialize(
        model=model,
        model_parameters=[p for p in model.parameters() if p.requires_grad],
        config=learner_deepspeed_config(rl, train, ep_preset=family_of(model.config).ep_preset),
    )
    return engine


def _global_counts(mask: Any, torch: Any) -> tuple[float, float]:
    """(response tokens, sequences with any) over every rank."""
    counts = torch.tensor([mask.sum(), (mask.sum(1) > 0).sum()], dtype=torch.float64)
    if torch.distributed.is_initialized() and torch.distributed.get_world_size() > 1:
        torch.distributed.all_reduce(counts)
    return float(counts[0]), float(counts[1])


def _mean_over_ranks(stats: dict[str, float], torch: Any) -> dict[str, float]:
    if not (torch.distributed.is_initialized() and torch.distributed.get_world_size() > 1):
        return stats
    keys = sorted(stats)
    t = torch.tensor([stats[k] for k in keys], dtype=torch.float64)
    torch.distributed.all_reduce(t)
    t /= torch.distributed.get_world_size()
    return dict(zip(keys, t.tolist(), strict=True))


class _staged:
    """A local directory standing for ``url`` with ``tag`` under it: the path itself for
    local URLs; else a temporary one that ``url/tag`` is downloaded into or uploaded from."""

    def __init__(self, url: str, tag: str, *, upload: bool) -> None:
        self.url, self.tag, self.upload, self._tmp = url, tag, upload, None

    def __enter__(self) -> str:
        if "://" not in self.url or self.url.startswith("file://"):
            return self.url.removeprefix("file://")
        self._tmp = tempfile.mkdtemp(prefix="agentworld-ckpt-")
        if not self.upload:
            download_dir(f"{self.url.rstrip('/')}/{self.tag}", os.path.join(self._tmp, self.tag))
        return self._tmp

    def __exit__(self, *exc: object) -> None:
        if self._tmp is None:
            return
        if self.upload and exc[0] is None:
            copy_local_dir_to(
                os.path.join(self._tmp, self.tag), f"{self.url.rstrip('/')}/{self.tag}"
            )
        shutil.rmtree(self._tmp, ignore_errors=True)
