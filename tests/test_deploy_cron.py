"""The CRD checker on what the API server and KubeRay accept beyond our own manifests:
ObjectMeta (``name`` or ``generateName``, and the server's rules for each field) and
RayCronJob (schema, cron schedule, time zone, its job template checked like a RayJob),
entrypoints that run a line of jobs, and the nightly RayCronJob under k8s/."""

from __future__ import annotations

import copy
import functools
import shutil
from pathlib import Path

import pytest
import yaml

from agentworld.deploy.__main__ import main
from agentworld.deploy.crd import default_crd_dir
from agentworld.deploy.cron import CronError, can_fire, parse_schedule
from agentworld.deploy.entrypoint import check_entrypoint_line
from agentworld.deploy.kustomize import build
from agentworld.deploy.validate import (
    Context,
    check_object,
    overlay_dirs,
    pinned_ray_version,
    validate,
)

ROOT = Path(__file__).resolve().parents[1]
CTX = Context(
    root=ROOT,
    crd_dir=default_crd_dir(ROOT),
    ray_version=pinned_ray_version(ROOT),
    workdir="/home/ray/agentworld",
)


@functools.cache
def _rendered_collect() -> dict:
    (doc,) = [
        r.doc
        for r in build(ROOT / "k8s/overlays/cpu/jobs").resources
        if r.doc["metadata"]["name"] == "agentworld-collect"
    ]
    return doc


def rayjob() -> dict:
    """The cpu overlay's collect RayJob, as rendered (a fresh copy)."""
    return copy.deepcopy(_rendered_collect())


def raycronjob() -> dict:
    """A RayCronJob running the same job every night at 02:00 UTC."""
    job = rayjob()
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCronJob",
        "metadata": {"name": "agentworld-collect-nightly", "labels": job["metadata"]["labels"]},
        "spec": {"schedule": "0 2 * * *", "timeZone": "Etc/UTC", "jobTemplate": job["spec"]},
    }


def problems_of(doc: dict) -> list[str]:
    return [str(p) for p in check_object(doc, CTX)]


# ObjectMeta


def test_rayjob_with_generate_name_and_no_name_passes():
    doc = rayjob()
    doc["metadata"]["generateName"] = "agentworld-collect-"
    del doc["metadata"]["name"]
    assert problems_of(doc) == []


def test_rayjob_with_neither_name_nor_generate_name_is_refused_naming_metadata_name():
    doc = rayjob()
    del doc["metadata"]["name"]
    assert problems_of(doc) == ["metadata.name: name or generateName is required"]


@pytest.mark.parametrize(
    ("prefix", "message"),
    [
        # The API server: a DNS-1123 subdomain once its trailing '-' is masked.
        ("Agentworld-", "'Agentworld-' is not a DNS-1123 subdomain"),
        ("agentworld_collect-", "'agentworld_collect-' is not a DNS-1123 subdomain"),
        ("a" * 254, "must be no more than 253 characters"),
        # Valid for the server, but the name it makes (5 more characters) is not
        # (a '.-' in it), or breaks KubeRay's rules (DNS-1035, at most 47 characters).
        ("agentworld.-", "the name made from it, 'agentworld.-xxxxx', is not a DNS-1123"),
        ("1agentworld-", "the generated name '1agentworld-xxxxx' is not a DNS-1035 label"),
        ("a" * 43, "RayJob names are at most 47 characters (the generated name"),
    ],
)
def test_invalid_generate_name_is_refused_naming_it(prefix, message):
    doc = rayjob()
    doc["metadata"]["generateName"] = prefix
    del doc["metadata"]["name"]
    found = [p for p in problems_of(doc) if p.startswith("metadata.generateName: ")]
    assert any(message in p for p in found), problems_of(doc)


