"""A vLLM rollout engine: generates G predictions per prompt and takes new weights.

Identical prompts in one call (a GRPO group's siblings: same task, seed and history, as
the agent's episodes are on their first turn) go to vLLM as one request for all their
samples, so that the shared prompt is computed once, not once per sibling.

vLLM V1 runs the model in an EngineCore process (and a worker process under it), so
new weights cannot be copied into the module from here. The learner's safetensors blob
(checkpoint names and layout) is written as it is to a node-local directory
(``/dev/shm`` where there is one) and every worker is told over ``collective_rpc`` to
load it into the running model (``WeightSyncExtension``, vLLM's worker-extension
hook); the prefix cache, computed with the old weights, is dropped; the engine's weight
version is set and read back. Used as a Ray actor by ``agentworld.rl.placement``;
knows nothing of Ray.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from typing import Any

from agentworld.model import local_model_dir
from agentworld.model.engine import close_engine, start_llm
from agentworld.rl.config import RolloutConfig


@dataclass(frozen=True, kw_only=True)
class Completion:
    token_ids: tuple[int, ...]
    """Generated tokens, the end-of-turn token included when generation stopped on it."""
    text: str
    """Decoded text with special tokens kept (tags), end-of-turn token removed."""
    finished: bool
    """True when generation stopped by itself, False when cut at max_new_tokens."""


def sibling_groups(prompts: list[list[int]]) -> list[list[int]]:
    """Indices of ``prompts`` grouped by identical prompt, in order of first appearance."""
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, p in enumerate(prompts):
        groups.setdefault(tuple(p), []).append(i)
    return list(groups.values())


def _shm_dir() -> str:
    base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    return tempfile.mkdtemp(prefix="agentworld-weights-", dir=base)


class WeightSyncExtension:
    """Methods added to every vLLM worker (``worker_extension_cls``)."""

    def load_weights_from(self, path: str) -> int:
        """vLLM's in-place reload from ``path``, then the CPU MoE repack it skips.

        On a weight update vLLM (0.32) copies the new expert weights into the existing
        tensors but runs the CPU experts' prepack (their grouped-GEMM layout) only on
        the first load, so the CPU build would compute with unpacked weights. Returns
        the number of MoE layers repacked."""
        self.reload_weights(weights_path=path)  # type: ignore[attr-defined]
        return _repack_cpu_experts(self.model_runner.get_model())  # type: ignore[attr-defined]


def _repack_cpu_experts(model: Any) -> int:
    from vllm.model_executor.layers.fused_moe.experts.cpu_moe import CPUUnquantizedExperts

    n = 0
    for module in model.modules():
        kernel = getattr(getattr(module, "quant_method", None), "moe_kernel", None)
        experts = getattr(kernel, "fused_experts", None)
        if isinstance(experts, CPUUnquantizedExperts):
            experts.process_weights_after_loading(module)
            n += 1
    return n


class RolloutEngine:
    def __init__(self, model_dir: str, cfg: RolloutConfig, *, seed: int = 0) -> None:
        self.cfg = cfg
        # vLLM's NCCL weight-transfer engine in every worker (``agentworld.rl.nccl_sync``).
        nccl = {"weight_transfer_config": {"backend": "nccl"}} if cfg.weight_sync == "nccl" else {}
        self.llm = start_llm(
            local_model_dir(model_dir),
            cfg.engine,
            seed=seed,
            worker_extension_cls=f"{__name__}.WeightSyncExtension",
            **nccl,
        )
        self.tokenizer = self.llm.get_tokenizer()
        self._weights_dir = _shm_dir()
        self.llm.llm_engine.set_weight_version("0")
        self.engine_requests = 0
        self.last_load: dict[str, float] = {}
        """Seconds of the last ``load_weights``: writing the tensors, the engine's reload,
        the cache reset."""
        """vLLM requests made by ``generate`` so far (one per distinct prompt of a call)."""

    def generate(
        self,
        prompts: list[list[int]],
        *,
        n: int,
        max_new_tokens: int | None = None,
        temperature: float | None = None,
    ) -> list[list[Completion]]:
        """``n`` sampled completions per prompt (token ids in, so that the learner sees
        exactly the tokens the engine saw); the k copies of one prompt are one request
        of k * n samples. Sampling draws from the engine's seeded generator: no
        per-request seeds, which vLLM's CPU build cannot honour once a long prefill is
        split into chunks (its CPU generators have no offset)."""
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        # An explicit temperature (0: greedy, an agent's evaluation) overrides the recipe's.
        temperature = self.cfg.temperature if temperature is None else temperature
        groups = sibling_groups(prompts)
        # Greedy answers of one prompt are all the same (and vLLM refuses n > 1 greedy):
        # one sample then serves every copy.
        draws = [1 if temperature == 0 else n * len(group) for group in groups]
        params = [
            SamplingParams(
                n=k,
                temperature=temperature,
                top_p=self.cfg.top_p,
                max_tokens=max_new_tokens or self.cfg.max_new_tokens,
                skip_special_tokens=False,
            )
            for k in draws
        ]
        outs = self.llm.generate(
            [TokensPrompt(prompt_token_ids=list(prompts[g[0]])) for g in groups],
            params,
            use_tqdm=False,
        )
        self.engine_requests += len(outs)
        result: list[list[Completion]] = [[] for _ in prompts]
        for group, out in zip(groups, outs, strict=True):
            samples = [self._completion(o) for o in out.outputs]
            if len(samples) == 1:
                samples *= n * len(group)
            for k, i in enumerate(group):
                result[i] = samples[k * n : (k + 1) * n]
        return result

    def _completion(self, o: Any) -> Completion:
        eos = self.tokenizer.eos_token or ""
        text = o.text[: -len(eos)] if eos and o.text.endswith(eos) else o.text
        return Completion(
            token_ids=tuple(o.token_ids), text=text, finished=o.finish_reason == "stop"
        )

    def load_weights(self, blob: bytes, version: int) -> int:
        """Load ``blob`` (checkpoint-format weights as safetensors bytes, the learner's
        ``weights()``) into the running model and return the weight version the engine
        reports afterwards."""

        t0 = time.perf_counter()
        path = os.path.join(self._weights_dir, "model.safetensors")
        with open(path, "wb") as f:
            f.write(blob)
        t1 = time.perf_counter()
        self.llm.collective_rpc("load_weights_from", args=(self._weights_dir,))
        t2 = time.perf_counter()
        os.remove(path)
        reported = self._take_version(version)
        self.last_load = {
            "write_s": t1 - t0,
            "reload_s": t2 - t1,
            "reset_s": time.perf_counter() - t2,
        }
        return reported

    def _take_version(self, version: int) -> int:
        """After new weights: drop the prefix cache (its KV was computed with the old
        ones), set ``version`` and return the version the engine reports."""
        self.llm.reset_prefix_cache()
        self.llm.llm_engine.set_weight_version(str(version))
        return self.weight_version()

    # ---- weights over NCCL (``agentworld.rl.nccl_sync``; GPU only) --------------------

    def init_weight_transfer(self, init_info: dict[str, Any]) -> None:
        """Join the sender's group; blocks in the rendezvous until the sender joins."""
        self.llm.collective_rpc("init_weight_transfer_engine", kwargs={"init_info": init_info})

    def start_weight_update(self) -> None:
        self.llm.collective_rpc("start_weight_update")

    def update_weights(self, update_info: dict[str, Any]) -> None:
        """Receive the broadcast tensors into the running model (blocks until sent)."""
        self.llm.collective_rpc("update_weights", kwargs={"update_info": update_info})

    def finish_weight_update(self, version: int) -> int:
        self.llm.collective_rpc("finish_weight_update")
        return self._take_version(version)

    def load_times(self) -> dict[str, float]:
        return dict(self.last_load)

    def weight_version(self) -> int:
        return int(self.llm.llm_engine.get_weight_version())

    def prompt_logprobs(self, token_ids: list[int]) -> list[float]:
        """log p(token t | tokens < t) for t >= 1, as the engine computes it."""
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        params = SamplingParams(max_tokens=1, prompt_logprobs=0, temperature=1.0)
        out = self.llm.generate([TokensPrompt(prompt_token_ids=token_ids)], params, use_tqdm=False)
        lps = out[0].prompt_logprobs[1:]
        return [d[tok].logprob for d, tok in zip(lps, token_ids[1:], strict=True)]

    def close(self) -> None:
        shutil.rmtree(self._weights_dir, ignore_errors=True)
        close_engine(self.llm, self.cfg.engine)
