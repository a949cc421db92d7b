"""MinHash signatures and LSH band keys (plain numpy, no Ray).

Permutation i is the multiply-shift hash ``(a_i * x + b_i) mod 2**64 >> 32`` of the
shingle folded to 32 bits: a universal family, vectorized over shingles x permutations.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache

import numpy as np

_MASK32 = np.uint64(0xFFFFFFFF)
_CHUNK = 4096  # shingles per matrix product, to bound memory on long records


def _false_positive(threshold: float, b: int, r: int) -> float:
    s = np.linspace(0.0, threshold, 201)
    return float(np.trapezoid(1 - (1 - s**r) ** b, s))


def _false_negative(threshold: float, b: int, r: int) -> float:
    s = np.linspace(threshold, 1.0, 201)
    return float(np.trapezoid((1 - s**r) ** b, s))


@lru_cache(maxsize=64)
def optimal_bands_rows(
    threshold: float, num_perm: int, recall_weight: float = 0.5
) -> tuple[int, int]:
    """(bands, rows) with bands * rows <= num_perm minimizing the weighted area of
    false positives below the threshold and false negatives above it."""
    best, best_err = (1, 1), float("inf")
    for b in range(1, num_perm + 1):
        for r in range(1, num_perm // b + 1):
            fp, fn = _false_positive(threshold, b, r), _false_negative(threshold, b, r)
            err = (1 - recall_weight) * fp + recall_weight * fn
            if err < best_err:
                best, best_err = (b, r), err
    return best


def collision_probability(similarity: float, bands: int, rows: int) -> float:
    """Chance that two records of this Jaccard share at least one band."""
    return 1 - (1 - similarity**rows) ** bands


@lru_cache(maxsize=8)
def permutations(num_perm: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The (a, b) coefficients, a odd; fixed by the seed."""
    rng = np.random.Generator(np.random.PCG64(seed))
    a = rng.integers(1, 2**63, size=num_perm, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    b = rng.integers(0, 2**63, size=num_perm, dtype=np.uint64)
    return a, b


def signature(shingles: np.ndarray, num_perm: int, seed: int = 0) -> np.ndarray:
    """uint32 MinHash signature (num_perm,) of a uint64 shingle-hash array."""
    a, b = permutations(num_perm, seed)
    sig = np.full(num_perm, 0xFFFFFFFF, dtype=np.uint64)
    x = (shingles ^ (shingles >> np.uint64(32))) & _MASK32
    with np.errstate(over="ignore"):
        for start in range(0, x.size, _CHUNK):
            chunk = x[start : start + _CHUNK, None]
            values = (chunk * a[None, :] + b[None, :]) >> np.uint64(32)  # (S, P)
            np.minimum(sig, values.min(axis=0), out=sig)
    return sig.astype(np.uint32)


def band_keys(sig: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """int64 key per band (bands,); the band index is part of the key, so two
    records collide only in the same band."""
    out = np.empty(bands, dtype=np.int64)
    for j in range(bands):
        data = j.to_bytes(2, "little") + sig[j * rows : (j + 1) * rows].tobytes()
        digest = hashlib.blake2b(data, digest_size=8).digest()
        out[j] = int.from_bytes(digest, "little", signed=True)
    return out
