"""Validate everything under ``k8s/``: the image build file, and every manifest as each
overlay renders it (CRD schema, KubeRay's rules, runtime envs, Serve configs, job
entrypoints, credentials). A manifest file that no overlay renders is a problem too: it
would never be checked."""

from __future__ import annotations

import copy
import dataclasses
import re
import tomllib
from pathlib import Path
from typing import Any

import yaml

from agentworld.deploy import credentials, kuberay, rayconfig
from agentworld.deploy.crd import check_resource, default_crd_dir
from agentworld.deploy.cron import check_schedule
from agentworld.deploy.dockerfile import check_dockerfile
from agentworld.deploy.entrypoint import Entrypoint, check_entrypoint_line
from agentworld.deploy.kustomize import KustomizeError, build
from agentworld.deploy.needs import stage_needs
from agentworld.deploy.problems import FieldPath, Problem, format_path
from agentworld.deploy.simapp import SIM_IMPORT_PATHS, check_sim_args
from agentworld.recipes import RECIPES

STAGE_LABEL = "agentworld.dev/stage"
DOCKERFILE = "k8s/Dockerfile"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Context:
    """Facts every manifest is checked against."""

    root: Path
    """Repository root (holds k8s/, jobs/, serve/, pyproject.toml)."""
    crd_dir: Path
    """Folder with the KubeRay CRD files."""
    ray_version: str
    """The Ray version pinned in pyproject.toml; images and rayVersion must match it."""
    workdir: str | None
    """The image's WORKDIR, which RayJobs use as their runtime env's working_dir."""


def pinned_ray_version(root: Path) -> str:
    deps = tomllib.loads((root / "pyproject.toml").read_text())["project"]["dependencies"]
    for dep in deps:
        m = re.fullmatch(r"ray(\[[^\]]*\])?==([\w.]+)", dep.replace(" ", ""))
        if m:
            return m[2]
    raise ValueError("pyproject.toml pins no ray version (ray[...]==X.Y.Z)")


def overlay_dirs(root: Path) -> list[Path]:
    """Every folder under k8s/overlays with a kustomization (components excluded)."""

    found = []
    for file in sorted((root / "k8s" / "overlays").rglob("kustomization.y*ml")):
        if (yaml.safe_load(file.read_text()) or {}).get("kind", "Kustomization") == "Kustomization":
            found.append(file.parent)
    return found


def validate(root: Path, *, crd_dir: Path | None = None) -> list[Problem]:
    """All problems of the tree at ``root``; an empty list means it is deployable."""
    root = root.resolve()
    ray_version = pinned_ray_version(root)
    stages, found = check_dockerfile(root / DOCKERFILE, root, ray_version=ray_version)
    problems = [p.located(DOCKERFILE) for p in found]
    workdir = stages[-1].workdir if stages else None
    ctx = Context(
        root=root,
        crd_dir=crd_dir or default_crd_dir(root),
        ray_version=ray_version,
        workdir=workdir,
    )
    read: set[Path] = set()
    overlays = overlay_dirs(root)
    if not overlays:
        problems.append(Problem("", "no overlays under k8s/overlays", where="k8s"))
    for overlay in overlays:
        rel = overlay.relative_to(root)
        try:
            rendered = build(overlay)
        except KustomizeError as e:
            problems.append(Problem("", str(e).replace(f"{root}/", ""), where=str(rel)))
            continue
        read |= rendered.files
        for r in rendered.resources:
            problems += [p.located(f"{rel} {r.ref}") for p in check_object(r.doc, ctx)]
    problems += _unrendered(root, read)
    return problems


def _unrendered(root: Path, read: set[Path]) -> list[Problem]:
    return [
        Problem(
            "",
            "no overlay renders this file, so it is never validated",
            where=str(f.relative_to(root)),
        )
        for f in sorted((root / "k8s").rglob("*.y*ml"))
        if f.resolve() not in read and f.suffix in (".yaml", ".yml")
    ]


