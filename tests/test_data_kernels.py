"""The vectorized dedup kernels against plain reference implementations (Python ints,
sets and dicts, one record or one bucket at a time) on small inputs: word and n-gram
hashes, MinHash signatures, band keys, Jaccard, bucket pairs, exact runs, components
and survivors, and the reader's record JSON."""

from __future__ import annotations

import hashlib
import random
import re
import unicodedata

import numpy as np
import pyarrow as pa
import pytest

from agentworld.data.components import components_in_memory, components_local
from agentworld.data.exact import exact_partition
from agentworld.data.ingest_rows import parse_obj, record_json
from agentworld.data.kernels import jaccards
from agentworld.data.lsh import bucket_pairs, bucket_partition, pair_jaccards
from agentworld.data.minhash import band_keys_many, permutations, signatures
from agentworld.data.survivor import pick_survivor, pick_survivors_local
from agentworld.data.synthetic import synthetic_corpus
from agentworld.data.text import flat_ngram_hashes, hash64, normalized_words
from agentworld.schema import trajectory_to_chat, trajectory_to_rows
from agentworld.schema.examples import sample_trajectories

M64 = (1 << 64) - 1
TEXTS = [
    "",
    " \t ",
    "one",
    "two words",
    "Hello, World!\tfoo_bar 42 x",
    "\x1c\x1fUPPER lower",
    "Ünïcode ﬁ ＡＢＣ İstanbul straße",
    "a\u00a0b\u2003c x\x85y",
    "日本語 テキスト 123 e\u0301",
]


def _texts(seed: int, n: int = 60) -> list[str]:
    rng = random.Random(seed)
    alphabet = ["alpha", "Beta", "gamma_1", "42", "ß", "é", " ", "\n", ", ", "\t", "-"]
    return TEXTS + ["".join(rng.choices(alphabet, k=rng.randint(0, 30))) for _ in range(n)]


# ---- plain references -------------------------------------------------------------------


def ref_words(text: str) -> list[str]:
    norm = re.sub(r"\s+", " ", unicodedata.normalize("NFKC", text).lower()).strip()
    return re.findall(r"\w+", norm)


def ref_word_hash(w: str) -> int:
    return int.from_bytes(hashlib.blake2b(w.encode(), digest_size=8).digest(), "little")


def ref_ngrams(text: str, n: int) -> list[int]:
    hs = [ref_word_hash(w) for w in ref_words(text)]
    if not hs:
        return []
    k = min(n, len(hs))
    grams = set()
    for i in range(len(hs) - k + 1):
        h = 0
        for w in hs[i : i + k]:
            h = (h * 0x9E3779B97F4A7C15 + w) & M64
        grams.add(h)
    return sorted(grams)


def ref_signature(shingles: list[int], a: list[int], b: list[int]) -> list[int]:
    xs = [(s ^ (s >> 32)) & 0xFFFFFFFF for s in shingles]
    return [
        min([((ai * x + bi) & M64) >> 32 for x in xs], default=0xFFFFFFFF)
        for ai, bi in zip(a, b, strict=True)
    ]


def ref_fmix(h: int) -> int:
    h ^= h >> 30
    h = (h * 0xBF58476D1CE4E5B9) & M64
    h ^= h >> 27
    h = (h * 0x94D049BB133111EB) & M64
    return h ^ (h >> 31)


def ref_band_keys(sig: list[int], bands: int, rows: int) -> list[int]:
    out = []
    for j in range(bands):
        h = ref_fmix((j + 0x9E3779B97F4A7C15) & M64)
        for v in sig[j * rows : (j + 1) * rows]:
            h = ref_fmix(h ^ v)
        out.append(h - (1 << 64) if h >= 1 << 63 else h)
    return out


