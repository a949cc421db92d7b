"""Prompt copy: would a copy step the model does not have to learn close the search gap?

The small models do not learn to copy a span by content (README, fidelity: copy
documents, copy rows). This probe gives a trained export the induction step at decoding
time instead, as a vLLM logits processor (``PromptCopy``): once the model has written
``min_match`` tokens that stand together in its prompt, the token that followed them
there gets ``bias`` added to its logit (the longest match wins, the latest on a tie).
The match looks only at what the model wrote in this answer and only into the prompt, so
an answer's first tokens are the model's own and a copy cannot feed on itself.

For each policy of a ``bench_fidelity.py`` run it regenerates the held-out turns the
run's evaluate stage predicted (the same prompts: ``fit_prompt``, and the model's own
memory when it has one) at each ``bias:min_match`` setting, greedy, and scores them
against the run's baselines (char F1 per domain, the margin and its interval). Setting
``0:2`` is the run's own decoding and reproduces its figures.

Run:  python bench/prompt_copy_probe.py RUN_DIR [RUN_DIR ...] [--policies sft,rl]
          [--settings 0:2,2:2,4:2,6:2,8:2,4:3,6:3,8:3]
      (writes bench/results/prompt_copy.json)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict
from pathlib import Path

from _results import write_result

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

MAX_MATCH = 32
"""Longest match compared: beyond it the choice among matches no longer changes."""


class PromptSource:
    """One request's prompt, indexed by its ``min_match``-grams, and its output so far."""

    def __init__(self, prompt: list[int], output: list[int], bias: float, min_match: int):
        self.prompt, self.output = list(prompt), output  # output: vLLM's running list
        self.bias, self.min_match = bias, min_match
        self.ends: dict[tuple[int, ...], list[int]] = defaultdict(list)
        for end in range(min_match - 1, len(self.prompt) - 1):  # a token must follow
            self.ends[tuple(self.prompt[end - min_match + 1 : end + 1])].append(end)

    def next_token(self) -> int | None:
        """The prompt's token after the longest match of the output's end, or None."""
        out, n = self.output, self.min_match
        ends = self.ends.get(tuple(out[-n:])) if len(out) >= n else None
        if not ends:
            return None
        best, best_len, limit = ends[0], 0, min(len(out), MAX_MATCH)
        for end in ends:  # ascending: a tie goes to the latest
            k = n
            while k < limit and end - k >= 0 and self.prompt[end - k] == out[-k - 1]:
                k += 1
            if k >= best_len:
                best, best_len = end, k
        return self.prompt[best + 1]


def _settings(extra_args: dict | None) -> tuple[float, int] | None:
    if not extra_args or not extra_args.get("prompt_copy_bias"):
        return None
    return float(extra_args["prompt_copy_bias"]), int(extra_args["prompt_copy_min_match"])


try:
    from vllm.v1.sample.logits_processor import LogitsProcessor
    from vllm.v1.sample.logits_processor.builtin import process_dict_updates
except ImportError:  # the docs, --help and PromptSource need no vLLM
    pass
else:

    class PromptCopy(LogitsProcessor):
        """vLLM logits processor: prompt copy for requests whose ``extra_args`` ask."""

        def __init__(self, vllm_config, device, is_pin_memory: bool) -> None:
            self.sources: dict[int, PromptSource] = {}

        def is_argmax_invariant(self) -> bool:
            return False

        def update_state(self, batch_update) -> None:
            def new_state(params, prompt, output):
                got = _settings(params.extra_args)
                return None if got is None or prompt is None else PromptSource(prompt, output, *got)

            process_dict_updates(self.sources, batch_update, new_state)

        def apply(self, logits):
            for index, source in self.sources.items():
                token = source.next_token()
                if token is not None and token < logits.shape[1]:
                    logits[index, token] += source.bias
            return logits


