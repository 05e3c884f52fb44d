"""Process groups and model wrapping: one process (no group), DDP under ``torchrun`` (gloo on CPU, nccl on GPU),
and FSDP2 (``torch.distributed.fsdp.fully_shard``) behind a flag.

Under ``torchrun`` the environment carries ``RANK``, ``LOCAL_RANK`` and ``WORLD_SIZE``; :func:`init_distributed`
reads them, creates the default process group and picks the device. Everything else asks :class:`DistInfo`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as torch_dist
from torch import nn

from litebert.errors import LitebertError


@dataclass(frozen=True)
class DistInfo:
    """Where this process stands: ``rank`` in ``[0, world_size)``, its ``local_rank`` and ``device``."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")

    @property
    def is_main(self) -> bool:
        """Rank 0 logs, writes metrics and saves."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def init_distributed(device: str | None = None) -> DistInfo:
    """Create the process group when launched by ``torchrun`` (``WORLD_SIZE`` > 1) and return :class:`DistInfo`.

    ``device``: ``None`` = ``cuda:LOCAL_RANK`` when CUDA is available, else CPU; or ``"cpu"``/``"cuda"``. The
    backend is nccl on CUDA, gloo on CPU. Idempotent: an existing default group is reused.
    """
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    use_cuda = torch.cuda.is_available() if device is None else device.startswith("cuda")
    if use_cuda and not torch.cuda.is_available():
        raise LitebertError("device 'cuda' requested but CUDA is not available")
    dev = torch.device("cuda", local_rank) if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(dev)
    if world_size > 1 and not torch_dist.is_initialized():
        torch_dist.init_process_group(backend="nccl" if use_cuda else "gloo")
    return DistInfo(rank=rank, world_size=world_size, local_rank=local_rank, device=dev)


def destroy_distributed() -> None:
    """Tear down the default process group if this process created one."""
    if torch_dist.is_available() and torch_dist.is_initialized():
        torch_dist.destroy_process_group()


def is_dist() -> bool:
    return torch_dist.is_available() and torch_dist.is_initialized() and torch_dist.get_world_size() > 1


def all_reduce_sum(t: torch.Tensor) -> torch.Tensor:
    """Sum ``t`` over ranks in place (a no-op in one process) and return it."""
    if is_dist():
        torch_dist.all_reduce(t, op=torch_dist.ReduceOp.SUM)
    return t


def broadcast_object(obj, src: int = 0):
    """Rank ``src``'s ``obj`` on every rank (a no-op in one process)."""
    if not is_dist():
        return obj
    box = [obj]
    torch_dist.broadcast_object_list(box, src=src)
    return box[0]


def all_gather_object(obj) -> list:
    """Every rank's ``obj``, in rank order."""
    if not is_dist():
        return [obj]
    out = [None] * torch_dist.get_world_size()
    torch_dist.all_gather_object(out, obj)
    return out


def barrier() -> None:
    if is_dist():
        torch_dist.barrier()


def wrap_model(model: nn.Module, dist: DistInfo, *, fsdp: bool = False, compile: bool = False) -> nn.Module:
    """Move ``model`` to ``dist.device`` and wrap it for training.

    * ``fsdp=True``: FSDP2 — ``fully_shard`` each transformer layer group, then the whole model (parameters become
      DTensors sharded over ranks; build the optimizer afterwards). Meant for albert-xlarge/xxlarge on GPUs. Note
      ALBERT shares one layer group across all layers, so most memory saved is optimizer state and gradients.
    * else, with ``world_size > 1``: ``DistributedDataParallel`` (gradients averaged over ranks).
    * ``compile=True``: ``torch.compile`` the (wrapped) module.

    The returned module is what the objective calls; :func:`unwrap_model` gives back the original.
    """
    model = model.to(dist.device)
    if fsdp:
        try:
            from torch.distributed.fsdp import fully_shard
        except ImportError as exc:  # torch < 2.6
            raise LitebertError("--fsdp needs torch >= 2.6 (torch.distributed.fsdp.fully_shard)") from exc
        if not torch_dist.is_initialized():
            raise LitebertError("--fsdp needs a process group: launch with torchrun")
        groups = getattr(getattr(getattr(model, "albert", None), "encoder", None), "albert_layer_groups", None)
        for block in groups or []:
            fully_shard(block)
        fully_shard(model)
    elif dist.world_size > 1:
        ids = [dist.device.index] if dist.device.type == "cuda" else None
        model = nn.parallel.DistributedDataParallel(model, device_ids=ids)
    if compile:
        model = torch.compile(model)
    return model


def unwrap_model(model: nn.Module) -> nn.Module:
    """The user's module inside ``torch.compile`` and DDP wrappers (FSDP2 shards in place: returned as is)."""
    while True:
        if hasattr(model, "_orig_mod"):
            model = model._orig_mod
        elif isinstance(model, nn.parallel.DistributedDataParallel):
            model = model.module
        else:
            return model


def is_fsdp(model: nn.Module) -> bool:
    """True when ``model`` (or its compiled original) was wrapped by FSDP2's ``fully_shard``."""
    raw = unwrap_model(model)
    return hasattr(raw, "set_requires_gradient_sync") and type(raw).__name__.startswith("FSDP")
