"""The model card every export carries: ``README.md`` beside the weights, with the
Hugging Face model-card front matter (YAML between ``---`` lines), so that an export
pushed to a hub says what it is. The export writes what it knows (where it started,
what it was trained on, with how much of each domain, the recipe); the evaluation adds
the held-out fidelity against the baselines when it scores the model.

Plain functions over a directory (any fsspec URL) and dicts: no model is loaded."""

from __future__ import annotations

import json
from typing import Any

import yaml

from agentworld.io import exists, join, read_bytes, write_bytes

FILE = "README.md"
KIND_WORDS = {
    "cpt": "continued pre-training on whole trajectories",
    "sft": "supervised fine-tuning on (context -> next observation)",
    "rl": "GRPO on rule rewards against the recorded observations",
    "agent": "an agent trained against the world model (not a world model itself)",
}
LIMITS = [
    "Predicts what an environment answers from the recorded sessions it was trained on; "
    "it has never executed anything, and commands, tools or pages unlike those it saw "
    "get plausible text, not the truth.",
    "Fidelity is measured on held-out turns with the real history (teacher-forced); a "
    "long simulated session drifts from what a real environment would show.",
    "Trained at the size of the recipe named above; small recipes are for trying the "
    "platform, not for simulating environments agents will depend on.",
]


def card_data(
    *,
    stage: str,
    name: str,
    base_model: str | None,
    domains: dict[str, int],
    recipe: str,
    steps: int | None = None,
) -> dict[str, Any]:
    """The card's front matter before any evaluation."""
    data: dict[str, Any] = {
        "library_name": "transformers",
        "pipeline_tag": "text-generation",
        "tags": ["agentworld", "world-model", "environment-simulator", stage],
        "agentworld": {
            "stage": stage,
            "recipe": recipe,
            "steps": steps,
            "trained_on": {"trajectories_per_domain": dict(sorted(domains.items()))},
        },
    }
    if base_model:
        data["base_model"] = base_model
    data["model-index"] = [{"name": name, "results": []}]
    return data


def fidelity_results(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """model-index results from an evaluate score summary: per domain, the model's char
    F1 and ROUGE-L, and the best baseline's margin with its interval."""
    metrics = []
    for domain, entry in summary.get("domains", {}).items():
        for metric in ("char_f1", "rouge_l"):
            value = entry.get("rule", {}).get(metric)
            if value is not None:
                metrics.append({"type": metric, "name": f"{metric} ({domain})", "value": value})
        m = summary.get("margin", {}).get(domain, {}).get("char_f1")
        if m:
            metrics.append(
                {
                    "type": "margin_char_f1",
                    "name": f"char_f1 margin vs {m['baseline']} ({domain})",
                    "value": m["margin"],
                    "ci95": m.get("ci95"),
                }
            )
    return [
        {
            "task": {"type": "text-generation", "name": "environment simulation"},
            "dataset": {"type": "agentworld-heldout", "name": "held-out recorded turns"},
            "metrics": metrics,
        }
    ]


def render(data: dict[str, Any]) -> str:
    """README.md text: the front matter, then the same facts for a reader."""
    meta = data["agentworld"]
    stage = meta["stage"]
    domains = meta["trained_on"]["trajectories_per_domain"]
    base = data.get("base_model") or "trained from scratch (a fresh model of the recipe's shape)"
    lines = [
        "---",
        yaml.safe_dump(data, sort_keys=False, allow_unicode=True).rstrip(),
        "---",
        "",
        f"# {data['model-index'][0]['name']}",
        "",
        f"An AgentWorld export after {KIND_WORDS.get(stage, stage)}: a language world model "
        "that, given an agent's action and the session so far, writes the environment's "
        "next observation.",
        "",
        f"- Starting point: {base}.",
        f"- Recipe: `{meta['recipe']}`" + (f", {meta['steps']} steps." if meta["steps"] else "."),
        "- Trained on: "
        + (", ".join(f"{d} {n}" for d, n in domains.items()) or "unknown")
        + " trajectories.",
        "",
        "## Held-out fidelity",
        "",
    ]
    results = data["model-index"][0]["results"]
    if not results:
        lines.append("Not evaluated yet (`python jobs/evaluate.py fidelity ...` adds it here).")
    else:
        lines += ["| metric | value | 95% interval |", "| --- | --- | --- |"]
        for m in results[0]["metrics"]:
            ci = m.get("ci95")
            interval = f"[{ci[0]:+.1f}, {ci[1]:+.1f}]" if ci else ""
            lines.append(f"| {m['name']} | {m['value']:.1f} | {interval} |")
    lines += ["", "## Known limits", "", *(f"- {x}" for x in LIMITS), ""]
    return "\n".join(lines)


def read_card(model_dir: str) -> dict[str, Any] | None:
    """The front matter of ``model_dir``'s card, or None when it has none."""
    url = join(model_dir, FILE)
    if not exists(url):
        return None
    text = read_bytes(url).decode()
    if not text.startswith("---\n"):
        return None
    return yaml.safe_load(text[4 : text.index("\n---\n", 4)])


def write_card(model_dir: str, data: dict[str, Any]) -> str:
    write_bytes(join(model_dir, FILE), render(data).encode())
    return join(model_dir, FILE)


def add_fidelity(model_dir: str, summary: dict[str, Any]) -> bool:
    """Put an evaluation's held-out fidelity into ``model_dir``'s card; False (and
    nothing written) where the directory has no card."""
    data = read_card(model_dir)
    if data is None:
        return False
    data["model-index"][0]["results"] = fidelity_results(summary)
    write_card(model_dir, data)
    return True


def trained_on(prepared: str) -> dict[str, int]:
    """Trajectories kept per domain in a prepare run's report (empty when the data is
    not a prepare run, e.g. per-turn samples given directly)."""
    url = join(prepared, "report.json")
    if not exists(url):
        return {}
    report = json.loads(read_bytes(url))
    return {d: int(c.get("kept", 0)) for d, c in report.get("by_domain", {}).items()}
