"""Data preparation (the ``prepare`` stage) on Ray Data: read, validate, dedup,
decontaminate, tokenize, pack.

Light to import: only the config is loaded here; the pipeline is
``agentworld.data.run.prepare`` (Ray and the tokenizer are imported when it runs).
"""

from agentworld.data.config import DataConfig

__all__ = ["DataConfig"]
