"""Text of a record for dedup and decontamination: normalization, words, n-gram hashes.

Plain functions (no Ray). Hashes are stable across processes and machines (blake2b and
fixed arithmetic, never Python's salted ``hash``), which is what makes dedup results
independent of where a block is processed.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from functools import cache
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_SPACE = re.compile(r"\s+")
_WORD = re.compile(r"\w+")
# Odd 64-bit multiplier of the polynomial n-gram hash (arithmetic wraps mod 2**64).
_POLY = np.uint64(0x9E3779B97F4A7C15)


def normalize(text: str) -> str:
    """NFKC, lower case, runs of whitespace collapsed to one space (str.split and the
    pattern ``\\s`` agree on what whitespace is, and split is faster)."""
    return " ".join(unicodedata.normalize("NFKC", text).lower().split())


def words(text: str) -> list[str]:
    return _WORD.findall(normalize(text))


def hash64(data: bytes | str) -> int:
    """A stable signed 64-bit hash."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little", signed=True)


def unit_hash(data: str) -> float:
    """A stable hash in [0, 1), for splits and samples chosen by id."""
    digest = hashlib.blake2b(data.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little") / 2.0**64


def _blake64(w: str) -> int:
    return int.from_bytes(hashlib.blake2b(w.encode(), digest_size=8).digest(), "little")


def _hash_words(words_array) -> np.ndarray:
    """uint64 hash of each element of an Arrow string array, each distinct one once."""

    encoded = pc.dictionary_encode(words_array)
    vocab = encoded.dictionary.to_pylist()
    table = np.fromiter((_blake64(w) for w in vocab), dtype=np.uint64, count=len(vocab))
    return table[encoded.indices.to_numpy(zero_copy_only=False)]


def normalized_words(texts: list[str]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """``normalize`` of every text, and the hashes of ``words`` of every text, flat,
    with (N + 1,) int64 offsets: the same as the per-text functions, with each text
    normalized once and each distinct word of the batch hashed once.

    ASCII texts (NFKC leaves them as they are) go through one compiled pass over all of
    them; the others through ``normalize`` and the word pattern (whitespace does not
    change the words, so they are taken from the normalized text)."""
    ascii_at = [i for i, t in enumerate(texts) if t.isascii()]
    if len(ascii_at) == len(texts):
        return _ascii_normalized_words(texts)
    other_at = [i for i, t in enumerate(texts) if not t.isascii()]
    a_norms, a_w, a_offsets = _ascii_normalized_words([texts[i] for i in ascii_at])
    o_norms = [normalize(texts[i]) for i in other_at]
    o_w, o_offsets = flat_word_hashes([_WORD.findall(t) for t in o_norms])
    norms: list[str] = [""] * len(texts)
    for i, t in zip(ascii_at, a_norms, strict=True):
        norms[i] = t
    for i, t in zip(other_at, o_norms, strict=True):
        norms[i] = t
    w, offsets = _interleave(
        len(texts),
        [
            (np.array(ascii_at, np.int64), a_w, a_offsets),
            (np.array(other_at, np.int64), o_w, o_offsets),
        ],
    )
    return norms, w, offsets


@cache
def _ascii_classes() -> tuple[np.ndarray, np.ndarray]:
    """(128,) bool each: ASCII characters that ``\\s`` and ``\\w`` match (asked of the
    patterns themselves, so the compiled pass splits exactly as they do)."""
    chars = [chr(c) for c in range(128)]
    space = np.array([_SPACE.fullmatch(c) is not None for c in chars])
    word = np.array([_WORD.fullmatch(c) is not None for c in chars])
    return space, word


def _ascii_normalized_words(texts: list[str]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """normalized_words of ASCII texts: one compiled pass (kernels.ascii_words)."""

    # not at the top: it brings numba into this light module
    from agentworld.data.kernels import ascii_words

    sizes = np.fromiter((len(t) for t in texts), dtype=np.int64, count=len(texts))
    offsets = np.zeros(sizes.size + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    buf = np.frombuffer("".join(texts).encode("ascii"), dtype=np.uint8)
    norm, norm_offsets, chars, ends, word_offsets = ascii_words(buf, offsets, *_ascii_classes())
    joined = norm.tobytes().decode("ascii")
    starts, stops = norm_offsets[:-1].tolist(), norm_offsets[1:].tolist()
    norms = [joined[a:b] for a, b in zip(starts, stops, strict=True)]
    if ends.size == 1:
        return norms, np.empty(0, dtype=np.uint64), word_offsets
    words_array = pa.LargeStringArray.from_buffers(
        ends.size - 1, pa.py_buffer(ends), pa.py_buffer(chars)
    )
    return norms, _hash_words(words_array), word_offsets


def _interleave(n: int, parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]]):
    """Flat values with (n + 1,) offsets from groups of records: each group (record
    indices, its flat values, its offsets) put back at its records' places."""
    sizes = np.zeros(n, dtype=np.int64)
    for at, _, offsets in parts:
        sizes[at] = np.diff(offsets)
    out_offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(sizes, out=out_offsets[1:])
    out = np.empty(int(out_offsets[-1]), dtype=np.uint64)
    for at, flat, offsets in parts:
        if flat.size:
            shift = np.repeat(out_offsets[at] - offsets[:-1], np.diff(offsets))
            out[shift + np.arange(flat.size)] = flat
    return out, out_offsets


def flat_word_hashes(token_lists: list[list[str]]) -> tuple[np.ndarray, np.ndarray]:
    """uint64 hash of every word of many word lists, flat, and (N + 1,) int64 offsets
    (each distinct word hashed once)."""

    sizes = np.fromiter((len(t) for t in token_lists), dtype=np.int64, count=len(token_lists))
    offsets = np.zeros(sizes.size + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    if offsets[-1] == 0:
        return np.empty(0, dtype=np.uint64), offsets
    return _hash_words(pa.array([w for t in token_lists for w in t], pa.large_string())), offsets


def flat_ngram_hashes(w: np.ndarray, offsets: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Sorted unique n-gram hashes of every text (flat, with offsets) from flat word
    hashes: ``ngram_hashes`` of each text, computed for all of them in one loop."""
    # not at the top: it brings numba into this light module
    from agentworld.data.kernels import ngrams

    return ngrams(w, offsets, n, _POLY)


def word_hashes(tokens: list[str]) -> np.ndarray:
    """uint64 hash per word (each distinct word hashed once)."""
    return flat_word_hashes([tokens])[0]


def ngram_hashes(tokens: list[str], n: int) -> np.ndarray:
    """Sorted unique uint64 hashes of the word n-grams. A text shorter than n words
    gives one n-gram of all its words, so that short records still compare."""
    w, offsets = flat_word_hashes([tokens])
    return flat_ngram_hashes(w, offsets, n)[0]


def turn_text(record: dict[str, Any]) -> str:
    """Actions and observations of a record (JSON form), without the environment."""
    return "\n".join(f"{t['action']}\n{t['observation']}" for t in record["turns"])


def full_text(record: dict[str, Any]) -> str:
    """Environment, then each turn's action and observation (JSON form)."""
    return record["environment"] + "\n" + turn_text(record)


def jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """Jaccard similarity of two sorted unique hash arrays."""
    if a.size == 0 and b.size == 0:
        return 1.0
    inter = np.intersect1d(a, b, assume_unique=True).size
    return inter / (a.size + b.size - inter)
