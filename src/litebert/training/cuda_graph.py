"""The whole optimizer step as one CUDA graph: for models whose step is bound by kernel launches, not by the GPU.

A small model's step is a few hundred small kernels; each launch costs the host tens of microseconds (far more
inside a sandbox), so the GPU waits for the host (docs/gpu.md, "What bounds the figures"). Captured once and
replayed, the step costs the host one launch. ``torch.compile(mode="reduce-overhead")`` graphs the forward and the
backward separately after a compilation of tens of seconds and leaves the optimizer eager; here the step the loop
already runs — every micro-batch's forward and backward, the clip, the non-finite check and the optimizer update,
nothing of which reads the device (docs/DESIGN.md, "Training loop contract") — is captured as it is, in about one
step's time. The recipe is PyTorch's "whole network capture" (docs: CUDA semantics, CUDA Graphs) as NVIDIA's MLPerf
BERT uses it:

1. ``warmup_steps`` real steps run eagerly on a side stream (lazy initialisation: cuBLAS handles, the optimizer's
   state, autocast);
2. the next step is captured with static input buffers (one set per micro-batch, copies of the first batches),
   each group's learning rate held in a 0-d tensor that the kernels read (LAMB and torch's fused AdamW take one;
   AdamW's ``capturable``), the gradients set to None so that the captured backward allocates them in the
   graph's memory pool, then replayed;
3. every later step copies its batches into the static buffers (from the DataLoader's pinned host memory, one
   ``non_blocking`` copy each, stream-ordered after the previous replay), writes the schedule's learning rates into
   their tensors, and replays.

The numbers a replay leaves (loss sums, norms, counts) are rewritten by the next one: the loop copies them
(:meth:`litebert.training.loop._Trainer.record`). Dropout draws from the CUDA generator's graph-safe Philox
state, which each replay advances. What needs one shape and one process is checked before the first step
(:func:`check_graphable`); a batch of another shape later is a :class:`LitebertError`.
"""

from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING

import torch

from litebert.errors import LitebertError
from litebert.optim import skips_on_device

if TYPE_CHECKING:  # the loop imports this module, not the other way
    from litebert.training.loop import Batch, StepNumbers, _Trainer

#: eager steps before the capture (PyTorch's example uses 3; DDP would need 11)
WARMUP_STEPS = 3


def check_run(world_size: int, device: torch.device) -> None:
    """Raise :class:`LitebertError` unless the run is one process on a CUDA device (what a command checks before
    it writes anything)."""
    if world_size > 1 or device.type != "cuda":
        where = f"{world_size} processes" if world_size > 1 else f"device {device}"
        raise LitebertError(f"--cuda-graphs runs one process on a CUDA device; this run has {where}")


def check_graphable(trainer: _Trainer) -> None:
    """Raise :class:`LitebertError` when the step cannot be captured: more than one process (the gradient
    all-reduce), fp16 (``GradScaler``'s unscale keeps per-step host state), a ``torch.compile``d model (use one
    or the other), an optimizer whose step does not read its learning rate and skip flag on the device (LAMB and
    torch's fused AdamW do), or a schedule that is not a pure function of the step."""
    args, dist = trainer.args, trainer.dist
    if dist.world_size > 1:
        raise LitebertError(
            f"CUDA graphs (--cuda-graphs) run one process; this run has {dist.world_size}: drop --cuda-graphs "
            "under torchrun"
        )
    if args.precision == "fp16":
        raise LitebertError("CUDA graphs (--cuda-graphs) take --precision bf16 or fp32, not fp16 (loss scaling)")
    if hasattr(trainer.model, "_orig_mod"):
        raise LitebertError(
            "CUDA graphs (--cuda-graphs) capture the eager step: not with --compile "
            "(--compile-mode reduce-overhead is the compiled way to CUDA graphs)"
        )
    opt = trainer.optimizer
    if not skips_on_device(opt):  # LAMB, or a fused torch optimizer: found_inf and a tensor lr read on the device
        raise LitebertError(
            f"CUDA graphs (--cuda-graphs) need LAMB or torch's fused AdamW (a GPU's), not {type(opt).__name__}"
            f"{' without fused=True' if 'fused' in opt.param_groups[0] else ''}"
        )


class CudaBackend:
    """Capture and replay on a CUDA device (``torch.cuda.CUDAGraph``), warm-up on a side stream."""

    def __init__(self, device: torch.device) -> None:
        if device.type != "cuda":
            raise LitebertError(f"CUDA graphs (--cuda-graphs) need a CUDA device; this run is on {device}")
        self.stream = torch.cuda.Stream(device)
        self.graph: torch.cuda.CUDAGraph | None = None
        self.out = None

    def eager(self, fn):
        """Run ``fn`` on the side stream, ordered after and before the current stream's work."""
        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.stream):
            out = fn()
        torch.cuda.current_stream().wait_stream(self.stream)
        return out

    def capture(self, fn) -> None:
        """Record ``fn``'s kernels (nothing runs until :meth:`replay`); its outputs live in the graph's pool.

        ``thread_local``: a DataLoader's pin-memory thread allocating page-locked memory meanwhile does not
        invalidate the capture (it would under "global"); kernels are captured by stream, so the autograd engine's
        backward, launched from its own thread onto the capturing stream, is captured all the same."""
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph, capture_error_mode="thread_local"):
            self.out = fn()

    def replay(self):
        self.graph.replay()
        return self.out


