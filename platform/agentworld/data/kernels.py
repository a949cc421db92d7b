"""Compiled inner loops of dedup (numba, a declared dependency): MinHash over many
records at once and the intersection sizes of sorted hash sets. Everything else in
dedup is whole-array numpy; these two loops are the ones numpy cannot express without
(records x shingles x permutations) temporaries.

Both work on a *flat* layout: the values of all records concatenated, and ``offsets``
(N + 1,) int64 so that record i is ``flat[offsets[i]:offsets[i + 1]]``. Compiled once
per machine (``cache=True`` writes next to this file, or numba's user cache when that
is read-only), so a Ray worker pays the load, not the compilation.
"""

from __future__ import annotations

import numpy as np
from numba import njit

_SHIFT = np.uint64(32)
_EMPTY = np.uint64(0xFFFFFFFF)


@njit(cache=True, nogil=True)
def _minhash(x: np.ndarray, offsets: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    n, p = offsets.size - 1, a.size
    out = np.empty((n, p), dtype=np.uint32)
    acc = np.empty(p, dtype=np.uint64)
    for r in range(n):
        acc[:] = _EMPTY
        for s in range(offsets[r], offsets[r + 1]):
            v = x[s]
            for k in range(p):  # vectorized by LLVM: one lane per permutation
                h = (a[k] * v + b[k]) >> _SHIFT
                if h < acc[k]:
                    acc[k] = h
        for k in range(p):
            out[r, k] = np.uint32(acc[k])
    return out


def minhash(x32: np.ndarray, offsets: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(N, P) uint32: per record, min over its values x of ``(a * x + b) mod 2**64 >> 32``.

    x32: (S,) uint64 values below 2**32; offsets: (N + 1,) int64; a, b: (P,) uint64.
    A record without values gets 0xFFFFFFFF everywhere."""
    return _minhash(
        np.ascontiguousarray(x32, dtype=np.uint64),
        np.ascontiguousarray(offsets, dtype=np.int64),
        np.ascontiguousarray(a, dtype=np.uint64),
        np.ascontiguousarray(b, dtype=np.uint64),
    )


@njit(cache=True, nogil=True)
def _ngrams(w: np.ndarray, offsets: np.ndarray, n: int, poly: np.uint64):
    count = offsets.size - 1
    out = np.empty(max(w.size, count), dtype=np.uint64)
    out_offsets = np.zeros(count + 1, dtype=np.int64)
    at = 0
    for r in range(count):
        start, size = offsets[r], offsets[r + 1] - offsets[r]
        if size > 0:
            k = min(n, size)  # a text shorter than n words: one n-gram of all of them
            m = size - k + 1
            grams = np.empty(m, dtype=np.uint64)
            for i in range(m):
                h = np.uint64(0)
                for j in range(k):
                    h = h * poly + w[start + i + j]
                grams[i] = h
            grams.sort()
            out[at] = grams[0]
            at += 1
            for i in range(1, m):
                if grams[i] != grams[i - 1]:
                    out[at] = grams[i]
                    at += 1
        out_offsets[r + 1] = at
    return out[:at].copy(), out_offsets


def ngrams(w: np.ndarray, offsets: np.ndarray, n: int, poly: np.uint64):
    """Sorted unique polynomial n-gram hashes ``sum_j w[i + j] * poly**(k - 1 - j)``
    (mod 2**64) of every record, flat with offsets; k = min(n, record length)."""
    return _ngrams(
        np.ascontiguousarray(w, dtype=np.uint64),
        np.ascontiguousarray(offsets, dtype=np.int64),
        n,
        np.uint64(poly),
    )


@njit(cache=True, nogil=True)
def _intersections(
    flat: np.ndarray, offsets: np.ndarray, left: np.ndarray, right: np.ndarray
) -> np.ndarray:
    out = np.zeros(left.size, dtype=np.int64)
    for k in range(left.size):
        i, i_end = offsets[left[k]], offsets[left[k] + 1]
        j, j_end = offsets[right[k]], offsets[right[k] + 1]
        c = 0
        while i < i_end and j < j_end:  # merge of two sorted unique runs
            x, y = flat[i], flat[j]
            if x == y:
                c += 1
                i += 1
                j += 1
            elif x < y:
                i += 1
            else:
                j += 1
        out[k] = c
    return out


def intersections(
    flat: np.ndarray, offsets: np.ndarray, left: np.ndarray, right: np.ndarray
) -> np.ndarray:
    """(K,) int64: size of set(record left[k]) & set(record right[k]); each record's
    values sorted and unique. left, right: (K,) int64 record indices."""
    return _intersections(
        np.ascontiguousarray(flat, dtype=np.uint64),
        np.ascontiguousarray(offsets, dtype=np.int64),
        np.ascontiguousarray(left, dtype=np.int64),
        np.ascontiguousarray(right, dtype=np.int64),
    )


def jaccards(
    flat: np.ndarray, offsets: np.ndarray, left: np.ndarray, right: np.ndarray
) -> np.ndarray:
    """(K,) float64 Jaccard of record pairs (two empty sets: 1.0), the same arithmetic
    as text.jaccard."""
    inter = intersections(flat, offsets, left, right)
    sizes = np.diff(np.asarray(offsets, dtype=np.int64))
    union = sizes[left] + sizes[right] - inter
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(union == 0, 1.0, inter / np.maximum(union, 1))


@njit(cache=True, nogil=True)
def _ascii_words(buf: np.ndarray, offsets: np.ndarray, space: np.ndarray, word: np.ndarray):
    n = offsets.size - 1
    norm = np.empty(buf.size, dtype=np.uint8)
    norm_offsets = np.zeros(n + 1, dtype=np.int64)
    chars = np.empty(buf.size, dtype=np.uint8)
    ends = np.zeros(buf.size + 1, dtype=np.int64)
    word_offsets = np.zeros(n + 1, dtype=np.int64)
    at = wat = nw = 0
    for r in range(n):
        pending = started = in_word = False
        for s in range(offsets[r], offsets[r + 1]):
            c = buf[s]
            if c >= 65 and c <= 90:  # str.lower of an ASCII letter
                c += 32
            if space[c]:  # a run of whitespace: one space, none at either end
                pending = started
            else:
                if pending:
                    norm[at] = 32
                    at += 1
                    pending = False
                norm[at] = c
                at += 1
                started = True
            if word[c]:
                chars[wat] = c
                wat += 1
                in_word = True
            elif in_word:
                nw += 1
                ends[nw] = wat
                in_word = False
        if in_word:
            nw += 1
            ends[nw] = wat
        norm_offsets[r + 1] = at
        word_offsets[r + 1] = nw
    return norm[:at], norm_offsets, chars[:wat], ends[: nw + 1], word_offsets


def ascii_words(buf: np.ndarray, offsets: np.ndarray, space: np.ndarray, word: np.ndarray):
    """Normalized text and words of many ASCII texts at once (flat layout).

    buf: (B,) uint8, the texts concatenated, text i at ``buf[offsets[i]:offsets[i + 1]]``;
    space, word: (128,) bool, which characters are whitespace and word characters.
    Returns (norm, norm_offsets): each text lower-cased with every run of whitespace one
    space and none at either end; (chars, ends): the bytes of every word (a maximal run
    of word characters) concatenated, word k at ``chars[ends[k]:ends[k + 1]]``; and
    word_offsets (N + 1,): the words of text i are ``word_offsets[i]:word_offsets[i + 1]``.
    """
    return _ascii_words(
        np.ascontiguousarray(buf, dtype=np.uint8),
        np.ascontiguousarray(offsets, dtype=np.int64),
        np.ascontiguousarray(space, dtype=np.bool_),
        np.ascontiguousarray(word, dtype=np.bool_),
    )
