"""Optimizers and learning-rate schedules for ALBERT pretraining and fine-tuning.

* :class:`Lamb` — LAMB exactly as docs/algorithms.md §4 (You et al. 2019, "Large Batch Optimization for Deep Learning:
  Training BERT in 76 minutes", arXiv:1904.00962; google-research/albert ``lamb_optimizer.py``).
* :func:`build_param_groups` — which parameters get weight decay and the trust ratio, decided once from the
  parameter *names* (``LayerNorm``, ``layer_norm``, ``bias`` are excluded), as the official code does with
  ``exclude_from_weight_decay`` / ``exclude_from_layer_adaptation``.
* :func:`build_optimizer` — ``"lamb"`` or ``"adamw"`` (``torch.optim.AdamW``) over those groups.
* :func:`build_scheduler` — linear warmup from 0 to the peak, then polynomial decay (power 1 = linear) to 0.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import NamedTuple

import torch
from torch import nn

from litebert.errors import LitebertError

#: the optimizers :func:`build_optimizer` builds (the choices of every command's ``--optimizer``)
OPTIMIZERS = ("lamb", "adamw")

#: Substrings of parameter names that get neither weight decay nor the LAMB trust ratio (docs/algorithms.md §4).
NO_DECAY_PATTERNS: tuple[str, ...] = ("LayerNorm", "layer_norm", "bias")


class Lamb(torch.optim.Optimizer):
    """LAMB: Adam-style moments, decoupled weight decay, and a per-parameter trust ratio.

    For a parameter ``w`` with gradient ``g`` (already clipped by the caller), per step::

        m = β1·m + (1−β1)·g;   v = β2·v + (1−β2)·g²
        (bias_correction: m̂ = m/(1−β1^t), v̂ = v/(1−β2^t); else m̂ = m, v̂ = v — the official code has none)
        u = m̂ / (√v̂ + ε);      if weight_decay: u += λ·w
        r = ‖w‖/‖u‖ if adapt and ‖w‖ > 0 and ‖u‖ > 0 else 1          (zero-norm guard)
        w −= η·r·u

    so for adapted parameters ``‖Δw‖ = η·‖w‖`` exactly (whenever both norms are positive). Norms are Frobenius
    norms over the whole tensor; a shared (tied) weight is one parameter and gets one trust ratio.

    Param-group options: ``lr`` (η), ``betas`` (β1, β2), ``eps`` (ε), ``weight_decay`` (λ), ``adapt`` (apply the
    trust ratio), ``bias_correction``. Use :func:`build_param_groups` to set ``weight_decay=0, adapt=False`` for
    LayerNorm and bias parameters. Defaults are docs/algorithms.md §4's: β = (0.9, 0.999), ε = 1e-6, λ = 0.01.

    The step never reads a number back to the host (a GPU never waits for it): each parameter's step count ``t``
    is a float64 tensor on the parameter's device (``state["step"]``; a checkpoint that holds it on the CPU is
    moved on the first step).

    ``foreach=True`` (default) updates the tensors of all the groups that share device, dtype, ``betas``, ``eps``
    and ``bias_correction`` with one set of ``torch._foreach_*`` kernels, whatever their ``lr``, ``weight_decay``
    and ``adapt`` (a step launched one set per group before): the step counts, moments and ``u`` once for all; the
    weight decay one kernel per distinct λ; both norms of every adapted tensor in one ``torch._foreach_norm``, their
    trust ratios in one vectorized ``torch.where`` over the stacked norms, applied with one ``torch._foreach_mul_``;
    ``w −= η·u`` one kernel (float lrs that differ between groups: one more). On albert-base's two groups that is 17
    ATen operations a step, 25 with ``found_inf`` set, against 30 and 60 with one set per group
    (``benchmarks/bench_optim.py`` counts them). On a GPU the trust ratios, a list of 0-d tensors, still take one
    small kernel per adapted tensor: torch's multi-tensor kernel needs tensors of equal shapes. DTensors (FSDP) are
    merged only across groups with the same ``lr``. ``foreach=False`` is the one-tensor-at-a-time reference of the
    same arithmetic.

    A group's ``lr`` is a Python float, or a 0-d float32 tensor on the parameters' device, read by the kernels when
    they run: what a step captured in a CUDA graph needs (:mod:`litebert.training.cuda_graph` fills it before each
    replay); the update is then ``w −= (η·r)·u`` instead of ``w −= η·(r·u)``, equal up to rounding (also where
    float lrs differ between the groups of one set of kernels).

    Skipping a step on the device: when the attribute ``found_inf`` is set (a float tensor of one element on the
    parameters' device, nonzero = skip; the protocol of ``torch.amp.GradScaler`` and torch's fused optimizers), a
    skipped step leaves weights, moments and step counts exactly as they were, without the host looking at the flag;
    the gradients of a skipped step are zeroed (they may hold inf/NaN). Sparse gradients are not supported
    (``RuntimeError``).
    """

    def __init__(
        self,
        params: Iterable,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-6,
        weight_decay: float = 0.01,
        adapt: bool = True,
        bias_correction: bool = False,
        foreach: bool = True,
    ) -> None:
        if not lr >= 0.0:
            raise ValueError(f"Lamb: lr must be >= 0, got {lr}")
        if not 0.0 <= betas[0] < 1.0 or not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Lamb: betas must be in [0, 1), got {betas}")
        if not eps >= 0.0:
            raise ValueError(f"Lamb: eps must be >= 0, got {eps}")
        if not weight_decay >= 0.0:
            raise ValueError(f"Lamb: weight_decay must be >= 0, got {weight_decay}")
        defaults = dict(
            lr=lr,
            betas=tuple(betas),
            eps=eps,
            weight_decay=weight_decay,
            adapt=adapt,
            bias_correction=bias_correction,
            foreach=foreach,
        )
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        found_inf = getattr(self, "found_inf", None)
        skips: dict[torch.device, _Skip] = {}

        def skip_on(device: torch.device) -> _Skip | None:
            if found_inf is None:
                return None
            if device not in skips:  # 1 = apply this step, 0 = skip it (on the device: no host read)
                ok = found_inf.reshape(()).to(device) == 0
                skips[device] = _Skip(ok, ok.float(), ok.to(torch.int64), ok.to(torch.float64))
            return skips[device]

        buckets: dict[tuple, tuple[list, list]] = {}  # the tensors one set of foreach kernels updates: adapted, others
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.grad.is_sparse:
                    raise RuntimeError("Lamb does not support sparse gradients")
                state = self._state_on_device(p)
                if group["foreach"]:
                    buckets.setdefault(_bucket_key(group, p), ([], []))[0 if group["adapt"] else 1].append((p, group))
                    continue
                skip = skip_on(p.device)
                if skip is not None:  # a skipped step's gradient may hold inf/NaN: zeroed, so the moments stay
                    _zero_unless([p.grad], skip.keep_int)
                m, v, t = state["exp_avg"], state["exp_avg_sq"], state["step"]
                _lamb_single(p, p.grad, m, v, t, **_group_kwargs(group), keep=None if skip is None else skip.keep)
        for (device, _, betas, eps, bias_correction, *_), (adapted, others) in buckets.items():
            entries = adapted + others
            states = [self.state[p] for p, _ in entries]
            _lamb_foreach(
                [p for p, _ in entries],
                [p.grad for p, _ in entries],
                [s["exp_avg"] for s in states],
                [s["exp_avg_sq"] for s in states],
                [s["step"] for s in states],
                lrs=[g["lr"] for _, g in entries],
                weight_decays=[g["weight_decay"] for _, g in entries],
                n_adapt=len(adapted),
                beta1=betas[0],
                beta2=betas[1],
                eps=eps,
                bias_correction=bias_correction,
                skip=skip_on(device),
                consts=self._constants(device, betas),
            )
        return loss

    def _state_on_device(self, p: torch.Tensor) -> dict:
        """``p``'s state, made at its first step; a step count a checkpoint holds on the CPU moved to ``p``'s device."""
        state = self.state[p]
        if len(state) == 0:
            state["step"] = torch.zeros((), dtype=torch.float64, device=p.device)
            state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        elif state["step"].device != p.device:  # a checkpoint written before the count lived on the device
            state["step"] = state["step"].to(p.device, torch.float64)
        return state

    def _constants(self, device: torch.device, betas: tuple[float, float]) -> torch.Tensor:
        """``(β1, β2, 1, 1)`` as a float32 tensor on ``device``, made once (fill kernels: nothing copied from the
        host) and kept on the optimizer, keyed by its values: the step's factors ``where(ok, β, 1)`` in one kernel,
        and the trust ratio's 1."""
        cache = self.__dict__.setdefault("_device_constants", {})
        key = (device, *betas)
        if key not in cache:
            consts = torch.ones(4, dtype=torch.float32, device=device)
            consts[0].fill_(betas[0])
            consts[1].fill_(betas[1])
            cache[key] = consts
        return cache[key]


