"""Tiny random checkpoints of the released model family, built with transformers' own
config and model classes, and a small tokenizer shaped like the family's: Qwen's special
tokens, a padded vocabulary (the embedding larger than the tokenizer), and a thinking
chat template written in the style of Qwen3.5's (earlier answers plain, the answer after
the last user message in a think block, a generation prompt that opens one).

Used by tests/test_model_family*.py; built once per test session."""

from __future__ import annotations

import json
import os

# A thinking template in the style of the Qwen3 / Qwen3.5 family (written for these
# tests): reasoning comes from ``reasoning_content`` or from a think block in the
# content; only answers after the last user message show it.
THINKING_TEMPLATE = (
    "{%- set ns = namespace(last_user=-1) -%}"
    "{%- for m in messages -%}{%- if m['role'] == 'user' -%}{%- set ns.last_user = loop.index0 -%}"
    "{%- endif -%}{%- endfor -%}"
    "{%- for m in messages -%}"
    "{%- if m['role'] == 'assistant' -%}"
    "{%- set content = m['content'] -%}{%- set reasoning = m.get('reasoning_content') or '' -%}"
    "{%- if '</think>' in content -%}"
    "{%- set reasoning = content.split('</think>')[0].split('<think>')[-1] -%}"
    "{%- set content = content.split('</think>')[-1] -%}"
    "{%- if content.startswith('\\n\\n') -%}{%- set content = content[2:] -%}{%- endif -%}"
    "{%- if reasoning.startswith('\\n') -%}{%- set reasoning = reasoning[1:] -%}{%- endif -%}"
    "{%- if reasoning.endswith('\\n') -%}{%- set reasoning = reasoning[:-1] -%}{%- endif -%}"
    "{%- endif -%}"
    "{%- if loop.index0 > ns.last_user and ns.last_user >= 0 -%}"
    "{{- '<|im_start|>assistant\\n<think>\\n' + reasoning + '\\n</think>\\n\\n' + content + '<|im_end|>\\n' -}}"
    "{%- else -%}"
    "{{- '<|im_start|>assistant\\n' + content + '<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- else -%}"
    "{{- '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{%- if enable_thinking is defined and enable_thinking is false -%}"
    "{{- '<think>\\n\\n</think>\\n\\n' -}}{%- else -%}{{- '<think>\\n' -}}{%- endif -%}"
    "{%- endif -%}"
)
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
ADDED = ["<think>", "</think>", "<tool_call>", "</tool_call>"]
PADDED_VOCAB = 640
"""The model's embedding rows: more than the tokenizer's tokens, as Qwen pads its vocab."""


def family_tokenizer(texts: list[str]):
    """A byte-level BPE as Qwen3.5's tokenizer class, with Qwen's special tokens."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import AddedToken
    from transformers.models.qwen3_5.tokenization_qwen3_5 import Qwen3_5Tokenizer

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=500,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(texts, trainer=trainer)
    state = json.loads(bpe.to_str())["model"]
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in state["merges"]]
    tok = Qwen3_5Tokenizer(
        vocab=state["vocab"], merges=merges, eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
    tok.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in ADDED])
    tok.chat_template = THINKING_TEMPLATE
    return tok


def _shape(tok) -> dict:
    return dict(
        vocab_size=PADDED_VOCAB,
        hidden_size=64,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=64,
        max_position_embeddings=4096,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        tie_word_embeddings=False,
    )


def _config(family: str, tok):
    from transformers import Qwen3_5MoeConfig, Qwen3Config, Qwen3MoeConfig

    shape = _shape(tok)
    if family == "qwen3":
        return Qwen3Config(**shape, num_hidden_layers=2, intermediate_size=128)
    moe = dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32)
    if family == "qwen3_moe":
        return Qwen3MoeConfig(**shape, **moe, num_hidden_layers=2, intermediate_size=128)
    text = dict(
        **shape,
        **moe,
        num_hidden_layers=4,  # three Gated DeltaNet layers, then full attention
        shared_expert_intermediate_size=32,
        linear_conv_kernel_dim=4,
        linear_key_head_dim=16,
        linear_value_head_dim=16,
        linear_num_key_heads=2,
        linear_num_value_heads=2,
    )
    vision = dict(depth=1, hidden_size=32, intermediate_size=32, num_heads=2, out_hidden_size=64)
    return Qwen3_5MoeConfig(text_config=text, vision_config=vision, tie_word_embeddings=False)


def build_family_checkpoint(family: str, tok, out: str, *, seed: int = 0) -> str:
    """A random checkpoint of ``family`` with ``tok`` at ``out``. Qwen3.5-MoE is saved as
    the released models are: ``Qwen3_5MoeForConditionalGeneration`` with a vision config
    and language-model weights only."""
    import torch
    from safetensors.torch import load_file, save_file
    from transformers import AutoModelForCausalLM, Qwen3_5MoeForConditionalGeneration

    torch.manual_seed(seed)
    config = _config(family, tok)
    if family == "qwen3_5_moe":
        model = Qwen3_5MoeForConditionalGeneration(config)
    else:
        model = AutoModelForCausalLM.from_config(config)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    if family == "qwen3_5_moe":
        path = os.path.join(out, "model.safetensors")
        weights = load_file(path)
        language = {k: v for k, v in weights.items() if not k.startswith("model.visual.")}
        assert len(language) < len(weights)
        save_file(language, path, metadata={"format": "pt"})
    return out


def script_checkpoint(src: str, out: str, answer: list[str]) -> str:
    """``src`` (a dense Qwen3 checkpoint) with weights that make its next token a function
    of the current one alone, saved at ``out`` with the same config and tokenizer: after
    the chat template's generation prompt it writes the tokens ``answer`` (each a single
    token of the tokenizer), then ``<|im_end|>``, whatever the sampling. Every layer adds
    nothing to the residual stream (attention and MLP outputs zeroed), so the final norm
    sees the current token's embedding, a one-hot row that the output layer maps to the
    next token of the script."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(src)
    model = AutoModelForCausalLM.from_pretrained(src, dtype=torch.float32)
    prompt = tok.apply_chat_template(
        [{"role": "user", "content": "x"}], tokenize=False, add_generation_prompt=True
    )
    ids = [tok(prompt, add_special_tokens=False).input_ids[-1]]
    for text in answer:
        token = tok(text, add_special_tokens=False).input_ids
        assert len(token) == 1, (text, token)
        ids += token
    ids.append(tok.eos_token_id)
    assert len(set(ids)) == len(ids), ids  # each step of the script is its own token
    hidden = model.config.hidden_size
    other = len(ids) - 1  # the slot of every token off the script: it ends the answer
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        model.model.norm.weight.fill_(1.0)
        embed, head = model.model.embed_tokens.weight, model.lm_head.weight
        embed.zero_()
        embed[:, other] = 1.0
        head.zero_()
        for slot, (now, nxt) in enumerate(zip(ids[:-1], ids[1:], strict=True)):
            embed[now] = 0.0
            embed[now, slot] = 1.0
            head[nxt, slot] = 10.0
        head[tok.eos_token_id, other] = 10.0
    assert other < hidden
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out