class GraphedStep:
    """A drop-in for :meth:`_Trainer.device_step` (``trainer.step_fn``): eager for ``warmup_steps`` steps, then
    captured once and replayed. Call with this rank's micro-batches in host memory (``trainer.batches_on_host``:
    pinned on a GPU run, so that the copies into the static buffers do not wait); returns the step's
    :class:`~litebert.training.loop.StepNumbers` (the graph's output tensors after a capture: copy them before the
    next call). ``backend``: :class:`CudaBackend` for the trainer's device (tests pass one that re-runs the
    captured function instead). Raises :class:`LitebertError` (:func:`check_graphable`, or a batch whose shape
    or keys differ from the captured ones)."""

    def __init__(self, trainer: _Trainer, warmup_steps: int = WARMUP_STEPS, backend=None) -> None:
        check_graphable(trainer)
        self.trainer = trainer
        self.warmup_steps = warmup_steps
        self.backend = backend if backend is not None else CudaBackend(trainer.dist.device)
        self.eager_steps = 0
        self.static: list[Batch] | None = None
        groups = trainer.optimizer.param_groups
        dev = trainer.dist.device
        #: each group's learning rate as the kernels read it (float32: what fused AdamW and LAMB compute in)
        self.lrs = [torch.zeros((), dtype=torch.float32, device=dev) for _ in groups]

    def __call__(self, micro: list[Batch]) -> StepNumbers:
        if self.static is None and self.eager_steps < self.warmup_steps:
            self.eager_steps += 1
            on_device = [self._to_device(mb, non_blocking=True) for mb in micro]
            return self.backend.eager(lambda: self.trainer.device_step(on_device))
        if self.static is None:
            self._capture(micro)
        else:
            self._load(micro)
        for t, group in zip(self.lrs, self.trainer.optimizer.param_groups):
            t.fill_(group["lr"])  # a fill kernel with the host's value: no transfer, no wait
        return self.backend.replay()

    def _to_device(self, batch: Batch, **kw) -> Batch:
        dev = self.trainer.dist.device
        return {k: (v.to(dev, **kw) if isinstance(v, torch.Tensor) else v) for k, v in batch.items()}

    def _capture(self, micro: list[Batch]) -> None:
        t0 = time.perf_counter()
        self.static = [self._to_device(mb, copy=True) for mb in micro]  # copy: the buffers are the graph's own
        self.backend.capture(self._step_on_static)
        self.trainer.logger.text(
            f"step {self.trainer.st.step + 1}: the optimizer step is captured as one CUDA graph "
            f"({time.perf_counter() - t0:.2f} s, after {self.eager_steps} eager steps); it is replayed from now on"
        )

    def _step_on_static(self) -> StepNumbers:
        """The function the graph holds: the gradients start as None (the first backward writes them, later ones
        add), the learning rates are read from :attr:`lrs`."""
        self.trainer.optimizer.zero_grad(set_to_none=True)
        with self._lrs_on_device():
            return self.trainer.device_step(self.static, zero_grad=False)

    @contextlib.contextmanager
    def _lrs_on_device(self):
        """Each group's ``lr`` is its tensor (and fused AdamW ``capturable``) while the step is captured; the
        floats (what the schedule sets, the loop logs and checkpoints save) are put back after."""
        groups = self.trainer.optimizer.param_groups
        saved = [(g["lr"], g.get("capturable")) for g in groups]
        try:
            for g, t in zip(groups, self.lrs):
                g["lr"] = t
                if "capturable" in g:
                    g["capturable"] = True
            yield
        finally:
            for g, (lr, capturable) in zip(groups, saved):
                g["lr"] = lr
                if capturable is not None:
                    g["capturable"] = capturable

    def _load(self, micro: list[Batch]) -> None:
        """Copy this step's batches (host memory) into the static buffers (after the previous replay on the same
        stream); a batch whose keys, shapes or dtypes differ cannot be replayed."""
        for i, (static, mb) in enumerate(zip(self.static, micro)):
            if static.keys() != mb.keys():
                raise LitebertError(
                    f"CUDA graphs: micro-batch {i} of step {self.trainer.st.step + 1} has the fields {sorted(mb)}, "
                    f"the captured step {sorted(static)}"
                )
            for k, v in mb.items():
                s = static[k]
                if not isinstance(v, torch.Tensor):
                    if v != s:
                        raise LitebertError(f"CUDA graphs: batch field {k!r} changed from {s!r} to {v!r}")
                    continue
                if v.shape != s.shape or v.dtype != s.dtype:
                    raise LitebertError(
                        f"CUDA graphs need one batch shape (--static-shapes): micro-batch {i} of step "
                        f"{self.trainer.st.step + 1} has {k} {tuple(v.shape)} {v.dtype}, the captured step "
                        f"{tuple(s.shape)} {s.dtype}"
                    )
                s.copy_(v, non_blocking=True)