def test_generate_name_at_kuberays_limit_passes():
    doc = rayjob()
    doc["metadata"]["generateName"] = "a" * 42  # 42 + 5 random characters = 47
    del doc["metadata"]["name"]
    assert problems_of(doc) == []


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda m: m.update(uid="0b9e8c1a"),
            "metadata.uid: unknown field",  # written by the server, never by a manifest
        ),
        (lambda m: m.update(namespace="Agentworld"), "metadata.namespace: 'Agentworld' is not"),
        (
            lambda m: m["labels"].update({"agentworld.dev/stage": "collect now"}),
            "metadata.labels[agentworld.dev/stage]: 'collect now' is not a valid label value",
        ),
        (
            lambda m: m.update(annotations={"bad key": "x"}),
            "metadata.annotations[bad key]: 'bad key' is not a qualified name",
        ),
        (
            lambda m: m.update(finalizers=["orphan", "foregroundDeletion"]),
            "metadata.finalizers: orphan and foregroundDeletion cannot both be set",
        ),
        (
            lambda m: m.update(
                ownerReferences=[{"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": "a"}]
            ),
            "metadata.ownerReferences[0].uid: required field is missing",
        ),
        (
            lambda m: m.update(
                ownerReferences=[
                    {"apiVersion": "v1", "kind": "X", "name": n, "uid": n, "controller": True}
                    for n in ("a", "b")
                ]
            ),
            "metadata.ownerReferences[1].controller: only one owner reference may be the controller",
        ),
    ],
)
def test_object_meta_fields_are_checked_as_the_api_server_does(change, message):
    doc = rayjob()
    change(doc["metadata"])
    assert any(message in p for p in problems_of(doc)), problems_of(doc)


def test_complete_owner_references_finalizers_and_annotations_pass():
    doc = rayjob()
    doc["metadata"].update(
        namespace="agentworld",
        annotations={"Example.com/Note": "fine", "kueue.x-k8s.io/queue-name": "q"},
        finalizers=["agentworld.dev/cleanup"],
        ownerReferences=[
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "a", "uid": "1", "controller": True}
        ],
    )
    assert problems_of(doc) == []


# RayCronJob


def test_valid_raycronjob_passes():
    assert problems_of(raycronjob()) == []


@pytest.mark.parametrize(
    ("schedule", "message"),
    [
        ("0 2 * *", "expected exactly 5 fields"),
        ("0 2 * * * *", "expected exactly 5 fields"),  # no seconds field in KubeRay's parser
        ("60 2 * * *", "minute '60': 60 is above the maximum 59"),
        ("0 2 * * 7", "day of week '7': 7 is above the maximum 6"),
        ("0 2 * * mon-fry", "day of week 'mon-fry': 'fry' is not a number"),
        ("*/0 2 * * *", "the step must be a positive number"),
        ("0 5-2 * * *", "the range starts after its end"),
        ("@fortnightly", "unrecognized descriptor '@fortnightly'"),
        ("@every 1 hour", "not a Go duration"),
        ("TZ=Etc/UTC 0 2 * * *", "may not hold TZ= or CRON_TZ=; set timeZone instead"),
        ("0 0 30 2 *", "'0 0 30 2 *' never fires"),
    ],
)
def test_bad_schedule_is_refused_naming_the_field(schedule, message):
    doc = raycronjob()
    doc["spec"]["schedule"] = schedule
    found = problems_of(doc)
    assert len(found) == 1 and found[0].startswith("spec.schedule: "), found
    assert message in found[0]


@pytest.mark.parametrize(
    "schedule",
    [
        "0 2 * * *",
        "*/15 9-17 * * MON-FRI",
        "0 0 1,15 * ?",
        "5/20 * * jan-mar,dec sun",
        "0 0 29 2 *",
        "0 0 31 2 mon",  # either day field matches when both are restricted
        "@daily",
        "@every 1h30m",
    ],
)
def test_schedules_kuberay_accepts_pass(schedule):
    doc = raycronjob()
    doc["spec"]["schedule"] = schedule
    assert problems_of(doc) == []


def test_cron_fields_are_read_as_kuberay_reads_them():
    minute, hour, dom, month, dow = parse_schedule("5/20 9-17/4 * jan,Mar ?")
    assert sorted(minute.values) == [5, 25, 45]  # N/STEP runs to the field's maximum
    assert sorted(hour.values) == [9, 13, 17] and not hour.star
    assert dom.star and dow.star and sorted(month.values) == [1, 3]
    assert parse_schedule("@every 10m") is None
    assert not can_fire(parse_schedule("0 0 31 4,6 *"))
    with pytest.raises(CronError, match="too many slashes"):
        parse_schedule("*/2/3 * * * *")


