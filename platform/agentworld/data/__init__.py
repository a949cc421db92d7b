"""Data preparation (the ``prepare`` stage) on Ray Data: read, validate, dedup,
decontaminate, tokenize, pack.

Light to import: only the config is loaded here; the pipeline is
``agentworld.data.run.prepare`` (Ray and the tokenizer are imported when it runs).

Where things are. ``run.py`` runs the steps of ``steps/`` in order, one file a step;
each step calls the plain modules beside it, named for what they hold:

  ingest     steps/ingest.py       ingest_rows (read + parse), validate, features
  dedup      steps/dedup.py        duplicates (on Ray Data): exact, minhash, lsh,
                                   components, survivor, labels, kernels (numba)
  count      steps/count.py        the split thresholds
  audit      steps/audit.py        quarantine, contaminated, duplicates written out
  tokenizer  steps/train_tokenizer.py  vocab (train or load the tokenizer)
  tokenize   steps/tokenize.py     sample_rows (a block of records -> sample rows),
                                   chat_tokens (one chat -> CPT document, SFT samples)
  pack       steps/pack.py         packed_shards (groups of samples on Ray Data),
                                   bin_packing (the packing itself, numpy)
  samples    steps/samples.py      the SFT samples un-packed, for evaluate and RL

``placement.py`` holds every Ray call; ``report.py`` the per-domain tables.
"""

from agentworld.data.config import DataConfig

__all__ = ["DataConfig"]
