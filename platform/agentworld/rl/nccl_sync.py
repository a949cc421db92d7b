"""Weight sync over NCCL, for GPU machines (``rl.rollout.weight_sync="nccl"``).

The default path (``object_store``) sends the learner's weights as one safetensors blob
through Ray's object store and has every engine reload them from a file. Here learner
rank 0 broadcasts the checkpoint-layout tensors from GPU memory straight into the GPU
memory of every rollout engine's workers, through vLLM's weight-transfer engine
(``WeightTransferConfig(backend="nccl")``): no serialization, no object store, no file.

One NCCL group holds the sender at rank 0 and every engine worker after it: engine i's
workers (tensor parallel) take ranks ``1 + i * workers .. 1 + (i + 1) * workers - 1``.
Learner rank 0 hosts the rendezvous and drives each update: the engines start it, block
in ``update_weights`` receiving, the learner broadcasts in packed buffers, the engines
finish it and take the new version. vLLM's CPU build has no NCCL and NCCL cannot put
two ranks on one GPU, so this path needs separate GPUs for the learner and the engines;
no benchmark runs it yet. The pure parts (the rank plan, the update's metadata) are
tested on CPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TransferPlan:
    world_size: int
    """The sender and every engine worker."""
    rank_offsets: tuple[int, ...]
    """Engine i's first worker rank (vLLM adds each worker's rank within the engine)."""


def transfer_plan(replicas: int, workers_per_replica: int) -> TransferPlan:
    if replicas < 1 or workers_per_replica < 1:
        raise ValueError(f"need >= 1 engine and worker, got {replicas} x {workers_per_replica}")
    offsets = tuple(1 + i * workers_per_replica for i in range(replicas))
    return TransferPlan(world_size=1 + replicas * workers_per_replica, rank_offsets=offsets)


def update_info(tensors: dict[str, Any]) -> dict[str, list]:
    """What every engine worker must expect, in the order the tensors are sent: names
    (checkpoint names, which vLLM's ``load_weights`` reads), dtypes and shapes."""
    return {
        "names": list(tensors),
        "dtype_names": [str(t.dtype).removeprefix("torch.") for t in tensors.values()],
        "shapes": [list(t.shape) for t in tensors.values()],
    }


class NcclSender:
    """Learner rank 0's end of the weight-transfer group (GPU only). ``engines`` makes
    the engines' calls and bounds their waits (``agentworld.rl.placement.EngineCalls``);
    ``addr``:``port`` is free on this node, the group's rendezvous."""

    def __init__(self, engines: Any, workers_per_replica: int, addr: str, port: int) -> None:
        # not at the top: vLLM's weight transfer is imported only where it runs
        from vllm.distributed.weight_transfer.nccl_common import (
            NCCLWeightTransferInitInfo,
            trainer_init,
            worker_init_payload,
        )

        self.engines = engines
        plan = transfer_plan(len(engines), workers_per_replica)
        payloads = [
            worker_init_payload(
                NCCLWeightTransferInitInfo(
                    master_address=addr,
                    master_port=port,
                    rank_offset=offset,
                    world_size=plan.world_size,
                    packed=True,
                )
            )
            for offset in plan.rank_offsets
        ]
        # The engines' workers block in the rendezvous until the sender joins it.
        joined = engines.init_transfer(payloads)
        rendezvous = {"master_address": addr, "master_port": port, "world_size": plan.world_size}
        self.group = trainer_init(rendezvous)
        joined()

    def send(self, tensors: dict[str, Any], version: int) -> list[int]:
        """Broadcast ``tensors`` (checkpoint layout, on this GPU) to every engine; the
        weight version each engine reports afterwards."""
        # not at the top: vLLM's weight transfer is imported only where it runs
        from vllm.distributed.weight_transfer.packed_tensor import packed_nccl_broadcast_producer

        self.engines.start()
        received = self.engines.receive(update_info(tensors))
        packed_nccl_broadcast_producer(
            iterator=iter(tensors.items()),
            group=self.group,
            src=0,
            post_iter_func=lambda item: item[1],
        )
        received()
        return self.engines.finish(version)
