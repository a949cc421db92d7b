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
from dataclasses import dataclass, field

import numpy as np

from agentworld.data.text import hash64
from agentworld.schema import Trajectory, predict_turn_messages

_encode_string = json.encoder.encode_basestring  # the C encoder where json has it
_SENTINEL = "\x00AGENTWORLD-CONTENT\x00"
ROLES = ("system", "user", "assistant")


class TemplateError(ValueError):
    """The tokenizer's chat template cannot be sliced per message."""


@dataclass(frozen=True)
class Sample:
    """One tokenized document. ``tokens`` (L,) int32, ``mask`` (L,) int8 = 1 on targets."""

    kind: str  # "cpt", "copy" (packed with cpt) or "sft"
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


@dataclass(frozen=True)
class Framed:
    """One message's tokens with its header and trailer, and its JSON."""

    ids: np.ndarray
    json: str


@dataclass
class Encoded:
    """One trajectory encoded once: its messages, ids (N,) int32 as the whole templated
    text encodes, per message the token where it starts (plus N), its content's own
    tokens (what a sample trains on when the message is the target), and its JSON. Per
    turn, the action's user message with its memory attached, where it has one
    (agentworld.model.memory)."""

    messages: list[dict[str, str]]
    ids: np.ndarray
    starts: list[int]  # message starts, plus N
    contents: list[np.ndarray]
    message_json: list[str]
    remembered: list[Framed | None] = field(default_factory=list)


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


def encode_trajectories(
    tokenizer,
    layout: ChatLayout,
    trajs: list[Trajectory],
    remembered: list[list[str | None]] | None = None,
) -> list[Encoded]:
    """Encode many trajectories with one batched call over all message contents (and a
    second, small one over the header + content of messages starting with whitespace).
    ``remembered[i][k-1]``: the observation to attach to turn k's action of trajectory
    i, or None (agentworld.model.memory)."""
    all_messages = [trajectory_messages(t) for t in trajs]
    flat = [m for messages in all_messages for m in messages]
    encoded, heads = _encode_messages(tokenizer, layout, flat)
    out, i = [], 0
    for messages in all_messages:
        n = len(messages)
        out.append(_assemble(layout, messages, encoded[i : i + n], heads[i : i + n]))
        i += n
    if remembered is not None:
        _attach_memory(tokenizer, layout, trajs, out, remembered)
    return out


def _attach_memory(tokenizer, layout, trajs, out: list[Encoded], remembered) -> None:
    from agentworld.model.memory import attach

    at, users = [], []
    for i, (traj, memory) in enumerate(zip(trajs, remembered, strict=True)):
        out[i].remembered = [None] * len(traj.turns)
        for k, observation in enumerate(memory):
            if observation is not None:
                at.append((i, k))
                users.append({"role": "user", "content": attach(traj.turns[k].action, observation)})
    encoded, heads = _encode_messages(tokenizer, layout, users)
    trailer = layout.trailer_ids["user"]
    for (i, k), m, enc, head in zip(at, users, encoded, heads, strict=True):
        _, pieces = _pieces(layout, "user", enc, head)
        out[i].remembered[k] = Framed(np.concatenate([*pieces, trailer]), _message_json(m))


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


COPY_SPAN = (8, 32)
"""Shortest and longest span (tokens) a copy document repeats."""
COPY_CONTEXT = 32
"""Most tokens of the trajectory before the span and between the span and its repeat."""


@dataclass(frozen=True)
class CopyTokens:
    """The tokens copy documents are made of (agentworld.data.samples.copy_tokens)."""

    sep: int
    """Marks the span and its repeat."""
    ordinary: np.ndarray
    """The ids a span is drawn from: every id but the special tokens."""


def copy_samples(ids: np.ndarray, key: str, share: float, vocab: CopyTokens) -> list[Sample]:
    """Copy documents for one trajectory: ``a <sep> span b <sep> span``, where ``a`` and
    ``b`` are windows of the trajectory (up to COPY_CONTEXT tokens each) and ``span`` is
    random ordinary ids, the loss on the repeat only. Enough documents that they make
    about ``share`` of this trajectory's CPT tokens and theirs together, drawn by a
    generator seeded from ``key``: a rerun writes the same documents.

    The span is random so that the repeat can only be copied: it cannot be predicted
    from the corpus, which the model memorizes over CPT's epochs (spans taken from the
    trajectory itself were, and taught no copying: the model then copied 0% of a
    random span). Its place varies, within text like the corpus's, so that the model
    must find the marker and copy what follows it, the way a search observation repeats
    its query or the opened id from the action."""
    low, high = COPY_SPAN
    if share <= 0 or ids.size == 0:
        return []
    rng = np.random.default_rng(hash64(key) & (2**64 - 1))
    budget, out = share / (1 - share) * ids.size, []
    sep = np.asarray([vocab.sep], np.int32)
    while True:
        n = int(rng.integers(low, high + 1))
        a, b = (_window(ids, int(rng.integers(0, COPY_CONTEXT + 1)), rng) for _ in range(2))
        size = a.size + b.size + 2 * n + 2
        if budget < size / 2:  # rounded: the last document goes in when half of it fits
            return out
        span = rng.choice(vocab.ordinary, n).astype(np.int32)
        tokens = np.concatenate([a, sep, span, b, sep, span])
        mask = np.zeros(size, np.int8)
        mask[size - n :] = 1
        out.append(Sample("copy", f"{key}:k:{len(out):05d}", tokens, mask))
        budget -= size


def _window(ids: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    n = min(n, ids.size)
    start = int(rng.integers(0, ids.size - n + 1))
    return ids[start : start + n].astype(np.int32)


def sft_sample(
    e: Encoded, layout: ChatLayout, key: str, k: int, *, seq_len: int, truncation: str
) -> Sample | str:
    """Sample for turn k (1-based), or the reason it is dropped: the prompt's tokens as
    the templated prompt encodes, then the header and observation k's own tokens. The
    action carries its memory where it has one and the sample fits with it (dropping
    the oldest turns as needed); otherwise it goes without."""
    memory = e.remembered[k - 1] if e.remembered else None
    if memory is not None:
        sample = _sft_sample(e, layout, key, k, memory, seq_len=seq_len, truncation=truncation)
        if not isinstance(sample, str):
            return sample
    return _sft_sample(e, layout, key, k, None, seq_len=seq_len, truncation=truncation)


def _sft_sample(
    e: Encoded,
    layout: ChatLayout,
    key: str,
    k: int,
    memory: Framed | None,
    *,
    seq_len: int,
    truncation: str,
) -> Sample | str:
    s, t = e.starts, 2 * k
    header, trailer = layout.header_ids["assistant"], layout.trailer_ids["assistant"]
    user = e.ids[s[t - 1] : s[t]] if memory is None else memory.ids
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
    user_json = e.message_json[t - 1] if memory is None else memory.json
    predict = [e.message_json[0], *e.message_json[2 * dropped + 1 : t - 1], user_json]
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
