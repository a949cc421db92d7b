"""Session-wide real components shared by the tests: a local S3-compatible server
(moto's server mode on 127.0.0.1), a local Ray cluster, a tiny MoE checkpoint, the
simulator's Serve application on it.

Heavy pieces start once per session and only when a test asks for them.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import uuid
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# Tests run on a 2-core machine: keep torch from oversubscribing it.
os.environ.setdefault("OMP_NUM_THREADS", "2")
# vLLM's CPU build: a 1 GiB KV cache is plenty for tiny models and keeps several
# engines (tests, Serve replicas, rollout actors) inside the machine's memory.
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")

S3_REGION = "us-west-2"


@pytest.fixture(scope="session")
def s3_server():
    """A moto S3 server on 127.0.0.1 (random port). Yields its endpoint URL; the
    standard AWS_* variables are set so that s3fs (and Ray Data) reach it."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    saved = {k: os.environ.get(k) for k in _S3_ENV}
    os.environ.update(
        {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": S3_REGION,
            "AWS_REGION": S3_REGION,
            "AWS_ENDPOINT_URL": endpoint,
        }
    )
    yield endpoint
    server.stop()
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


_S3_ENV = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_DEFAULT_REGION",
    "AWS_REGION",
    "AWS_ENDPOINT_URL",
)


@pytest.fixture
def s3_bucket(s3_server, request):
    """A fresh bucket; yields its s3:// URL."""
    import uuid

    import s3fs

    fs = s3fs.S3FileSystem(
        client_kwargs={"endpoint_url": s3_server, "region_name": S3_REGION},
        skip_instance_cache=True,
    )
    name = f"test-{uuid.uuid4().hex[:12]}"
    fs.mkdir(name)
    yield f"s3://{name}"


@pytest.fixture(scope="session")
def ray_cluster():
    """One local Ray cluster for the whole session (4 logical CPUs on 2 cores, so that
    Serve and Train placement fit)."""
    import ray

    from agentworld.cluster import init_with_retry

    if not ray.is_initialized():
        init_with_retry(
            num_cpus=4,
            object_store_memory=2 * 1024**3,
            include_dashboard=False,
            log_to_driver=False,
            runtime_env={"env_vars": {"PYTHONPATH": str(ROOT / "platform")}},
        )
    yield ray
    ray.shutdown()


@pytest.fixture(scope="session")
def corpus_texts():
    """Text the tiny tokenizer is trained on: a small generated set of trajectories."""
    from agentworld.schema.examples import sample_trajectories

    texts = []
    for t in sample_trajectories(40):
        texts.append(t.environment)
        for turn in t.turns:
            texts.extend([turn.action, turn.observation])
    return texts


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory, corpus_texts):
    """A tiny Qwen3-MoE + tokenizer in HF format, built once per session."""
    from agentworld.model import build_tiny_checkpoint

    path = tmp_path_factory.mktemp("tiny-moe")
    build_tiny_checkpoint(corpus_texts, str(path))
    return str(path)


@pytest.fixture(scope="session")
def vllm_engine(tiny_checkpoint):
    """One vLLM (CPU build) engine on the tiny checkpoint, shared by the session."""
    import gc

    from vllm import LLM

    from agentworld.model.engine import EngineConfig, close_engine

    llm = LLM(
        model=tiny_checkpoint,
        dtype="float32",
        enforce_eager=True,
        gpu_memory_utilization=0.2,
        max_model_len=1024,
        seed=0,
    )
    yield llm
    close_engine(llm, EngineConfig())
    del llm
    gc.collect()


@pytest.fixture(scope="session")
def collected_corpus(tmp_path_factory, ray_cluster):
    """A small real corpus recorded by agentworld.collect, once per session: 40
    episodes over terminal, mcp, swe and search (10 each, seed 0). Returns the
    directory URL holding part-XXXXX.jsonl record shards and manifest.json."""
    from agentworld.collect import CollectConfig, collect

    out = str(tmp_path_factory.mktemp("collected") / "raw")
    config = CollectConfig(episodes=40, seed=0, episodes_per_task=10, max_parallel=2)
    collect(config, out)
    return out


