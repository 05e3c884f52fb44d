"""The one training loop: pretraining and fine-tuning differ only in the objective they pass.

Read :meth:`_Trainer.run` top to bottom: for each optimizer step: micro-batches with accumulation (``no_sync`` on
all but the last) and global loss normalisation → clip → finite check, optimizer step (or skip), schedule → log →
evaluate → checkpoint; each step is one named helper of :class:`_Trainer`. The contract is written out in
docs/DESIGN.md, "Training loop contract". A step that does not log, evaluate or save never waits for the device:
its numbers stay there (:meth:`_Trainer.record`) until :meth:`_Trainer.settle` reads them all at once.
"""

from __future__ import annotations

import contextlib
import math
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from litebert.errors import LitebertError
from litebert.optim import skips_on_device
from litebert.precision import RESOLVED_PRECISIONS
from litebert.training import distributed as D
from litebert.training import state as S
from litebert.training.metrics import MetricsLogger

Batch = dict[str, torch.Tensor]

#: what the loop computes in (a command's ``--precision``, litebert.precision.PRECISIONS, resolves to one of these)
PRECISIONS = RESOLVED_PRECISIONS


@dataclass
class TrainingArgs:
    """Settings of the loop itself (the objective, data and model are the caller's)."""

    output_dir: str | Path
    #: optimizer steps to reach (skipped non-finite steps count: the data and the schedule move on)
    max_steps: int
    #: micro-batches per optimizer step (per process)
    gradient_accumulation_steps: int = 1
    #: clip the global gradient norm to this; None or 0 = no clipping (the norm is still measured and logged)
    max_grad_norm: float | None = 1.0
    #: a "train" record (log line, metrics.jsonl, TensorBoard) every N steps, and at the last step
    logging_steps: int = 50
    #: evaluate every N steps (0 = only at the end); only when an eval_fn is given
    eval_steps: int = 0
    #: write a training-state checkpoint every N steps (0 = only at the end)
    save_steps: int = 0
    #: keep only the newest K complete checkpoints (None = all)
    save_total_limit: int | None = None
    #: None (fresh run), "auto" (newest complete checkpoint in output_dir, or fresh) or a checkpoint directory
    resume: str | None = None
    #: "fp32", "bf16" (autocast) or "fp16" (autocast + GradScaler; meant for GPUs)
    precision: str = "fp32"
    #: this many non-finite steps in a row stop the run with a LitebertError
    max_bad_steps: int = 5
    #: key of eval_fn's result that selects the best model (on_best) and drives early stopping
    metric_for_best: str | None = None
    greater_is_better: bool = True
    #: stop after this many evaluations without improvement of metric_for_best (None = never)
    early_stopping_patience: int | None = None
    #: tqdm progress bar on rank 0 when stderr is a terminal (log files get the periodic log line only)
    progress_bar: bool = True
    #: prefix of log lines, e.g. "pretrain"
    log_prefix: str = ""
    #: wall-clock limit of this call's training, in minutes: the step that crosses it is treated as the last one
    #: (logged, evaluated, checkpointed); None = no limit. The schedule still runs over max_steps. Rank 0's clock
    #: decides (broadcast), so every rank stops at the same step.
    max_minutes: float | None = None
    #: capture the whole optimizer step (every micro-batch's forward and backward, clip, update) as one CUDA graph
    #: after a few eager steps and replay it (:mod:`litebert.training.cuda_graph`): one process, one batch shape,
    #: fp32 or bf16, LAMB or fused AdamW, an uncompiled model
    cuda_graphs: bool = False

    def __post_init__(self) -> None:
        def need(cond: bool, name: str, what: str) -> None:
            if not cond:
                raise LitebertError(f"training argument {name}={getattr(self, name)!r}: {what}")

        need(isinstance(self.max_steps, int) and self.max_steps > 0, "max_steps", "must be a positive integer")
        need(self.gradient_accumulation_steps >= 1, "gradient_accumulation_steps", "must be >= 1")
        need(self.max_grad_norm is None or self.max_grad_norm >= 0, "max_grad_norm", "must be >= 0 or None")
        need(self.logging_steps >= 1, "logging_steps", "must be >= 1")
        need(self.eval_steps >= 0, "eval_steps", "must be >= 0")
        need(self.save_steps >= 0, "save_steps", "must be >= 0")
        need(self.save_total_limit is None or self.save_total_limit >= 1, "save_total_limit", "must be >= 1")
        need(self.precision in PRECISIONS, "precision", f"expected {', '.join(PRECISIONS)}")
        need(self.max_bad_steps >= 1, "max_bad_steps", "must be >= 1")
        need(
            self.early_stopping_patience is None or self.metric_for_best is not None,
            "early_stopping_patience",
            "needs metric_for_best",
        )
        need(self.max_minutes is None or self.max_minutes > 0, "max_minutes", "must be > 0 or None")


@dataclass
class LossOutput:
    """The objective's result for one micro-batch.

    ``sums``: loss term → 0-d tensor summed (not averaged) over the term's units in this micro-batch (e.g.
    ``mlm_loss``: summed cross-entropy over its predicted tokens). ``ratios``: metric → (numerator, denominator),
    0-d tensors (or numbers), e.g. ``mlm_accuracy``: (correct, predicted tokens); the loop reports Σnum/Σden.
    Tensors stay on the device: the loop reads them back only at logging, evaluation and checkpoint steps (a number
    costs the objective a device→host wait of its own).
    """

    sums: dict[str, torch.Tensor]
    ratios: dict[str, tuple[torch.Tensor | float, torch.Tensor | float]] = field(default_factory=dict)


@dataclass
class StepNumbers:
    """What the device computed in one optimizer step, all of it still on the device (read at :meth:`_Trainer.settle`).

    ``terms``/``names``: the loss terms and ratio names (host lists); ``finite``: 0-d bool, the step was applied;
    ``step_loss``: 0-d float64 Σ_terms sum/units; ``grad_norm``: 0-d, the global norm before clipping;
    ``reduced``: (T + 2R,) float64 loss sums then each ratio's numerator and denominator, over micro-batches and
    ranks; ``units``: (T,) float64; ``tokens``: 0-d float64 real tokens of the step; ``packed``: (3 + 2T + 2R + 1,)
    float64, all of them in one vector for the host's one read (finite, step_loss, grad_norm, reduced, units,
    tokens), built within the step (inside a CUDA graph: no kernels of its own when replayed).
    """

    terms: list[str]
    names: list[str]
    finite: torch.Tensor
    step_loss: torch.Tensor
    grad_norm: torch.Tensor
    reduced: torch.Tensor
    units: torch.Tensor
    tokens: torch.Tensor
    packed: torch.Tensor