class _Skip(NamedTuple):
    """A step's skip flag on one device, in each type the step needs it in (``found_inf``; 1 = apply, 0 = skip)."""

    ok: torch.Tensor  # 0-d bool
    keep: torch.Tensor  # 0-d float32
    keep_int: torch.Tensor  # 0-d int64, for :func:`_zero_unless`
    keep_step: torch.Tensor  # 0-d float64, the step counts' increment


def _group_kwargs(group: dict) -> dict:
    return dict(
        lr=group["lr"],
        beta1=group["betas"][0],
        beta2=group["betas"][1],
        eps=group["eps"],
        weight_decay=group["weight_decay"],
        adapt=group["adapt"],
        bias_correction=group["bias_correction"],
    )


def _bucket_key(group: dict, p: torch.Tensor) -> tuple:
    """The tensors of all groups with the same key are updated by one set of foreach kernels: same device and dtype,
    and the hyperparameters that enter every tensor's arithmetic; ``lr``, ``weight_decay`` and ``adapt`` may differ.
    DTensors (FSDP) are merged only where ``lr`` is the same too: a per-tensor vector of learning rates would be a
    plain tensor of more than one element among DTensors, which DTensor refuses."""
    key = (p.device, p.dtype, tuple(group["betas"]), group["eps"], group["bias_correction"])
    if hasattr(p, "to_local"):
        lr = group["lr"]
        key += ("dtensor", id(lr) if isinstance(lr, torch.Tensor) else lr)
    return key


