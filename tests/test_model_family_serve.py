"""Serving the released model family: the engine config carries what the family needs
to vLLM, and where the CPU build of vLLM cannot run an architecture (Qwen3.5-MoE: its
qwen3_5 module needs torchvision, which has no CPU build for torch 2.13 on our
registries), every job that would start an engine stops before any work with one line
naming the architecture and the reason, and exit code 2."""

from __future__ import annotations

import subprocess
import sys

import pytest

from agentworld.model.engine import EngineConfig
from tests.conftest import ROOT
from tests.family_checkpoints import build_family_checkpoint, family_tokenizer
from tests.test_model_family_units import corpus


def test_the_engine_config_passes_the_family_settings_to_vllm():
    plain = EngineConfig().vllm_kwargs()
    assert not {"language_model_only", "reasoning_parser", "trust_remote_code"} & set(plain)
    family = EngineConfig(language_model_only=True, reasoning_parser="qwen3").vllm_kwargs()
    assert family["language_model_only"] is True and family["reasoning_parser"] == "qwen3"
    import dataclasses

    from vllm.engine.arg_utils import EngineArgs

    # Every key is an engine argument of the installed vLLM.
    assert set(family) <= {f.name for f in dataclasses.fields(EngineArgs)}


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("released") / "qwen35")
    return build_family_checkpoint("qwen3_5_moe", family_tokenizer(corpus()), path)


def _job(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *argv], cwd=ROOT, capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize(
    "job",
    [
        ("jobs/serve.py", "--model", "{ckpt}"),
        ("jobs/evaluate.py", "infer", "--input", "{data}", "--out", "{out}", "--model", "{ckpt}"),
        ("jobs/rl.py", "--data", "{data}", "--init", "{ckpt}", "--out", "{out}"),
        ("jobs/agent.py", "train", "--world-model", "{ckpt}", "--out", "{out}"),
    ],
    ids=["serve", "evaluate", "rl", "agent"],
)
def test_a_job_refuses_an_architecture_vllm_cpu_cannot_run_before_any_work(job, released, tmp_path):
    """Red without check_engine_can_run: serve deployed and vLLM failed minutes later
    on its torchvision import (evaluate, rl and agent likewise inside Ray actors)."""
    out = tmp_path / "out"
    values = {"ckpt": released, "data": released, "out": str(out)}
    res = _job(*(a.format(**values) for a in job))
    assert res.returncode == 2, res.stdout[-2000:] + res.stderr[-2000:]
    lines = [x for x in res.stderr.splitlines() if "invalid configuration" in x]
    assert len(lines) == 1, res.stderr[-2000:]
    assert "Qwen3_5MoeForConditionalGeneration (Qwen3.5-MoE)" in lines[0]
    assert "torchvision" in lines[0] and "CPU build" in lines[0]
    assert not out.exists()  # nothing was written