def test_bad_time_zone_is_refused_naming_the_field():
    doc = raycronjob()
    doc["spec"]["timeZone"] = "Mars/Olympus_Mons"
    assert problems_of(doc) == [
        "spec.timeZone: 'Mars/Olympus_Mons' is not an IANA time zone (e.g. Etc/UTC, Europe/Paris)"
    ]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda s: s.update(schedul=s.pop("schedule")),
            "spec.schedul: unknown field; did you mean 'schedule'?",
        ),
        (
            lambda s: s["jobTemplate"].update(entrypointt="python jobs/collect.py"),
            "spec.jobTemplate.entrypointt: unknown field; did you mean 'entrypoint'?",
        ),
        (lambda s: s.update(concurrencyPolicy="Forbid"), "spec.concurrencyPolicy: unknown field"),
    ],
)
def test_unknown_field_is_refused_naming_it(change, message):
    doc = raycronjob()
    change(doc["spec"])
    assert message in problems_of(doc)


def test_entrypoint_with_unknown_flag_is_refused_as_for_rayjob():
    job, cron = rayjob(), raycronjob()
    job["spec"]["entrypoint"] += " --bogus-flag 1"
    cron["spec"]["jobTemplate"]["entrypoint"] += " --bogus-flag 1"
    (for_job,) = problems_of(job)
    (for_cron,) = problems_of(cron)
    assert for_job.startswith("spec.entrypoint: jobs/collect.py rejects its arguments")
    assert "unrecognized arguments: --bogus-flag 1" in for_job
    assert for_cron == for_job.replace("spec.entrypoint", "spec.jobTemplate.entrypoint", 1)


def test_job_template_follows_the_rayjob_rules():
    doc = raycronjob()
    template = doc["spec"]["jobTemplate"]
    del template["backoffLimit"]
    template["rayClusterSpec"]["headGroupSpec"]["rayStartParams"]["num-cpus"] = "2"
    found = problems_of(doc)
    assert "spec.jobTemplate.backoffLimit: must be set explicitly in our RayJobs" in found
    assert any(
        p.startswith("spec.jobTemplate.rayClusterSpec.headGroupSpec.rayStartParams.num-cpus")
        for p in found
    ), found


def test_raycronjob_name_leaves_room_for_its_rayjobs():
    doc = raycronjob()
    doc["metadata"]["name"] = "a" * 37  # its RayJobs add '-' and the scheduled minute
    assert problems_of(doc) == ["metadata.name: RayCronJob names are at most 36 characters"]


# Entrypoints that run a line of jobs


def _line_of_jobs(doc_spec: dict, *, mode: str | None) -> None:
    doc_spec["entrypoint"] = (
        "RUN=$(date -u +%Y%m%d) && "
        "python jobs/collect.py --recipe debug_cpu --out /data/nightly/$RUN/raw "
        "--set collect.seed=$RUN && "
        "python jobs/prepare.py --recipe debug_cpu --input /data/nightly/$RUN/raw "
        "--out /data/nightly/$RUN/prepare"
    )
    if mode:
        doc_spec["submissionMode"] = mode


def test_a_line_of_jobs_runs_in_http_mode_each_job_checked_by_its_parser():
    doc = rayjob()
    doc["metadata"]["labels"]["agentworld.dev/stage"] = "collect-prepare"
    _line_of_jobs(doc["spec"], mode="HTTPMode")
    assert problems_of(doc) == []
    doc["spec"]["entrypoint"] += " --bogus-flag 1"
    assert problems_of(doc) == [
        "spec.entrypoint: jobs/prepare.py rejects its arguments: __main__.py: error: "
        "unrecognized arguments: --bogus-flag 1"
    ]
    doc["spec"]["entrypoint"] = doc["spec"]["entrypoint"].replace("seed=$RUN", "seed=$DAY")
    assert any("$DAY is not set earlier on the line" in p for p in problems_of(doc))


@pytest.mark.parametrize("mode", [None, "K8sJobMode", "SidecarMode"])
def test_a_line_of_jobs_is_refused_where_the_submitters_shell_reads_it(mode):
    doc = rayjob()
    doc["metadata"]["labels"]["agentworld.dev/stage"] = "collect-prepare"
    _line_of_jobs(doc["spec"], mode=mode)
    (found,) = problems_of(doc)
    assert found.startswith(
        f"spec.entrypoint: with submissionMode {mode or 'K8sJobMode'} the submitter's bash"
    )