Objective = Callable[[nn.Module, Batch], LossOutput]
CountFn = Callable[[Batch], dict[str, "torch.Tensor | int"]]
BatchFactory = Callable[[int, int], Iterable[Batch]]
EvalFn = Callable[[nn.Module], dict[str, float]]


@dataclass
class TrainResult:
    step: int
    epoch: int
    skipped_steps: int
    stopped_early: bool
    best_metric: float | None
    best_step: int | None
    last_train: dict
    last_eval: dict
    last_checkpoint: Path | None
    #: wall-clock seconds of this call
    seconds: float
    #: wall-clock and CPU seconds (this process) of training over the whole run: this call's, plus those the
    #: checkpoint it resumed from recorded of the calls before it
    train_seconds: float = 0.0
    train_cpu_seconds: float = 0.0


class TrainingInterrupted(SystemExit):
    """SIGINT or SIGTERM stopped the run at an optimizer-step boundary, after a checkpoint of that step was saved.

    A :class:`SystemExit` whose ``code`` is 128 + the signal's number (130, 143), so the command exits as a process
    killed by it would (but with a checkpoint). ``step``, ``checkpoint`` and ``signum`` say where it stopped."""

    def __init__(self, signum: int, step: int, checkpoint: Path | None) -> None:
        super().__init__(128 + signum)
        self.signum, self.step, self.checkpoint = signum, step, checkpoint


#: the signals that stop a run at the next step boundary with a checkpoint (a preemptible machine sends SIGTERM)
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
#: under several processes the ranks agree on a stop with a host collective (a gloo group: no device read), on the
#: steps that read back anyway (log, evaluate, save) and every this many steps in between
STOP_CHECK_STEPS = 10


class _StopSignals:
    """While entered (in the main thread), SIGINT and SIGTERM only set ``signum``: the loop stops at the next step
    boundary, so a signal never lands in the middle of an optimizer step or a checkpoint (a second one while the
    checkpoint is written changes nothing). The previous handlers come back on exit."""

    def __init__(self) -> None:
        self.signum = 0
        self.previous: dict[int, object] = {}

    def _handle(self, signum, frame) -> None:
        self.signum = self.signum or signum

    def __enter__(self) -> _StopSignals:
        if threading.current_thread() is threading.main_thread():
            for sig in STOP_SIGNALS:
                self.previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)


@dataclass
class _LoopState:
    """Everything besides model/optimizer/scheduler/RNG that an exact resume needs (stored in trainer_state.json),
    and the run's training clocks, so that a resumed run keeps counting (checkpoints without them start at 0)."""

    step: int = 0
    epoch: int = 0
    position: int = 0  # micro-batches of `epoch` already consumed by this rank
    skipped_steps: int = 0
    bad_in_row: int = 0
    best_metric: float | None = None
    best_step: int | None = None
    evals_without_improvement: int = 0
    train_seconds: float = 0.0  # wall-clock seconds of training so far, over every call of the run
    train_cpu_seconds: float = 0.0  # CPU seconds of (rank 0's) process over the same calls


def make_batch_factory(
    dataset,
    batch_size: int,
    collate_fn=None,
    *,
    seed: int,
    shuffle: bool = True,
    drop_last: bool = True,
    num_workers: int = 0,
    rank: int = 0,
    world_size: int = 1,
    set_epoch: bool = True,
    equal_per_rank: bool = True,
    pin_memory: bool = False,
    group_lengths: np.ndarray | None = None,
    group_step: int | None = None,
) -> BatchFactory:
    """A :data:`BatchFactory` over a map-style ``dataset``.

    Epoch ``e``: a permutation of ``range(len(dataset))`` from ``torch.Generator().manual_seed(seed + e)`` (or
    the identity with ``shuffle=False``) cut into chunks of ``batch_size`` (the last partial chunk dropped with
    ``drop_last``); global chunk ``k`` goes to rank ``k % world_size``, and every rank gets the same number of
    chunks (extra chunks at the end are dropped; ``equal_per_rank=False`` keeps them, for evaluation). So 1 process × batch 8, 1 × 4 with 2 accumulation steps and
    2 processes × 4 see the same examples in each optimizer step. ``dataset.set_epoch(e)`` is called first
    when it exists (dynamic masking). The DataLoader gets its own seeded generator, so creating it never
    touches the global RNG (which would break exact resume). ``pin_memory``: batches in page-locked memory (for a
    GPU: the loop's ``non_blocking`` copies then overlap the device's work instead of waiting for it).
    ``group_lengths`` (``int [N]``, the items' lengths) with ``group_step`` (items per optimizer step over all
    processes): the shuffled order is regrouped by :func:`group_by_length` before it is cut, so a batch holds items
    of similar length and is padded little (a step's items do not depend on how it is split into processes and
    micro-batches).
    """
    n = len(dataset)

    def batches(epoch: int, skip: int) -> Iterable[Batch]:
        if set_epoch and hasattr(dataset, "set_epoch"):
            dataset.set_epoch(epoch)
        if shuffle:
            order = torch.randperm(n, generator=torch.Generator().manual_seed(seed + epoch)).tolist()
        else:
            order = list(range(n))
        if group_lengths is not None:
            order = group_by_length(order, group_lengths, group_step, seed + 104729 * (epoch + 1))
        chunks = [order[i : i + batch_size] for i in range(0, n, batch_size)]
        if drop_last and chunks and len(chunks[-1]) < batch_size:
            chunks.pop()
        end = len(chunks) // world_size * world_size if equal_per_rank else len(chunks)
        mine = chunks[rank:end:world_size][skip:]
        return torch.utils.data.DataLoader(
            dataset,
            batch_sampler=mine,
            collate_fn=collate_fn,
            num_workers=num_workers,
            pin_memory=pin_memory,
            generator=torch.Generator().manual_seed(seed + 7919 * (epoch + 1)),
        )

    return batches


#: optimizer steps whose items :func:`group_by_length` sorts together (transformers' ``LengthGroupedSampler``
#: sorts mega-batches of 50 batches)
GROUP_STEPS = 50