def probe(run: str, policy: str, settings: list[tuple[float, int]]) -> dict:
    """Per setting: the summary's char F1 per domain and its margin over the baselines."""
    from transformers import AutoTokenizer
    from vllm import LLM, SamplingParams

    from agentworld.evaluate.items import key_trajectory
    from agentworld.evaluate.placement import fit_prompt
    from agentworld.evaluate.score import add_baselines, summarize
    from agentworld.io import read_jsonl
    from agentworld.model.engine import EngineConfig
    from agentworld.model.memory import read_memory

    infer, score = Path(run, f"eval-{policy}", "infer"), Path(run, f"eval-{policy}", "score")
    rows = read_jsonl(str(infer / "predictions.jsonl"))
    cfg = json.loads((infer / "manifest.json").read_text())["config"]
    engine, sampling = EngineConfig(**cfg["vllm"]["engine"]), cfg["sampling"]
    baselines = {p.stem: read_jsonl(str(p)) for p in sorted((score / "baselines").glob("*.jsonl"))}
    model = str(Path(run, policy, "hf"))
    tok = AutoTokenizer.from_pretrained(model)
    contexts = [r["messages"] for r in rows]
    memory = read_memory(model)
    if memory is not None:  # as the evaluate stage prompts a model trained with one
        contexts = memory.with_memory(contexts, [key_trajectory(r["key"]) for r in rows])
    budget = engine.max_model_len - sampling["max_tokens"]
    prompts = [{"prompt_token_ids": fit_prompt(tok, m, budget)[0]} for m in contexts]
    llm = LLM(
        model=model,
        **engine.vllm_kwargs(),  # the run's evaluate engine, as VLLMPredictor builds it
        seed=sampling["seed"] or 0,
        logits_processors=["prompt_copy_probe:PromptCopy"],
    )
    out = {}
    for bias, min_match in settings:
        params = SamplingParams(
            temperature=sampling["temperature"],
            max_tokens=sampling["max_tokens"],
            seed=sampling["seed"],
            extra_args={"prompt_copy_bias": bias, "prompt_copy_min_match": min_match},
        )
        texts = [o.outputs[0].text for o in llm.generate(prompts, params, use_tqdm=False)]
        preds = [{**r, "output": t} for r, t in zip(rows, texts, strict=True)]
        summary = summarize(preds, model=f"{policy} {bias}:{min_match}")
        add_baselines(summary, baselines, preds)
        figures = {}
        for d, e in summary["domains"].items():
            m = summary["margin"][d]["char_f1"]
            figures[d] = {
                "char_f1": round(e["rule"]["char_f1"], 1),
                "margin": round(m["margin"], 1),
                "ci95": m["ci95"] and [round(x, 1) for x in m["ci95"]],
                "vs": m["baseline"],
            }
        out[f"{bias:g}:{min_match}"] = figures
        line = "  ".join(f"{d} {f['char_f1']:5.1f}" for d, f in figures.items())
        print(f"[prompt_copy] {run} {policy} bias {bias:g} min_match {min_match}: {line}")
    del llm
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("runs", nargs="+", help="bench_fidelity.py --out directories")
    p.add_argument("--policies", default="sft,rl")
    p.add_argument("--settings", default="0:2,2:2,4:2,6:2,8:2,4:3,6:3,8:3")
    p.add_argument("--result", default="prompt_copy", help="name under bench/results/")
    a = p.parse_args(argv)
    settings = [(float(b), int(n)) for b, n in (s.split(":") for s in a.settings.split(","))]
    # vLLM's engine process imports the processor by name: this directory must be on its path.
    here, path = str(Path(__file__).resolve().parent), os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join([here, path] if path else [here])
    if any(b < 0 or n < 1 for b, n in settings):
        p.error("--settings: each is bias:min_match with bias >= 0 and min_match >= 1")
    figures = {
        run: {pol: probe(run, pol, settings) for pol in a.policies.split(",")} for run in a.runs
    }
    path = write_result(a.result, {"settings": a.settings, "runs": figures})
    print(f"[prompt_copy] wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
