"""The model card every export carries (README.md with Hugging Face front matter): what
the export writes, read back as YAML, and the held-out fidelity the evaluation adds."""

from __future__ import annotations

import json

import yaml

from agentworld.model.card import add_fidelity, card_data, read_card, trained_on, write_card

SUMMARY = {
    "model": "rl",
    "domains": {
        "all": {"predictions": 20, "rule": {"char_f1": 61.5, "rouge_l": 55.0}},
        "terminal": {"predictions": 12, "rule": {"char_f1": 70.25, "rouge_l": 66.0}},
    },
    "margin": {
        "all": {"char_f1": {"margin": 4.5, "ci95": [1.0, 8.0], "baseline": "retrieval"}},
        "terminal": {"char_f1": {"margin": -2.0, "ci95": None, "baseline": "copy_previous"}},
    },
}


def _front_matter(path) -> dict:
    text = path.read_text()
    assert text.startswith("---\n")
    return yaml.safe_load(text[4 : text.index("\n---\n", 4)])


def test_an_export_card_is_valid_front_matter_and_takes_the_fidelity(tmp_path):
    prepared = tmp_path / "prepared"
    prepared.mkdir()
    report = {"by_domain": {"mcp": {"read": 9, "kept": 7}, "terminal": {"read": 12, "kept": 12}}}
    (prepared / "report.json").write_text(json.dumps(report))
    hf = tmp_path / "rl" / "hf"
    data = card_data(stage="rl", name="agentworld-small_cpu-rl", base_model="/runs/sft/hf",
                     domains=trained_on(str(prepared)), recipe="small_cpu", steps=12)  # fmt: skip
    write_card(str(hf), data)
    meta = _front_matter(hf / "README.md")
    assert meta["base_model"] == "/runs/sft/hf" and meta["library_name"] == "transformers"
    assert meta["agentworld"]["trained_on"]["trajectories_per_domain"] == {"mcp": 7, "terminal": 12}
    assert meta["agentworld"]["recipe"] == "small_cpu" and meta["model-index"][0]["results"] == []
    assert "Not evaluated yet" in (hf / "README.md").read_text()
    assert read_card(str(hf)) == meta

    assert add_fidelity(str(hf), SUMMARY)
    meta = _front_matter(hf / "README.md")
    metrics = {m["name"]: m for m in meta["model-index"][0]["results"][0]["metrics"]}
    assert metrics["char_f1 (terminal)"]["value"] == 70.25
    assert metrics["char_f1 margin vs retrieval (all)"]["ci95"] == [1.0, 8.0]
    assert metrics["char_f1 margin vs copy_previous (terminal)"]["value"] == -2.0
    text = (hf / "README.md").read_text()
    assert "| char_f1 margin vs retrieval (all) | 4.5 | [+1.0, +8.0] |" in text
    assert "## Known limits" in text and "Not evaluated yet" not in text


def test_a_fresh_model_says_so_and_a_folder_without_a_card_is_left_alone(tmp_path):
    data = card_data(stage="cpt", name="m", base_model=None, domains={}, recipe="debug_cpu")
    write_card(str(tmp_path / "cpt"), data)
    assert "base_model" not in _front_matter(tmp_path / "cpt" / "README.md")
    assert "trained from scratch" in (tmp_path / "cpt" / "README.md").read_text()
    assert not add_fidelity(str(tmp_path / "other"), SUMMARY)
    assert not (tmp_path / "other").exists()
