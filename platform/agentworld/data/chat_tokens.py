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

The whole trajectory is encoded once; SFT sample k is a slice of it (system message +
turns 1..k) with the loss on observation k and its closing marker only. Too long: a
CPT document is cut into sequence-sized chunks (each its own document); an SFT sample
drops its oldest turns, never the environment text, until it fits (``left``) or is
dropped (``drop``), the reason counted.

Cost: one batched encode without offsets per block, token ids assembled in numpy, each
SFT mask allocated at its sample's length, and each message JSON-encoded once (a
sample's message list is the join of its messages' JSON).
"""

from __future__ import annotations

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

    kind: str  # "cpt" or "sft"
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


@dataclass(frozen=True)
class ChatLayout:
    """Header and trailer text (and tokens) the template puts around each role's content."""

    header: dict[str, str]
    trailer: dict[str, str]
    header_ids: dict[str, np.ndarray]
    trailer_ids: dict[str, np.ndarray]
    target_trailer: int
    """Leading trailer tokens of an assistant message that are targets (the closing
    marker, without the whitespace after it)."""

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
        layout = cls(
            header=header,
            trailer=trailer,
            header_ids={r: np.asarray(_ids(tokenizer, h), np.int32) for r, h in header.items()},
            trailer_ids={r: np.asarray(t, np.int32) for r, t in trailer_ids.items()},
            target_trailer=len(closing_ids),
        )
        if render(tokenizer, _PROBE) != "".join(layout.frame(m) for m in _PROBE):
            raise TemplateError(
                "the chat template renders messages differently in context; prepare "
                "slices per message and needs a message-additive template such as ChatML"
            )
        return layout

    def frame(self, message: dict[str, str]) -> str:
        role = message["role"]
        return self.header[role] + message["content"] + self.trailer[role]


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
    second, small one over the header + content of messages starting with whitespace)."""
    all_messages = [trajectory_messages(t) for t in trajs]
    flat = [m for messages in all_messages for m in messages]
    encoded, heads = _encode_messages(tokenizer, layout, flat)
    out, i = [], 0
    for messages in all_messages:
        n = len(messages)
        out.append(_assemble(layout, messages, encoded[i : i + n], heads[i : i + n]))
        i += n
    return out


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
    the templated prompt encodes, then the header and observation k's own tokens."""
    s, t = e.starts, 2 * k
    header, trailer = layout.header_ids["assistant"], layout.trailer_ids["assistant"]
    user = e.ids[s[t - 1] : s[t]]
    target = e.contents[t]
    sys_end, answer = s[1], header.size + target.size + trailer.size
    dropped = 0
    while sys_end + s[t - 1] - s[2 * dropped + 1] + user.size + answer > seq_len:
        if truncation == "drop":
            return "too_long"
        dropped += 1
        if dropped >= k:
            return "too_long_after_truncation"
    history = e.ids[s[2 * dropped + 1] : s[t - 1]]
    tokens = np.concatenate([e.ids[:sys_end], history, user, header, target, trailer])
    mask = np.zeros(tokens.size, dtype=np.int8)  # at the sample's own length
    begin = sys_end + history.size + user.size + header.size
    mask[begin : begin + target.size + layout.target_trailer] = 1
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
