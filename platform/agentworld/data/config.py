"""Typed configuration of the prepare stage. Free of heavy imports: the recipes module
imports it. Invalid values raise ConfigError naming the field (``data.<name>``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from agentworld.config import ConfigError, check_fraction, check_positive
from agentworld.data.formats.registry import FORMAT_NAMES, SHARD_FORMATS

Priority = Literal["more_turns", "success", "longer"]
InputFormat = Literal[
    "auto",
    "record",
    "awb",
    "chat",
    # agentworld.data.formats.registry, in its order
    "swe_agent",
    "openhands",
    "toolbench",
    "openai_chat",
    "mcp_xml",
    "intercode",
    "asciicast",
    "search_r1",
    "react",
    "browsergym",
    "aitz",
    "android_world",
    "screenagent",
    "opencua",
]


def _error(name: str, message: str) -> ConfigError:
    return ConfigError(f"data.{name}", message)


@dataclass(frozen=True, kw_only=True)
class DataConfig:
    """Ingest, validation, dedup, decontamination, tokenization and packing."""

    input_format: InputFormat = "auto"
    """How inputs are read. ``auto`` detects per JSONL line (``turns`` = record,
    ``messages`` = chat with tool calls, ``prompt``/``response`` = AgentWorldBench row,
    ``instance_id``/``history`` = OpenHands) and per other file or folder (the first
    adapter of agentworld.data.formats that claims it; a file none claims is
    quarantined). ``record``, ``awb`` or ``chat`` read shards only, all in that format;
    an adapter's name reads every file with that adapter."""
    custom_domains: tuple[str, ...] = ()
    """Domains registered (agentworld.schema.register_domain) in every worker before
    parsing, for records of domains beyond the seven built in."""
    num_workers: int = 2
    """CPUs prepare uses at once (Ray Data's limit, plain tasks in flight, shuffle
    partitions): the job's parallelism."""
    block_records: int = 2000
    """Records per block produced by the readers."""
    split_bytes: int = 128 * 1024 * 1024
    """Uncompressed JSONL files larger than this are read as several byte ranges."""
    min_turns: int = 1
    """Records with fewer turns are quarantined."""
    max_record_chars: int = 8_000_000
    """Records whose text is longer are quarantined (a runaway log, a binary dump)."""
    exact_dedup: bool = True
    """Remove records whose normalized text is identical to a better one."""
    near_dedup: bool = True
    """Remove records whose word-shingle Jaccard with a better one is >= the threshold."""
    near_dup_threshold: float = 0.8
    """Jaccard similarity above which two trajectories are near duplicates; every
    candidate pair from LSH is verified against it on the actual shingle sets."""
    shingle_size: int = 5
    """Words per shingle."""
    num_perm: int = 128
    """MinHash permutations."""
    lsh_bands: int | None = None
    """LSH bands; None derives bands and rows from the threshold (set both or neither)."""
    lsh_rows: int | None = None
    """Rows per band; bands * rows must not exceed num_perm."""
    lsh_recall_weight: float = 0.9
    """Weight of missed pairs against spurious candidates when bands and rows are
    derived. Spurious candidates only cost a verification, so recall weighs more: at
    0.9 with 128 permutations and threshold 0.8, pairs of Jaccard 0.85 meet with
    probability 0.975 (0.69 at equal weights)."""
    bucket_all_pairs_max: int = 64
    """Buckets up to this size emit every pair as a candidate; larger buckets pair each
    member with its sorted neighbour and with the bucket's first ``bucket_anchors``
    members, so a huge bucket never costs quadratic work."""
    bucket_anchors: int = 4
    """Anchor members per oversized bucket."""
    survivor_priority: tuple[Priority, ...] = ("more_turns", "success")
    """Order of preference for the record a cluster keeps; ties go to the smallest
    (trajectory id, source, input location), so the choice is stable."""
    decontam_ngram: int = 8
    """Words per n-gram compared with the evaluation sets."""
    decontam_threshold: float = 0.5
    """A record whose share of turn n-grams found in an evaluation set is at least this
    is contaminated and removed. Environment text is not compared: many trajectories
    share one system prompt."""
    eval_fraction: float = 0.05
    """Share of trajectories held out, chosen by a stable hash of the trajectory id."""
    min_eval_trajectories: int = 1
    """At least this many trajectories of every domain are held out (the domain's
    smallest hashes), so that each domain is evaluated even in small corpora; a domain
    with no more kept trajectories than this keeps one for training."""
    sft_truncation: Literal["left", "drop"] = "left"
    """SFT samples longer than the sequence: ``left`` drops the oldest turns and keeps
    the environment text (dropping the sample when even that does not fit); ``drop``
    drops the sample. Either way the reason is counted in the report."""
    sft_rows: Literal["turn", "trajectory"] = "turn"
    """What SFT trains on. ``turn``: one row per turn, its history as the prompt (a
    turn's context is trained again with every later turn). ``trajectory``: the same
    samples as whole-conversation rows, every answer a target, so each context token
    is read once per epoch where the trajectory fits the sequence (a long one is cut
    into rows, each starting with the history its first new turn's sample keeps). The
    samples for evaluation and RL are the per-turn ones either way."""
    max_domain_drop_share: float = 0.2
    """Prepare fails, naming the domain, when a domain loses more than this share of its
    SFT samples (too long for the recipe's sequence even after truncation): a model
    that never trains on a domain would be served for it all the same. 1 disables."""
    drop_guard_min_samples: int = 10
    """Domains with fewer SFT samples than this are reported but not held to
    max_domain_drop_share: a share of a handful of samples says little."""
    cpt_split_min: int = 32
    """A CPT document that fits no packed row may be cut to fill the row with the most
    free space when at least this many tokens fit there (each piece its own document);
    0 never cuts. SFT samples are never cut."""
    pack_window: int = 4096
    """Samples packed together by best-fit-decreasing (one packing group, one shard)."""
    rows_per_shard: int = 10_000
    """Rows per audit shard (quarantine, duplicates, contaminated, samples)."""
    tokenizer_train_docs: int = 200_000
    """Most trajectories the tokenizer is trained on (a stable hash picks them)."""
    progress_bars: bool = True
    """Ray Data's progress bars; the step lines are printed either way."""
    seed: int = 0
    """Seed of the MinHash permutations and of the order of packed rows."""

    def __post_init__(self) -> None:
        known = ("auto", *SHARD_FORMATS, *FORMAT_NAMES)
        if self.input_format not in known:
            raise _error(
                "input_format", f"unknown format {self.input_format!r}; use {', '.join(known)}"
            )
        check_positive(
            "data",
            num_workers=self.num_workers,
            block_records=self.block_records,
            split_bytes=self.split_bytes,
            min_turns=self.min_turns,
            max_record_chars=self.max_record_chars,
            shingle_size=self.shingle_size,
            num_perm=self.num_perm,
            bucket_all_pairs_max=self.bucket_all_pairs_max,
            bucket_anchors=self.bucket_anchors,
            decontam_ngram=self.decontam_ngram,
            pack_window=self.pack_window,
            rows_per_shard=self.rows_per_shard,
            tokenizer_train_docs=self.tokenizer_train_docs,
            drop_guard_min_samples=self.drop_guard_min_samples,
        )
        check_fraction("data.near_dup_threshold", self.near_dup_threshold, low_open=True)
        check_fraction("data.decontam_threshold", self.decontam_threshold, low_open=True)
        check_fraction("data.eval_fraction", self.eval_fraction)
        if not 0 <= self.max_domain_drop_share <= 1:
            raise _error(
                "max_domain_drop_share", f"must be in [0, 1], got {self.max_domain_drop_share}"
            )
        check_fraction("data.lsh_recall_weight", self.lsh_recall_weight)
        if self.cpt_split_min < 0:
            raise _error("cpt_split_min", f"must be >= 0, got {self.cpt_split_min}")
        if self.min_eval_trajectories < 0:
            raise _error("min_eval_trajectories", f"must be >= 0, got {self.min_eval_trajectories}")
        self._check_lsh()
        self._check_priority()

    def _check_lsh(self) -> None:
        if (self.lsh_bands is None) != (self.lsh_rows is None):
            raise _error("lsh_bands", "set lsh_bands and lsh_rows together, or neither")
        if self.lsh_bands is None:
            return
        check_positive("data", lsh_bands=self.lsh_bands, lsh_rows=self.lsh_rows)
        if self.lsh_bands * self.lsh_rows > self.num_perm:
            raise _error(
                "lsh_bands",
                f"lsh_bands * lsh_rows = {self.lsh_bands * self.lsh_rows} exceeds num_perm {self.num_perm}",
            )

    def _check_priority(self) -> None:
        allowed = ("more_turns", "success", "longer")
        for key in self.survivor_priority:
            if key not in allowed:
                raise _error("survivor_priority", f"unknown key {key!r}; use {', '.join(allowed)}")
        if len(set(self.survivor_priority)) != len(self.survivor_priority):
            raise _error("survivor_priority", "keys must not repeat")

    def lsh_shape(self) -> tuple[int, int]:
        """(bands, rows): the configured ones, or those derived from the threshold."""
        if self.lsh_bands is not None and self.lsh_rows is not None:
            return self.lsh_bands, self.lsh_rows
        # not at the top: agentworld.data imports this module (a cycle)
        from agentworld.data.minhash import optimal_bands_rows

        return optimal_bands_rows(self.near_dup_threshold, self.num_perm, self.lsh_recall_weight)
