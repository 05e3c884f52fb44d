"""Which floating-point precision a run computes in: ``--precision {auto,fp32,bf16,fp16}``, resolved in one place.

``auto`` (the default of ``pretrain``, ``finetune``, ``evaluate`` and ``predict``) is bf16 autocast where the device
computes bf16 natively and fp32 elsewhere:

- CUDA: ``torch.cuda.is_bf16_supported(including_emulation=False)`` (compute capability ≥ 8.0, or ROCm);
- CPU: torch's own capability table (``torch.cpu.get_capabilities()``, cpuinfo): x86 ``avx512_bf16`` (AVX-512 BF16,
  e.g. AMD Zen 4+, Intel Cooper Lake+) or ``amx_bf16`` (Intel Sapphire Rapids+), ARM ``bf16``/``sve_bf16``
  (Armv8.6-A BF16 instructions), with oneDNN (``torch.backends.mkldnn``) present, since CPU bf16 matmuls run in
  oneDNN. Without these instructions a bf16 matmul is converted and computed in fp32 or with a scalar fallback:
  no faster, and up to ~150× slower than fp32 (measured on an AVX2-only CPU), so ``auto`` never picks it there.

Explicit ``bf16`` (or ``fp16``) on a device without native support runs as asked but warns
(:class:`PrecisionWarning`) that it is emulated and slow. In every precision the master weights, the optimizer state
and the checkpoints stay fp32: only the autocast region (forward, loss) computes in the lower precision.

Resuming: the training checkpoint records the precision it was trained in; ``auto`` on resume means *that*
precision (unless this device cannot compute it natively, then fp32), an explicit value overrides it.

Depends only on torch (it sits beside ``config`` at the bottom of the import order).
"""

from __future__ import annotations

import contextlib
import warnings
from dataclasses import asdict, dataclass

import torch

#: the values of ``--precision``; ``auto`` resolves to one of the others
PRECISIONS = ("auto", "fp32", "bf16", "fp16")
#: what a resolved run computes in
RESOLVED_PRECISIONS = ("fp32", "bf16", "fp16")

_DTYPES = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}
# torch.cpu.get_capabilities() keys that mean "computes this dtype natively" (torch/cpu/__init__.py lists them)
_CPU_NATIVE_FLAGS = {
    "bf16": ("amx_bf16", "avx512_bf16", "sve_bf16", "bf16"),
    "fp16": ("amx_fp16", "avx512_fp16", "fp16_arith"),
}


class PrecisionWarning(UserWarning):
    """Explicit bf16/fp16 on a device that does not compute it natively (emulated: slow)."""


@dataclass(frozen=True)
class PrecisionChoice:
    """The resolved precision of a run.

    Attributes:
        precision: what the run computes in: ``"fp32"``, ``"bf16"`` or ``"fp16"`` (autocast).
        requested: what was asked for (``"auto"`` or one of the above).
        reason: one sentence saying why (printed at the start of a run, stored in ``run_settings.json``).
        native: the device computes ``precision`` natively (always True for fp32).
    """

    precision: str
    requested: str
    reason: str
    native: bool = True

    @property
    def dtype(self) -> torch.dtype | None:
        """The autocast dtype, or None for fp32 (no autocast)."""
        return _DTYPES[self.precision]

    def autocast(self, device: torch.device | str):
        """A context manager: ``torch.autocast(device_type, dtype)`` for bf16/fp16, a no-op for fp32."""
        if self.dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=torch.device(device).type, dtype=self.dtype)

    def to_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        return f"precision {self.precision} (requested {self.requested}: {self.reason})"


def native_support(dtype: str, device: torch.device | str) -> tuple[bool, str]:
    """(does ``device`` compute ``dtype`` ("bf16"/"fp16") natively, a short description of why or why not)."""
    device = torch.device(device)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            return False, "CUDA is not available"
        name = torch.cuda.get_device_name(device)
        if dtype == "bf16":
            ok = torch.cuda.is_bf16_supported(including_emulation=False)
            return ok, f"{name} {'computes' if ok else 'does not compute'} bf16 natively"
        return True, f"{name} computes fp16 natively"
    if device.type == "cpu":
        caps = cpu_capabilities()
        flags = [f for f in _CPU_NATIVE_FLAGS[dtype] if caps.get(f)]
        if not flags:
            arch = caps.get("architecture", "this CPU")
            return False, f"{arch} CPU without {'/'.join(_CPU_NATIVE_FLAGS[dtype][:2])} instructions"
        if not torch.backends.mkldnn.is_available():
            return False, f"CPU has {'+'.join(flags)} but this torch build has no oneDNN (mkldnn)"
        return True, f"CPU has {'+'.join(flags)}"
    return False, f"no native {dtype} check for device type {device.type!r}"


def cpu_capabilities() -> dict:
    """torch's CPU feature table (``torch.cpu.get_capabilities()``, torch ≥ 2.8); ``{}`` on older torch."""
    get = getattr(torch.cpu, "get_capabilities", None)
    return dict(get()) if get is not None else {}


def resolve_precision(
    requested: str, device: torch.device | str, *, checkpoint_precision: str | None = None
) -> PrecisionChoice:
    """The precision a run on ``device`` computes in; see the module docstring for the rules.

    Args:
        requested: one of :data:`PRECISIONS`.
        device: the run's device (``cpu``, ``cuda:0`` …).
        checkpoint_precision: the resolved precision recorded in the checkpoint a run resumes from, if any.
    Raises:
        ValueError: ``requested`` is not one of :data:`PRECISIONS` (the configs validate it first and raise a
            ``LitebertError`` naming the field).
    Warns:
        PrecisionWarning: an explicit bf16/fp16 that this device emulates.
    """
    if requested not in PRECISIONS:
        raise ValueError(f"precision {requested!r}: expected one of {', '.join(PRECISIONS)}")
    if requested == "auto" and checkpoint_precision is not None:
        if checkpoint_precision not in RESOLVED_PRECISIONS:
            raise ValueError(
                f"checkpoint precision {checkpoint_precision!r}: expected one of {', '.join(RESOLVED_PRECISIONS)}"
            )
        if checkpoint_precision == "fp32":
            return PrecisionChoice("fp32", requested, "resumed run: the checkpoint was trained in fp32")
        ok, why = native_support(checkpoint_precision, device)
        if ok:
            return PrecisionChoice(
                checkpoint_precision,
                requested,
                f"resumed run: the checkpoint was trained in {checkpoint_precision}; {why}",
            )
        return PrecisionChoice(
            "fp32",
            requested,
            f"the checkpoint was trained in {checkpoint_precision}, but {why}: "
            f"fp32 (pass --precision {checkpoint_precision} to force it)",
        )
    if requested == "auto":
        ok, why = native_support("bf16", device)
        if ok:
            return PrecisionChoice("bf16", requested, f"{why}: bf16 autocast")
        return PrecisionChoice("fp32", requested, f"{why}: fp32 (bf16 would be emulated)")
    if requested == "fp32":
        return PrecisionChoice("fp32", requested, "asked for")
    ok, why = native_support(requested, device)
    if not ok:
        warnings.warn(
            f"--precision {requested}: {why}, so {requested} is emulated and can be much slower than fp32 "
            f"(use --precision auto or fp32)",
            PrecisionWarning,
            stacklevel=2,
        )
    return PrecisionChoice(requested, requested, f"asked for; {why}", native=ok)