def _flat(sets: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    offsets = np.cumsum([0, *map(len, sets)]).astype(np.int64)
    flat = np.array([v for s in sets for v in s], dtype=np.uint64)
    return flat, offsets


# ---- tests ----------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(3))
def test_words_ngrams_and_signatures_equal_the_plain_reference(seed):
    texts = _texts(seed)
    norms, w, w_offsets = normalized_words(texts)
    assert norms == [
        re.sub(r"\s+", " ", unicodedata.normalize("NFKC", t).lower()).strip() for t in texts
    ]
    for i, t in enumerate(texts):
        assert w[w_offsets[i] : w_offsets[i + 1]].tolist() == [
            ref_word_hash(x) for x in ref_words(t)
        ]
    for n in (1, 3, 5):
        flat, offsets = flat_ngram_hashes(w, w_offsets, n)
        for i, t in enumerate(texts):
            assert flat[offsets[i] : offsets[i + 1]].tolist() == ref_ngrams(t, n), (t, n)
    flat, offsets = flat_ngram_hashes(w, w_offsets, 5)
    a, b = permutations(16, seed)
    sigs = signatures(flat, offsets, 16, seed)
    assert sigs.shape == (len(texts), 16) and sigs.dtype == np.uint32
    for i in range(len(texts)):
        ref = ref_signature(flat[offsets[i] : offsets[i + 1]].tolist(), a.tolist(), b.tolist())
        assert sigs[i].tolist() == ref


@pytest.mark.parametrize("seed", range(3))
def test_compiled_ascii_pass_equals_the_patterns_on_every_ascii_character(seed):
    """ASCII texts take the compiled pass (kernels.ascii_words), the others the Python
    patterns; in one block, in any order, each text gets what the reference gives."""
    rng = random.Random(seed)
    ascii_texts = [
        "".join(chr(rng.randrange(128)) for _ in range(rng.randint(0, 40))) for _ in range(80)
    ]
    ascii_texts += ["", "\x1c\x1d\x1e\x1f\x0b\x0c", "  Lead and trail  ", "A_B-c9"]
    mixed = ascii_texts + [t + " é" for t in ascii_texts[:20]]
    rng.shuffle(mixed)
    for texts in (ascii_texts, mixed):
        norms, w, offsets = normalized_words(texts)
        for i, t in enumerate(texts):
            assert norms[i] == re.sub(r"\s+", " ", unicodedata.normalize("NFKC", t).lower()).strip()
            assert w[offsets[i] : offsets[i + 1]].tolist() == [
                ref_word_hash(x) for x in ref_words(t)
            ], repr(t)


def test_band_keys_equal_the_plain_reference_and_collide_only_on_equal_bands():
    rng = np.random.default_rng(0)
    sigs = rng.integers(0, 2**32, size=(40, 12), dtype=np.uint64).astype(np.uint32)
    sigs[1, :6] = sigs[0, :6]  # shares band 0 and 1 (rows 3) with record 0
    sigs[2, 3:6] = sigs[0, 0:3]  # the same values in another band: no collision
    keys = band_keys_many(sigs, 4, 3)
    assert keys.dtype == np.int64 and keys.shape == (40, 4)
    for i in range(40):
        assert keys[i].tolist() == ref_band_keys(sigs[i].tolist(), 4, 3)
    assert (keys[1, :2] == keys[0, :2]).all() and (keys[1, 2:] != keys[0, 2:]).all()
    assert keys[2, 1] != keys[0, 0]
    assert len(np.unique(keys)) == keys.size - 2


def test_jaccard_of_sorted_sets_equals_python_sets():
    rng = random.Random(1)
    sets = [sorted(rng.sample(range(60), rng.randint(0, 25))) for _ in range(30)] + [[], []]
    flat, offsets = _flat(sets)
    left = np.array([rng.randrange(len(sets)) for _ in range(200)] + [30], dtype=np.int64)
    right = np.array([rng.randrange(len(sets)) for _ in range(200)] + [31], dtype=np.int64)
    got = jaccards(flat, offsets, left, right)
    for k, (i, j) in enumerate(zip(left.tolist(), right.tolist(), strict=True)):
        a, b = set(sets[i]), set(sets[j])
        assert got[k] == (len(a & b) / len(a | b) if a | b else 1.0)
    uids = np.arange(100, 132, dtype=np.int64)
    pairs = np.stack([uids[left], uids[right]], axis=1)
    assert np.array_equal(pair_jaccards(pairs, uids, flat, offsets), got)


def test_bucket_partition_equals_bucket_pairs_of_each_bucket():
    rng = random.Random(2)
    rows = []
    for band in range(-30, 30):
        size = rng.choice([1, 1, 2, 3, 5, 9, 70])  # 70 > all_pairs_max: the linear scheme
        members = rng.sample(range(1000), size)
        rows += [(band * 7919, u) for u in members] + [(band * 7919, members[0])]  # a repeat
    rng.shuffle(rows)
    table = pa.table(
        {"band": [r[0] for r in rows], "uid": [r[1] for r in rows], "part": [0] * len(rows)}
    )
    got = bucket_partition(table, all_pairs_max=8, anchors=2)
    buckets: dict[int, list[int]] = {}
    for band, uid in rows:
        buckets.setdefault(band, []).append(uid)
    want = set()
    for members in buckets.values():
        want |= {
            tuple(p) for p in bucket_pairs(np.array(members), all_pairs_max=8, anchors=2).tolist()
        }
    pairs = list(zip(got.column("a").to_pylist(), got.column("b").to_pylist(), strict=True))
    assert len(pairs) == len(set(pairs)) and set(pairs) == want


def test_exact_partition_keeps_the_smallest_key_of_each_hash():
    rng = random.Random(3)
    rows = [
        {
            "uid": i,
            "exact_hash": f"{rng.randrange(12):032x}",
            "pkey": f"k{rng.random():.6f}",
            "bands": [i],
        }
        for i in range(80)
    ]
    out = exact_partition(pa.Table.from_pylist(rows)).to_pylist()
    assert sorted(r["uid"] for r in out) == list(range(80))
    groups: dict[str, list[dict]] = {}
    for r in rows:
        groups.setdefault(r["exact_hash"], []).append(r)
    by_uid = {r["uid"]: r for r in out}
    for h, members in groups.items():
        best = min(members, key=lambda r: r["pkey"])
        for m in members:
            o = by_uid[m["uid"]]
            assert o["dup_of"] == (None if m is best else best["uid"])
            assert o["cluster"] == (hash64(h) if len(members) > 1 else None)
            assert o["pkey"] == m["pkey"] and o["bands"] == m["bands"]


@pytest.mark.parametrize("seed", range(3))
def test_local_components_and_survivors_equal_union_find_and_per_cluster_pick(seed):
    rng = random.Random(seed)
    edges = np.array([(rng.randrange(300), rng.randrange(300)) for _ in range(200)], dtype=np.int64)
    edges = edges[edges[:, 0] != edges[:, 1]]
    nodes, labels = components_local(edges[:, 0], edges[:, 1])
    assert dict(zip(nodes.tolist(), labels.tolist(), strict=True)) == components_in_memory(edges)
    pkeys = pa.array([f"{rng.random():.8f}" for _ in nodes])
    got = pick_survivors_local(nodes, labels, pkeys).sort_by("uid")
    want = []
    for label in np.unique(labels).tolist():
        member = labels == label
        group = pa.table(
            {"uid": nodes[member], "label": labels[member], "pkey": pkeys.filter(pa.array(member))}
        )
        want.append(pick_survivor(group))
    assert got.equals(pa.concat_tables(want).sort_by("uid"))


def test_record_json_is_to_json():
    trajs = sample_trajectories(30) + synthetic_corpus(20, n_exact=2, n_near=2, n_far=2).records
    chats = [
        parse_obj(
            {"id": t.id, "domain": "terminal", "source": "chat", "messages": trajectory_to_chat(t)},
            "chat",
        )
        for t in trajs[:10]
    ]
    awb = [parse_obj(r, "awb") for t in trajs[:5] for r in trajectory_to_rows(t)]
    for t in trajs + chats + awb:
        assert record_json(t) == t.to_json()
    assert any(t.turns[0].tool_call is not None for t in chats) and any(t.metadata for t in awb)
