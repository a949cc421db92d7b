"""Tokenization of trajectories into a CPT document and SFT samples (plain functions
over a HF tokenizer, no Ray).

The chat messages are those of agentworld.schema.render (system = environment, user =
action, assistant = observation), rendered by ``tokenizer.apply_chat_template``. Each
message is header + content + trailer (``<|im_start|>assistant\\n`` ... ``<|im_end|>\\n``
in ChatML); ``ChatLayout`` reads them off the template and checks, once per tokenizer on
a multi-turn probe conversation, that the template renders exactly their concatenation
(a message-additive template such as ChatML).

Token boundaries. Every prompt token is the one evaluate, RL and serve get by encoding
the templated prompt text whole: a message whose content starts with whitespace is
encoded together with its header, because the header's newline and that whitespace
merge into one token there (``cat -n`` output: ``"\n     1"``). Encoded apart, each
such earlier observation in the context was a token sequence the model never sees at
inference (15 of the demo's 119 SFT samples). The observation a sample trains on is
encoded apart from its header, as the model writes it: the prompt ends with the header.

Answers. The prompt ends with what the template appends for ``add_generation_prompt``
(``<|im_start|>assistant\n`` in ChatML; ``...assistant\n<think>\n`` in a Qwen3.5-style
thinking template); the target is the rest of the answer as the template renders it
after a user message: an empty or recorded think block where the template writes one,
the observation, the closing marker. A turn with the world model's own reasoning
(``Turn.simulator_reasoning``) is the content ``<think>\nR\n</think>\n\nO``, which ChatML
renders verbatim and Qwen-style templates re-frame. The answer's pieces are read off
the template once with sentinels and checked on probes; a template that rewrites
content (strips its newlines, say) is rendered per sample instead, exactly.

The whole trajectory is encoded once; SFT sample k is a slice of it (system message +
turns 1..k) with the loss on answer k and its closing marker only. A CPT document is the
trajectory in history form (each observation framed as an earlier turn is). Too long: a
CPT document is cut into sequence-sized chunks (each its own document); an SFT sample
drops its oldest turns, never the environment text, until it fits (``left``) or is
dropped (``drop``), the reason counted.

Cost: one batched encode without offsets per block, token ids assembled in numpy, each
SFT mask allocated at its sample's length, and each message JSON-encoded once (a
sample's message list is the join of its messages' JSON).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

import numpy as np

from agentworld.schema import Trajectory, predict_turn_messages

_encode_string = json.encoder.encode_basestring  # the C encoder where json has it
_SENTINEL = "\x00AGENTWORLD-CONTENT\x00"
ROLES = ("system", "user", "assistant")


class TemplateError(ValueError):
    """The tokenizer's chat template cannot be sliced per message."""


@dataclass(frozen=True)
class Sample:
    """One tokenized document. ``tokens`` (L,) int32, ``mask`` (L,) int8 = 1 on targets."""

    kind: str  # "cpt", "sft" or "sft_window"
    key: str  # stable id: trajectory uid, kind, turn or chunk
    tokens: np.ndarray
    mask: np.ndarray
    turn_idx: int = 0
    messages_json: str = ""
    reference: str = ""
    truncated_turns: int = 0


def render(tokenizer, messages: list[dict[str, str]], **kwargs) -> str:
    return tokenizer.apply_chat_template(messages, tokenize=False, **kwargs)


def _ids(tokenizer, text: str) -> list[int]:
    return tokenizer.backend_tokenizer.encode(text, add_special_tokens=False).ids


# A conversation the template must render as the concatenation of its framed messages.
_PROBE = [
    {"role": "system", "content": "probe environment\nwith two lines"},
    {"role": "user", "content": "ls -la"},
    {"role": "assistant", "content": "total 0\n"},
    {"role": "user", "content": "  cat  x "},
    {"role": "assistant", "content": ""},
    {"role": "user", "content": "exit"},
    {"role": "assistant", "content": "bye"},
]


_REASON = "\x00AGENTWORLD-REASONING\x00"
_PROMPT_PROBE = [{"role": "system", "content": "probe"}, {"role": "user", "content": "probe"}]
# Observations and reasonings the sentinel pieces must reproduce exactly.
_ANSWER_PROBES = [
    ("total 0\n", None),
    ("\n\n  lead ", None),
    ("", None),
    ("x", "\nwhy\n"),
    ("", "r"),
]