def group_by_length(order: Sequence[int], lengths: np.ndarray, step: int, seed: int) -> list[int]:
    """``order`` regrouped so that each optimizer step's ``step`` items have similar lengths: cut into groups of
    :data:`GROUP_STEPS` steps, each sorted by length (longest first, ties in ``order``'s order), then the whole
    steps of a group put in a random order (``torch.Generator().manual_seed(seed)``). A last partial step (the
    items past the last whole step) stays last and unsorted, in ``order``'s order: the batcher drops a partial
    batch at the end of an epoch, which sorted would be the shortest items of the data set in every epoch (all of
    it in one group when it holds fewer than :data:`GROUP_STEPS` steps); unsorted, as without grouping, it is a
    random few. transformers' ``LengthGroupedSampler`` (``group_by_length``), at the granularity of a step. Every
    item stays in its group, so the data order stays random from group to group.

    Args:
        order: item indices (a shuffled epoch).
        lengths: ``int [N]``, tokens of each item.
        step: items per optimizer step (batch size × accumulation × processes), ≥ 1.
        seed: seed of the order of steps within each group.

    Returns:
        the same indices in the new order.
    """
    g = torch.Generator().manual_seed(seed)
    idx = np.asarray(order, dtype=np.int64)
    out: list[int] = []
    size = step * GROUP_STEPS
    for start in range(0, len(idx), size):
        group = idx[start : start + size]
        whole = len(group) // step
        group, rest = group[: whole * step], group[whole * step :]
        group = group[np.argsort(-np.asarray(lengths)[group], kind="stable")]
        steps = torch.randperm(whole, generator=g).numpy() if whole else np.zeros(0, np.int64)
        out.extend(group.reshape(whole, step)[steps].reshape(-1).tolist())
        out.extend(rest.tolist())
    return out


def _to_device(batch: Batch, device: torch.device) -> Batch:
    return {k: (v.to(device, non_blocking=True) if isinstance(v, torch.Tensor) else v) for k, v in batch.items()}


def _count_tokens(batch: Batch) -> torch.Tensor | int:
    """Real (non-padding) tokens of a batch: Σ attention_mask, a tensor (no host read); else the number of ids."""
    if "attention_mask" in batch:
        return batch["attention_mask"].sum()
    if "input_ids" in batch:
        return batch["input_ids"].numel()
    return 0


def _on_device(value, device: torch.device) -> torch.Tensor:
    """``value`` (a tensor or a number) as a 0-d float64 tensor on ``device``; a number is written by a fill kernel
    (``torch.full``), not copied from host memory, so it never waits for the device either."""
    if isinstance(value, torch.Tensor):
        return value.detach().to(device, torch.float64).reshape(())
    return torch.full((), float(value), dtype=torch.float64, device=device)


# ---------------------------------------------------------------------------------------------- state dicts
# One layout in every mode (1 process, DDP, FSDP): the model's full state dict (HF names) and the optimizer state
# keyed by parameter name (torch.distributed.checkpoint.state_dict), so a checkpoint resumes under any of them.
def _full_options(**kw):
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    return StateDictOptions(full_state_dict=True, **kw)


def _model_state(model: nn.Module) -> dict:
    """The full (unsharded) model state dict; a collective under FSDP (every rank calls it)."""
    if D.is_fsdp(model):
        from torch.distributed.checkpoint.state_dict import get_model_state_dict

        return get_model_state_dict(D.unwrap_model(model), options=_full_options(cpu_offload=True))
    return D.unwrap_model(model).state_dict()


def _optim_state(model: nn.Module, optimizer) -> dict:
    """The full optimizer state keyed by parameter name (``state[name]``, ``param_groups[i]["params"]`` = names)."""
    from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict

    return get_optimizer_state_dict(D.unwrap_model(model), optimizer, options=_full_options(cpu_offload=True))


def _named_optim_state(model: nn.Module, optimizer, state: dict) -> dict:
    """``state`` keyed by parameter name; a positional ``optimizer.state_dict()`` (checkpoints written before the
    named layout, 1 process or DDP) is renamed through this optimizer's parameter order, which is the same as the
    one that wrote it (both built by ``build_optimizer`` over the same model)."""
    if all(isinstance(k, str) for k in state.get("state", {})) and all(
        isinstance(p, str) for g in state.get("param_groups", []) for p in g["params"]
    ):
        return state
    name_of = {id(p): n for n, p in D.unwrap_model(model).named_parameters()}
    names = [name_of[id(p)] for g in optimizer.param_groups for p in g["params"]]
    return {
        "state": {names[i]: s for i, s in state["state"].items()},
        "param_groups": [dict(g, params=[names[i] for i in g["params"]]) for g in state["param_groups"]],
    }


def _load_states(model: nn.Module, optimizer, ckpt: dict) -> None:
    from torch.distributed.checkpoint.state_dict import set_model_state_dict, set_optimizer_state_dict

    raw = D.unwrap_model(model)
    try:
        if D.is_fsdp(model):
            set_model_state_dict(raw, ckpt["model"], options=_full_options())
        else:
            raw.load_state_dict(ckpt["model"], strict=True)
        # strict=False: a parameter that never had a gradient (e.g. a head unused so far) has no optimizer state;
        # the model's state dict above was loaded strictly, so a checkpoint of another model cannot pass
        set_optimizer_state_dict(
            raw, optimizer, _named_optim_state(model, optimizer, ckpt["optimizer"]), options=_full_options(strict=False)
        )
    except (RuntimeError, ValueError, KeyError, IndexError) as exc:
        from litebert.training.run import state_mismatch  # run.py imports no loop code

        # one complete line: a few of the keys that differ, else the whole message (torch's spans many lines)
        why = state_mismatch(raw.state_dict(), ckpt["model"]) or " ".join(str(exc).split())
        raise LitebertError(f"checkpoint {ckpt['path']} does not fit this model/optimizer: {why}") from None


def _resolve_resume(args: TrainingArgs, dist: D.DistInfo) -> Path | None:
    from litebert.training.run import resolve_resume  # the run layer's policy (run.py imports no loop code)

    return resolve_resume(args.output_dir, args.resume, dist)


