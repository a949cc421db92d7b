"""The KubeRay deployment under k8s/: every manifest, rendered through each overlay,
passes the validator; deliberately broken copies fail with a message naming the field."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from agentworld.deploy.crd import default_crd_dir
from agentworld.deploy.kustomize import KustomizeError, build
from agentworld.deploy.validate import overlay_dirs, validate

ROOT = Path(__file__).resolve().parents[1]
CRDS = default_crd_dir(ROOT)
STAGES_DEPLOYED = {"collect", "prepare", "cpt", "sft", "rl", "evaluate"}


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of what the validator reads (k8s/, jobs/, serve/, pyproject.toml, README.md;
    platform/ linked: the image build file copies it)."""
    for name in ("k8s", "jobs", "serve"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, tmp_path / name)
    (tmp_path / "platform").symlink_to(ROOT / "platform")
    return tmp_path


def edit(path: Path, change: Callable[[list], None]) -> None:
    """Load every YAML document of ``path``, let ``change`` mutate them, write them back."""
    docs = list(yaml.safe_load_all(path.read_text()))
    change(docs)
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))


def problems_of(root: Path) -> list[str]:
    return [str(p) for p in validate(root, crd_dir=CRDS)]


def find(problems: list[str], *fragments: str) -> list[str]:
    return [p for p in problems if all(f in p for f in fragments)]


def exactly_one(problems: list[str], *fragments: str) -> None:
    found = find(problems, *fragments)
    assert len(found) == 1, found


def cluster(docs: list) -> dict:
    return docs[0]["spec"]


def test_every_manifest_through_each_overlay_passes():
    overlays = {str(d.relative_to(ROOT)) for d in overlay_dirs(ROOT)}
    assert {
        "k8s/overlays/cpu",
        "k8s/overlays/cpu/jobs",
        "k8s/overlays/gpu",
        "k8s/overlays/gpu/jobs",
    } <= overlays
    assert problems_of(ROOT) == []
    jobs = {p.stem for p in (ROOT / "jobs").glob("*.py")}
    for overlay in ("cpu", "gpu"):
        kinds = [r.doc["kind"] for r in build(ROOT / "k8s/overlays" / overlay).resources]
        assert kinds.count("RayCluster") == 1
        rendered = build(ROOT / "k8s/overlays" / overlay / "jobs").resources
        staged = {r.doc["metadata"]["labels"]["agentworld.dev/stage"] for r in rendered}
        # One RayJob per pipeline stage, each running a job file that exists.
        assert STAGES_DEPLOYED <= staged <= jobs


def test_misspelled_field_is_named(tree):
    def misspell(docs):
        head = cluster(docs)["headGroupSpec"]["template"]["spec"]["containers"][0]
        head["imagePullPolicey"] = head.pop("imagePullPolicy")

    edit(tree / "k8s/base/raycluster.yaml", misspell)
    field = "spec.headGroupSpec.template.spec.containers[0].imagePullPolicey"
    found = find(
        problems_of(tree),
        "RayCluster/agentworld",
        f"{field}: unknown field; did you mean 'imagePullPolicy'?",
    )
    assert len(found) == 2  # through the cpu and the gpu overlay


def test_wrong_type_is_named(tree):
    edit(
        tree / "k8s/base/raycluster.yaml",
        lambda docs: cluster(docs)["headGroupSpec"]["rayStartParams"].update({"num-cpus": 0}),
    )
    assert find(
        problems_of(tree),
        "spec.headGroupSpec.rayStartParams.num-cpus: must be of type string, got 0",
    )


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("one", "'one' is not a Kubernetes quantity"),
        ("0.5", "'0.5': nvidia.com/gpu must be a whole number"),
        (0.5, "must be an integer or a string, got 0.5"),
    ],
)
def test_bad_gpu_quantity_is_named(tree, value, message):
    def set_gpus(docs):
        cluster(docs)["workerGroupSpecs"][1]["template"]["spec"]["containers"][0]["resources"][
            "limits"
        ]["nvidia.com/gpu"] = value

    edit(tree / "k8s/base/raycluster.yaml", set_gpus)
    field = "spec.workerGroupSpecs[1].template.spec.containers[0].resources.limits[nvidia.com/gpu]"
    assert find(problems_of(tree), "k8s/overlays/gpu RayCluster/agentworld", f"{field}: {message}")


def test_missing_required_field_is_named_and_defaults_fill_the_rest(tree):
    def drop(docs):
        group = cluster(docs)["workerGroupSpecs"][0]
        del group["groupName"]
        del group["minReplicas"]  # has a schema default (0): not an error
        group["replicas"] = None  # YAML null: pruned, then defaulted

    edit(tree / "k8s/base/raycluster.yaml", drop)
    problems = problems_of(tree)
    assert find(problems, "spec.workerGroupSpecs[0].groupName: required field is missing")
    assert not find(problems, "minReplicas") and not find(problems, ".replicas")


