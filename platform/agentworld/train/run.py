"""The driver of a CPT or SFT run (jobs/cpt.py, jobs/sft.py): check, train on Ray
Train, export, write the manifest. A finished run does nothing on rerun; a restarted
one resumes from the newest checkpoint under ``<out>/checkpoints``."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

from agentworld import cli
from agentworld.cluster import local_ray
from agentworld.console import say
from agentworld.io import is_complete, join, read_manifest, write_manifest
from agentworld.io.storage import copy_local_dir_to
from agentworld.model.card import card_data, trained_on, write_card
from agentworld.model.family import checkpoint_architecture, missing_kernels
from agentworld.train.job import DataPlan, TrainJob
from agentworld.train.job import plan as make_plan
from agentworld.train.progress import Progress
from agentworld.train.worker import WorkerSpec, train_loop_per_worker


@contextlib.contextmanager
def wandb_run(job: TrainJob, plan: DataPlan) -> Iterator[Any]:
    """A wandb run with the full configuration (offline unless the recipe says
    otherwise); its files end up under ``<out>/wandb``."""

    train = job.train
    if train.wandb_mode == "disabled":
        yield None
        return
    import wandb

    local = "://" not in job.out or job.out.startswith("file://")
    directory = (
        os.path.join(job.out.removeprefix("file://"), "wandb") if local else tempfile.mkdtemp()
    )
    os.makedirs(directory, exist_ok=True)
    config = {"stage": job.stage, "data": job.data, "out": job.out, "init": plan.source.init_url}
    config.update(recipe=job.config, train_rows=plan.train_rows, eval_rows=plan.eval_rows)
    run = wandb.init(
        project=train.wandb_project,
        name=f"{job.stage}-{job.name}",
        mode=train.wandb_mode,
        dir=directory,
        config=config,
        reinit="create_new",
    )
    try:
        yield run
    finally:
        run.finish()
        if not local:
            copy_local_dir_to(directory, join(job.out, "wandb"))


def _fit(job: TrainJob, plan: DataPlan, log, on_event):
    # not at the top: it brings ray into this light module
    from agentworld.train.placement import (
        ForwardReports,
        build_trainer,
        event_queue,
        put,
        read_packed,
        read_packed_table,
        storage_env,
    )

    spec = WorkerSpec(
        stage=job.stage,
        model=job.model,
        train=job.train,
        cluster=job.cluster,
        source=plan.source,
        hf_url=join(job.out, "hf"),
        rows_per_worker=plan.train_rows // job.cluster.num_workers,
        env=storage_env(),
    )
    queue = event_queue()
    trainer = build_trainer(
        train_loop_per_worker,
        spec,
        train_data=read_packed(plan.train_url),
        held_out=put(read_packed_table(plan.eval_url)),
        events=queue,
        out_url=job.out,
        callbacks=[ForwardReports(queue)],
    )
    with (
        wandb_run(job, plan) as run,
        Progress(job.stage, queue, wandb_run=run, log=log, on_event=on_event) as progress,
    ):
        result = trainer.fit()
    return result, progress.history


def run(
    job: TrainJob,
    *,
    log: Callable[[str], None] = say,
    on_event: Callable[[dict], None] | None = None,
) -> dict[str, Any]:
    """Run (or resume, or skip) the stage; returns its manifest. Needs a Ray cluster
    (``ray.init()`` first). ``on_event`` sees every report and failure as it arrives."""
    # not at the top: it brings ray into this light module
    from agentworld.train.placement import check_resources

    if is_complete(job.out):
        log(f"[{job.stage}] {job.out} is complete; nothing to do")
        return read_manifest(job.out)
    plan = make_plan(job)
    check_resources(job.cluster)
    for line in family_notes(plan.source.init_url):
        log(f"[{job.stage}] {line}")
    result, history = _fit(job, plan, log, on_event)
    metrics = result.metrics or history.last
    counts = {
        "steps": int(metrics.get("step", 0)),
        "train_rows": plan.train_rows,
        "eval_rows": plan.eval_rows,
        "loss": history.loss,
        "eval_loss": history.eval_loss,
        "worker_failures": len(history.failures),
        "resumed_from_steps": history.resumed_from,
        "expert_placement": metrics.get("placement", []),
    }
    card = card_data(
        stage=job.stage,
        name=f"agentworld-{job.name}-{job.stage}",
        base_model=plan.source.init_url,
        domains=trained_on(job.data),
        recipe=job.name,
        steps=counts["steps"],
    )
    write_card(join(job.out, "hf"), card)
    return write_manifest(
        job.out,
        stage=job.stage,
        inputs={"data": job.data, "init": plan.source.init_url},
        config=job.config,
        counts=counts,
        outputs={
            "hf": join(job.out, "hf"),
            "checkpoints": join(job.out, "checkpoints"),
            "latest_checkpoint": result.checkpoint.path if result.checkpoint else None,
            "wandb": join(job.out, "wandb"),
        },
    )


def family_notes(init_url: str | None) -> list[str]:
    """What a run from ``init_url`` does differently, said once per run (not per step or
    per rank): which kernel fallback runs, how packed rows reach a recurrent model."""
    if not init_url:
        return []
    family = checkpoint_architecture(init_url, field="init").family
    notes = []
    missing = missing_kernels(family)
    if missing:
        notes.append(
            f"{family.label}: {' and '.join(missing)} not installed: its Gated DeltaNet "
            "layers run transformers' PyTorch fallback (correct, much slower)"
        )
    if family.recurrent:
        notes.append(
            f"{family.label}: linear-attention layers carry a state along a row, so each "
            "packed document is trained as its own padded row"
        )
    return notes


def local_cpus(cluster) -> int:
    """Logical CPUs of a new local cluster: the worker group plus Ray Data, even on a
    2-core machine (a joined cluster, RAY_ADDRESS, keeps what its nodes have)."""
    return max(os.cpu_count() or 1, cluster.num_workers * cluster.cpus_per_worker + 1)


def summary(manifest: dict[str, Any]) -> str:
    """The job's last console line."""
    c = manifest["counts"]
    evals = list(c["eval_loss"].values())
    loss = f"held-out loss {evals[0]:.4f} -> {evals[-1]:.4f}" if evals else "no held-out loss"
    return (
        f"[{manifest['stage']}] {c['steps']} steps, {loss}, export -> {manifest['outputs']['hf']}"
    )


def job_parser(doc: str | None, *, init_help: str):
    """The command line of jobs/cpt.py and jobs/sft.py: the shared ``--recipe`` /
    ``--set``, and where the data, the run and the starting checkpoint are."""
    p = cli.job_parser(doc)
    p.add_argument("--data", type=cli.url, help="the prepare stage's output (tokenizer/, packed/)")
    p.add_argument("--out", type=cli.url, required=True, help="run directory (path or fsspec URL)")
    p.add_argument("--init", type=cli.url, help=init_help)
    return p


def run_locally(job: TrainJob) -> int:
    """What jobs/cpt.py and jobs/sft.py do once they built the job (a bad value or a
    missing input fails there, before Ray starts): run it on the cluster of RAY_ADDRESS
    (``ray job submit``) or on a local one sized for its workers, print the summary."""
    with local_ray(num_cpus=local_cpus(job.cluster)):
        manifest = run(job)
    say(summary(manifest))
    return 0