def _sync_context(model: nn.Module, sync: bool):
    """Skip the gradient all-reduce on all but the last micro-batch of a step (DDP ``no_sync``; FSDP
    ``set_requires_gradient_sync``). Sees through a ``torch.compile`` wrapper."""
    if sync:
        return contextlib.nullcontext()
    inner = getattr(model, "_orig_mod", model)  # torch.compile(DDP(...)) is an OptimizedModule around the DDP
    if isinstance(inner, nn.parallel.DistributedDataParallel):
        return inner.no_sync()
    if D.is_fsdp(model):
        return _fsdp_no_sync(D.unwrap_model(model))
    return contextlib.nullcontext()


@contextlib.contextmanager
def _fsdp_no_sync(raw: nn.Module):
    raw.set_requires_gradient_sync(False)
    try:
        yield
    finally:
        raw.set_requires_gradient_sync(True)


def _improved(value: float, best: float | None, greater: bool) -> bool:
    if best is None:
        return True
    return value > best if greater else value < best


def _rescale_position(
    st: _LoopState, trainer_state: dict, args: TrainingArgs, world_size: int, extra_state: dict | None, path: Path
) -> None:
    """Carry the data position of a checkpoint written by another number of processes (1 ↔ DDP ↔ FSDP).

    The position counts this rank's micro-batches of the epoch; with the same global batch per step, the steps done
    in the epoch are the same, so ``position = steps_in_epoch × accumulation``. Raises LitebertError when the
    global batch differs or the checkpoint was taken in a step that straddled an epoch boundary.
    """
    saved_ws = int(trainer_state.get("world_size", 1))
    if saved_ws == world_size:
        return
    saved_gbs = (trainer_state.get("extra") or {}).get("global_batch_size")
    gbs = (extra_state or {}).get("global_batch_size")
    if saved_gbs is not None and gbs is not None and saved_gbs != gbs:
        raise LitebertError(
            f"checkpoint {path} was written with a global batch of {saved_gbs} sequences per step, "
            f"this run has {gbs}: resume with the same batch size x accumulation x processes"
        )
    saved_accum = int(trainer_state.get("gradient_accumulation_steps", 1))
    if st.position % saved_accum:
        raise LitebertError(
            f"checkpoint {path}: its step straddled an epoch boundary, so it can only be resumed "
            f"with the {saved_ws} process(es) that wrote it"
        )
    st.position = st.position // saved_accum * args.gradient_accumulation_steps


def _own_rng_stream(rank: int) -> None:
    """Give a rank other than 0 a torch random stream of its own (CPU and CUDA: dropout masks), seeded from the
    stream every rank shares and the rank number.

    Every rank starts alike (the same seed, for the same initial weights; or rank 0's RNG file of a checkpoint
    written by fewer processes), so rank r would otherwise draw for its rows exactly the dropout masks rank 0 draws
    for its own: the noise of the ranks' halves of a batch would be one noise, twice. Rank 0, and so a 1-process
    run, keeps its stream unchanged. The seed depends only on the shared state and the rank, so a run repeats
    exactly, and each rank's stream is in its checkpoint file (``rng_state_rank{r}.pt``).
    """
    if rank == 0:
        return
    shared = int(torch.randint(0, 2**62, (1,)))  # the same number on every rank
    torch.manual_seed(int(np.random.SeedSequence([shared, rank]).generate_state(1, np.uint64)[0]))