def test_int32_range_is_checked(tree):
    edit(
        tree / "k8s/base/raycluster.yaml",
        lambda docs: cluster(docs)["workerGroupSpecs"][0].update({"maxReplicas": 2**31}),
    )
    assert find(
        problems_of(tree),
        "spec.workerGroupSpecs[0].maxReplicas: 2147483648 is out of range for int32",
    )


def test_entrypoint_naming_a_missing_recipe_is_named(tree):
    def use_missing_recipe(docs):
        docs[0][0]["value"] = "python jobs/demo.py --recipe no_such_recipe --out /data/runs/demo"

    edit(tree / "k8s/overlays/cpu/jobs/collect.yaml", use_missing_recipe)
    exactly_one(
        problems_of(tree),
        "k8s/overlays/cpu/jobs RayJob/agentworld-collect",
        "spec.entrypoint: recipe 'no_such_recipe' does not exist (known: ",
    )


def test_entrypoint_naming_a_missing_job_or_bad_argument_is_named(tree):
    patch = tree / "k8s/overlays/cpu/jobs/collect.yaml"
    text = patch.read_text()
    patch.write_text(text.replace("jobs/collect.py", "jobs/colect.py"))
    assert find(
        problems_of(tree),
        "RayJob/agentworld-collect",
        "spec.entrypoint: jobs/colect.py does not exist",
    )
    patch.write_text(text.replace("collect.episodes=24", "collect.episodes=many"))
    assert find(
        problems_of(tree),
        "RayJob/agentworld-collect",
        "jobs/collect.py rejects its configuration",
        "collect.episodes",
    )


def test_credentials_only_through_secrets(tree):
    def literal_key(docs):
        head = cluster(docs)["headGroupSpec"]["template"]["spec"]["containers"][0]
        head["env"] = [
            {"name": "AWS_SECRET_ACCESS_KEY", "value": "hunter2hunter2"},
            {"name": "TOKENIZERS_PARALLELISM", "value": "false"},
        ]

    edit(tree / "k8s/base/raycluster.yaml", literal_key)
    problems = problems_of(tree)
    assert find(
        problems,
        "spec.headGroupSpec.template.spec.containers[0].env[0].value: AWS_SECRET_ACCESS_KEY must come from a Secret",
    )
    assert not find(problems, "TOKENIZERS_PARALLELISM")


def test_rayjob_lifecycle_fields_runtime_env_and_kuberay_rules(tree):
    def loosen(docs):
        spec = docs[0]["spec"]
        del spec["backoffLimit"]
        spec["shutdownAfterJobFinishes"] = False  # ttlSecondsAfterFinished > 0 needs it
        spec["runtimeEnvYAML"] = "working_dir: /app\nenv_var: {WANDB_MODE: online}\n"

    edit(tree / "k8s/base/jobs/rayjob-collect.yaml", loosen)
    problems = find(problems_of(tree), "k8s/overlays/gpu/jobs RayJob/agentworld-collect")
    assert find(problems, "spec.backoffLimit: must be set explicitly")
    assert find(problems, "spec.ttlSecondsAfterFinished: needs shutdownAfterJobFinishes: true")
    assert find(problems, "spec.runtimeEnvYAML.env_var: not a runtime_env field")
    assert find(
        problems,
        "spec.runtimeEnvYAML.working_dir: must be the image's WORKDIR '/home/ray/agentworld'",
    )


def test_head_runs_no_work(tree):
    edit(
        tree / "k8s/base/raycluster.yaml",
        lambda docs: cluster(docs)["headGroupSpec"]["rayStartParams"].update({"num-cpus": "8"}),
    )
    assert find(problems_of(tree), 'spec.headGroupSpec.rayStartParams.num-cpus: must be "0"')


def test_unrendered_manifest_and_broken_image_file_are_reported(tree):
    (tree / "k8s/base/stray.yaml").write_text(
        "apiVersion: ray.io/v1\nkind: RayCluster\nmetadata: {name: stray}\n"
    )
    dockerfile = tree / "k8s/Dockerfile"
    dockerfile.write_text(dockerfile.read_text().replace('-e ".[gpu]"', "-e ."))
    problems = problems_of(tree)
    assert find(problems, "k8s/base/stray.yaml: no overlay renders this file")
    assert find(problems, "k8s/Dockerfile: stage gpu: installs no `.[gpu]`")


def test_renderer_applies_patches_namespace_labels_images(tree):
    rendered = build(tree / "k8s/overlays/cpu").resources
    (rc,) = [r.doc for r in rendered if r.doc["kind"] == "RayCluster"]
    assert rc["metadata"]["namespace"] == "agentworld-trial"
    assert rc["metadata"]["labels"]["agentworld.dev/overlay"] == "cpu"
    assert [g["groupName"] for g in rc["spec"]["workerGroupSpecs"]] == ["cpu"]
    images = {
        c["image"]
        for g in [rc["spec"]["headGroupSpec"], *rc["spec"]["workerGroupSpecs"]]
        for c in g["template"]["spec"]["containers"]
    }
    assert images == {"agentworld:0.1.0-cpu"}


