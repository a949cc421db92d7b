"""What a CPT or SFT run is asked to do, and the checks that run before any worker
starts: every problem raises ConfigError naming the parameter or recipe field."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any, Literal

import pyarrow.parquet as pq

from agentworld.config import ConfigError
from agentworld.io import exists, get_fs, join, read_bytes
from agentworld.model.config import ModelConfig
from agentworld.model.family import checkpoint_architecture
from agentworld.train.config import ClusterConfig, TrainConfig
from agentworld.train.engine import ModelSource


@dataclass(frozen=True, kw_only=True)
class TrainJob:
    """One CPT or SFT run."""

    stage: Literal["cpt", "sft"]
    data: str
    """The prepare stage's output (holds tokenizer/ and packed/<stage>/{train,eval}/)."""
    out: str
    """Run directory: checkpoints/, hf/, wandb/, manifest.json."""
    model: ModelConfig
    """The model's shape (a fresh model) and ``pretrained`` (CPT's starting point)."""
    train: TrainConfig
    """The training settings; the stage's own (TrainConfig.for_stage) once constructed."""
    cluster: ClusterConfig
    init: str | None = None
    """HF checkpoint to start from; SFT requires it (the CPT export, ``<cpt out>/hf``)."""
    name: str = "custom"
    """The run configuration's name (the wandb run is ``<stage>-<name>``)."""
    config: dict[str, Any] = dataclasses.field(default_factory=dict)
    """The whole run configuration, recorded in the manifest and in wandb."""

    def __post_init__(self) -> None:
        if self.stage not in ("cpt", "sft"):
            raise ConfigError("stage", f"must be 'cpt' or 'sft', got {self.stage!r}")
        if not self.data:
            raise ConfigError("data", "required: the URL of the prepare stage's output")
        if not self.out:
            raise ConfigError("out", "required: the URL of the run directory")
        if self.stage == "sft" and not self.init:
            raise ConfigError("init", "SFT starts from a CPT export: pass --init <cpt out>/hf")
        # Everything downstream reads self.train: SFT's own steps and learning rate
        # replace the shared ones here, once.
        object.__setattr__(self, "train", self.train.for_stage(self.stage))

    def url(self, *parts: str) -> str:
        return join(self.data, *parts)


@dataclass(frozen=True, kw_only=True)
class DataPlan:
    """What the checks found: where to read, how much there is, what to start from."""

    train_url: str
    eval_url: str
    train_rows: int
    eval_rows: int
    source: ModelSource


def _parquet_files(url: str) -> list[str]:
    fs, path = get_fs(url)
    if not fs.exists(path):
        return []
    return sorted(p for p in fs.find(path) if p.endswith(".parquet"))


def _parquet_rows(url: str, field_name: str) -> tuple[int, int]:
    """(rows, length of the first row's input_ids) of the packed shards under ``url``."""

    files = _parquet_files(url)
    if not files:
        raise ConfigError(
            field_name, f"no packed Parquet shards under {url} (run jobs/prepare.py first)"
        )
    fs, _ = get_fs(url)
    rows, seq_len = 0, 0
    for path in files:
        with fs.open(path, "rb") as f:
            meta = pq.ParquetFile(f)
            rows += meta.metadata.num_rows
            if not seq_len and meta.metadata.num_rows:
                seq_len = len(
                    meta.read_row_group(0, columns=["input_ids"], use_threads=False).column(0)[0]
                )
    return rows, seq_len


def _hf_dir(url: str, field_name: str) -> str:
    """An HF checkpoint directory: ``url`` itself, or ``url/hf`` for a CPT run directory."""

    for candidate in (url, join(url, "hf")):
        if exists(join(candidate, "config.json")):
            return candidate
    raise ConfigError(field_name, f"no HF checkpoint (config.json) at {url} or {url}/hf")


def _model_source(job: TrainJob) -> ModelSource:
    init_field = "init" if job.init else "model.pretrained"
    init = job.init or job.model.pretrained
    init = _hf_dir(init, init_field) if init else None
    tokenizer = init if job.init else job.url("tokenizer")
    if not exists(join(tokenizer, "tokenizer.json")):
        raise ConfigError(
            "data", f"no tokenizer at {tokenizer} (the prepare stage writes tokenizer/)"
        )
    if init:
        _check_architecture(init, init_field, job.train.expert_parallel_size)
    if job.model.pretrained and not job.init:
        _check_same_tokenizer(tokenizer, init)
    return ModelSource(tokenizer_url=tokenizer, init_url=init)


def _check_architecture(init: str, field_name: str, ep: int) -> None:
    """The starting checkpoint is of the family, and its experts split ``ep`` ways."""
    arch = checkpoint_architecture(init, field=field_name)
    if ep > 1 and not arch.num_experts:
        raise ConfigError(
            "train.expert_parallel_size",
            f"{init} is a dense {arch.family.label} model (no experts): it must be 1, got {ep}",
        )
    if arch.num_experts % ep:
        raise ConfigError(
            "train.expert_parallel_size",
            f"{init} has {arch.num_experts} experts, not divisible by expert_parallel_size {ep}",
        )


def _vocabulary(url: str) -> tuple[Any, Any]:
    tok = json.loads(read_bytes(join(url, "tokenizer.json")))
    added = sorted((t["id"], t["content"]) for t in tok.get("added_tokens", []))
    return tok.get("model", {}).get("vocab"), added


def _check_same_tokenizer(prepared: str, pretrained: str) -> None:
    """A run from ``model.pretrained`` trains on data tokenized with its own tokenizer
    (prepare with the same ``model.pretrained``), not one trained on the corpus."""
    if not exists(join(pretrained, "tokenizer.json")):
        return  # a tokenizer without a tokenizers file: nothing to compare
    if _vocabulary(prepared) != _vocabulary(pretrained):
        raise ConfigError(
            "data",
            f"{prepared} was tokenized with another vocabulary than {pretrained}'s own: "
            "run jobs/prepare.py with the same --set model.pretrained",
        )


def plan(job: TrainJob) -> DataPlan:
    """Check the data, the starting point and the batch geometry against the job."""
    train = job.train
    train_url = job.url("packed", job.stage, "train")
    eval_url = job.url("packed", job.stage, "eval")
    train_rows, seq_len = _parquet_rows(train_url, "data")
    eval_rows, _ = _parquet_rows(eval_url, "data")
    source = _model_source(job)
    if seq_len != train.seq_len:
        raise ConfigError(
            "train.seq_len",
            f"{train.seq_len} but the packed rows under {train_url} hold {seq_len} tokens",
        )
    workers = job.cluster.num_workers
    if train_rows // workers < train.micro_batch_size:
        raise ConfigError(
            "train.micro_batch_size",
            f"{workers} workers x {train.micro_batch_size} rows need {workers * train.micro_batch_size} "
            f"packed rows; {train_url} has {train_rows}",
        )
    if eval_rows == 0:
        raise ConfigError("data", f"{eval_url} holds no held-out rows")
    return DataPlan(
        train_url=train_url,
        eval_url=eval_url,
        train_rows=train_rows,
        eval_rows=eval_rows,
        source=source,
    )
