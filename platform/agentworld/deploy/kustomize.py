"""Offline rendering of the kustomize features our overlays use, with kustomize's
semantics for them; every other kustomization field is refused, so that what the
validator checks is what ``kubectl apply -k`` applies.

Supported: ``resources`` (files under the kustomization's folder, or other
kustomization folders), ``components``, ``namespace``, ``labels`` (metadata only),
``images`` (every ``containers``/``initContainers`` image in any kind, as kustomize does)
and ``patches`` that are RFC 6902 op lists with a ``target``. Run order follows
kustomize: resources, components, then patches, namespace, labels, images.
One rule is stricter than kustomize: a patch whose target matches nothing is an error
(kustomize skips it, which hides a misspelled target).
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import yaml

from agentworld.deploy.jsonpatch import PatchError, apply_patch

KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
API_VERSIONS = {
    "Kustomization": "kustomize.config.k8s.io/v1beta1",
    "Component": "kustomize.config.k8s.io/v1alpha1",
}
SUPPORTED_FIELDS = {
    "apiVersion",
    "kind",
    "resources",
    "components",
    "namespace",
    "labels",
    "images",
    "patches",
}
_CLUSTER_SCOPED = {
    "Namespace",
    "ClusterRole",
    "ClusterRoleBinding",
    "CustomResourceDefinition",
    "PersistentVolume",
}


class KustomizeError(ValueError):
    """A kustomization cannot be rendered; the message names the file and field."""


@dataclasses.dataclass
class Resource:
    """One rendered object and the manifest file it came from."""

    doc: dict[str, Any]
    origin: Path

    @property
    def ref(self) -> str:
        return f"{self.doc.get('kind')}/{self.doc.get('metadata', {}).get('name')}"


@dataclasses.dataclass
class Rendered:
    """The objects of one kustomization and every file that was read to make them."""

    resources: list[Resource]
    files: set[Path]


def find_kustomization(directory: Path) -> Path | None:
    for name in KUSTOMIZATION_FILES:
        if (directory / name).is_file():
            return directory / name
    return None


def build(directory: Path) -> Rendered:
    """Render the kustomization in ``directory`` (like ``kubectl kustomize DIR``)."""
    return _build(Path(directory).resolve(), "Kustomization", ())


def _build(directory: Path, kind: str, stack: tuple[Path, ...]) -> Rendered:
    if directory in stack:
        raise KustomizeError(f"{directory}: kustomization cycle through {[str(p) for p in stack]}")
    file, kust = _load(directory, kind)
    out = Rendered([], {file})
    for entry in kust.get("resources") or []:
        _add_resources(
            out,
            _resolve(directory, entry, file, "resources", allow_dir=True),
            file,
            (*stack, directory),
        )
    _check_unique_ids(out.resources, file)
    for entry in kust.get("components") or []:
        comp_dir = _resolve(directory, entry, file, "components", allow_dir=True)
        comp = _build(comp_dir, "Component", (*stack, directory))
        out.resources.extend(comp.resources)
        out.files |= comp.files
        _check_unique_ids(out.resources, file)
        _transform(out, comp_dir, _load(comp_dir, "Component")[1])
    _transform(out, directory, kust)
    return out


def _load(directory: Path, kind: str) -> tuple[Path, dict[str, Any]]:
    file = find_kustomization(directory)
    if file is None:
        raise KustomizeError(f"{directory}: no kustomization.yaml")
    kust = yaml.safe_load(file.read_text()) or {}
    if kust.get("kind", "Kustomization") != kind:
        raise KustomizeError(f"{file}: kind must be {kind}, got {kust.get('kind')!r}")
    if kust.get("apiVersion", API_VERSIONS[kind]) != API_VERSIONS[kind]:
        raise KustomizeError(f"{file}: apiVersion must be {API_VERSIONS[kind]}")
    unsupported = sorted(set(kust) - SUPPORTED_FIELDS)
    if unsupported:
        raise KustomizeError(
            f"{file}: field {unsupported[0]!r} is not supported by the offline renderer "
            f"(supported: {', '.join(sorted(SUPPORTED_FIELDS))})"
        )
    return file, kust


def _resolve(directory: Path, entry: object, file: Path, field: str, *, allow_dir: bool) -> Path:
    if not isinstance(entry, str) or "://" in entry or entry.startswith("github.com/"):
        raise KustomizeError(f"{file}: {field}: {entry!r} must be a local path")
    path = (directory / entry).resolve()
    if not path.exists():
        raise KustomizeError(f"{file}: {field}: {entry!r} does not exist")
    # kustomize's default load restriction: files must lie under the kustomization's
    # folder; only other kustomization folders may be outside it.
    if not (allow_dir and path.is_dir()) and not path.is_relative_to(directory):
        raise KustomizeError(
            f"{file}: {field}: {entry!r} is outside {directory} (kustomize refuses it)"
        )
    return path


def _add_resources(out: Rendered, path: Path, file: Path, stack: tuple[Path, ...]) -> None:
    if path.is_dir():
        sub = _build(path, "Kustomization", stack)
        out.resources.extend(sub.resources)
        out.files |= sub.files
        return
    out.files.add(path)
    for i, doc in enumerate(yaml.safe_load_all(path.read_text())):
        if doc is None:
            continue
        if (
            not isinstance(doc, dict)
            or not doc.get("kind")
            or not (doc.get("metadata") or {}).get("name")
        ):
            # kustomize identifies objects by name and refuses generateName alone
            # (kubernetes-sigs/kustomize#641): such a manifest is for `kubectl create -f`.
            raise KustomizeError(
                f"{path}: document {i} needs kind and metadata.name (kustomize does not "
                "take generateName; create such a manifest with kubectl create -f)"
            )
        out.resources.append(Resource(doc, path))


def _resource_id(doc: dict[str, Any]) -> tuple[str, str, str, str]:
    group = str(doc.get("apiVersion", "")).rpartition("/")[0]
    meta = doc.get("metadata") or {}
    return group, str(doc.get("kind")), str(meta.get("namespace", "")), str(meta.get("name"))


def _check_unique_ids(resources: list[Resource], file: Path) -> None:
    seen: dict[tuple, Resource] = {}
    for r in resources:
        rid = _resource_id(r.doc)
        if rid in seen:
            raise KustomizeError(
                f"{file}: {r.ref} from {r.origin} is already defined in {seen[rid].origin}"
            )
        seen[rid] = r


def _transform(out: Rendered, directory: Path, kust: dict[str, Any]) -> None:
    file = find_kustomization(directory)
    for i, patch in enumerate(kust.get("patches") or []):
        _apply_patch_entry(out, directory, file, i, patch)
    if kust.get("namespace"):
        for r in out.resources:
            if r.doc["kind"] not in _CLUSTER_SCOPED:
                r.doc["metadata"]["namespace"] = kust["namespace"]
    for i, entry in enumerate(kust.get("labels") or []):
        _apply_labels(out.resources, entry, f"{file}: labels[{i}]")
    for i, image in enumerate(kust.get("images") or []):
        if not isinstance(image, dict) or not image.get("name"):
            raise KustomizeError(f"{file}: images[{i}]: needs a name")
        for r in out.resources:
            _retag(r.doc, image)


def _apply_patch_entry(out: Rendered, directory: Path, file: Path, i: int, entry: dict) -> None:
    where = f"{file}: patches[{i}]"
    if set(entry) - {"path", "patch", "target"}:
        raise KustomizeError(f"{where}: only path, patch and target are supported")
    if "path" in entry:
        path = _resolve(directory, entry["path"], file, f"patches[{i}].path", allow_dir=False)
        out.files.add(path)
        ops = yaml.safe_load(path.read_text())
    else:
        ops = yaml.safe_load(entry.get("patch") or "")
    if not isinstance(ops, list) or "target" not in entry:
        raise KustomizeError(
            f"{where}: only JSON 6902 patches (a list of ops) with a target are supported"
        )
    matched = [r for r in out.resources if _matches(r.doc, entry["target"], where)]
    if not matched:
        raise KustomizeError(f"{where}: target {entry['target']} matches no resource")
    for r in matched:
        before = _resource_id(r.doc)
        try:
            r.doc = apply_patch(r.doc, ops)
        except PatchError as e:
            raise KustomizeError(f"{where} on {r.ref}: {e}") from None
        if _resource_id(r.doc) != before:
            raise KustomizeError(
                f"{where}: a patch may not change the kind, name or namespace of {r.ref}"
            )


def _matches(doc: dict[str, Any], target: dict[str, Any], where: str) -> bool:
    group, _, version = str(doc.get("apiVersion", "")).rpartition("/")
    meta = doc.get("metadata") or {}
    facts = {
        "group": group,
        "version": version,
        "kind": doc.get("kind"),
        "name": meta.get("name"),
        "namespace": meta.get("namespace", ""),
    }
    for key, want in target.items():
        if key in facts:
            # kustomize treats target names (and the other strings) as anchored regexes.
            if not re.fullmatch(str(want), str(facts[key] or "")):
                return False
        elif key == "labelSelector":
            if not _selects(meta.get("labels") or {}, str(want)):
                return False
        else:
            raise KustomizeError(f"{where}: target field {key!r} is not supported")
    return True


def _selects(labels: dict[str, str], selector: str) -> bool:
    """Equality-based label selectors: ``a=b``, ``a==b``, ``a!=b``, ``a``, ``!a``."""
    for term in filter(None, (t.strip() for t in selector.split(","))):
        if "!=" in term:
            k, v = (s.strip() for s in term.split("!=", 1))
            ok = labels.get(k) != v
        elif "=" in term:
            k, v = (s.strip() for s in term.replace("==", "=").split("=", 1))
            ok = labels.get(k) == v
        elif term.startswith("!"):
            ok = term[1:].strip() not in labels
        else:
            ok = term in labels
        if not ok:
            return False
    return True


def _apply_labels(resources: list[Resource], entry: dict, where: str) -> None:
    if entry.get("includeSelectors") or entry.get("includeTemplates"):
        raise KustomizeError(f"{where}: includeSelectors/includeTemplates are not supported")
    pairs = entry.get("pairs") or {}
    if not all(isinstance(v, str) for v in pairs.values()):
        raise KustomizeError(f"{where}: label values must be strings")
    for r in resources:
        r.doc["metadata"].setdefault("labels", {}).update(pairs)


def split_image(image: str) -> tuple[str, str]:
    """``registry:5000/repo/img:tag`` -> (``registry:5000/repo/img``, ``:tag``); digests too."""
    if "@" in image:
        name, _, digest = image.partition("@")
        return name, "@" + digest
    slash = image.rfind("/")
    colon = image.rfind(":")
    if colon > slash:
        return image[:colon], image[colon:]
    return image, ""


def _retag(node: Any, image: dict[str, Any]) -> None:
    if isinstance(node, list):
        for item in node:
            _retag(item, image)
        return
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        if key in ("containers", "initContainers") and isinstance(value, list):
            for c in value:
                if isinstance(c, dict) and isinstance(c.get("image"), str):
                    c["image"] = _new_image(c["image"], image)
        _retag(value, image)


def _new_image(current: str, image: dict[str, Any]) -> str:
    name, suffix = split_image(current)
    if name != image["name"]:
        return current
    name = image.get("newName") or name
    if image.get("digest"):
        return f"{name}@{image['digest']}"
    if image.get("newTag"):
        return f"{name}:{image['newTag']}"
    return name + suffix
