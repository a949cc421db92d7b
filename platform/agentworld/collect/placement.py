"""Ray placement of the collect stage: chunks of episodes as Ray tasks, at most
``max_parallel`` in flight, results handed back as they finish."""

from __future__ import annotations

from collections.abc import Iterator

from agentworld.collect.chunk import ChunkResult, run_chunk
from agentworld.collect.config import CollectConfig
from agentworld.collect.episode import EpisodeSpec


def run_chunks(
    chunks: dict[int, list[EpisodeSpec]], config: CollectConfig, api_key: str | None = None
) -> Iterator[tuple[int, ChunkResult]]:
    """Yield (chunk number, result) in completion order. A task that dies (worker
    crash, out of memory) becomes a result whose episodes are all reported failed."""
    import ray

    # One retry covers a lost worker; episodes are deterministic, so a rerun is the same.
    task = ray.remote(run_chunk).options(num_cpus=config.cpus_per_task, max_retries=1)
    queue = sorted(chunks)
    in_flight: dict = {}
    while queue or in_flight:
        while queue and len(in_flight) < config.max_parallel:
            k = queue.pop(0)
            in_flight[task.remote(chunks[k], config, api_key)] = k
        done, _ = ray.wait(list(in_flight), num_returns=1)
        k = in_flight.pop(done[0])
        try:
            yield k, ray.get(done[0])
        except ray.exceptions.RayError as e:
            yield k, ChunkResult.all_failed(chunks[k], f"{type(e).__name__}: {str(e)[:1000]}")