# ---------------------------------------------------------------------------------------------- the loop
class _Trainer:
    """The loop's state and its step helpers; :meth:`run` is the loop, read top to bottom."""

    def __init__(
        self,
        model,
        optimizer,
        scheduler,
        batches: BatchFactory,
        objective: Objective,
        count: CountFn,
        args: TrainingArgs,
        dist: D.DistInfo,
        eval_fn: EvalFn | None,
        on_best,
        on_save,
        extra_state: dict | None,
    ) -> None:
        self.model, self.optimizer, self.scheduler = model, optimizer, scheduler
        self.batches, self.objective, self.count, self.args, self.dist = batches, objective, count, args, dist
        self.eval_fn, self.on_best, self.on_save, self.extra_state = eval_fn, on_best, on_save, extra_state
        self.out = Path(args.output_dir)
        self.st = _LoopState()
        self.last_ckpt: Path | None = None
        self.resumed_from: Path | None = None
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(args.precision)
        self.scaler = torch.amp.GradScaler(dist.device.type) if args.precision == "fp16" else None
        self.window = _Window()
        self.last_train: dict = {}
        self.last_eval: dict = {}
        self.stopped_early = False
        self.stop_reason: str | None = None  # what stopped the run before max_steps: recorded in the checkpoint
        self.signals = _StopSignals()
        self.stop_group = None  # a gloo group for the ranks' stop flag: a host collective, never a device read
        self.logger: MetricsLogger | None = None
        self.data_iter: Iterator[Batch] | None = None
        # where reading the data has got to (one batch ahead of st.epoch/st.position when one is staged)
        self.fetch_epoch, self.fetch_position = 0, 0
        self.staged: tuple[Batch, int, int] | None = None
        # the steps since the last host read: their numbers on the device (record) and their host seconds
        self.pending: list = []
        self.step_seconds: list[float] = []
        self.postfix = ""
        # this call's start, and the run's clocks before it (from the checkpoint it resumes from)
        self.clock_start = (time.perf_counter(), time.process_time())
        self.clock_before = (0.0, 0.0)
        # the device's part of a step: run eagerly, or replayed from a CUDA graph, which takes the batches in host
        # memory and copies them straight into its static buffers (one copy each, not a copy and a device copy)
        self.step_fn: Callable[[list[Batch]], StepNumbers] = self.device_step
        self.batches_on_host = args.cuda_graphs
        if args.cuda_graphs:
            from litebert.training.cuda_graph import GraphedStep

            self.step_fn = GraphedStep(self)

    # -- resume -------------------------------------------------------------------------------------------------
    def resume(self) -> None:
        """Load the checkpoint ``args.resume`` points at (if any): weights, optimizer, schedule, loop state, RNG."""
        path = _resolve_resume(self.args, self.dist)
        if path is not None:
            ckpt = S.load_checkpoint(path, rank=self.dist.rank, world_size=self.dist.world_size)
            _load_states(self.model, self.optimizer, ckpt)
            # our schedules are pure functions of the step: load_state_dict sets the step and recomputes the lr
            # with this run's settings (so a larger --max-steps on resume follows the new schedule)
            self.scheduler.load_state_dict(ckpt["scheduler"])
            ts = ckpt["trainer_state"]
            saved = ts.get("loop", {})
            self.st = _LoopState(**{k: v for k, v in saved.items() if k in _LoopState.__dataclass_fields__})
            _rescale_position(self.st, ts, self.args, self.dist.world_size, self.extra_state, path)
            self.clock_before = (float(self.st.train_seconds), float(self.st.train_cpu_seconds))
            self.window = _Window.restore(ts.get("window"))
            S.set_rng_state(ckpt["rng"], self.dist.device)
            if ckpt["rng_rank"] != self.dist.rank:  # rank 0's state: a checkpoint of fewer processes
                _own_rng_stream(self.dist.rank)
            if self.scaler is not None and ckpt["scaler"] is not None:
                self.scaler.load_state_dict(ckpt["scaler"])
            self.last_ckpt = self.resumed_from = path
        else:
            _own_rng_stream(self.dist.rank)
        self.logger = MetricsLogger(
            self.out,
            enabled=self.dist.is_main,
            resume_step=self.st.step if path is not None else None,
            prefix=self.args.log_prefix,
            max_steps=self.args.max_steps,
        )
        if path is not None:
            self.logger.text(
                f"resumed from {path} at step {self.st.step} (epoch {self.st.epoch}, batch {self.st.position})"
            )
        self.data_iter = iter(self.batches(self.st.epoch, self.st.position))
        self.fetch_epoch, self.fetch_position = self.st.epoch, self.st.position

    # -- one optimizer step ---------------------------------------------------------------------------------------
    def autocast(self):
        if self.amp_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.dist.device.type, dtype=self.amp_dtype)

    def _fetch(self) -> tuple[Batch, int, int]:
        """This rank's next micro-batch, its copy to the device issued (``non_blocking``: from pinned memory it
        overlaps the device's work; a CUDA graph's step copies it itself, :attr:`batches_on_host`), with the (epoch,
        position) the run reaches once it is consumed; moves to the next epoch as needed."""
        try:
            batch = next(self.data_iter)
        except StopIteration:
            self.fetch_epoch, self.fetch_position = self.fetch_epoch + 1, 0
            self.data_iter = iter(self.batches(self.fetch_epoch, 0))
            try:
                batch = next(self.data_iter)
            except StopIteration:
                raise LitebertError(
                    f"epoch {self.fetch_epoch} yields no batches: the data set is smaller than one "
                    "batch per process (lower --batch-size)"
                ) from None
        self.fetch_position += 1
        if not self.batches_on_host:
            batch = _to_device(batch, self.dist.device)
        return batch, self.fetch_epoch, self.fetch_position

    def next_batch(self) -> Batch:
        """This rank's next micro-batch on the device (the one :meth:`prefetch` staged, if any); the data position
        (``st.epoch``, ``st.position``) counts the batches consumed, so a checkpoint resumes at the right one."""
        batch, self.st.epoch, self.st.position = self.staged if self.staged is not None else self._fetch()
        self.staged = None
        return batch

    def prefetch(self) -> None:
        """Read and collate the next micro-batch and issue its copy now, so it is on the device before the step
        that needs it (the host prepares it while the device works on this step)."""
        if self.staged is None:
            self.staged = self._fetch()

    def normalisers(self, micro: list[Batch]) -> tuple[list[str], torch.Tensor, torch.Tensor]:
        """Units of each loss term over all micro-batches and ranks: (terms, (T,) float64 units ≥ 1 on the device,
        0-d float64 tokens). A term with no units counts 1. One all-reduce, no host read."""
        counts = [self.count(mb) for mb in micro]
        terms = sorted({t for c in counts for t in c})
        dev = self.dist.device
        rows = [
            torch.stack([_on_device(c.get(t, 0), dev) for t in terms] + [_on_device(_count_tokens(mb), dev)])
            for c, mb in zip(counts, micro)
        ]
        vec = D.all_reduce_sum(torch.stack(rows).sum(0))
        return terms, vec[:-1].clamp(min=1.0), vec[-1]

    def forward_backward(self, micro: list[Batch], terms: list[str], units: torch.Tensor):
        """Backward of Σ_terms sum/units over the micro-batches (gradient sync on the last only). Returns the ratio
        names and one float64 vector on the device, reduced over ranks: the step's loss sums (in ``terms`` order)
        then each ratio's numerator and denominator."""
        dev = self.dist.device
        norm = units.float()  # exact: counts below 2^24; float32 as the loss (a Python float divided it before)
        sums: dict[str, list[torch.Tensor]] = {t: [] for t in terms}
        ratios: dict[str, list[list[torch.Tensor]]] = {}
        for i, mb in enumerate(micro):
            with _sync_context(self.model, i == len(micro) - 1), self.autocast():
                out = self.objective(self.model, mb)
                loss = sum(out.sums[t].float() / norm[terms.index(t)] for t in out.sums)
            # DDP/FSDP average gradients over ranks; × world turns that average back into the global sum
            loss = loss * self.dist.world_size
            (self.scaler.scale(loss) if self.scaler is not None else loss).backward()
            for t, v in out.sums.items():
                sums[t].append(_on_device(v, dev))
            for name, (num, den) in out.ratios.items():
                acc = ratios.setdefault(name, [[], []])
                acc[0].append(_on_device(num, dev))
                acc[1].append(_on_device(den, dev))
        names = sorted(ratios)
        zero = torch.zeros((), dtype=torch.float64, device=dev)
        parts = [sum(sums[t], zero) for t in terms] + [sum(part, zero) for n in names for part in ratios[n]]
        return names, D.all_reduce_sum(torch.stack(parts))

    def clip(self) -> torch.Tensor:
        """Unscale (fp16), clip to ``max_grad_norm`` and return the global gradient norm, a 0-d tensor on the
        device (inf/NaN if non-finite)."""
        if self.scaler is not None:
            self.scaler.unscale_(self.optimizer)
        clip = self.args.max_grad_norm if self.args.max_grad_norm else math.inf
        grad_norm = torch.nn.utils.clip_grad_norm_(self.params, clip)
        if hasattr(grad_norm, "full_tensor"):  # DTensor under FSDP
            grad_norm = grad_norm.full_tensor()
        return grad_norm.detach()

    def device_step(self, micro: list[Batch], zero_grad: bool = True) -> StepNumbers:
        """The device's part of one optimizer step over ``micro`` (this rank's micro-batches, on the device):
        normalisers, forward and backward, clip, finite check, update; nothing read back to the host.
        ``zero_grad=False`` leaves the gradients in place (a captured CUDA graph rewrites them each replay)."""
        terms, units, tokens = self.normalisers(micro)
        names, reduced = self.forward_backward(micro, terms, units)
        step_loss = (reduced[: len(terms)] / units).sum()
        grad_norm = self.clip()
        finite = torch.isfinite(step_loss) & torch.isfinite(grad_norm)
        self.update(finite, zero_grad)
        head = torch.stack([finite.double(), step_loss, grad_norm.double()])
        packed = torch.cat([head, reduced, units, tokens.reshape(1)])
        return StepNumbers(terms, names, finite, step_loss, grad_norm, reduced, units, tokens, packed)

    def update(self, finite: torch.Tensor, zero_grad: bool = True) -> None:
        """Update the weights if the step is finite (else skip it) and clear the gradients.

        ``finite`` is a device bool: an optimizer that skips on the device (:func:`litebert.optim.skips_on_device`:
        LAMB, torch's fused optimizers) gets it as ``found_inf``, so the host never waits for it; another one costs
        one host read here.
        """
        if skips_on_device(self.optimizer):
            self.optimizer.found_inf = (~finite).float().reshape(())  # 0-d, as GradScaler's: fused AdamW needs it
            self.optimizer.grad_scale = None  # already unscaled (fp16) or never scaled
            try:
                self.optimizer.step()
            finally:
                del self.optimizer.found_inf, self.optimizer.grad_scale
        elif bool(finite):
            self.optimizer.step()
        if zero_grad:
            self.optimizer.zero_grad(set_to_none=True)

    def advance(self) -> None:
        """The host's part of the end of a step: the fp16 loss scale (``GradScaler.update``, a device op: a
        non-finite step backs the scale off; the scaler has unscaled the gradients in :meth:`clip`), the schedule,
        the step count."""
        if self.scaler is not None:
            self.scaler.update()
        self.scheduler.step()
        self.st.step += 1

    def record(self, n: StepNumbers, lr: float) -> None:
        """Keep this step's numbers on the device until :meth:`settle` reads them: a copy of ``n.packed`` (a CUDA
        graph's outputs are rewritten by the next replay), one kernel; with fp16 the loss scale after this step's
        update appended."""
        if self.scaler is not None:
            vec = torch.cat([n.packed, self.scaler._get_scale_async().double().reshape(1)])
        else:
            vec = n.packed.clone()
        self.pending.append((self.st.step, lr, n.terms, n.names, vec))

    def settle(self, step_end: float) -> None:
        """Read the steps kept since the last read (one device→host transfer) and account for them in order, as
        each step did when it read its own numbers: skipped (non-finite) steps are counted and logged, and stop the
        run (:meth:`count_bad_step`); finite ones enter the log window. ``step_end``: the time this step's work was
        enqueued; the wait for the device here is part of the step's time."""
        if not self.pending:
            return
        pending, seconds_of = self.pending, self.step_seconds
        self.pending, self.step_seconds = [], []  # a raise below leaves nothing to account twice
        values = torch.stack([v for *_, v in pending]).tolist()  # the one host read of the window
        seconds_of[-1] += time.perf_counter() - step_end
        for (step, lr, terms, names, _), vec, seconds in zip(pending, values, seconds_of):
            finite, step_loss, grad_norm = bool(vec[0]), vec[1], vec[2]  # the layout of StepNumbers.packed
            k, r = len(terms), len(names)
            sums = dict(zip(terms, vec[3 : 3 + k]))
            ratios = {n: (vec[3 + k + 2 * j], vec[4 + k + 2 * j]) for j, n in enumerate(names)}
            units = dict(zip(terms, vec[3 + k + 2 * r : 3 + 2 * k + 2 * r]))
            tokens = vec[3 + 2 * k + 2 * r]
            scale = vec[-1] if self.scaler is not None else 0.0
            step_loss = sum(sums[t] / units[t] for t in units)  # as the host computed it before: exact same float
            self.count_bad_step(finite, step_loss, grad_norm, step, scale)
            if finite:
                self.window.add(sums, units, ratios, grad_norm, tokens, seconds)
            self.postfix = _postfix(step_loss, ratios, lr, self.window)

    def count_bad_step(self, finite: bool, step_loss: float, grad_norm: float, step: int, scale: float) -> None:
        """Count a skipped (non-finite) step ``step`` — including a step the fp16 loss scaler had to skip (its scale
        then was ``scale``) — and stop the run after ``max_bad_steps`` in a row."""
        if finite:
            self.st.bad_in_row = 0
            return
        self.st.skipped_steps += 1
        self.st.bad_in_row += 1
        self.window.skipped += 1
        scale_note = f", loss scale now {scale:g}" if self.scaler is not None else ""
        self.logger.text(
            f"step {step}: non-finite loss ({step_loss}) or gradient norm ({grad_norm}); step "
            f"skipped ({self.st.bad_in_row} in a row, {self.st.skipped_steps} in total{scale_note})"
        )
        if self.st.bad_in_row >= self.args.max_bad_steps:
            where = f"the last good checkpoint is {self.last_ckpt}" if self.last_ckpt else "no checkpoint was saved yet"
            raise LitebertError(
                f"stopped at step {step}: {self.st.bad_in_row} non-finite steps in a row (loss {step_loss}, "
                f"gradient norm {grad_norm}); {where}. Lower --learning-rate or use --precision fp32, then "
                f"resume with --resume PATH"
            )

    def reads_now(self, at_end: bool) -> bool:
        """Whether this step logs, evaluates or saves, and so reads the steps' numbers back to the host now."""
        args, step = self.args, self.st.step
        return (
            at_end
            or self.stopped_early
            or step % args.logging_steps == 0
            or bool(self.eval_fn is not None and args.eval_steps and step % args.eval_steps == 0)
            or bool(args.save_steps and step % args.save_steps == 0)
        )

    # -- log, evaluate, checkpoint ----------------------------------------------------------------------------------
    def log(self, lr: float, at_end: bool) -> None:
        """A "train" record every ``logging_steps`` steps and at the end (over the steps since the last one)."""
        if self.st.step % self.args.logging_steps == 0 or at_end:
            if self.window.steps or self.window.skipped:
                self.last_train = {"step": self.st.step, "split": "train", **self.window.summary(), "learning_rate": lr}
                self.logger.record(self.last_train)
            self.window = _Window()

    def evaluate(self, at_end: bool) -> None:
        """Every ``eval_steps`` steps and at the end: eval_fn, best-model callback, early stopping."""
        args = self.args
        if self.eval_fn is None or not ((args.eval_steps and self.st.step % args.eval_steps == 0) or at_end):
            return
        self.model.eval()
        with torch.no_grad(), self.autocast():
            metrics = self.eval_fn(self.model)
        self.model.train()
        self.last_eval = {"step": self.st.step, "split": "eval", **metrics}
        self.logger.record(self.last_eval)
        if args.metric_for_best is None:
            return
        if args.metric_for_best not in metrics:
            raise LitebertError(
                f"metric_for_best {args.metric_for_best!r} is not among the evaluation metrics {sorted(metrics)}"
            )
        value = float(metrics[args.metric_for_best])
        st = self.st
        if D.broadcast_object(_improved(value, st.best_metric, args.greater_is_better)):
            st.best_metric, st.best_step, st.evals_without_improvement = value, st.step, 0
            if self.on_best is not None and self.dist.is_main:
                self.on_best(D.unwrap_model(self.model), metrics, st.step)
            return
        st.evals_without_improvement += 1
        patience = args.early_stopping_patience
        if patience is not None and st.evals_without_improvement >= patience:
            self.logger.text(
                f"early stopping at step {st.step}: {args.metric_for_best} has not improved for "
                f"{patience} evaluations (best {st.best_metric} at step {st.best_step})"
            )
            self.stopped_early = True
            self.stop_reason = "early stopping"

    def checkpoint(self, at_end: bool) -> None:
        """Every ``save_steps`` steps, at the end and on early stopping — never in a non-finite streak, so "the last
        good checkpoint" stays good."""
        final = at_end or self.stopped_early
        if not ((self.args.save_steps and self.st.step % self.args.save_steps == 0) or final):
            return
        if self.st.bad_in_row and not final:
            self.logger.text(f"step {self.st.step}: checkpoint postponed (the last step was not finite)")
            return
        self.last_ckpt = self.save()

    def tick(self) -> None:
        """Bring the run's clocks (``st.train_seconds``, ``st.train_cpu_seconds``) up to now."""
        self.st.train_seconds = self.clock_before[0] + time.perf_counter() - self.clock_start[0]
        self.st.train_cpu_seconds = self.clock_before[1] + time.process_time() - self.clock_start[1]

    def save(self) -> Path:
        self.tick()
        trainer_state = {
            "loop": asdict(self.st),
            "window": vars(self.window),  # the steps since the last train record: a resume logs them too
            "extra": self.extra_state or {},
            "gradient_accumulation_steps": self.args.gradient_accumulation_steps,
        }
        if self.stop_reason is not None:  # a run ended before max_steps: `--resume auto` with the same settings
            trainer_state["stopped"] = {"by": self.stop_reason, "max_steps": self.args.max_steps}
        model_state = _model_state(self.model)  # collectives under FSDP: every rank calls them
        optim_state = _optim_state(self.model, self.optimizer)
        raw = D.unwrap_model(self.model)
        main = self.dist.is_main
        path = S.save_checkpoint(
            self.out,
            self.st.step,
            rank=self.dist.rank,
            world_size=self.dist.world_size,
            model_state=model_state if main else None,
            optimizer_state=optim_state if main else None,
            scheduler_state=self.scheduler.state_dict(),
            trainer_state=trainer_state,
            scaler_state=self.scaler.state_dict() if self.scaler is not None else None,
            extra_files=(lambda d: self.on_save(d, raw)) if self.on_save is not None else None,
            save_total_limit=self.args.save_total_limit,
            barrier=D.barrier,
            device=self.dist.device,
        )
        self.logger.text(f"saved checkpoint {path}")
        return path

    # -- stop on a signal ---------------------------------------------------------------------------------------------
    def stop_signal(self, at_end: bool) -> int:
        """The signal that stops the run after this step (0: none). One process reads its flag; several agree with
        an all-reduce (the largest signal any rank got), on steps every rank computes the same way."""
        if self.dist.world_size == 1:
            return self.signals.signum
        if not (self.reads_now(at_end) or self.st.step % STOP_CHECK_STEPS == 0):
            return 0
        flag = torch.tensor([self.signals.signum], dtype=torch.int64)  # on the host: no device sync
        if D.is_dist():
            if self.stop_group is None:  # (created at the same step by every rank: a collective)
                self.stop_group = torch.distributed.new_group(backend="gloo")
            torch.distributed.all_reduce(flag, op=torch.distributed.ReduceOp.MAX, group=self.stop_group)
        return int(flag[0])

    def interrupt(self, signum: int) -> None:
        """Save a checkpoint of this step (unless the step just saved one), say how to continue, and raise
        :class:`TrainingInterrupted`."""
        if self.last_ckpt is None or self.last_ckpt.name != f"step-{self.st.step}":
            self.last_ckpt = self.save()
        command = (self.args.log_prefix or "pretrain").split()[0]
        self.logger.text(
            f"{signal.Signals(signum).name} at step {self.st.step}: stopped, checkpoint {self.last_ckpt}; continue "
            f"with the same command and --resume auto (`litebert {command} ... --output {self.out} --resume auto`)"
        )
        raise TrainingInterrupted(signum, self.st.step, self.last_ckpt)

    # -- the loop -----------------------------------------------------------------------------------------------
    def run(self) -> None:
        args, st = self.args, self.st
        bar = tqdm(
            total=args.max_steps,
            initial=st.step,
            disable=not _show_bar(self.dist, args),
            desc=args.log_prefix or "train",
            dynamic_ncols=True,
            leave=True,
        )
        self.model.train()
        t_run = time.perf_counter()
        try:
            self.signals.__enter__()
            while st.step < args.max_steps:
                lr = self.optimizer.param_groups[0]["lr"]
                t_step = time.perf_counter()
                micro = [self.next_batch() for _ in range(args.gradient_accumulation_steps)]
                if st.step + 1 < args.max_steps:
                    self.prefetch()
                # every number of the step stays on the device: read back only when logged, evaluated or saved
                numbers = self.step_fn(micro)
                del micro
                self.advance()
                self.record(numbers, lr)
                step_end = time.perf_counter()
                self.step_seconds.append(step_end - t_step)
                bar.update(1)
                at_end = st.step >= args.max_steps
                if args.max_minutes is not None and not at_end:
                    at_end = bool(D.broadcast_object(time.perf_counter() - t_run >= 60.0 * args.max_minutes))
                    if at_end:
                        self.logger.text(
                            f"step {st.step}: the time limit of {args.max_minutes:g} minutes is reached; stopping"
                        )
                        self.stopped_early = True  # leaves the loop after this step's log, evaluation, checkpoint
                        self.stop_reason = "--max-minutes"
                # a signal stops the run after this step's log, evaluation and checkpoint, as they would have been
                # (a resume then logs and saves as the uninterrupted run does); at the last step the run just ends
                signum = 0 if at_end else self.stop_signal(at_end)
                if self.reads_now(at_end) or signum:
                    self.settle(step_end)  # may stop the run: max_bad_steps non-finite steps in a row
                    bar.set_postfix_str(self.postfix, refresh=False)
                self.log(lr, at_end)
                self.evaluate(at_end)
                self.checkpoint(at_end)
                if signum:
                    self.interrupt(signum)
                if self.stopped_early:
                    break
        finally:
            self.signals.__exit__()
            bar.close()
            self.logger.close()