def think_block(observation: str, reasoning: str | None) -> str:
    """The assistant content for a turn: the observation, after the world model's
    reasoning in a think block when the turn has one."""
    if reasoning is None:
        return observation
    return f"<think>\n{reasoning}\n</think>\n\n{observation}"


@dataclass(frozen=True)
class ChatLayout:
    """Header and trailer text (and tokens) the template puts around each role's content
    in a conversation's history, what it appends for the generation prompt, and how it
    lays out an answer after it."""

    header: dict[str, str]
    trailer: dict[str, str]
    header_ids: dict[str, np.ndarray]
    trailer_ids: dict[str, np.ndarray]
    target_trailer: int
    """Leading trailer tokens of an assistant message that are targets (the closing
    marker, without the whitespace after it)."""
    generation: str = ""
    """What ``add_generation_prompt`` appends after a user message."""
    generation_ids: np.ndarray | None = None
    closing: str = ""
    """The answer's closing marker (the last target text) and what follows it."""
    after_closing: str = ""
    answer_pieces: tuple[str, ...] = ("", "")
    """(before, after) the observation in the answer text after ``generation``, up to and
    including ``closing``."""
    reasoned_pieces: tuple[str, ...] = ("", "", "")
    """(before, between, after) the reasoning and the observation, likewise."""
    verbatim: bool = True
    """The pieces reproduce the template's answers; otherwise each is rendered."""

    @classmethod
    def of(cls, tokenizer) -> ChatLayout:
        header, trailer = {}, {}
        for role in ROLES:
            piece = render(tokenizer, [{"role": role, "content": _SENTINEL}])
            if piece.count(_SENTINEL) != 1:
                raise TemplateError(f"the chat template does not render {role} content verbatim")
            header[role], trailer[role] = piece.split(_SENTINEL)
        closing = trailer["assistant"].rstrip()
        closing_ids = _ids(tokenizer, closing)
        trailer_ids = {r: _ids(tokenizer, t) for r, t in trailer.items()}
        if trailer_ids["assistant"][: len(closing_ids)] != closing_ids:
            raise TemplateError("the assistant closing marker does not encode on its own")
        frames = dict(
            header=header,
            trailer=trailer,
            header_ids={r: np.asarray(_ids(tokenizer, h), np.int32) for r, h in header.items()},
            trailer_ids={r: np.asarray(t, np.int32) for r, t in trailer_ids.items()},
            target_trailer=len(closing_ids),
        )
        layout = cls(**frames)
        generation = _generation_text(tokenizer, layout)
        answer = _answer_pieces(tokenizer, generation, _SENTINEL, None, closing)
        reasoned = _answer_pieces(tokenizer, generation, _SENTINEL, _REASON, closing)
        layout = cls(
            **frames,
            generation=generation,
            generation_ids=np.asarray(_ids(tokenizer, generation), np.int32),
            closing=closing,
            after_closing=trailer["assistant"][len(closing) :],
            answer_pieces=answer,
            reasoned_pieces=reasoned,
        )
        exact = all(
            layout.answer_text(o, r) == _rendered_answer(tokenizer, generation, o, r, closing)
            for o, r in _ANSWER_PROBES
        )
        return layout if exact else dataclasses.replace(layout, verbatim=False)

    def frame(self, message: dict[str, str]) -> str:
        role = message["role"]
        return self.header[role] + message["content"] + self.trailer[role]

    def answer_text(self, observation: str, reasoning: str | None) -> str:
        """The target text of an answer (after the generation prompt, through the closing
        marker) from the pieces; exact only where ``verbatim``."""
        if reasoning is None:
            before, after = self.answer_pieces
            return before + observation + after
        before, between, after = self.reasoned_pieces
        return before + reasoning + between + observation + after