#: an integer type of each floating-point element size (bytes), to zero a tensor through its bit pattern
_SAME_SIZE_INT = {2: torch.int16, 4: torch.int32, 8: torch.int64}


def _zero_unless(tensors: list[torch.Tensor], keep: torch.Tensor) -> None:
    """``t *= keep`` (a 0-d 0/1 tensor) in place for every tensor, also where ``t`` holds inf or NaN: in floating
    point 0·NaN is NaN, so the bit patterns are multiplied as integers (all-zero bits are +0.0). One multi-tensor
    kernel, no host read. DTensors (FSDP) are zeroed through their local shard."""
    local = [t.to_local() if hasattr(t, "to_local") else t for t in tensors]
    torch._foreach_mul_([t.view(_SAME_SIZE_INT[t.element_size()]) for t in local], keep.to(torch.int64))


def _bias_corrections(steps, beta1: float, beta2: float, dtype: torch.dtype):
    """Per tensor ``1 − β1^t`` and ``1 − β2^t`` (float64, then ``dtype``) from the step-count tensors."""
    t = torch.stack(steps)  # (N,) float64
    return (1 - beta1**t).to(dtype).unbind(0), (1 - beta2**t).to(dtype).unbind(0)


def _lamb_single(p, g, m, v, t, *, lr, beta1, beta2, eps, weight_decay, adapt, bias_correction, keep) -> None:
    """One parameter's LAMB update (the reference path; :func:`_lamb_foreach` is its multi-tensor twin)."""
    t.add_(1 if keep is None else keep)
    if keep is not None:  # a skipped step leaves the moments as they are (its gradient is zero, see the caller)
        m.mul_(torch.where(keep > 0, beta1, 1.0)).add_(g, alpha=1 - beta1)
        v.mul_(torch.where(keep > 0, beta2, 1.0)).addcmul_(g, g, value=1 - beta2)
    else:
        m.mul_(beta1).add_(g, alpha=1 - beta1)
        v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
    if bias_correction:
        (bc1,), (bc2,) = _bias_corrections([t], beta1, beta2, p.dtype)
        denom = (v / bc2).sqrt_().add_(eps)
        u = (m / bc1).div_(denom)
    else:
        u = m / v.sqrt().add_(eps)
    if weight_decay != 0:
        u.add_(p, alpha=weight_decay)
    if adapt:
        w_norm = torch.linalg.vector_norm(p)
        u_norm = torch.linalg.vector_norm(u)
        ratio = torch.where((w_norm > 0) & (u_norm > 0), w_norm / u_norm, torch.ones_like(w_norm))
        u.mul_(ratio if keep is None else ratio * keep)
    elif keep is not None:
        u.mul_(keep)
    if isinstance(lr, torch.Tensor):  # read on the device (a CUDA graph replays it with each step's value)
        p.add_(u.mul_(-lr))
    else:
        p.add_(u, alpha=-lr)


