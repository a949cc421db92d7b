"""Text of a record for dedup and decontamination: normalization, words, n-gram hashes.

Plain functions (no Ray). Hashes are stable across processes and machines (blake2b and
fixed arithmetic, never Python's salted ``hash``), which is what makes dedup results
independent of where a block is processed.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from typing import Any

import numpy as np

_SPACE = re.compile(r"\s+")
_WORD = re.compile(r"\w+")
# Odd 64-bit multiplier of the polynomial n-gram hash (arithmetic wraps mod 2**64).
_POLY = np.uint64(0x9E3779B97F4A7C15)


def normalize(text: str) -> str:
    """NFKC, lower case, runs of whitespace collapsed to one space."""
    return _SPACE.sub(" ", unicodedata.normalize("NFKC", text).lower()).strip()


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


def word_hashes(tokens: list[str]) -> np.ndarray:
    """uint64 hash per word (each distinct word hashed once)."""
    cache: dict[str, int] = {}
    out = np.empty(len(tokens), dtype=np.uint64)
    for i, w in enumerate(tokens):
        h = cache.get(w)
        if h is None:
            h = cache[w] = int.from_bytes(
                hashlib.blake2b(w.encode(), digest_size=8).digest(), "little"
            )
        out[i] = h
    return out


def ngram_hashes(tokens: list[str], n: int) -> np.ndarray:
    """Sorted unique uint64 hashes of the word n-grams. A text shorter than n words
    gives one n-gram of all its words, so that short records still compare."""
    if not tokens:
        return np.empty(0, dtype=np.uint64)
    w = word_hashes(tokens)
    n = min(n, len(w))
    m = len(w) - n + 1
    h = np.zeros(m, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j in range(n):
            h = h * _POLY + w[j : j + m]
    return np.unique(h)


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