def _show_bar(dist: D.DistInfo, args: TrainingArgs) -> bool:
    """The tqdm bar on rank 0, and only on a terminal: in a log file its ``\\r`` frames are megabytes of noise
    (the periodic log line says the same)."""
    return dist.is_main and args.progress_bar and sys.stderr.isatty()


def train(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler,
    batches: BatchFactory,
    objective: Objective,
    count: CountFn,
    args: TrainingArgs,
    *,
    eval_fn: EvalFn | None = None,
    on_best: Callable[[nn.Module, dict, int], None] | None = None,
    on_save: Callable[[Path, nn.Module], None] | None = None,
    extra_state: dict | None = None,
    dist: D.DistInfo | None = None,
) -> TrainResult:
    """Train ``model`` (already wrapped by :func:`~litebert.training.distributed.wrap_model`) for ``args.max_steps``.

    ``scheduler``: ``step()``, ``state_dict()``, ``load_state_dict()`` (:func:`litebert.optim.build_scheduler`).
    See docs/DESIGN.md "Training loop contract" for the callables. Raises :class:`LitebertError` on bad
    arguments, an unusable checkpoint, an empty epoch, or ``args.max_bad_steps`` non-finite steps in a row (the
    message names the step and the last good checkpoint).
    """
    t_start = time.perf_counter()
    if dist is None:
        dist = D.DistInfo(
            rank=torch.distributed.get_rank() if D.is_dist() else 0,
            world_size=torch.distributed.get_world_size() if D.is_dist() else 1,
            device=next(D.unwrap_model(model).parameters()).device,
        )
    if on_best is not None and D.is_fsdp(model):
        raise LitebertError("best-model saving (on_best) is not supported with FSDP")
    trainer = _Trainer(
        model, optimizer, scheduler, batches, objective, count, args, dist, eval_fn, on_best, on_save, extra_state
    )
    trainer.resume()
    trainer.run()
    trainer.tick()
    st = trainer.st
    return TrainResult(
        step=st.step,
        epoch=st.epoch,
        skipped_steps=st.skipped_steps,
        stopped_early=trainer.stopped_early,
        best_metric=st.best_metric,
        best_step=st.best_step,
        last_train=trainer.last_train,
        last_eval=trainer.last_eval,
        last_checkpoint=trainer.last_ckpt,
        seconds=time.perf_counter() - t_start,
        train_seconds=st.train_seconds,
        train_cpu_seconds=st.train_cpu_seconds,
    )


