"""MinHash signatures and LSH band keys (plain numpy, no Ray).

Permutation i is the multiply-shift hash ``(a_i * x + b_i) mod 2**64 >> 32`` of the
shingle folded to 32 bits: a universal family. Signatures of a whole block are one
compiled loop (kernels.minhash); band keys are whole-array numpy.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

_MASK32 = np.uint64(0xFFFFFFFF)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


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
    offsets = np.array([0, shingles.size], dtype=np.int64)
    return signatures(shingles, offsets, num_perm, seed)[0]


def signatures(flat: np.ndarray, offsets: np.ndarray, num_perm: int, seed: int = 0) -> np.ndarray:
    """(N, num_perm) uint32 signatures of N shingle sets given flat with (N + 1,) offsets."""
    # not at the top: it brings numba into this light module
    from agentworld.data.kernels import minhash

    a, b = permutations(num_perm, seed)
    x = (flat ^ (flat >> np.uint64(32))) & _MASK32
    return minhash(x, offsets, a, b)


def _fmix64(h: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer: a bijection of uint64 with full avalanche."""
    h = h ^ (h >> np.uint64(30))
    h = h * np.uint64(0xBF58476D1CE4E5B9)
    h = h ^ (h >> np.uint64(27))
    h = h * np.uint64(0x94D049BB133111EB)
    return h ^ (h >> np.uint64(31))


def band_keys_many(sigs: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """(N, bands) int64 key per band of each signature (N, P). The band index is part
    of the key, so two records collide only in the same band; the key is a 64-bit mix
    of the band's rows, one whole-array pass per row."""
    n = sigs.shape[0]
    cells = sigs[:, : bands * rows].astype(np.uint64).reshape(n, bands, rows)
    with np.errstate(over="ignore"):
        h = np.broadcast_to(_fmix64(np.arange(bands, dtype=np.uint64) + _GOLDEN), (n, bands))
        for t in range(rows):
            h = _fmix64(h ^ cells[:, :, t])
    return np.ascontiguousarray(h).view(np.int64)


def band_keys(sig: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """int64 key per band (bands,) of one signature (see band_keys_many)."""
    return band_keys_many(sig[None, :], bands, rows)[0]
