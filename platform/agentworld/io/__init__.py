"""Object storage: shards and manifests on any fsspec URL, with atomic writes."""

from agentworld.io.manifest import is_complete, read_manifest, write_manifest
from agentworld.io.shards import (
    ReadResult,
    Rejected,
    iter_records,
    list_shards,
    read_jsonl,
    read_parquet,
    read_records,
    write_jsonl,
    write_parquet,
    write_parquet_chunks,
)
from agentworld.io.storage import (
    absolute_url,
    atomic_write,
    exists,
    get_fs,
    join,
    read_bytes,
    write_bytes,
)

__all__ = [
    "absolute_url",
    "ReadResult",
    "Rejected",
    "atomic_write",
    "exists",
    "get_fs",
    "is_complete",
    "iter_records",
    "join",
    "list_shards",
    "read_bytes",
    "read_jsonl",
    "read_manifest",
    "read_parquet",
    "read_records",
    "write_bytes",
    "write_jsonl",
    "write_manifest",
    "write_parquet",
    "write_parquet_chunks",
]