class _Window:
    """Sums over the steps since the last log record (already reduced over micro-batches and ranks); skipped
    (non-finite) steps are only counted."""

    def __init__(self) -> None:
        self.steps = 0
        self.skipped = 0
        self.sums: dict[str, float] = {}
        self.units: dict[str, float] = {}
        self.ratios: dict[str, list[float]] = {}
        self.grad_norm = 0.0
        self.tokens = 0.0
        self.seconds = 0.0

    @classmethod
    def restore(cls, saved: dict | None) -> _Window:
        """The window a checkpoint saved (``vars`` of one; its sums are over all ranks, so any world size may resume
        it), or an empty one for a checkpoint from before windows were saved."""
        window = cls()
        for name, value in (saved or {}).items():
            if name in window.__dict__:
                setattr(window, name, value)
        return window

    def add(self, sums, units, ratios, grad_norm, tokens, seconds) -> None:
        self.steps += 1
        for t, v in sums.items():
            self.sums[t] = self.sums.get(t, 0.0) + v
            self.units[t] = self.units.get(t, 0.0) + units[t]
        for n, (num, den) in ratios.items():
            acc = self.ratios.setdefault(n, [0.0, 0.0])
            acc[0] += num
            acc[1] += den
        self.grad_norm += grad_norm
        self.tokens += tokens
        self.seconds += seconds

    def summary(self) -> dict:
        """loss, each term, each ratio, mean grad_norm, tokens_per_second, steps_per_second (finite steps, host
        seconds from a step's start to the next's), skipped_steps (None where no step of the
        window was finite)."""
        terms = {t: self.sums[t] / max(self.units[t], 1.0) for t in sorted(self.sums)}
        rec: dict = {"loss": sum(terms.values()) if self.steps else None}
        rec.update({t: v for t, v in terms.items() if t != "loss"})
        rec.update({n: num / den if den else None for n, (num, den) in sorted(self.ratios.items())})
        rec["grad_norm"] = self.grad_norm / self.steps if self.steps else None
        rec["tokens_per_second"] = self.tokens / self.seconds if self.seconds > 0 else 0.0
        rec["steps_per_second"] = self.steps / self.seconds if self.seconds > 0 else 0.0
        rec["skipped_steps"] = self.skipped
        return rec


def _postfix(step_loss: float, ratios: dict, lr: float, window: _Window) -> str:
    parts = [f"loss={step_loss:.3f}"]
    for n, (num, den) in ratios.items():
        if den:
            parts.append(f"{n.replace('_accuracy', '_acc')}={num / den:.3f}")
    parts.append(f"lr={lr:.2e}")
    if window.seconds > 0:
        parts.append(f"tok/s={window.tokens / window.seconds:.0f}")
    return " ".join(parts)