@pytest.fixture(scope="session")
def packed_data(ray_cluster, collected_corpus, tmp_path_factory):
    """The prepare stage's output for the collected corpus, packed at test_train's short
    recipe's length, a fifth of the trajectories held out."""
    from agentworld.data.run import prepare
    from agentworld.recipes.jobs import prepare_job
    from tests.test_train import short_recipe

    recipe = short_recipe()
    # The test recipe's short rows drop long samples; drop rates are prepare's tests' concern.
    data = dataclasses.replace(
        recipe.data, eval_fraction=0.2, progress_bars=False, max_domain_drop_share=1.0
    )
    out = str(tmp_path_factory.mktemp("prepared"))
    prepare(
        prepare_job(dataclasses.replace(recipe, data=data), inputs=(collected_corpus,), out=out)
    )
    return out


@pytest.fixture(scope="session")
def cpt_run(ray_cluster, packed_data, tmp_path_factory):
    """One short CPT run on ``packed_data`` (Ray Train + DeepSpeed, 2 workers, experts
    split 2 ways), shared by test_train and by test_rl_pipeline (its starting policy):
    (run directory, manifest, the run's log lines)."""
    from tests.test_train import _run

    out = str(tmp_path_factory.mktemp("cpt"))
    manifest, lines = _run("cpt", packed_data, out)
    return out, manifest, lines


SIM_KEYS = {
    "team-a": "sk-team-a-0001",
    "team-b": "sk-team-b-0002",
    "team-c": "sk-team-c-0003",
    "team-d": "sk-team-d-0004",  # the fuzzer's and the metrics test's own team
    "team-e": "sk-team-e-0005",  # the simulated MCP servers' and the playground's teams
    "team-f": "sk-team-f-0006",
}
SIM_TIMEOUT_S = 20  # limits.request_timeout_s: a 12-token step takes well under 1 s


_SIM_APP: dict = {}
"""The running simulator app (``url``, ``stop``), shared by consecutive modules."""


@pytest.fixture(scope="module")
def sim_url(request, ray_cluster, tiny_checkpoint, tmp_path_factory):
    """serve/sim_cpu.yaml deployed with the tiny checkpoint and the test teams (team-c
    is rate limited hard); yields the base URL. Started once for the modules that use
    it (about 80 s on an idle 2-core machine) and stopped after the last of them: the
    app holds the cluster's CPUs, which the modules after it (Ray Train, RL) need."""
    if not _SIM_APP:
        _SIM_APP.update(start_sim_app(ray_cluster, tiny_checkpoint, tmp_path_factory))
    yield _SIM_APP["url"]
    items = request.session.items
    last = max(i for i, item in enumerate(items) if item.module is request.module)
    if not any("sim_url" in item.fixturenames for item in items[last + 1 :]):
        _SIM_APP.pop("stop")()
        _SIM_APP.clear()


def start_sim_app(ray_cluster, model: str, tmp_path_factory, **engine) -> dict:
    """serve/sim_cpu.yaml deployed with ``model`` and the test teams (``engine``: more
    engine settings); returns its ``url`` and ``stop``."""
    from ray import serve

    from agentworld.sim.placement.app import build_app

    config = yaml.safe_load((ROOT / "serve" / "sim_cpu.yaml").read_text())
    app_config = config["applications"][0]
    args = app_config["args"]
    args["model"] = model
    args["engine"].update(max_model_len=1024, **engine)
    args["auth"] = {"api_keys": SIM_KEYS, "api_keys_env": None}
    # team-c is limited hard for the rate-limit test; the others must never be, however
    # fast an idle machine runs the modules (burst 20 alone runs out within one test).
    args["limits"].update(
        burst=20,
        rate_per_minute=100_000,
        max_request_bytes=16 * 1024,
        team_rate_per_minute={"team-c": 1},
        request_timeout_s=SIM_TIMEOUT_S,
    )
    args["ingress_replicas"] = 2  # any replica serves any session (the store is shared)
    args["store_name"] = f"sim-test-{uuid.uuid4().hex[:8]}"
    args["storage_url"] = str(tmp_path_factory.mktemp("sim-sessions"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    serve.run(build_app(args), name=app_config["name"], route_prefix=app_config["route_prefix"])

    def stop() -> None:
        serve.delete(app_config["name"])
        serve.shutdown()
        store = ray_cluster.get_actor(args["store_name"], namespace=args["store_namespace"])
        ray_cluster.kill(store)

    return {"url": f"http://127.0.0.1:{port}", "stop": stop}
