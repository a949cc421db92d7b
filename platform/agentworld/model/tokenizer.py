"""A byte-level BPE tokenizer trained on the corpus, with our special tokens and a
ChatML chat template (the format the Qwen family uses)."""

from __future__ import annotations

from collections.abc import Iterable

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

SPECIAL_TOKENS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|pad|>",
    "<think>",
    "</think>",
    "<predicted_observation>",
    "</predicted_observation>",
)

# ChatML. The assistant turn is wrapped in {% generation %} so that transformers can
# return an assistant-token mask (return_assistant_tokens_mask=True).
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if message['role'] == 'assistant' %}"
    "{{ '<|im_start|>assistant\\n' }}{% generation %}{{ message['content'] }}{{ '<|im_end|>' }}{% endgeneration %}{{ '\\n' }}"
    "{% else %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


LONGEST_WORD = 128
"""Characters of the longest piece of text without a space that BPE sees as one word."""


def train_tokenizer(texts: Iterable[str], *, vocab_size: int = 2048, min_frequency: int = 2):
    """Train a byte-level BPE on ``texts``; returns a transformers PreTrainedTokenizerFast."""
    from transformers import PreTrainedTokenizerFast

    if vocab_size < 256 + len(SPECIAL_TOKENS):
        raise ValueError(
            f"vocab_size {vocab_size} is below the 256 bytes + {len(SPECIAL_TOKENS)} special tokens"
        )
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            # A run of LONGEST_WORD characters without a space (a base64 blob, a line of
            # '=') is cut into pieces of that length first: BPE's training and encoding
            # cost grows with the square of a word's length, and a 1 MiB word stalled
            # training for minutes. Shorter words are split as before.
            pre_tokenizers.Split(Regex(rf"\S{{{LONGEST_WORD}}}"), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|pad|>",
        bos_token=None,
        unk_token=None,
        additional_special_tokens=[t for t in SPECIAL_TOKENS if t not in ("<|im_end|>", "<|pad|>")],
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.model_max_length = 1 << 20
    return fast