def check_object(doc: dict[str, Any], ctx: Context) -> list[Problem]:
    """Problems of one rendered object (normalized in place by the schema check)."""
    raw = copy.deepcopy(doc)
    problems = check_resource(doc, ctx.crd_dir)
    if problems:
        return problems  # later checks assume the schema holds
    problems = kuberay.check_metadata(doc) + list(credentials.container_env_problems(doc))
    for path, spec in kuberay.cluster_specs(doc):
        problems += kuberay.check_cluster(spec, path, ray_version=ctx.ray_version)
    if doc["kind"] == "RayJob":
        problems += _check_job(doc, raw["spec"], ("spec",), ctx)
    elif doc["kind"] == "RayCronJob":
        problems += check_schedule(doc["spec"], ("spec",))
        problems += _check_job(doc, raw["spec"]["jobTemplate"], ("spec", "jobTemplate"), ctx)
    elif doc["kind"] == "RayService":
        problems += _check_service(doc, ctx)
    return problems


def _check_job(
    doc: dict[str, Any], raw_spec: dict[str, Any], path: FieldPath, ctx: Context
) -> list[Problem]:
    """A RayJob's spec, or a RayCronJob's job template (``path`` says which)."""
    spec = _at(doc, path)
    problems = kuberay.check_rayjob(spec, raw_spec, path)
    env_field = format_path((*path, "runtimeEnvYAML"))
    env, found = rayconfig.check_runtime_env(spec.get("runtimeEnvYAML") or "{}", env_field)
    problems += found
    if env is not None:
        problems += credentials.env_vars_problems(env.get("env_vars") or {}, env_field)
        if ctx.workdir and env.get("working_dir") != ctx.workdir:
            problems.append(
                Problem(
                    f"{env_field}.working_dir",
                    f"must be the image's WORKDIR {ctx.workdir!r}, got {env.get('working_dir')!r}",
                )
            )
    if "entrypoint" not in spec:
        return problems
    field = format_path((*path, "entrypoint"))
    entries, found = check_entrypoint_line(
        spec["entrypoint"], ctx.root, mode=spec["submissionMode"], field=field
    )
    problems += found
    for entry in entries:
        problems += credentials.argument_problems(entry.args, field)
    if entries and not found:
        problems += _job_fit_problems(doc, spec, path, entries)
    return problems


def _at(doc: dict[str, Any], path: FieldPath) -> Any:
    for key in path:
        doc = doc[key]
    return doc


def _job_fit_problems(
    doc: dict[str, Any], spec: dict[str, Any], path: FieldPath, entries: list[Entrypoint]
) -> list[Problem]:
    """The stage label names the jobs (``collect-prepare-evaluate`` for a line of
    three), and the job's cluster holds what each job's recipe asks."""
    problems = []
    label = (doc["metadata"].get("labels") or {}).get(STAGE_LABEL)
    stages = "-".join(e.stage for e in entries)
    if label != stages:
        problems.append(
            Problem(
                f"metadata.labels[{STAGE_LABEL}]",
                f"must be {stages!r} (the jobs it runs), got {label!r}",
            )
        )
    cluster = spec.get("rayClusterSpec")
    for entry in entries:
        if not cluster or entry.recipe not in RECIPES:
            continue
        needs = stage_needs(entry.stage, entry.config or RECIPES[entry.recipe](), entry.parsed)
        if needs is not None:
            problems += kuberay.capacity_problems(cluster, (*path, "rayClusterSpec"), needs)
    return problems


def _check_service(doc: dict[str, Any], ctx: Context) -> list[Problem]:
    text = doc["spec"].get("serveConfigV2")
    if not text:
        return [Problem("spec.serveConfigV2", "must be set (copied from a file under serve/)")]
    problems = rayconfig.check_serve_config(text, ctx.root) + rayconfig.check_serve_source(
        doc, ctx.root
    )
    config, _ = rayconfig.parse_yaml_mapping(text, "spec.serveConfigV2")
    for i, app in enumerate((config or {}).get("applications") or []):
        where = f"spec.serveConfigV2.applications[{i}]"
        env_vars = ((app or {}).get("runtime_env") or {}).get("env_vars") or {}
        problems += credentials.env_vars_problems(env_vars, f"{where}.runtime_env")
        problems += credentials.literal_config_problems(
            (app or {}).get("args") or {}, f"{where}.args"
        )
        if (app or {}).get("import_path") in SIM_IMPORT_PATHS:
            cluster = doc["spec"]["rayClusterConfig"]
            problems += check_sim_args(app.get("args") or {}, cluster, f"{where}.args")
    return problems