def _generation_text(tokenizer, layout: ChatLayout) -> str:
    """What add_generation_prompt appends; checks on the multi-turn probe that a prompt
    is the concatenation of its framed messages and that text."""
    context = render(tokenizer, _PROMPT_PROBE)
    prompt = render(tokenizer, _PROMPT_PROBE, add_generation_prompt=True)
    if not prompt.startswith(context):
        raise TemplateError("the generation prompt is not appended to the rendered context")
    generation = prompt[len(context) :]
    history = _PROBE[:-1]  # ends with a user message, as every prompt does
    rendered = render(tokenizer, history, add_generation_prompt=True)
    if rendered != "".join(layout.frame(m) for m in history) + generation:
        raise TemplateError(
            "the chat template renders messages differently in context; prepare "
            "slices per message and needs a message-additive template such as ChatML"
        )
    return generation


def _rendered_answer(tokenizer, generation: str, observation, reasoning, closing: str) -> str:
    """The answer text as the template renders it after a user message: the whole
    conversation's text past the prompt, cut after the last closing marker."""
    answer = {"role": "assistant", "content": think_block(observation, reasoning)}
    full = render(tokenizer, [*_PROMPT_PROBE, answer])
    prompt = render(tokenizer, _PROMPT_PROBE, add_generation_prompt=True)
    if not full.startswith(prompt):
        raise TemplateError("the rendered answer does not start with the generation prompt")
    text = full[len(prompt) :]
    end = text.rfind(closing)
    if not closing or end < 0:
        raise TemplateError("the rendered answer does not end with the closing marker")
    return text[: end + len(closing)]


def _answer_pieces(tokenizer, generation, observation, reasoning, closing) -> tuple[str, ...]:
    text = _rendered_answer(tokenizer, generation, observation, reasoning, closing)
    marks = [m for m in (reasoning, observation) if m is not None]
    if any(text.count(m) != 1 for m in marks):
        return ("", closing) if reasoning is None else ("<think>\n", "\n</think>\n\n", closing)
    pieces, rest = [], text
    for m in marks:
        head, rest = rest.split(m)
        pieces.append(head)
    return (*pieces, rest)


def trajectory_messages(traj: Trajectory) -> list[dict[str, str]]:
    """system, then (user action, assistant observation) for every turn."""
    n = len(traj.turns)
    return [
        *predict_turn_messages(traj, n),
        {"role": "assistant", "content": traj.turns[-1].observation},
    ]


@dataclass
class Encoded:
    """One trajectory encoded once: its messages, ids (N,) int32 as the whole templated
    text encodes, per message the token where it starts (plus N), its content's own
    tokens (what a sample trains on when the message is the target), and its JSON."""

    messages: list[dict[str, str]]
    ids: np.ndarray
    starts: list[int]  # message starts, plus N
    contents: list[np.ndarray]
    message_json: list[str]
    targets: list[np.ndarray | None] = dataclasses.field(default_factory=list)
    """Per turn, the answer's target tokens (after the generation prompt, through the
    closing marker), or None where they are the observation's tokens and the marker's."""


def _merges_with_header(content: str) -> bool:
    """Leading whitespace joins the header's trailing newline into one token."""
    return content[:1].isspace()


def _encode_contents(tokenizer, texts: list[str]):
    backend = tokenizer.backend_tokenizer
    if not texts:
        return []
    # Offsets are never used: the fast batch encode skips computing them.
    encode = getattr(backend, "encode_batch_fast", backend.encode_batch)
    return encode(texts, add_special_tokens=False)


def _encode_messages(tokenizer, layout: ChatLayout, flat: list[dict[str, str]]):
    """Per message, its content's encoding and (for content starting with whitespace)
    the joint encoding of header and content, else None."""
    encoded = _encode_contents(tokenizer, [m["content"] for m in flat])
    merged_at = [i for i, m in enumerate(flat) if _merges_with_header(m["content"])]
    merged = _encode_contents(
        tokenizer, [layout.header[flat[i]["role"]] + flat[i]["content"] for i in merged_at]
    )
    framed = dict(zip(merged_at, merged, strict=True))
    return encoded, [framed.get(j) for j in range(len(flat))]