def test_the_stage_label_names_every_job_of_the_line():
    doc = rayjob()
    _line_of_jobs(doc["spec"], mode="HTTPMode")
    assert problems_of(doc) == [
        "metadata.labels[agentworld.dev/stage]: must be 'collect-prepare' (the jobs it runs), "
        "got 'collect'"
    ]


# The nightly RayCronJob (k8s/base/schedule, overlays gpu/schedule and cpu/schedule)

SIMULATOR_OVERLAY = {"gpu": "k8s/overlays/gpu", "cpu": "k8s/overlays/cpu/sim"}


def test_k8s_validate_passes_on_every_manifest_the_nightly_included(capsys):
    overlays = overlay_dirs(ROOT)
    assert {ROOT / "k8s/overlays/gpu/schedule", ROOT / "k8s/overlays/cpu/schedule"} <= set(overlays)
    assert main(["--root", str(ROOT), "validate"]) == 0  # what `make k8s-validate` runs
    assert (
        capsys.readouterr().out.strip() == f"[deploy] {len(overlays)} overlays checked: 0 problems"
    )


@pytest.mark.parametrize("overlay", sorted(SIMULATOR_OVERLAY))
def test_nightly_collects_prepares_and_evaluates_the_served_simulator(overlay):
    (cron,) = [r.doc for r in build(ROOT / "k8s/overlays" / overlay / "schedule").resources]
    assert cron["kind"] == "RayCronJob"
    template = cron["spec"]["jobTemplate"]
    entries, problems = check_entrypoint_line(
        template["entrypoint"], ROOT, mode=template["submissionMode"]
    )
    assert problems == [] and [e.stage for e in entries] == ["collect", "prepare", "evaluate"]
    collect, prepare, evaluate = (e.parsed for e in entries)
    # Fresh episodes every night: the run directory and the seed are the night's date.
    assert "/nightly/20260102/" in collect.out
    assert entries[0].config.collect.seed == 20260102
    # Prepared in a run of their own, the evaluation on its held-out turns.
    assert prepare.input == (collect.out,) and "/nightly/20260102/" in prepare.out
    assert evaluate.command == "fidelity" and evaluate.split == "eval"
    assert evaluate.input == f"{prepare.out}/samples/sft"
    # ... of the simulator that the deployment serves, in the same namespace.
    sims = [
        r.doc
        for r in build(ROOT / SIMULATOR_OVERLAY[overlay]).resources
        if r.doc["kind"] == "RayService"
    ]
    assert [
        s["metadata"]["name"]
        for s in sims
        if s["metadata"]["namespace"] == cron["metadata"]["namespace"]
        and evaluate.endpoint == f"http://{s['metadata']['name']}-serve-svc:8000/v1"
    ] == ["agentworld-sim"]
    assert entries[2].config.evaluate.infer.endpoint.api_key_env == "AGENTWORLD_SIM_KEY"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of what the validator reads; platform/ linked (the image copies it)."""
    for name in ("k8s", "jobs", "serve"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, tmp_path / name)
    (tmp_path / "platform").symlink_to(ROOT / "platform")
    return tmp_path


def test_nightly_problems_are_named_through_each_overlay(tree):
    path = tree / "k8s/base/schedule/raycronjob-nightly.yaml"
    (cron,) = yaml.safe_load_all(path.read_text())
    cron["spec"]["schedule"] = "0 26 * * *"
    template = cron["spec"]["jobTemplate"]
    template["entrypoint"] = template["entrypoint"].replace("--eval-sets", "--eval-suites")
    path.write_text(yaml.safe_dump(cron, sort_keys=False))
    problems = [str(p) for p in validate(tree, crd_dir=CTX.crd_dir)]
    for overlay in ("gpu", "cpu"):
        assert (
            f"k8s/overlays/{overlay}/schedule RayCronJob/agentworld-nightly: spec.schedule: "
            "not a cron schedule KubeRay accepts: hour '26': 26 is above the maximum 23"
        ) in problems
    # The cpu overlay replaces the job line; the gpu one runs the base's.
    (bad_flag,) = [p for p in problems if "rejects its arguments" in p]
    assert bad_flag.startswith(
        "k8s/overlays/gpu/schedule RayCronJob/agentworld-nightly: spec.jobTemplate.entrypoint: "
        "jobs/prepare.py rejects its arguments"
    )
    assert len(problems) == 3, problems
