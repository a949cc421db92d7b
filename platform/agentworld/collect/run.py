"""The collect stage: plan episodes, record them in parallel on Ray, write record
shards ``<out>/part-XXXXX.jsonl`` (one per chunk), a status file per chunk under
``<out>/status/`` and ``<out>/manifest.json``.

A finished run does nothing on rerun. A killed run resumes: a chunk whose status file
exists is not recorded again, so shards are never duplicated.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from typing import Any

from agentworld.collect.config import CollectConfig
from agentworld.collect.episode import EpisodeSpec, plan_episodes
from agentworld.collect.placement import run_chunks
from agentworld.console import Progress, say
from agentworld.io import (
    is_complete,
    join,
    read_bytes,
    read_manifest,
    read_records,
    write_bytes,
    write_jsonl,
    write_manifest,
)


def shard_name(k: int) -> str:
    return f"part-{k:05d}.jsonl"


def plan_chunks(config: CollectConfig) -> dict[int, list[EpisodeSpec]]:
    specs = plan_episodes(config)
    n = config.episodes_per_task
    return {k: specs[i : i + n] for k, i in enumerate(range(0, len(specs), n))}


def collect(config: CollectConfig, out: str, **storage_options: Any) -> dict[str, Any]:
    """Record ``config.episodes`` episodes under ``out``; returns the manifest. Needs
    Ray initialized (jobs/collect.py does it)."""

    if is_complete(out, **storage_options):
        manifest = read_manifest(out, **storage_options)
        _check_same_config(out, manifest["config"], config)
        return manifest
    api_key = os.environ.get(config.agent_api_key_env) if config.agent_endpoint else None
    chunks = plan_chunks(config)
    todo = {k: c for k, c in chunks.items() if not _chunk_done(out, k, c, **storage_options)}
    already = sum(len(c) for k, c in chunks.items() if k not in todo)
    progress = Progress("collect", config.episodes, "episodes")
    done, failed = already, 0
    if already:
        say(f"[collect] resuming: {already} episodes already recorded under {out}")
    for k, result in run_chunks(todo, config, api_key):
        for relative, data in result.files.items():  # before the shard that names them
            write_bytes(join(out, relative), data, **storage_options)
        if result.records:
            write_jsonl(
                join(out, shard_name(k)), (json.loads(r) for r in result.records), **storage_options
            )
        status = {
            "chunk": k,
            "episodes": [s.id for s in chunks[k]],
            "trajectories": len(result.records),
            "failed": result.failed,
            "seconds": result.seconds,
        }
        # Written after the shard: a status file means its shard is complete.
        write_bytes(_status_url(out, k), json.dumps(status, indent=1).encode(), **storage_options)
        done, failed = done + len(chunks[k]), failed + len(result.failed)
        progress.update(done, failed=failed)
    return _finish(config, out, chunks, **storage_options)


def _status_url(out: str, k: int) -> str:
    return join(out, "status", f"part-{k:05d}.json")


def _chunk_done(out: str, k: int, chunk: list[EpisodeSpec], **storage_options: Any) -> bool:
    # Read, not exists-then-read: a listing cache can still show a deleted object.
    try:
        recorded = json.loads(read_bytes(_status_url(out, k), **storage_options))["episodes"]
    except FileNotFoundError:
        return False
    if recorded != [s.id for s in chunk]:
        raise ValueError(
            f"{out} holds chunk {k} of another run (episodes {recorded[:3]}...); "
            "resume with the same --episodes/--domains/--seed/--episodes-per-task or use a new --out"
        )
    return True


def _check_same_config(out: str, recorded: dict[str, Any], config: CollectConfig) -> None:
    """A complete run answers a rerun only when it was made with the same config."""

    now = json.loads(json.dumps(asdict(config)))
    diff = sorted(k for k in now if recorded.get(k) != now[k])
    if diff:
        raise ValueError(
            f"{out} is a complete collect run with a different config ({', '.join(diff)}); "
            "use a new --out"
        )


def _finish(config: CollectConfig, out: str, chunks: dict, **storage_options: Any) -> dict:
    statuses = [
        json.loads(read_bytes(_status_url(out, k), **storage_options)) for k in sorted(chunks)
    ]
    failed = [f for s in statuses for f in s["failed"]]
    # Every written line is read back and validated against the record before the run
    # counts as complete.
    back = read_records(out, errors="collect", **storage_options)
    if back.rejected:
        first = back.rejected[0].to_dict()
        raise RuntimeError(f"{len(back.rejected)} written records do not validate: {first}")
    by_domain: dict[str, int] = {}
    for t in back.records:
        by_domain[t.domain] = by_domain.get(t.domain, 0) + 1
    counts = {
        "episodes": config.episodes,
        "trajectories": len(back.records),
        "failed": len(failed),
        "turns": sum(len(t.turns) for t in back.records),
        "by_domain": dict(sorted(by_domain.items())),
    }
    if counts["trajectories"] + counts["failed"] != config.episodes:
        raise RuntimeError(f"episode counts do not add up: {counts}")
    shards = [
        join(out, shard_name(k))
        for k, s in zip(sorted(chunks), statuses, strict=True)
        if s["trajectories"]
    ]
    return write_manifest(
        out,
        stage="collect",
        inputs=[],
        config=config,
        counts=counts,
        outputs={"shards": shards, "failed_episodes": failed},
        **storage_options,
    )
