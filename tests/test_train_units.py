"""The parts of CPT/SFT that need no Ray: packed-row attention, the loss, the schedule,
the DeepSpeed configuration a recipe produces, and the checks that reject a bad recipe
or a bad input before any worker starts."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from agentworld.config import ConfigError
from agentworld.model.config import ModelConfig
from agentworld.recipes import debug_cpu, qwen35_a3b
from agentworld.recipes.jobs import train_job
from agentworld.train.batch import collate
from agentworld.train.config import ClusterConfig, TrainConfig
from agentworld.train.job import plan

ROOT = Path(__file__).resolve().parents[1]


def _row(docs: list[list[int]], seq_len: int, pad: int = 0) -> dict:
    ids = [t for d in docs for t in d]
    tail = seq_len - len(ids)
    return {
        "input_ids": [ids + [pad] * tail],
        "loss_mask": [[1] * len(ids) + [0] * tail],
        "position_ids": [[p for d in docs for p in range(len(d))] + [0] * tail],
        "doc_lens": [[len(d) for d in docs]],
    }


def test_packed_documents_never_attend_to_each_other(tiny_checkpoint):
    """The second document of a packed row gets exactly the logits it gets alone."""
    import torch

    from agentworld.model import load_model

    model = load_model(tiny_checkpoint, dtype=torch.float32).eval()
    rng = np.random.default_rng(0)
    vocab = model.config.vocab_size
    first, second = rng.integers(10, vocab, 9).tolist(), rng.integers(10, vocab, 6).tolist()
    batch = collate(_row([first, second], 20))
    with torch.no_grad():
        # use_cache=False as in training: with a KV cache transformers reads no
        # document boundaries from the position ids.
        packed = model(input_ids=batch.input_ids, position_ids=batch.position_ids, use_cache=False)
        alone = model(input_ids=torch.tensor([second]), use_cache=False).logits[0]
        unpacked = model(input_ids=batch.input_ids, use_cache=False).logits[0]
        packed = packed.logits[0]
    torch.testing.assert_close(packed[9:15], alone, atol=1e-5, rtol=1e-5)
    assert (unpacked[9:15] - alone).abs().max() > 1e-2  # without the positions it would leak


def test_collate_checks_positions_against_doc_lens():
    row = _row([[5, 6, 7], [8, 9]], 8)
    row["position_ids"] = [[0, 1, 2, 3, 4, 0, 0, 0]]  # no restart where doc_lens says
    with pytest.raises(ValueError, match="row 0: position_ids"):
        collate(row)
    row = _row([[5, 6, 7], [8, 9]], 8)
    row["doc_lens"] = [[3, 9]]
    with pytest.raises(ValueError, match="row 0: doc_lens"):
        collate(row)


def test_a_batch_moves_whole_to_the_model_device():
    """collate builds batches on the CPU; the worker hands the engine ``batch.to(its
    device)`` (a GPU rank's model refuses CPU inputs). Every field moves, values kept."""
    batch = collate(_row([[5, 6, 7], [8, 9]], 8))
    moved = batch.to("meta")
    for f in dataclasses.fields(batch):
        assert getattr(moved, f.name).device.type == "meta", f.name
        assert getattr(moved, f.name).shape == getattr(batch, f.name).shape
    back = batch.to("cpu")
    assert all(
        (getattr(back, f.name) == getattr(batch, f.name)).all() for f in dataclasses.fields(batch)
    )


def test_loss_targets_skip_document_starts_pad_and_unmasked_tokens():
    import torch

    from agentworld.train.loss import lm_loss

    row = _row([[5, 6, 7], [8, 9]], 8)
    row["loss_mask"] = [[0, 1, 1, 1, 1, 0, 0, 0]]
    batch = collate(row)
    # position t predicts t+1: targets 6, 7 (doc 1) and 9 (doc 2); 8 starts a document
    assert batch.target_mask().tolist() == [[True, True, False, True, False, False, False]]
    logits = torch.zeros(1, 8, 16)
    loss, n = lm_loss(logits, batch)
    assert n == 3 and loss.item() == pytest.approx(np.log(16), rel=1e-6)


def test_warmup_then_cosine_schedule():
    from agentworld.train.loss import warmup_cosine

    lr = [warmup_cosine(s, warmup_steps=4, max_steps=20, min_lr_ratio=0.1) for s in range(20)]
    assert lr[:4] == [0.25, 0.5, 0.75, 1.0] and lr[4] == 1.0
    assert all(a >= b for a, b in zip(lr[4:], lr[5:], strict=False))
    assert lr[-1] == pytest.approx(0.1)


def test_the_export_gathers_in_bounded_buckets_and_loses_nothing(tiny_checkpoint):
    """ZeRO-3 partitions are gathered a bucket at a time (one collective each): the
    buckets keep every parameter once, in order, each within the budget unless it is
    larger alone; the state is the model's."""
    import torch

    from agentworld.model import load_model
    from agentworld.train.export import _buckets, full_state_dict

    model = load_model(tiny_checkpoint, dtype=torch.float32)
    named = list(model.named_parameters())
    limit = 64 * 1024
    buckets = _buckets(named, limit)
    assert [n for b in buckets for n, _ in b] == [n for n, _ in named]
    assert 1 < len(buckets) < len(named)
    for b in buckets:
        assert len(b) == 1 or sum(p.numel() * p.element_size() for _, p in b) <= limit
    state = full_state_dict(model, bucket_bytes=limit)
    assert list(state) == [n for n, _ in named]
    assert all(torch.equal(state[n], p) for n, p in named)


def test_deepspeed_config_follows_the_recipe():
    from agentworld.train.ds_config import deepspeed_config

    cpu = debug_cpu()
    cfg = deepspeed_config(cpu.train, cpu.cluster, 2)
    assert cfg["zero_optimization"]["stage"] == 2 and not cfg["bf16"]["enabled"]
    assert cfg["expert_parallel"] == {
        "enabled": True,
        "autoep_size": 2,
        "preset_model": "qwen3_moe",
        "use_grouped_mm": False,
    }
    big = qwen35_a3b()
    cfg = deepspeed_config(big.train, big.cluster, big.cluster.num_workers)
    assert cfg["zero_optimization"]["stage"] == 3 and cfg["bf16"]["enabled"]
    assert cfg["expert_parallel"]["autoep_size"] == 8
    assert cfg["train_batch_size"] == 1 * 4 * 64
    assert big.model.num_experts % big.train.expert_parallel_size == 0


@pytest.mark.parametrize(
    "change, field, message",
    [
        ({"model": ModelConfig(num_experts=3)}, "train.expert_parallel_size", "not divisible"),
        ({"cluster": ClusterConfig(num_workers=3)}, "train.expert_parallel_size", "world size"),
        ({"train": TrainConfig(precision="bf16")}, "train.precision", "GPUs"),
        (
            {"train": TrainConfig(attn_implementation="flash_attention_2")},
            "train.attn_implementation",
            "GPUs",
        ),
    ],
)
def test_bad_recipes_name_the_field(change, field, message):
    with pytest.raises(ConfigError, match=message) as err:
        dataclasses.replace(debug_cpu(), **change)
    assert err.value.field == field
    with pytest.raises(ConfigError, match="train.max_failures"):
        TrainConfig(max_failures=-1)


def test_sft_trains_with_its_own_steps_and_learning_rate_where_the_recipe_sets_them():
    from agentworld.config import set_overrides

    recipe = set_overrides(debug_cpu(), ["train.sft_max_steps=150", "train.sft_learning_rate=5e-4"])
    sft = train_job(recipe, stage="sft", data="/d", out="/o", init="/i").train
    cpt = train_job(recipe, stage="cpt", data="/d", out="/o").train
    assert (sft.max_steps, sft.learning_rate) == (150, 5e-4)
    assert (cpt.max_steps, cpt.learning_rate) == (40, 1e-3)
    # Unset, SFT shares CPT's; applying it twice changes nothing (a rerun's recipe check).
    assert debug_cpu().train.sft_max_steps == 100
    shared = dataclasses.replace(debug_cpu().train, sft_max_steps=None)
    plain = train_job(
        dataclasses.replace(recipe, train=shared), stage="sft", data="/d", out="/o", init="/i"
    )
    assert (plain.train.max_steps, plain.train.learning_rate) == (40, 1e-3)
    job = train_job(recipe, stage="sft", data="/d", out="/o", init="/i")
    assert dataclasses.replace(job, train=job.train) == job
    assert job.config["train"]["max_steps"] == 150  # the manifest records SFT's own
    with pytest.raises(ConfigError, match="below sft_max_steps 3") as err:
        set_overrides(debug_cpu(), ["train.sft_max_steps=3"])
    assert err.value.field == "train.warmup_steps"
    with pytest.raises(ConfigError, match="must be > 0"):
        TrainConfig(sft_learning_rate=0.0)


def _job_main(name: str):
    spec = importlib.util.spec_from_file_location(f"{name}_job", ROOT / "jobs" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main


def test_jobs_reject_bad_input_before_ray_starts(tmp_path):
    """The real command lines of every job that starts Ray, each in a fresh process (this
    one may already run Ray for other tests): every bad input exits 2 naming the field,
    and Ray never started, since no Ray session directory appeared under the process's
    RAY_TMPDIR."""
    import subprocess
    import sys
    import tempfile

    # A short directory: under pytest's long tmp_path Ray's socket paths would not fit,
    # and a Ray that started would crash instead of leaving its session directory.
    ray_dir = Path(tempfile.mkdtemp(prefix="aw-ray-")) / "ray"
    data, out = str(tmp_path), str(tmp_path / "o")
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'platform'}:{ROOT}", "RAY_TMPDIR": str(ray_dir)}
    env.pop("RAY_ADDRESS", None)
    cases = [
        ("cpt", ["--out", out], "data: required"),
        ("sft", ["--data", data, "--out", out], "init: SFT starts from a CPT export"),
        (
            "cpt",
            ["--data", data, "--out", out, "--set", "train.expert_parallel_size=3"],
            "train.expert_parallel_size",
        ),
        ("cpt", ["--data", data, "--out", out, "--set", "train.nope=1"], "train.nope"),
        # The other jobs that start Ray, on the same terms.
        (
            "prepare",
            ["--input", data, "--out", out, "--set", "data.eval_fraction=1.5"],
            "data.eval_fraction",
        ),
        (
            "rl",
            ["--data", data, "--init", data, "--out", out, "--set", "rl.max_steps=0"],
            "rl.max_steps",
        ),
        ("collect", ["--out", out, "--set", "collect.domains=android"], "collect.domains"),
        (
            "evaluate",
            ["infer", "--input", data, "--model", data, "--out", out, "--set", "evaluate.x=1"],
            "evaluate.x",
        ),
    ]
    for job, args, message in cases:
        cmd = [sys.executable, str(ROOT / "jobs" / f"{job}.py"), *args]
        res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
        assert (res.returncode, message in res.stderr) == (2, True), (args, res.stderr[-1500:])
    started = ray_dir.exists()
    shutil.rmtree(ray_dir.parent, ignore_errors=True)
    assert not started
    assert not os.path.exists(tmp_path / "o")


def test_plan_rejects_missing_data_and_mismatched_inputs(tmp_path, tiny_checkpoint):
    from tests.test_train import short_recipe, write_packed

    recipe = short_recipe()
    empty = train_job(recipe, stage="cpt", data=str(tmp_path / "nothing"), out=str(tmp_path / "o"))
    with pytest.raises(ConfigError, match="no packed Parquet shards") as err:
        plan(empty)
    assert err.value.field == "data"

    from agentworld.model import load_tokenizer
    from agentworld.schema.examples import sample_trajectories

    data = write_packed(
        str(tmp_path / "data"), sample_trajectories(10), load_tokenizer(tiny_checkpoint)
    )
    long_rows = dataclasses.replace(recipe, train=dataclasses.replace(recipe.train, seq_len=512))
    with pytest.raises(ConfigError) as err:
        plan(train_job(long_rows, stage="cpt", data=data, out=str(tmp_path / "o")))
    assert err.value.field == "train.seq_len"
    big_batch = dataclasses.replace(
        recipe, train=dataclasses.replace(recipe.train, micro_batch_size=64)
    )
    with pytest.raises(ConfigError) as err:
        plan(train_job(big_batch, stage="cpt", data=data, out=str(tmp_path / "o")))
    assert err.value.field == "train.micro_batch_size"
    with pytest.raises(ConfigError) as err:  # the init checkpoint has 4 experts, not 8-divisible
        job = train_job(
            recipe, stage="sft", data=data, out=str(tmp_path / "o"), init=tiny_checkpoint
        )
        wide = dataclasses.replace(
            job,
            model=ModelConfig(num_experts=8),
            cluster=dataclasses.replace(recipe.cluster, num_workers=8),
            train=dataclasses.replace(job.train, expert_parallel_size=8),
        )
        plan(wide)
    assert err.value.field == "train.expert_parallel_size"
    ok = plan(
        train_job(recipe, stage="sft", data=data, out=str(tmp_path / "o"), init=tiny_checkpoint)
    )
    assert ok.source.init_url == tiny_checkpoint and ok.train_rows > 0 and ok.eval_rows > 0


def test_cluster_too_small_fails_before_any_worker(ray_cluster):
    from agentworld.train.placement import check_resources

    big = dataclasses.replace(debug_cpu().cluster, num_workers=8)
    with pytest.raises(ConfigError) as err:
        check_resources(big)
    assert err.value.field == "cluster.num_workers" and "need 9 CPUs" in str(err.value)
    check_resources(debug_cpu().cluster)  # 2 workers + 1 fit the 4-CPU test cluster


def test_a_small_epoch_is_read_once_and_replayed_in_the_same_order(ray_cluster):
    """micro_batches: an epoch that fits EPOCH_KEPT_BYTES is read from the split once
    (each iter_batches is a new streaming execution) and replayed in the same order;
    a larger one is read again every epoch; a resume skips the same micro-batches."""
    import ray.data

    from agentworld.train import worker
    from agentworld.train.engine import ModelSource

    seq = 8
    rows = [
        {
            "input_ids": [i] * seq,
            "loss_mask": [1] * seq,
            "position_ids": list(range(seq)),
            "doc_lens": [seq],
        }
        for i in range(12)
    ]
    recipe = debug_cpu()
    recipe = dataclasses.replace(
        recipe, train=dataclasses.replace(recipe.train, seq_len=seq, micro_batch_size=4)
    )
    source = ModelSource(init_url=None, tokenizer_url="unused")
    spec = worker.WorkerSpec(
        stage="cpt",
        model=recipe.model,
        train=recipe.train,
        cluster=recipe.cluster,
        source=source,
        hf_url="unused",
        rows_per_worker=12,
    )

    class Counted:  # the real DataIterator, with its epochs counted
        def __init__(self, it) -> None:
            self.it, self.epochs = it, 0

        def iter_batches(self, **kw):
            self.epochs += 1
            return self.it.iter_batches(**kw)

    def first_ids(kept_bytes: int, skip: int, n: int) -> tuple[list[int], int]:
        shard = Counted(ray.data.from_items(rows).iterator())
        worker.EPOCH_KEPT_BYTES = kept_bytes
        batches = worker.micro_batches(shard, spec, skip=skip)
        ids = [int(next(batches).input_ids[0, 0]) for _ in range(n)]
        return ids, shard.epochs

    kept = worker.EPOCH_KEPT_BYTES
    try:
        replayed, epochs = first_ids(kept, 0, 9)  # three epochs of three micro-batches
        assert replayed == [0, 4, 8] * 3 and epochs == 1
        streamed, epochs = first_ids(12 * seq * 32 - 1, 0, 9)
        assert streamed == replayed and epochs == 3
        resumed, epochs = first_ids(kept, 4, 5)  # 4 micro-batches done: one epoch and one
        assert resumed == [4, 8, 0, 4, 8] and epochs == 1
    finally:
        worker.EPOCH_KEPT_BYTES = kept