def encode_trajectories(tokenizer, layout: ChatLayout, trajs: list[Trajectory]) -> list[Encoded]:
    """Encode many trajectories with one batched call over all message contents (and a
    second, small one over the header + content of messages starting with whitespace,
    and one over the answers that are more than observation + closing marker)."""
    all_messages = [trajectory_messages(t) for t in trajs]
    flat = [m for messages in all_messages for m in messages]
    encoded, heads = _encode_messages(tokenizer, layout, flat)
    targets = _encode_answers(tokenizer, layout, trajs)
    out, i = [], 0
    for messages, traj_targets in zip(all_messages, targets, strict=True):
        n = len(messages)
        e = _assemble(layout, messages, encoded[i : i + n], heads[i : i + n])
        e.targets = traj_targets
        out.append(e)
        i += n
    return out


def _answer(tokenizer, layout: ChatLayout, observation: str, reasoning: str | None) -> str | None:
    """The answer's target text, or None where it is the observation and the marker."""
    plain = layout.answer_pieces == ("", layout.closing)
    if reasoning is None and plain and layout.verbatim:
        return None
    if layout.verbatim:
        return layout.answer_text(observation, reasoning)
    return _rendered_answer(tokenizer, layout.generation, observation, reasoning, layout.closing)


def _encode_answers(tokenizer, layout: ChatLayout, trajs: list[Trajectory]):
    texts = [
        [_answer(tokenizer, layout, t.observation, t.simulator_reasoning) for t in traj.turns]
        for traj in trajs
    ]
    flat = [x for row in texts for x in row if x is not None]
    encoded = iter(_encode_contents(tokenizer, flat))
    return [
        [None if x is None else np.asarray(next(encoded).ids, np.int32) for x in row]
        for row in texts
    ]


def _pieces(layout: ChatLayout, role: str, enc, head) -> tuple[np.ndarray, tuple]:
    """A message's content tokens, and its header + content tokens as the templated text
    encodes them (``head``: the joint encoding of header and content, or None)."""
    content = np.asarray(enc.ids, dtype=np.int32)
    if head is None:
        return content, (layout.header_ids[role], content)
    return content, (np.asarray(head.ids, np.int32),)


def _assemble(layout: ChatLayout, messages: list[dict[str, str]], encodings, heads) -> Encoded:
    """``heads[i]``: the joint encoding of message i's header and content, or None where
    it is the header's tokens followed by the content's."""
    parts: list[np.ndarray] = []
    contents: list[np.ndarray] = []
    starts = [0]
    for m, enc, head in zip(messages, encodings, heads, strict=True):
        content, pieces = _pieces(layout, m["role"], enc, head)
        contents.append(content)
        parts += (*pieces, layout.trailer_ids[m["role"]])
        starts.append(starts[-1] + sum(x.size for x in pieces) + layout.trailer_ids[m["role"]].size)
    ids = np.concatenate(parts) if parts else np.empty(0, np.int32)
    return Encoded(messages, ids, starts, contents, [_message_json(m) for m in messages])


def _message_json(message: dict[str, str]) -> str:
    """``json.dumps(message, ensure_ascii=False)`` for a {role, content} message, from
    the C string encoder alone (a dumps call per message was an eighth of tokenize's
    Python time)."""
    if tuple(message) != ("role", "content") or message["role"] not in ROLES:
        return json.dumps(message, ensure_ascii=False)
    return f'{{"role": "{message["role"]}", "content": {_encode_string(message["content"])}}}'


def cpt_samples(e: Encoded, key: str, seq_len: int) -> list[Sample]:
    """The whole trajectory in seq_len chunks; the first token of each chunk is not a
    target (nothing before it in the same document predicts it)."""
    out = []
    for c, start in enumerate(range(0, e.ids.size, seq_len)):
        tokens = e.ids[start : start + seq_len]
        mask = np.ones(tokens.size, dtype=np.int8)
        mask[0] = 0
        out.append(Sample("cpt", f"{key}:c:{c:05d}", tokens, mask))
    return out


