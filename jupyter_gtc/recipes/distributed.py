"""The process group and the data-parallel wrapping, as torchrun launches us.

torchrun sets RANK, LOCAL_RANK and WORLD_SIZE in every process, on every node; ``srun
torchrun --rdzv-endpoint=HEAD:PORT`` makes one world out of several nodes. Run by hand
(no torchrun), a program is a world of one and nothing is wrapped.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

PARALLEL_MODES = ("fsdp", "ddp")


@dataclass(frozen=True)
class World:
    rank: int
    local_rank: int
    size: int
    device: torch.device

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return dist.is_initialized()

    def barrier(self) -> None:
        if self.distributed:
            dist.barrier()

    def mean(self, value: torch.Tensor) -> float:
        """``value`` averaged over all ranks."""
        value = value.detach()
        if self.distributed:
            value = value.clone()
            dist.all_reduce(value, op=dist.ReduceOp.AVG if value.is_cuda else dist.ReduceOp.SUM)
            if not value.is_cuda:  # gloo has no AVG
                value /= self.size
        return float(value)

    def close(self) -> None:
        if self.distributed:
            dist.destroy_process_group()


def init_world() -> World:
    """Join torchrun's process group: NCCL on GPUs, gloo on CPUs."""
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if torch.cuda.is_available():
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    if "RANK" in os.environ and not dist.is_initialized():
        if device.type == "cuda":
            dist.init_process_group("nccl", device_id=device)
        else:
            dist.init_process_group("gloo")
    rank, size = (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)
    return World(rank=rank, local_rank=local_rank, size=size, device=device)


def train_dtype(requested: str, device: torch.device) -> torch.dtype:
    """``auto`` is bf16 on GPUs (what they are built for) and fp32 on CPUs."""
    if requested == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    return {"bf16": torch.bfloat16, "fp32": torch.float32}[requested]


def parallelize(model: torch.nn.Module, world: World, mode: str, dtype: torch.dtype) -> torch.nn.Module:
    """Shard (FSDP2: each decoder layer, then the rest) or replicate (DDP) ``model``, built
    on the CPU. Parameters stay fp32; with bf16, FSDP computes in bf16 and reduces gradients
    in fp32. Under FSDP each ``fully_shard`` moves its own layer to the GPU and shards it
    there, so no GPU ever holds the whole fp32 model (32 GB for the 8b config)."""
    if world.size == 1:  # nothing to shard or synchronise; FSDP would only add ~25% per step
        return model.to(world.device)
    if mode == "fsdp":
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
        policy = MixedPrecisionPolicy(param_dtype=dtype, reduce_dtype=torch.float32)
        for layer in model.model.layers:
            fully_shard(layer, mp_policy=policy)
        fully_shard(model, mp_policy=policy)
        return model
    from torch.nn.parallel import DistributedDataParallel
    model.to(world.device)
    return DistributedDataParallel(model, device_ids=[world.local_rank] if world.device.type == "cuda" else None)


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    """The transformers model inside a DDP wrapper (FSDP2 shards the model in place)."""
    return getattr(model, "module", model)
