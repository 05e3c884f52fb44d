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

    Raises LitebertError, before the group is joined (so before anything is written), when CUDA is asked for but
    absent, or when a node runs more processes than it has GPUs (``LOCAL_WORLD_SIZE`` > ``torch.cuda.device_count()``:
    one process per GPU).
    """
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    use_cuda = torch.cuda.is_available() if device is None else device.startswith("cuda")
    if use_cuda and not torch.cuda.is_available():
        raise LitebertError("device 'cuda' requested but CUDA is not available")
    if use_cuda:
        gpus = torch.cuda.device_count()
        local_world = int(os.environ.get("LOCAL_WORLD_SIZE", str(local_rank + 1)))
        if max(local_world, local_rank + 1) > gpus:
            raise LitebertError(
                f"{max(local_world, local_rank + 1)} processes on this node but {gpus} GPU(s): each process needs a "
                f"GPU of its own; launch with torchrun --nproc-per-node {gpus} (or fewer), or pass --device cpu "
                "(nothing was written)"
            )
    dev = torch.device("cuda", local_rank) if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(dev)
    if world_size > 1 and not torch_dist.is_initialized():
        torch_dist.init_process_group(backend="nccl" if use_cuda else "gloo")
    return DistInfo(rank=rank, world_size=world_size, local_rank=local_rank, device=dev)


def destroy_distributed(sync: bool = False) -> None:
    """Tear down the default process group if this process created one.

    ``sync=True`` (the normal end of a run) first waits at a barrier, so that no rank closes its connections while
    another is still receiving the last collective (rank 0's broadcast of the results): a gloo process whose peer
    vanishes under a pending operation can abort (SIGABRT) after its work is done. Leave it ``False`` on an error
    path, where another rank may never reach the barrier.
    """
    if torch_dist.is_available() and torch_dist.is_initialized():
        if sync and torch_dist.get_world_size() > 1:
            torch_dist.barrier()
        torch_dist.destroy_process_group()


def is_dist() -> bool:
    return torch_dist.is_available() and torch_dist.is_initialized() and torch_dist.get_world_size() > 1


def all_reduce_sum(t: torch.Tensor) -> torch.Tensor:
    """Sum ``t`` over ranks in place (a no-op in one process) and return it."""
    if is_dist():
        torch_dist.all_reduce(t, op=torch_dist.ReduceOp.SUM)
    return t


def is_main_rank() -> bool:
    """Rank 0 of the default group, or the only process."""
    return not is_dist() or torch_dist.get_rank() == 0


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


def wrap_model(
    model: nn.Module,
    dist: DistInfo,
    *,
    fsdp: bool = False,
    compile: bool = False,
    precision: str = "fp32",
    compile_mode: str | None = None,
) -> nn.Module:
    """Move ``model`` to ``dist.device`` and wrap it for training.

    * ``fsdp=True``: FSDP2 (:func:`shard_model`): parameters become DTensors sharded over ranks; build the optimizer
      afterwards. Needs a process group of 2 or more ranks (LitebertError otherwise).
    * else, with ``world_size > 1``: ``DistributedDataParallel`` (gradients averaged over ranks). Every parameter
      must get a gradient in every step (no ``find_unused_parameters``, which costs a graph traversal per step):
      pretraining on MLM-only data builds a model without the SOP head for that reason.
    * ``compile=True``: :func:`compile_model` on the (wrapped) module, with ``torch.compile``'s ``compile_mode``
      (None: its default; ``"reduce-overhead"``: CUDA graphs, which need one batch shape).

    The returned module is what the objective calls; :func:`unwrap_model` gives back the original.
    """
    model = model.to(dist.device)
    if fsdp:
        shard_model(model, dist, precision)
    elif dist.world_size > 1:
        ids = [dist.device.index] if dist.device.type == "cuda" else None
        model = nn.parallel.DistributedDataParallel(model, device_ids=ids)
    if compile:
        model = compile_model(model, **({"mode": compile_mode} if compile_mode else {}))
    return model


def fsdp_units(model: nn.Module) -> list[nn.Module]:
    """The submodules that become FSDP units (besides the root): each transformer layer group, whose forward runs
    all of its consecutive layer uses in one call (so it is all-gathered once per forward and once per backward,
    and its gradient reduce-scattered once per step, however deep the model). With partial sharing
    (``sharing`` "attention"/"ffn") the shared modules sit in several groups, so the whole encoder is one unit."""
    encoder = getattr(getattr(model, "albert", None), "encoder", None)
    if encoder is None:
        return []
    if getattr(encoder.config, "sharing", "all") in ("attention", "ffn"):
        return [encoder]
    return list(encoder.albert_layer_groups)


def mixed_precision_policy(precision: str):
    """FSDP2's ``MixedPrecisionPolicy`` for ``precision``: with bf16, parameters are gathered and used in bf16 (half
    the all-gather traffic) but gradients are reduced in fp32 — a bf16 sum over many ranks keeps only 8 mantissa
    bits, so small per-rank contributions would be rounded away. fp32 and fp16 (autocast + loss scaling on fp32
    master weights) keep fp32 parameters and reductions."""
    from torch.distributed.fsdp import MixedPrecisionPolicy

    if precision == "bf16":
        return MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    return MixedPrecisionPolicy()


def shard_model(model: nn.Module, dist: DistInfo, precision: str = "fp32") -> nn.Module:
    """FSDP2 ``fully_shard`` of each :func:`fsdp_units` unit, then the root, in place, on a 1-D mesh of
    ``dist.device``'s type (passed explicitly: FSDP's default mesh is CUDA whenever a GPU is visible, even with
    ``--device cpu``), with :func:`mixed_precision_policy`. Raises LitebertError without a process group of 2+
    ranks or with torch < 2.6."""
    try:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard
    except ImportError as exc:  # torch < 2.6
        raise LitebertError("--fsdp needs torch >= 2.6 (torch.distributed.fsdp.fully_shard)") from exc
    if not torch_dist.is_initialized() or dist.world_size < 2:
        raise LitebertError("--fsdp needs 2 or more processes: launch with torchrun --nproc-per-node N (N >= 2)")
    mesh = init_device_mesh(dist.device.type, (dist.world_size,))
    policy = mixed_precision_policy(precision)
    for unit in fsdp_units(model):
        fully_shard(unit, mesh=mesh, mp_policy=policy)
    fully_shard(model, mesh=mesh, mp_policy=policy)
    return model


def compile_model(model: nn.Module, **compile_kwargs) -> nn.Module:
    """``torch.compile(model, **compile_kwargs)`` with the masked-position gather (``nonzero``, a data-dependent
    size) captured in the graph as a dynamic size, instead of a graph break and a recompile for each new number of
    masked positions."""
    torch._dynamo.config.capture_dynamic_output_shape_ops = True
    return torch.compile(model, **compile_kwargs)


def set_deterministic(device: torch.device) -> None:
    """Deterministic kernels (``--deterministic``): ``torch.use_deterministic_algorithms(True)`` and, on a GPU,
    ``CUBLAS_WORKSPACE_CONFIG=:4096:8`` (cuBLAS needs it; set before the first CUDA matmul) and no cuDNN
    autotuning. Needed for a bit-identical resume on a GPU, where the backward of ``index_select`` and of the
    embedding accumulate with atomics in a varying order. On CPU litebert's kernels are deterministic already."""
    if device.type == "cuda":
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.backends.cudnn.benchmark = False
    torch.use_deterministic_algorithms(True)


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