@pytest.mark.parametrize(
    ("kustomization", "message"),
    [
        ("namePrefix: x-\n", "field 'namePrefix' is not supported"),
        (
            "patches:\n  - target: {kind: RayJob, name: nope}\n    patch: '[{op: remove, path: /spec/suspend}]'\n",
            "matches no resource",
        ),
        ("resources:\n  - ../../../README.md\n", "is outside"),
    ],
)
def test_renderer_refuses_what_it_cannot_render_faithfully(tree, kustomization, message):
    target = tree / "k8s/overlays/gpu/kustomization.yaml"
    target.write_text(target.read_text() + kustomization)
    (tree / "README.md").write_text("x")
    with pytest.raises(KustomizeError, match=message):
        build(target.parent)


def test_stage_must_fit_its_cluster(tree):
    def many_engines(docs):
        docs[0][0]["value"] += " --set evaluate.infer.vllm.engine.replicas=8"

    edit(tree / "k8s/overlays/cpu/jobs/evaluate.yaml", many_engines)
    exactly_one(
        problems_of(tree),
        "k8s/overlays/cpu/jobs RayJob/agentworld-evaluate",
        "spec.rayClusterSpec.workerGroupSpecs: 8 vLLM engines (recipe.evaluate.infer.vllm) need 8.0 CPUs; the worker groups offer at most 4",
    )


def _serve_config(docs: list) -> dict:
    return yaml.safe_load(docs[0]["spec"]["serveConfigV2"])


def _set_serve_config(docs: list, change: Callable[[dict], None]) -> None:
    config = _serve_config(docs)
    change(config)
    docs[0]["spec"]["serveConfigV2"] = yaml.safe_dump(config, sort_keys=False)


def test_serve_config_import_path_that_does_not_exist_is_named(tree):
    def break_import(docs):
        _set_serve_config(
            docs,
            lambda c: c["applications"][0].update({"import_path": "agentworld.sim.nope:build_app"}),
        )

    edit(tree / "k8s/base/sim/rayservice.yaml", break_import)
    field = "spec.serveConfigV2.applications[0].import_path"
    assert find(
        problems_of(tree),
        "RayService/agentworld-sim",
        f"{field}: cannot import 'agentworld.sim.nope:build_app'",
    )


def test_serve_config_is_checked_by_serve_schema_app_config_and_source(tree):
    def break_config(docs):
        def change(c):
            c["proxy_location"] = "Everywhere"
            c["applications"][0]["args"]["limits"]["max_turn"] = 3

        _set_serve_config(docs, change)

    edit(tree / "k8s/base/sim/rayservice.yaml", break_config)
    problems = problems_of(tree)
    assert find(
        problems,
        "spec.serveConfigV2.proxy_location: Input should be 'Disabled', 'HeadOnly' or 'EveryNode'",
    )
    assert find(problems, "spec.serveConfigV2: differs from serve/sim_gpu.yaml")

    edit(
        tree / "k8s/base/sim/rayservice.yaml",
        lambda docs: _set_serve_config(docs, lambda c: c.update({"proxy_location": "EveryNode"})),
    )
    assert find(
        problems_of(tree), "spec.serveConfigV2.applications[0].args.limits.max_turn: unknown field"
    )


def test_sync_serve_copies_the_serve_file(tree):
    from agentworld.deploy.rayconfig import sync_serve_configs

    source = tree / "serve/sim_gpu.yaml"
    source.write_text(source.read_text().replace(" replicas: 2", " replicas: 3"))
    assert find(problems_of(tree), "spec.serveConfigV2: differs from serve/sim_gpu.yaml")
    assert sync_serve_configs(tree) == [tree / "k8s/base/sim/rayservice.yaml"]
    assert problems_of(tree) == []
    assert (
        _serve_config(
            list(yaml.safe_load_all((tree / "k8s/base/sim/rayservice.yaml").read_text()))
        )["applications"][0]["args"]["engine"]["replicas"]
        == 3
    )


def test_training_recipe_must_fit_its_gang(tree):
    def half_the_gang(docs):
        docs[0]["spec"]["rayClusterSpec"]["workerGroupSpecs"][0].update(
            replicas=4, minReplicas=4, maxReplicas=4
        )

    edit(tree / "k8s/base/jobs/rayjob-cpt.yaml", half_the_gang)
    exactly_one(
        problems_of(tree),
        "k8s/overlays/gpu/jobs RayJob/agentworld-cpt",
        "spec.rayClusterSpec.workerGroupSpecs: 64 Ray Train workers (recipe.cluster) need 64 GPUs; the worker groups offer at most 32",
    )