def sft_sample(
    e: Encoded, layout: ChatLayout, key: str, k: int, *, seq_len: int, truncation: str
) -> Sample | str:
    """Sample for turn k (1-based), or the reason it is dropped: the prompt's tokens as
    the templated prompt encodes (through the generation prompt), then answer k's own
    tokens, the targets."""
    s, t = e.starts, 2 * k
    closing = layout.trailer_ids["assistant"][: layout.target_trailer]
    tail = layout.trailer_ids["assistant"][layout.target_trailer :]
    prompt_end = layout.generation_ids
    user = e.ids[s[t - 1] : s[t]]
    target = e.targets[k - 1] if e.targets else None
    if target is None:
        target = np.concatenate([e.contents[t], closing])
    sys_end, answer = s[1], prompt_end.size + target.size + tail.size
    dropped = 0
    while sys_end + s[t - 1] - s[2 * dropped + 1] + user.size + answer > seq_len:
        if truncation == "drop":
            return "too_long"
        dropped += 1
        if dropped >= k:
            return "too_long_after_truncation"
    history = e.ids[s[2 * dropped + 1] : s[t - 1]]
    tokens = np.concatenate([e.ids[:sys_end], history, user, prompt_end, target, tail])
    mask = np.zeros(tokens.size, dtype=np.int8)  # at the sample's own length
    begin = sys_end + history.size + user.size + prompt_end.size
    mask[begin : begin + target.size] = 1
    # json.dumps of the message list, from each message's JSON written once
    predict = [e.message_json[0], *e.message_json[2 * dropped + 1 : t]]
    return Sample(
        "sft",
        f"{key}:s:{k:05d}",
        tokens,
        mask,
        turn_idx=k,
        messages_json="[" + ", ".join(predict) + "]",
        reference=e.messages[t]["content"],
        truncated_turns=dropped,
    )


def sft_windows(
    e: Encoded, layout: ChatLayout, key: str, samples: dict[int, Sample], seq_len: int
) -> list[Sample]:
    """The trajectory's SFT samples (``samples``: turn -> sample) as whole-conversation
    rows: each row is the system message and a run of consecutive turns that fits
    ``seq_len``, with every answer in it a target, so a turn's context is trained once
    rather than once per later turn. A row starts where its first new turn's own sample
    starts its history (the turns before that answer are context, not targets again)
    and runs on while the next turn fits; each answer's context in it is the system
    message and the latest turns of its sample's. Answers are the samples' tokens (the
    observation's own encoding, what inference generates), also where the whole text
    joins an answer's first whitespace to its header: the same text in other tokens.
    Where an answer's target is not its text (a reasoning template, a rendered
    answer), no row could hold it both as target and as history: the samples stay."""
    if any(t is not None for t in e.targets):
        return [dataclasses.replace(s, kind="sft_window") for s in samples.values()]
    st, sys_end = e.starts, e.starts[1]
    trailer = layout.trailer_ids["assistant"]
    closing, tail = trailer[: layout.target_trailer], trailer[layout.target_trailer :]

    def turn(j: int) -> list[np.ndarray]:
        """Turn j as its sample prompts and answers it: action, generation prompt,
        the observation's tokens and the closing marker (the target), the rest."""
        return [
            e.ids[st[2 * j - 1] : st[2 * j]],
            layout.generation_ids,
            e.contents[2 * j],
            closing,
            tail,
        ]

    turns = (len(st) - 2) // 2
    end = np.cumsum([0] + [sum(x.size for x in turn(j)) for j in range(1, turns + 1)])

    def length(a: int, b: int) -> int:
        """Tokens of a row of turns a..b."""
        return sys_end + int(end[b] - end[a - 1])

    out, pending = [], sorted(samples)
    while pending:
        first = pending[0]
        a = samples[first].truncated_turns + 1
        while a < first and length(a, first) > seq_len:
            a += 1
        if length(a, first) > seq_len:
            out.append(dataclasses.replace(samples[first], kind="sft_window"))
            pending = pending[1:]
            continue
        b = first
        while b < turns and length(a, b + 1) <= seq_len:
            b += 1
        parts, mask = [e.ids[:sys_end]], [np.zeros(sys_end, np.int8)]
        for j in range(a, b + 1):
            pieces = turn(j)
            target = j >= first and j in samples
            for n, x in enumerate(pieces):
                parts.append(x)
                mask.append(np.full(x.size, int(target and n in (2, 3)), np.int8))
        out.append(
            Sample(
                "sft_window", f"{key}:w:{first:05d}", np.concatenate(parts), np.concatenate(mask)
            )
        )
        pending = [k for k in pending if k > b]
    return out