def _lamb_foreach(
    params,
    grads,
    exp_avgs,
    exp_avg_sqs,
    steps,
    *,
    lrs,
    weight_decays,
    n_adapt,
    beta1,
    beta2,
    eps,
    bias_correction,
    skip,
    consts,
) -> None:
    """LAMB for a list of same-device, same-dtype tensors (of any number of groups) with ``torch._foreach_*``
    kernels: the first ``n_adapt`` get the trust ratio; ``lrs`` and ``weight_decays`` are per tensor (floats, an lr
    may be a 0-d tensor); ``consts`` is :meth:`Lamb._constants`; ``skip`` the step's :class:`_Skip` or None."""
    n, na = len(params), n_adapt
    if skip is not None:  # a skipped step's gradients may hold inf/NaN: zeroed, so the moments stay as they are
        _zero_unless(grads, skip.keep_int)
    # keep as a list of 0-d tensors: given one 0-d tensor, _foreach_add_ reads it back to the host (a device sync
    # per call, float32 or float64 alike; torch 2.11, H200, set_sync_debug_mode). _foreach_mul_ with one does not.
    torch._foreach_add_(steps, 1 if skip is None else [skip.keep_step] * n)
    if skip is not None:  # β, or 1 on a skipped step (both in one kernel)
        beta_or_1 = torch.where(skip.ok, consts[:2], consts[2:])
        torch._foreach_mul_(exp_avgs, beta_or_1[0])
        torch._foreach_add_(exp_avgs, grads, alpha=1 - beta1)
        torch._foreach_mul_(exp_avg_sqs, beta_or_1[1])
    else:
        torch._foreach_mul_(exp_avgs, beta1)
        torch._foreach_add_(exp_avgs, grads, alpha=1 - beta1)
        torch._foreach_mul_(exp_avg_sqs, beta2)
    torch._foreach_addcmul_(exp_avg_sqs, grads, grads, value=1 - beta2)
    if bias_correction:
        bc1, bc2 = _bias_corrections(steps, beta1, beta2, params[0].dtype)
        denom = torch._foreach_div(exp_avg_sqs, bc2)
        torch._foreach_sqrt_(denom)
        torch._foreach_add_(denom, eps)
        updates = torch._foreach_div(exp_avgs, bc1)
        torch._foreach_div_(updates, denom)
    else:
        denom = torch._foreach_sqrt(exp_avg_sqs)
        torch._foreach_add_(denom, eps)
        updates = torch._foreach_div(exp_avgs, denom)
    del denom
    for wd, idx in _indices_by(weight_decays).items():  # one kernel per distinct λ
        if wd != 0:
            torch._foreach_add_([updates[i] for i in idx], [params[i] for i in idx], alpha=wd)

    # w += α·f·u: α a host float, −lr where every lr is the same float (else −1, and differing float lrs are one
    # kernel with the lrs as its arguments); f a device scalar per tensor: the trust ratio r (adapted tensors) times
    # keep (a step flagged by found_inf) times lr (where lr is a tensor), or nothing where all three are absent
    host_lrs = [1.0 if isinstance(lr, torch.Tensor) else lr for lr in lrs]
    same_float = all(h == host_lrs[0] for h in host_lrs)
    scales = _device_scales(lrs, None if skip is None else skip.keep)
    if na:
        # every trust ratio at once: both norms of all adapted tensors in one kernel, then (N,) vectors
        norms = torch.stack(torch._foreach_norm([*params[:na], *updates[:na]]))
        w, u = norms[:na], norms[na:]
        ratios = torch.where(torch.minimum(w, u) > 0, w / u, consts[2])
        if any(s is not scales[0] for s in scales[:na]):  # adapted groups with lrs of their own, one a tensor
            ratios = ratios * torch.stack([consts[2] if s is None else s for s in scales[:na]])
        elif scales[0] is not None:
            ratios = ratios * scales[0]
        # a list of 0-d tensors: on a GPU one kernel per tensor (the multi-tensor kernel needs equal shapes)
        torch._foreach_mul_(updates[:na], ratios.unbind(0))
    for scale, idx in _indices_by(scales[na:], offset=na).items():  # one kernel per distinct scale
        if scale is not None:
            torch._foreach_mul_([updates[i] for i in idx], scale)
    if not same_float:
        torch._foreach_mul_(updates, host_lrs)
    torch._foreach_add_(params, updates, alpha=-host_lrs[0] if same_float else -1.0)


