"""A generated corpus with planted duplicates of known Jaccard similarity, for tests
and benchmarks of dedup and decontamination.

Planted: exact copies (case and whitespace changed), near copies (Jaccard with their
original at or above the threshold), far variants (clearly below it: to be kept),
templated families (same environment and actions, different observations: to be kept),
and trajectories that also appear in an evaluation set. Originals have a successful
outcome and copies none, so the priority rule keeps the original. The Jaccard of
every planted copy is measured with the same shingles dedup uses, so the ground truth
is exact rather than assumed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace

from agentworld.data.text import full_text, jaccard, ngram_hashes, words
from agentworld.schema import Outcome, Trajectory, Turn

DOMAINS = ("terminal", "mcp", "search", "swe")
BAD_LINES = (
    "{not json",
    '{"id": "bad-missing", "domain": "terminal", "source": "gen", "environment": "x"}',
    '{"id": "bad-domain", "domain": "fax", "source": "gen", "environment": "x", "turns": [{"action": "a", "observation": "b"}]}',
    '{"id": "bad-type", "domain": "terminal", "source": "gen", "environment": 3, "turns": []}',
    '{"id": "bad-empty", "domain": "mcp", "source": "gen", "environment": "x", "turns": []}',
    '{"id": "", "domain": "search", "source": "gen", "environment": "x", "turns": [{"action": "a", "observation": "b"}]}',
    "[1, 2, 3]",
)


@dataclass
class SyntheticCorpus:
    records: list[Trajectory] = field(default_factory=list)
    exact_ids: set[str] = field(default_factory=set)
    near_ids: set[str] = field(default_factory=set)
    far_ids: set[str] = field(default_factory=set)
    templated_ids: set[str] = field(default_factory=set)
    contaminated_ids: set[str] = field(default_factory=set)
    eval_set: list[Trajectory] = field(default_factory=list)
    similarity: dict[str, float] = field(default_factory=dict)
    """Planted copy id -> measured Jaccard with its original."""

    @property
    def duplicate_ids(self) -> set[str]:
        return self.exact_ids | self.near_ids


class _Gen:
    def __init__(self, seed: int, vocab_size: int = 4000) -> None:
        self.rng = random.Random(seed)
        letters = "abcdefghijklmnopqrstuvwxyz"
        self.vocab = sorted(
            {
                "".join(self.rng.choices(letters, k=self.rng.randint(3, 9)))
                for _ in range(vocab_size)
            }
        )

    def text(self, n: int) -> str:
        return " ".join(self.rng.choices(self.vocab, k=n))

    def trajectory(self, tid: str, *, turns: int | None = None, obs_words: int = 40) -> Trajectory:
        n = turns or self.rng.randint(3, 6)
        return Trajectory(
            id=tid,
            domain=self.rng.choice(DOMAINS),
            source=f"synthetic-{self.rng.randint(0, 2)}",
            environment=f"Environment {tid}: {self.text(20)}",
            turns=tuple(
                Turn(action=self.text(6), observation=self.text(obs_words)) for _ in range(n)
            ),
            outcome=Outcome(success=True),
        )

    def mutate(self, traj: Trajectory, rate: float, tid: str) -> Trajectory:
        def edit(s: str) -> str:
            ws = s.split(" ")
            return " ".join(
                self.rng.choice(self.vocab) if self.rng.random() < rate else w for w in ws
            )

        turns = tuple(replace(t, observation=edit(t.observation)) for t in traj.turns)
        return replace(traj, id=tid, turns=turns, outcome=None, metadata={})


def _similarity(a: Trajectory, b: Trajectory, k: int) -> float:
    ga = ngram_hashes(words(full_text(a.to_dict())), k)
    gb = ngram_hashes(words(full_text(b.to_dict())), k)
    return jaccard(ga, gb)


def _planted(
    g: _Gen, orig: Trajectory, tid: str, lo: float, hi: float, k: int
) -> tuple[Trajectory, float]:
    """A mutated copy whose measured Jaccard with ``orig`` is in [lo, hi]."""
    rate = 0.01 if lo > 0.8 else 0.15
    for _ in range(200):
        copy = g.mutate(orig, rate, tid)
        sim = _similarity(orig, copy, k)
        if lo <= sim <= hi:
            return copy, sim
        rate *= 1.3 if sim > hi else 0.75
    raise RuntimeError(f"could not plant a copy with Jaccard in [{lo}, {hi}]")


def _exact_copy(orig: Trajectory, tid: str) -> Trajectory:
    turns = tuple(replace(t, observation=t.observation.upper() + "  ") for t in orig.turns)
    return replace(orig, id=tid, turns=turns, outcome=None, source="mirror", metadata={})


def synthetic_corpus(
    n_base: int = 200,
    *,
    seed: int = 0,
    n_exact: int = 20,
    n_near: int = 30,
    n_far: int = 20,
    n_families: int = 4,
    family_size: int = 6,
    n_contaminated: int = 0,
    threshold: float = 0.8,
    shingle_size: int = 5,
    margin: float = 0.05,
) -> SyntheticCorpus:
    """Originals plus planted copies, in a shuffled order (see the module docstring)."""
    g = _Gen(seed)
    c = SyntheticCorpus()
    base = [g.trajectory(f"base-{i:05d}") for i in range(n_base)]
    c.records.extend(base)
    for i in range(n_exact):
        c.records.append(_exact_copy(base[i % n_base], f"exact-{i:05d}"))
        c.exact_ids.add(f"exact-{i:05d}")
    for i in range(n_near):
        orig = base[(n_exact + i) % n_base]
        copy, sim = _planted(g, orig, f"near-{i:05d}", threshold + margin, 0.99, shingle_size)
        c.records.append(copy)
        c.near_ids.add(copy.id)
        c.similarity[copy.id] = sim
    for i in range(n_far):
        orig = base[(n_exact + n_near + i) % n_base]
        copy, sim = _planted(g, orig, f"far-{i:05d}", 0.3, threshold - margin, shingle_size)
        c.records.append(copy)
        c.far_ids.add(copy.id)
        c.similarity[copy.id] = sim
    _add_families(g, c, n_families, family_size)
    for i in range(n_contaminated):
        traj = g.trajectory(f"leak-{i:05d}")
        c.records.append(traj)
        c.contaminated_ids.add(traj.id)
        c.eval_set.append(replace(traj, id=f"eval-{i:05d}", source="bench"))
    c.eval_set.extend(g.trajectory(f"eval-only-{i:03d}") for i in range(3))
    g.rng.shuffle(c.records)
    return c


def _add_families(g: _Gen, c: SyntheticCorpus, n_families: int, size: int) -> None:
    """Same environment and actions, different (short) observations: similar, not
    duplicates. Their Jaccard is high enough that LSH proposes some of them."""
    for f in range(n_families):
        env = f"Template {f}: {g.text(60)}"
        actions = [g.text(25) for _ in range(4)]
        for m in range(size):
            tid = f"tmpl-{f:02d}-{m:02d}"
            turns = tuple(Turn(action=a, observation=g.text(4)) for a in actions)
            c.records.append(
                Trajectory(
                    id=tid, domain="terminal", source="template", environment=env, turns=turns
                )
            )
            c.templated_ids.add(tid)
