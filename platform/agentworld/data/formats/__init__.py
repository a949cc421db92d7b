"""Ingest adapters: the trajectories other agent frameworks write, turned into records.

  registry.py      the table: one row per format (adapter module, domain, what it reads)
  base.py          the input unit, its head, Problem, readers of untrusted JSON
  listing.py       what prepare reads under an input: shards, files, claimed folders
  reading.py       one unit through its adapter (detected under ``auto``)
  messages.py      OpenAI-style chat with tool calls, read tolerantly and written back
  <format>.py      one adapter per format: ``detect(path, head)`` and ``read(unit)``
  android_ui.py, desktop_ui.py, safe_pickle.py, bgym_axtree.py: what adapters share

Every record names its source (``<format>:<file>``), keeps the outcome the source
gives, and says in its turns' metadata (``cut_by_source``) where the source itself cut
an observation. docs/formats.md shows how to add a format.
"""

from agentworld.data.formats.registry import (
    FORMAT_NAMES,
    FORMATS,
    SHARD_FORMATS,
    Format,
    detect,
    line_format,
    lookup,
)

__all__ = ["FORMATS", "FORMAT_NAMES", "SHARD_FORMATS", "Format", "detect", "line_format", "lookup"]