def _device_scales(lrs: list, keep: torch.Tensor | None) -> list[torch.Tensor | None]:
    """Per tensor the device factor of its update other than the trust ratio: ``keep·lr``, ``keep`` or ``lr`` (a
    tensor lr) or None (a float lr and no skip flag); one 0-d tensor per distinct lr tensor, shared."""
    made: dict[int, torch.Tensor | None] = {}
    out = []
    for lr in lrs:
        on_device = lr if isinstance(lr, torch.Tensor) else None
        if id(on_device) not in made:
            made[id(on_device)] = on_device if keep is None else keep if on_device is None else keep * on_device
        out.append(made[id(on_device)])
    return out


def _indices_by(values: list, offset: int = 0) -> dict:
    """``{value: [i + offset, ...]}`` in first-seen order; tensors by identity."""
    out: dict = {}
    for i, value in enumerate(values):
        out.setdefault(value, []).append(i + offset)
    return out


def skips_on_device(optimizer: torch.optim.Optimizer) -> bool:
    """Whether ``optimizer.step()`` honours a ``found_inf`` attribute, skipping a flagged step on the device
    without a host read: :class:`Lamb`, and torch's fused optimizers (``fused=True``)."""
    return isinstance(optimizer, Lamb) or any(group.get("fused") for group in optimizer.param_groups)


def is_excluded(name: str, patterns: Sequence[str] = NO_DECAY_PATTERNS) -> bool:
    """True when parameter ``name`` gets neither weight decay nor the trust ratio (docs/algorithms.md §4)."""
    return any(pat in name for pat in patterns)


def build_param_groups(model: nn.Module, weight_decay: float, exclude: Sequence[str] = NO_DECAY_PATTERNS) -> list[dict]:
    """Split ``model``'s trainable parameters into a decayed/adapted group and an excluded group, by name.

    Returns ``[{"params": [...], "names": [...], "weight_decay": weight_decay, "adapt": True},
    {"params": [...], "names": [...], "weight_decay": 0.0, "adapt": False}]`` (empty groups dropped).
    ``named_parameters()`` lists a shared/tied parameter once, under its first name, so it gets one trust ratio.
    The ``adapt`` key is ignored by AdamW.
    """
    decay, decay_names, other, other_names = [], [], [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        if is_excluded(name, exclude):
            other.append(p)
            other_names.append(name)
        else:
            decay.append(p)
            decay_names.append(name)
    groups = [
        {"params": decay, "names": decay_names, "weight_decay": weight_decay, "adapt": True},
        {"params": other, "names": other_names, "weight_decay": 0.0, "adapt": False},
    ]
    return [g for g in groups if g["params"]]


def build_optimizer(
    model: nn.Module,
    name: str = "lamb",
    lr: float = 1.76e-3,
    weight_decay: float = 0.01,
    betas: tuple[float, float] = (0.9, 0.999),
    eps: float = 1e-6,
    bias_correction: bool = False,
    exclude: Sequence[str] = NO_DECAY_PATTERNS,
) -> torch.optim.Optimizer:
    """Build ``"lamb"`` (:class:`Lamb`) or ``"adamw"`` (``torch.optim.AdamW``) over :func:`build_param_groups`.

    AdamW always uses its own bias correction (that is torch's AdamW); on a GPU it is torch's fused AdamW (one
    kernel for the step, and a non-finite step skipped on the device: :func:`skips_on_device`). Raises
    :class:`LitebertError` for an unknown ``name``. For FSDP2 build the optimizer after ``fully_shard`` (parameters
    become DTensors).
    """
    groups = build_param_groups(model, weight_decay, exclude)
    if name == "lamb":
        return Lamb(groups, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, bias_correction=bias_correction)
    if name == "adamw":
        for g in groups:
            g.pop("adapt", None)
        params = [p for g in groups for p in g["params"]]
        fused = all(p.is_cuda and type(p) is nn.Parameter for p in params) or None  # not DTensors (FSDP)
        return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, fused=fused)
    raise LitebertError(f"unknown optimizer {name!r}: expected 'lamb' or 'adamw'")


