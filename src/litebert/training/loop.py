"""The one training loop: pretraining and fine-tuning differ only in the objective they pass.

Read :func:`train` top to bottom: resume → for each optimizer step: micro-batches with accumulation (``no_sync``
on all but the last), global loss normalisation, clip, finite check, step, schedule → log → evaluate → checkpoint.
The contract is written out in docs/DESIGN.md, "Training loop contract".
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from torch import nn
from tqdm.auto import tqdm

from litebert.errors import LitebertError
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
    #: tqdm progress bar on rank 0
    progress_bar: bool = True
    #: prefix of log lines, e.g. "pretrain"
    log_prefix: str = ""

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
        need(self.early_stopping_patience is None or self.metric_for_best is not None, "early_stopping_patience",
             "needs metric_for_best")


@dataclass
class LossOutput:
    """The objective's result for one micro-batch.

    ``sums``: loss term → 0-d tensor summed (not averaged) over the term's units in this micro-batch (e.g.
    ``mlm_loss``: summed cross-entropy over its predicted tokens). ``ratios``: metric → (numerator, denominator)
    floats, e.g. ``mlm_accuracy``: (correct, predicted tokens); the loop reports Σnum/Σden.
    """

    sums: dict[str, torch.Tensor]
    ratios: dict[str, tuple[float, float]] = field(default_factory=dict)


Objective = Callable[[nn.Module, Batch], LossOutput]
CountFn = Callable[[Batch], dict[str, int]]
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
    seconds: float


@dataclass
class _LoopState:
    """Everything besides model/optimizer/scheduler/RNG that an exact resume needs (stored in trainer_state.json)."""

    step: int = 0
    epoch: int = 0
    position: int = 0  # micro-batches of `epoch` already consumed by this rank
    skipped_steps: int = 0
    bad_in_row: int = 0
    best_metric: float | None = None
    best_step: int | None = None
    evals_without_improvement: int = 0


def make_batch_factory(dataset, batch_size: int, collate_fn=None, *, seed: int, shuffle: bool = True,
                       drop_last: bool = True, num_workers: int = 0, rank: int = 0, world_size: int = 1,
                       set_epoch: bool = True, equal_per_rank: bool = True) -> BatchFactory:
    """A :data:`BatchFactory` over a map-style ``dataset``.

    Epoch ``e``: a permutation of ``range(len(dataset))`` from ``torch.Generator().manual_seed(seed + e)`` (or
    the identity with ``shuffle=False``) cut into chunks of ``batch_size`` (the last partial chunk dropped with
    ``drop_last``); global chunk ``k`` goes to rank ``k % world_size``, and every rank gets the same number of
    chunks (extra chunks at the end are dropped; ``equal_per_rank=False`` keeps them, for evaluation). So 1 process × batch 8, 1 × 4 with 2 accumulation steps and
    2 processes × 4 see the same examples in each optimizer step. ``dataset.set_epoch(e)`` is called first
    when it exists (dynamic masking). The DataLoader gets its own seeded generator, so creating it never
    touches the global RNG (which would break exact resume).
    """
    n = len(dataset)

    def batches(epoch: int, skip: int) -> Iterable[Batch]:
        if set_epoch and hasattr(dataset, "set_epoch"):
            dataset.set_epoch(epoch)
        if shuffle:
            order = torch.randperm(n, generator=torch.Generator().manual_seed(seed + epoch)).tolist()
        else:
            order = list(range(n))
        chunks = [order[i:i + batch_size] for i in range(0, n, batch_size)]
        if drop_last and chunks and len(chunks[-1]) < batch_size:
            chunks.pop()
        end = len(chunks) // world_size * world_size if equal_per_rank else len(chunks)
        mine = chunks[rank:end:world_size][skip:]
        return torch.utils.data.DataLoader(dataset, batch_sampler=mine, collate_fn=collate_fn,
                                           num_workers=num_workers,
                                           generator=torch.Generator().manual_seed(seed + 7919 * (epoch + 1)))

    return batches


def _to_device(batch: Batch, device: torch.device) -> Batch:
    return {k: (v.to(device, non_blocking=True) if isinstance(v, torch.Tensor) else v) for k, v in batch.items()}


def _count_tokens(batch: Batch) -> float:
    if "attention_mask" in batch:
        return float(batch["attention_mask"].sum())
    if "input_ids" in batch:
        return float(batch["input_ids"].numel())
    return 0.0


def _model_state(model: nn.Module) -> dict:
    if D.is_fsdp(model):
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        return get_model_state_dict(D.unwrap_model(model), options=StateDictOptions(full_state_dict=True,
                                                                                    cpu_offload=True))
    return D.unwrap_model(model).state_dict()


def _optim_state(model: nn.Module, optimizer) -> dict:
    if D.is_fsdp(model):
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

        return get_optimizer_state_dict(D.unwrap_model(model), optimizer,
                                        options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    return optimizer.state_dict()


def _load_states(model: nn.Module, optimizer, ckpt: dict) -> None:
    try:
        if D.is_fsdp(model):
            from torch.distributed.checkpoint.state_dict import (StateDictOptions, set_model_state_dict,
                                                                 set_optimizer_state_dict)

            opts = StateDictOptions(full_state_dict=True)
            set_model_state_dict(D.unwrap_model(model), ckpt["model"], options=opts)
            set_optimizer_state_dict(D.unwrap_model(model), optimizer, ckpt["optimizer"], options=opts)
        else:
            D.unwrap_model(model).load_state_dict(ckpt["model"], strict=True)
            optimizer.load_state_dict(ckpt["optimizer"])
    except (RuntimeError, ValueError, KeyError) as exc:
        raise LitebertError(f"checkpoint {ckpt['path']} does not fit this model/optimizer: "
                            f"{str(exc).splitlines()[0]}") from None


def _load_scheduler(scheduler, optimizer, state: dict) -> None:
    """Restore the scheduler's position but keep this run's schedule (e.g. a larger --max-steps on resume).

    ``LambdaLR.load_state_dict`` would also restore the saved lambdas' settings; we put the current ones back
    and recompute each group's lr with LambdaLR's own formula, so an unchanged schedule resumes bit-identically.
    """
    lambdas = getattr(scheduler, "lr_lambdas", None)
    current = [dict(fn.__dict__) for fn in lambdas] if lambdas is not None else None
    scheduler.load_state_dict(state)
    if lambdas is not None:
        for fn, settings in zip(scheduler.lr_lambdas, current):
            fn.__dict__.update(settings)
        for group, base_lr, fn in zip(optimizer.param_groups, scheduler.base_lrs, scheduler.lr_lambdas):
            group["lr"] = base_lr * fn(scheduler.last_epoch)
        scheduler._last_lr = [g["lr"] for g in optimizer.param_groups]


def _resolve_resume(args: TrainingArgs, dist: D.DistInfo) -> Path | None:
    from litebert.training.run import resolve_resume  # the run layer's policy (run.py imports no loop code)

    return resolve_resume(args.output_dir, args.resume, dist)


def _sync_context(model: nn.Module, sync: bool):
    """Skip the gradient all-reduce on all but the last micro-batch of a step."""
    if sync:
        return contextlib.nullcontext()
    if isinstance(model, nn.parallel.DistributedDataParallel):
        return model.no_sync()
    if D.is_fsdp(model):
        raw = D.unwrap_model(model)

        @contextlib.contextmanager
        def fsdp_no_sync():
            raw.set_requires_gradient_sync(False)
            try:
                yield
            finally:
                raw.set_requires_gradient_sync(True)

        return fsdp_no_sync()
    return contextlib.nullcontext()


def _improved(value: float, best: float | None, greater: bool) -> bool:
    if best is None:
        return True
    return value > best if greater else value < best


def train(model: nn.Module, optimizer: torch.optim.Optimizer, scheduler, batches: BatchFactory,
          objective: Objective, count: CountFn, args: TrainingArgs, *, eval_fn: EvalFn | None = None,
          on_best: Callable[[nn.Module, dict, int], None] | None = None,
          on_save: Callable[[Path, nn.Module], None] | None = None,
          extra_state: dict | None = None, dist: D.DistInfo | None = None) -> TrainResult:
    """Train ``model`` (already wrapped by :func:`~litebert.training.distributed.wrap_model`) for ``args.max_steps``.

    See docs/DESIGN.md "Training loop contract" for the callables. Raises :class:`LitebertError` on bad
    arguments, an unusable checkpoint, an empty epoch, or ``args.max_bad_steps`` non-finite steps in a row (the
    message names the step and the last good checkpoint).
    """
    t_start = time.perf_counter()
    if dist is None:
        dist = D.DistInfo(rank=torch.distributed.get_rank() if D.is_dist() else 0,
                          world_size=torch.distributed.get_world_size() if D.is_dist() else 1,
                          device=next(D.unwrap_model(model).parameters()).device)
    if on_best is not None and D.is_fsdp(model):
        raise LitebertError("best-model saving (on_best) is not supported with FSDP")
    out = Path(args.output_dir)
    st = _LoopState()
    last_ckpt: Path | None = None

    # ---- resume -------------------------------------------------------------------------------------------
    ckpt_path = _resolve_resume(args, dist)
    if ckpt_path is not None:
        ckpt = S.load_checkpoint(ckpt_path, rank=dist.rank, world_size=dist.world_size)
        _load_states(model, optimizer, ckpt)
        _load_scheduler(scheduler, optimizer, ckpt["scheduler"])
        saved = ckpt["trainer_state"].get("loop", {})
        st = _LoopState(**{k: v for k, v in saved.items() if k in _LoopState.__dataclass_fields__})
        S.set_rng_state(ckpt["rng"])
        last_ckpt = ckpt_path
        scaler_state = ckpt["scaler"]
        del ckpt
    else:
        scaler_state = None
    logger = MetricsLogger(out, enabled=dist.is_main, resume_step=st.step if ckpt_path else None,
                           prefix=args.log_prefix, max_steps=args.max_steps)
    if ckpt_path is not None:
        logger.text(f"resumed from {ckpt_path} at step {st.step} (epoch {st.epoch}, batch {st.position})")

    # ---- precision ----------------------------------------------------------------------------------------
    device = dist.device
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(args.precision)
    scaler = torch.amp.GradScaler(device.type) if args.precision == "fp16" else None
    if scaler is not None and scaler_state is not None:
        scaler.load_state_dict(scaler_state)

    def autocast():
        if amp_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=device.type, dtype=amp_dtype)

    # ---- data: an endless stream of this rank's micro-batches, tracking (epoch, position) ----------------
    data_iter: Iterator[Batch] = iter(batches(st.epoch, st.position))

    def next_batch() -> Batch:
        nonlocal data_iter
        try:
            batch = next(data_iter)
        except StopIteration:
            st.epoch, st.position = st.epoch + 1, 0
            data_iter = iter(batches(st.epoch, 0))
            try:
                batch = next(data_iter)
            except StopIteration:
                raise LitebertError(f"epoch {st.epoch} yields no batches: the data set is smaller than one batch "
                                    f"per process (lower --batch-size)") from None
        st.position += 1
        return batch

    def save(step: int) -> Path:
        trainer_state = {"loop": asdict(st), "extra": extra_state or {}}
        model_state = _model_state(model)  # collective under FSDP: every rank calls it
        optim_state = _optim_state(model, optimizer)
        path = S.save_checkpoint(
            out, step, rank=dist.rank, world_size=dist.world_size,
            model_state=model_state if dist.is_main else None,
            optimizer_state=optim_state if dist.is_main else None,
            scheduler_state=scheduler.state_dict(), trainer_state=trainer_state,
            scaler_state=scaler.state_dict() if scaler is not None else None,
            extra_files=(lambda d: on_save(d, D.unwrap_model(model))) if on_save is not None else None,
            save_total_limit=args.save_total_limit, barrier=D.barrier)
        logger.text(f"saved checkpoint {path}")
        return path

    params = [p for p in model.parameters() if p.requires_grad]
    clip = args.max_grad_norm if args.max_grad_norm else math.inf
    world = dist.world_size
    window = _Window()
    last_train: dict = {}
    last_eval: dict = {}
    stopped_early = False
    bar = tqdm(total=args.max_steps, initial=st.step, disable=not (dist.is_main and args.progress_bar),
               desc=args.log_prefix or "train", dynamic_ncols=True, leave=True)
    model.train()
    try:
        while st.step < args.max_steps:
            lr = optimizer.param_groups[0]["lr"]
            t_step = time.perf_counter()

            # -- global normalisers: units of each loss term over all micro-batches and ranks ---------------
            micro = [_to_device(next_batch(), device) for _ in range(args.gradient_accumulation_steps)]
            local_counts: dict[str, float] = {}
            tokens = 0.0
            for mb in micro:
                for k, v in count(mb).items():
                    local_counts[k] = local_counts.get(k, 0.0) + float(v)
                tokens += _count_tokens(mb)
            terms = sorted(local_counts)
            vec = D.all_reduce_sum(torch.tensor([local_counts[t] for t in terms] + [tokens], dtype=torch.float64,
                                                device=device))
            norm = {t: max(float(vec[i]), 1.0) for i, t in enumerate(terms)}  # a term with no units adds 0
            tokens = float(vec[-1])

            # -- forward/backward per micro-batch, gradient all-reduce only on the last ----------------------
            step_sums = {t: 0.0 for t in terms}
            step_ratios: dict[str, list[float]] = {}
            for i, mb in enumerate(micro):
                with _sync_context(model, i == len(micro) - 1), autocast():
                    out_mb = objective(model, mb)
                    loss = sum(out_mb.sums[t].float() / norm[t] for t in out_mb.sums)
                # DDP averages gradients over ranks; × world turns that average back into the global sum
                loss = loss * world
                (scaler.scale(loss) if scaler is not None else loss).backward()
                for t, v in out_mb.sums.items():
                    step_sums[t] = step_sums.get(t, 0.0) + float(v.detach())
                for name, (num, den) in out_mb.ratios.items():
                    acc = step_ratios.setdefault(name, [0.0, 0.0])
                    acc[0] += float(num)
                    acc[1] += float(den)
            del micro

            # -- reduce what we log; clip; finite check; step --------------------------------------------------
            ratio_names = sorted(step_ratios)
            vec = D.all_reduce_sum(torch.tensor(
                [step_sums[t] for t in terms] + [x for n in ratio_names for x in step_ratios[n]],
                dtype=torch.float64, device=device)).tolist()
            step_sums = {t: vec[i] for i, t in enumerate(terms)}
            step_ratios = {n: (vec[len(terms) + 2 * j], vec[len(terms) + 2 * j + 1]) for j, n in enumerate(ratio_names)}
            step_loss = sum(step_sums[t] / norm[t] for t in terms)
            if scaler is not None:
                scaler.unscale_(optimizer)
            grad_norm = torch.nn.utils.clip_grad_norm_(params, clip)
            if hasattr(grad_norm, "full_tensor"):  # DTensor under FSDP
                grad_norm = grad_norm.full_tensor()
            grad_norm = float(grad_norm)
            finite = math.isfinite(step_loss) and math.isfinite(grad_norm)
            if scaler is not None:
                if math.isfinite(step_loss):
                    scaler.step(optimizer)  # skips by itself on inf/nan gradients (loss-scale calibration)
                scaler.update()
                finite = math.isfinite(step_loss)
            elif finite:
                optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            scheduler.step()
            st.step += 1
            bar.update(1)

            if not finite:
                st.skipped_steps += 1
                st.bad_in_row += 1
                logger.text(f"step {st.step}: non-finite loss ({step_loss}) or gradient norm ({grad_norm}); "
                            f"step skipped ({st.bad_in_row} in a row, {st.skipped_steps} in total)")
                if st.bad_in_row >= args.max_bad_steps:
                    where = f"the last good checkpoint is {last_ckpt}" if last_ckpt else "no checkpoint was saved yet"
                    raise LitebertError(
                        f"stopped at step {st.step}: {st.bad_in_row} non-finite steps in a row (loss {step_loss}, "
                        f"gradient norm {grad_norm}); {where}. Lower --learning-rate or use --precision fp32, then "
                        f"resume with --resume PATH")
            else:
                st.bad_in_row = 0
                window.add(step_sums, norm, step_ratios, grad_norm, tokens, time.perf_counter() - t_step)
            bar.set_postfix_str(_postfix(step_loss, step_ratios, lr, window), refresh=False)

            # -- log ------------------------------------------------------------------------------------------
            at_end = st.step >= args.max_steps
            if st.step % args.logging_steps == 0 or at_end:
                if window.steps:
                    last_train = {"step": st.step, "split": "train", **window.summary(), "learning_rate": lr}
                    logger.record(last_train)
                window = _Window()

            # -- evaluate (+ best model, early stopping) -----------------------------------------------------
            if eval_fn is not None and ((args.eval_steps and st.step % args.eval_steps == 0) or at_end):
                model.eval()
                with torch.no_grad(), autocast():
                    metrics = eval_fn(model)
                model.train()
                last_eval = {"step": st.step, "split": "eval", **metrics}
                logger.record(last_eval)
                if args.metric_for_best is not None:
                    if args.metric_for_best not in metrics:
                        raise LitebertError(f"metric_for_best {args.metric_for_best!r} is not among the evaluation "
                                            f"metrics {sorted(metrics)}")
                    value = float(metrics[args.metric_for_best])
                    better = D.broadcast_object(_improved(value, st.best_metric, args.greater_is_better))
                    if better:
                        st.best_metric, st.best_step, st.evals_without_improvement = value, st.step, 0
                        if on_best is not None and dist.is_main:
                            on_best(D.unwrap_model(model), metrics, st.step)
                    else:
                        st.evals_without_improvement += 1
                        patience = args.early_stopping_patience
                        if patience is not None and st.evals_without_improvement >= patience:
                            logger.text(f"early stopping at step {st.step}: {args.metric_for_best} has not improved "
                                        f"for {patience} evaluations (best {st.best_metric} at step {st.best_step})")
                            stopped_early = True

            # -- checkpoint -------------------------------------------------------------------------------------
            if (args.save_steps and st.step % args.save_steps == 0) or at_end or stopped_early:
                if st.bad_in_row and not (at_end or stopped_early):
                    # keep "the last good checkpoint" good: never save in the middle of a non-finite streak
                    logger.text(f"step {st.step}: checkpoint postponed (the last step was not finite)")
                else:
                    last_ckpt = save(st.step)
            if stopped_early:
                break
    finally:
        bar.close()
        logger.close()
    if last_ckpt is None and ckpt_path is not None:
        last_ckpt = ckpt_path
    return TrainResult(step=st.step, epoch=st.epoch, skipped_steps=st.skipped_steps, stopped_early=stopped_early,
                       best_metric=st.best_metric, best_step=st.best_step, last_train=last_train,
                       last_eval=last_eval, last_checkpoint=last_ckpt, seconds=time.perf_counter() - t_start)


class _Window:
    """Sums over the steps since the last log record (already reduced over micro-batches and ranks)."""

    def __init__(self) -> None:
        self.steps = 0
        self.sums: dict[str, float] = {}
        self.units: dict[str, float] = {}
        self.ratios: dict[str, list[float]] = {}
        self.grad_norm = 0.0
        self.tokens = 0.0
        self.seconds = 0.0

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
        terms = {t: self.sums[t] / max(self.units[t], 1.0) for t in sorted(self.sums)}
        rec = {"loss": sum(terms.values())}
        rec.update({t: v for t, v in terms.items() if t != "loss"})
        rec.update({n: num / den if den else float("nan") for n, (num, den) in sorted(self.ratios.items())})
        rec["grad_norm"] = self.grad_norm / self.steps
        rec["tokens_per_second"] = self.tokens / self.seconds if self.seconds > 0 else 0.0
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
