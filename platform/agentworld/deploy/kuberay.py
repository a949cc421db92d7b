"""The checks KubeRay's operator and the Pod API make after the CRD schema has passed
(names, replica bounds, resource declarations, RayJob settings), plus the rules this
project sets for its own manifests (a head that runs no work, one image per cluster, the
Ray version of the image, whole GPUs).

Each function takes a resource that passed ``crd.check_resource`` (so types are right
and defaults are in) and returns Problems naming the field.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

from agentworld.deploy.objectmeta import effective_name
from agentworld.deploy.problems import FieldPath, Problem, format_path
from agentworld.deploy.quantity import QuantityError, is_whole, parse_quantity

# KubeRay appends suffixes ("-serve-svc", a 6-character hash) to these names, and a
# RayCronJob's RayJobs are named "<cronjob>-<scheduled minute>" (up to 11 characters).
MAX_NAME_LENGTH = {"RayCluster": 53, "RayJob": 47, "RayService": 47, "RayCronJob": 36}
_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
# Where the RayCluster spec sits in each kind (None: the spec is one).
_CLUSTER_SPEC = {
    "RayCluster": None,
    "RayJob": ("spec", "rayClusterSpec"),
    "RayService": ("spec", "rayClusterConfig"),
    "RayCronJob": ("spec", "jobTemplate", "rayClusterSpec"),
}
_NATIVE_RESOURCES = {"cpu", "memory", "ephemeral-storage", "storage"}
GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu")
_RAY_RESOURCE_PARAMS = ("num-cpus", "num-gpus", "memory", "resources")


def cluster_specs(doc: dict[str, Any]) -> list[tuple[FieldPath, dict[str, Any]]]:
    """Where the RayCluster spec sits in each kind."""
    path = _CLUSTER_SPEC[doc["kind"]]
    if path is None:
        return [(("spec",), doc.get("spec", {}))]
    node: Any = doc
    for key in path:
        node = node.get(key) if isinstance(node, dict) else None
    return [(path, node)] if isinstance(node, dict) else []


def check_metadata(doc: dict[str, Any]) -> list[Problem]:
    """KubeRay's name rules, on the name or the one the server will make from
    generateName (the API server's own ObjectMeta rules are ``objectmeta``'s)."""
    kind = doc["kind"]
    name, source = effective_name(doc["metadata"])
    field = f"metadata.{source}"
    limit = MAX_NAME_LENGTH[kind]
    problems = []
    if len(name) > limit:
        made = "" if source == "name" else f" (the generated name {name!r} has {len(name)})"
        problems.append(Problem(field, f"{kind} names are at most {limit} characters{made}"))
    if not _DNS1035.match(name):
        shown = repr(name) if source == "name" else f"the generated name {name!r}"
        problems.append(Problem(field, f"{shown} is not a DNS-1035 label (a-z, 0-9, '-')"))
    return problems


def check_cluster(spec: dict[str, Any], path: FieldPath, *, ray_version: str) -> list[Problem]:
    """One RayCluster spec (standalone or inside a RayJob/RayService)."""
    problems = []
    if spec.get("rayVersion") != ray_version:
        problems.append(
            Problem(
                format_path((*path, "rayVersion")),
                f"must be {ray_version!r} (the Ray pinned in pyproject.toml), got {spec.get('rayVersion')!r}",
            )
        )
    head = spec["headGroupSpec"]
    head_params = head.get("rayStartParams") or {}
    if head_params.get("num-cpus") != "0":
        problems.append(
            Problem(
                format_path((*path, "headGroupSpec", "rayStartParams", "num-cpus")),
                'must be "0": the head schedules no work',
            )
        )
    problems += _group_problems(head, (*path, "headGroupSpec"), "head")
    names: set[str] = set()
    for i, group in enumerate(spec.get("workerGroupSpecs") or []):
        gpath = (*path, "workerGroupSpecs", i)
        if group["groupName"] in names:
            problems.append(
                Problem(
                    format_path((*gpath, "groupName")),
                    f"duplicate group name {group['groupName']!r}",
                )
            )
        names.add(group["groupName"])
        problems += _replica_problems(group, gpath)
        problems += _group_problems(group, gpath, group["groupName"])
    problems += _image_problems(spec, path)
    problems += _autoscaler_problems(spec, path)
    return problems


def _replica_problems(group: dict[str, Any], path: FieldPath) -> list[Problem]:
    lo, hi, n = group["minReplicas"], group["maxReplicas"], group.get("replicas", 0)
    if lo < 0 or hi < 0:
        return [Problem(format_path((*path, "minReplicas")), "replica bounds must be >= 0")]
    if lo > hi:
        return [Problem(format_path((*path, "minReplicas")), f"{lo} is above maxReplicas {hi}")]
    if not lo <= n <= hi:
        return [
            Problem(
                format_path((*path, "replicas")),
                f"{n} is outside [minReplicas {lo}, maxReplicas {hi}]",
            )
        ]
    return []


def _group_problems(group: dict[str, Any], path: FieldPath, name: str) -> list[Problem]:
    params = group.get("rayStartParams") or {}
    problems = []
    if "labels" in params:
        problems.append(
            Problem(
                format_path((*path, "rayStartParams", "labels")),
                "not supported by KubeRay; use the group's labels field",
            )
        )
    if group.get("resources") and any(params.get(k) for k in _RAY_RESOURCE_PARAMS):
        problems.append(
            Problem(
                format_path((*path, "resources")),
                f"set resources either here or in rayStartParams of group {name}, not both",
            )
        )
    containers = group["template"]["spec"].get("containers") or []
    if not containers:
        return [
            *problems,
            Problem(
                format_path((*path, "template", "spec", "containers")), "needs the Ray container"
            ),
        ]
    for j, c in enumerate(containers):
        problems += container_resource_problems(
            c.get("resources") or {}, (*path, "template", "spec", "containers", j, "resources")
        )
    problems += _num_gpus_problems(params, containers[0], path)
    return problems


def container_resource_problems(resources: dict[str, Any], path: FieldPath) -> list[Problem]:
    """Pod API rules: whole extended resources (GPUs), requests equal to limits for
    them, and requests never above limits."""
    problems = []
    parsed: dict[str, dict[str, Decimal]] = {}
    for part in ("requests", "limits"):
        for res, value in (resources.get(part) or {}).items():
            try:
                parsed.setdefault(part, {})[res] = q = parse_quantity(value)
            except QuantityError as e:
                problems.append(Problem(format_path((*path, part, res)), str(e)))
                continue
            if (
                res not in _NATIVE_RESOURCES
                and not res.startswith("hugepages-")
                and not is_whole(q)
            ):
                problems.append(
                    Problem(
                        format_path((*path, part, res)), f"{value!r}: {res} must be a whole number"
                    )
                )
    requests, limits = parsed.get("requests", {}), parsed.get("limits", {})
    for res, req in requests.items():
        extended = res not in _NATIVE_RESOURCES
        if extended and res not in limits:
            problems.append(
                Problem(
                    format_path((*path, "limits", res)),
                    f"{res} must have a limit equal to its request",
                )
            )
        elif extended and limits[res] != req:
            problems.append(
                Problem(
                    format_path((*path, "requests", res)), f"{res} request must equal its limit"
                )
            )
        elif res in limits and req > limits[res]:
            problems.append(
                Problem(
                    format_path((*path, "requests", res)),
                    f"request {req} is above the limit {limits[res]}",
                )
            )
    return problems


def gpus_of(container: dict[str, Any]) -> int:
    limits = (container.get("resources") or {}).get("limits") or {}
    return sum(int(parse_quantity(limits[g])) for g in GPU_RESOURCES if g in limits)


def cpus_of(group: dict[str, Any]) -> Decimal:
    """Logical CPUs Ray sees on one pod of the group (rayStartParams win over limits)."""
    params = group.get("rayStartParams") or {}
    if "num-cpus" in params:
        return Decimal(params["num-cpus"])
    resources = group["template"]["spec"]["containers"][0].get("resources") or {}
    cpu = (resources.get("limits") or {}).get("cpu") or (resources.get("requests") or {}).get("cpu")
    return parse_quantity(cpu) if cpu is not None else Decimal(0)


def _num_gpus_problems(
    params: dict[str, str], ray_container: dict[str, Any], path: FieldPath
) -> list[Problem]:
    if "num-gpus" not in params:
        return []
    try:
        declared = Decimal(params["num-gpus"])
    except ArithmeticError:
        return [
            Problem(
                format_path((*path, "rayStartParams", "num-gpus")),
                f"{params['num-gpus']!r} is not a number",
            )
        ]
    try:
        limit = gpus_of(ray_container)
    except QuantityError:
        return []  # reported by container_resource_problems
    if declared != limit:
        return [
            Problem(
                format_path((*path, "rayStartParams", "num-gpus")),
                f"{declared} differs from the Ray container's GPU limit {limit}",
            )
        ]
    return []


def _pods(spec: dict[str, Any], path: FieldPath) -> Iterator[tuple[FieldPath, dict[str, Any]]]:
    yield (*path, "headGroupSpec", "template", "spec"), spec["headGroupSpec"]["template"]["spec"]
    for i, group in enumerate(spec.get("workerGroupSpecs") or []):
        yield (*path, "workerGroupSpecs", i, "template", "spec"), group["template"]["spec"]


def _image_problems(spec: dict[str, Any], path: FieldPath) -> list[Problem]:
    """Every Ray container must run the same image: Ray refuses mixed versions."""
    problems, first = [], None
    for pod_path, pod in _pods(spec, path):
        containers = pod.get("containers") or []
        if not containers:
            continue
        image = containers[0].get("image")
        ipath = format_path((*pod_path, "containers", 0, "image"))
        if not image:
            problems.append(Problem(ipath, "the Ray container needs an image"))
        elif first is None:
            first = image
        elif image != first:
            problems.append(Problem(ipath, f"{image!r} differs from the head's image {first!r}"))
    return problems


def _autoscaler_problems(spec: dict[str, Any], path: FieldPath) -> list[Problem]:
    if not spec.get("enableInTreeAutoscaling"):
        return [
            Problem(
                format_path((*path, "workerGroupSpecs", i, "suspend")),
                "suspended worker groups need the autoscaler",
            )
            for i, g in enumerate(spec.get("workerGroupSpecs") or [])
            if g.get("suspend")
        ]
    problems = []
    if (spec.get("autoscalerOptions") or {}).get("version") == "v2":
        for pod_path, pod in _pods(spec, path):
            if pod.get("restartPolicy") not in (None, "Never"):
                problems.append(
                    Problem(
                        format_path((*pod_path, "restartPolicy")),
                        "must be Never or unset with autoscaler v2",
                    )
                )
    return problems


def check_rayjob(spec: dict[str, Any], raw_spec: dict[str, Any], path: FieldPath) -> list[Problem]:
    """KubeRay's RayJob rules, and ours: the lifecycle fields are set explicitly
    (``raw_spec`` is the spec as written, before schema defaults). ``path`` is where the
    spec sits: ``spec`` in a RayJob, ``spec.jobTemplate`` in a RayCronJob."""

    def at(key: str) -> str:
        return format_path((*path, key))

    problems = [
        Problem(at(key), "must be set explicitly in our RayJobs")
        for key in (
            "entrypoint",
            "runtimeEnvYAML",
            "shutdownAfterJobFinishes",
            "ttlSecondsAfterFinished",
            "backoffLimit",
            "activeDeadlineSeconds",
        )
        if key not in raw_spec
    ]
    shutdown, ttl = (
        spec.get("shutdownAfterJobFinishes", False),
        spec.get("ttlSecondsAfterFinished", 0),
    )
    if spec.get("suspend") and not shutdown:
        problems.append(
            Problem(
                at("suspend"), "a RayJob with shutdownAfterJobFinishes false cannot be suspended"
            )
        )
    if ttl < 0:
        problems.append(Problem(at("ttlSecondsAfterFinished"), "must be >= 0"))
    elif ttl > 0 and not shutdown:
        problems.append(
            Problem(at("ttlSecondsAfterFinished"), "needs shutdownAfterJobFinishes: true")
        )
    selector = spec.get("clusterSelector")
    if not spec.get("rayClusterSpec") and not selector:
        problems.append(
            Problem(at("rayClusterSpec"), "one of rayClusterSpec or clusterSelector must be set")
        )
    if selector and spec.get("backoffLimit", 0) > 0:
        problems.append(
            Problem(at("backoffLimit"), "retries are incompatible with clusterSelector")
        )
    if spec.get("backoffLimit", 0) < 0:
        problems.append(Problem(at("backoffLimit"), "must be >= 0"))
    for key in ("activeDeadlineSeconds", "preRunningDeadlineSeconds"):
        if key in spec and spec[key] <= 0:
            problems.append(Problem(at(key), "must be > 0"))
    return problems


def capacity_problems(spec: dict[str, Any], path: FieldPath, needs: Any) -> list[Problem]:
    """A stage's workers (``needs``: gpus, cpus, what) must fit the worker groups at
    their largest; the head runs no work, so it does not count."""
    groups = spec.get("workerGroupSpecs") or []
    hosts = [g["maxReplicas"] * g.get("numOfHosts", 1) for g in groups]
    gpus = sum(
        n * gpus_of(g["template"]["spec"]["containers"][0])
        for n, g in zip(hosts, groups, strict=True)
    )
    cpus = sum(n * cpus_of(g) for n, g in zip(hosts, groups, strict=True))
    where = format_path((*path, "workerGroupSpecs"))
    problems = []
    if needs.gpus > gpus:
        problems.append(
            Problem(
                where,
                f"{needs.what} need {needs.gpus} GPUs; the worker groups offer at most {gpus}",
            )
        )
    if needs.cpus > cpus:
        problems.append(
            Problem(
                where,
                f"{needs.what} need {needs.cpus} CPUs; the worker groups offer at most {cpus}",
            )
        )
    return problems