class WarmupPolyDecay:
    """Learning-rate multiplier after ``step`` scheduler steps (:class:`StepSchedule`'s multiplier).

    ``step < warmup_steps``: ``step / warmup_steps`` (linear from 0; as google-research ``optimization.py`` and
    transformers, the first update uses lr 0). Then ``((max_steps − step) / (max_steps − warmup_steps))^power``,
    clamped at 0 from ``max_steps`` on: the peak at the end of warmup, 0 at ``max_steps``, linear for power 1.
    """

    def __init__(self, warmup_steps: int, max_steps: int, power: float = 1.0) -> None:
        if warmup_steps < 0 or max_steps <= 0:
            raise LitebertError(f"schedule: need warmup_steps >= 0 and max_steps > 0, got {warmup_steps}, {max_steps}")
        if power <= 0:
            raise LitebertError(f"schedule: power must be > 0, got {power}")
        self.warmup_steps = int(warmup_steps)
        self.max_steps = int(max_steps)
        self.power = float(power)

    def __call__(self, step: int) -> float:
        if step < self.warmup_steps:
            return step / self.warmup_steps
        if step >= self.max_steps:
            return 0.0
        remaining = (self.max_steps - step) / max(1, self.max_steps - self.warmup_steps)
        return math.pow(remaining, self.power)


class StepSchedule:
    """Learning rate as a pure function of the step: after ``step`` scheduler steps, group ``i`` uses
    ``base_lrs[i] × multiplier(step)`` (the formula of ``LambdaLR``, so the values are bit-identical to it).

    Its state is the step alone (``{"last_epoch": step}``, the key ``LambdaLR`` uses, so older checkpoints load):
    a resumed run follows the schedule and peak learning rates of *its* settings, e.g. a larger ``--max-steps``.
    """

    def __init__(self, optimizer: torch.optim.Optimizer, multiplier) -> None:
        self.optimizer = optimizer
        self.multiplier = multiplier
        self.base_lrs = [group["lr"] for group in optimizer.param_groups]
        self.last_epoch = 0
        self._apply()

    def _apply(self) -> None:
        for group, base in zip(self.optimizer.param_groups, self.base_lrs):
            group["lr"] = base * self.multiplier(self.last_epoch)

    def step(self) -> None:
        self.last_epoch += 1
        self._apply()

    def get_last_lr(self) -> list[float]:
        return [group["lr"] for group in self.optimizer.param_groups]

    def state_dict(self) -> dict:
        return {"last_epoch": self.last_epoch}

    def load_state_dict(self, state: dict) -> None:
        self.last_epoch = int(state["last_epoch"])
        self._apply()


def build_scheduler(
    optimizer: torch.optim.Optimizer, warmup_steps: int, max_steps: int, power: float = 1.0
) -> StepSchedule:
    """:class:`StepSchedule` with :class:`WarmupPolyDecay` (docs/algorithms.md §4: warmup then
    polynomial decay to 0 at ``max_steps``)."""
    return StepSchedule(optimizer, WarmupPolyDecay(warmup_steps, max_steps, power))
