"""Training-state checkpoints (docs/algorithms.md §5; torchtitan-style): complete, atomic, resumable.

Layout of ``OUTPUT/checkpoints/step-N/``::

    model.pt              model state dict (HF parameter names; full, unsharded)
    optimizer.pt          optimizer state dict
    scheduler.pt          LR scheduler state dict
    scaler.pt             fp16 GradScaler state (only with --precision fp16)
    rng_state_rank{r}.pt  python / numpy / torch (CPU) / CUDA RNG states of rank r, one file per rank
    trainer_state.json    step, epoch, data position, counters, best metric, training clocks (wall and CPU seconds
                          so far), world size, caller's extra state
    COMPLETE              written last: JSON with each file's size and sha256

Everything is written into ``checkpoints/.tmp-step-N/`` and renamed to ``step-N`` once sealed, so a kill at any
moment leaves either no ``step-N`` or a complete one. A ``step-N`` without ``COMPLETE`` (a copy cut short, a crash
on a file system without atomic rename) is ignored with a warning; a file whose size or checksum does not match
``COMPLETE`` or that cannot be read is a :class:`LitebertError` naming it.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch

from litebert.errors import LitebertError
from litebert.fileio import atomic_write, atomic_write_json, install_directory, read_json, sha256_file

COMPLETE_MARKER = "COMPLETE"
_STEP_RE = re.compile(r"^step-(\d+)$")

# Test-only fault injection: LITEBERT_TEST_KILL_DURING_SAVE=N makes the process SIGKILL itself while writing the
# checkpoint of step N (after the model and optimizer files, before sealing), to prove that resume survives it.
_KILL_ENV = "LITEBERT_TEST_KILL_DURING_SAVE"


def checkpoints_dir(output_dir: str | Path) -> Path:
    return Path(output_dir) / "checkpoints"


def _save_file(obj: Any, path: Path) -> None:
    atomic_write(path, lambda p: torch.save(obj, p))


def rng_state(device: torch.device | None = None) -> dict:
    """This process's RNG states: python ``random``, numpy global, torch CPU, and the CUDA state of ``device`` only
    (this rank's GPU; saving every visible GPU's state made a resume with fewer GPUs per process fail)."""
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if device is not None and device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def set_rng_state(state: dict, device: torch.device | None = None) -> None:
    """Restore :func:`rng_state`'s states; the CUDA one into ``device``. Older checkpoints hold a list with every
    visible GPU's state: the entry of ``device``'s index is used when it exists (else the CUDA RNG is left as is,
    with a warning)."""
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    cuda = state.get("cuda")
    if cuda is None or device is None or device.type != "cuda":
        return
    if isinstance(cuda, (list, tuple)):
        index = device.index or 0
        if index >= len(cuda):
            warnings.warn(
                f"the checkpoint holds CUDA RNG states of {len(cuda)} GPU(s), none for {device}: its CUDA "
                "RNG starts from the current state",
                stacklevel=2,
            )
            return
        cuda = cuda[index]
    torch.cuda.set_rng_state(cuda, device)


def list_checkpoints(output_dir: str | Path, *, warn: bool = True) -> list[tuple[int, Path]]:
    """Complete checkpoints under ``output_dir/checkpoints`` as ``(step, path)``, oldest first.

    Directories named ``step-N`` without ``COMPLETE`` are skipped (with a warning when ``warn``); temporary
    ``.tmp-*`` directories (a save cut short) are never listed.
    """
    root = checkpoints_dir(output_dir)
    found = []
    if not root.is_dir():
        return found
    for child in root.iterdir():
        m = _STEP_RE.match(child.name)
        if not m or not child.is_dir():
            continue
        if not (child / COMPLETE_MARKER).is_file():
            if warn:
                warnings.warn(f"ignoring incomplete checkpoint {child} (no {COMPLETE_MARKER} marker)", stacklevel=2)
            continue
        found.append((int(m.group(1)), child))
    return sorted(found)


def find_latest_checkpoint(output_dir: str | Path) -> Path | None:
    """The newest complete checkpoint directory, or ``None``."""
    ckpts = list_checkpoints(output_dir)
    return ckpts[-1][1] if ckpts else None


def save_checkpoint(
    output_dir: str | Path,
    step: int,
    *,
    rank: int,
    world_size: int,
    model_state: dict | None,
    optimizer_state: dict | None,
    scheduler_state: dict | None,
    trainer_state: dict,
    scaler_state: dict | None = None,
    extra_files=None,
    save_total_limit: int | None = None,
    barrier=lambda: None,
    device: torch.device | None = None,
) -> Path:
    """Write ``checkpoints/step-{step}/`` atomically; call on EVERY rank (each writes its RNG file).

    Rank 0 writes the model/optimizer/scheduler/trainer state (the ``*_state`` arguments are only read there),
    ``extra_files(tmp_dir)`` if given, then seals with ``COMPLETE`` and renames; other ranks only write
    ``rng_state_rank{r}.pt`` (with the CUDA RNG state of ``device`` when it is a GPU). ``barrier`` synchronises ranks (a no-op in one process). Returns the final path.
    Older checkpoints beyond ``save_total_limit`` (newest kept) are removed after the rename.
    """
    root = checkpoints_dir(output_dir)
    final = root / f"step-{step}"
    tmp = root / f".tmp-step-{step}"
    if rank == 0:
        root.mkdir(parents=True, exist_ok=True)
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir()
    barrier()
    try:
        _save_file(rng_state(device), tmp / f"rng_state_rank{rank}.pt")
        if rank == 0:
            _save_file(model_state, tmp / "model.pt")
            _save_file(optimizer_state, tmp / "optimizer.pt")
            if os.environ.get(_KILL_ENV) == str(step):
                os.kill(os.getpid(), 9)
            _save_file(scheduler_state, tmp / "scheduler.pt")
            if scaler_state is not None:
                _save_file(scaler_state, tmp / "scaler.pt")
            state = dict(trainer_state, step=step, world_size=world_size)
            atomic_write_json(tmp / "trainer_state.json", state)
            if extra_files is not None:
                extra_files(tmp)
    except OSError as exc:  # a full disk, an I/O error: the partial checkpoint goes, the earlier ones stay
        shutil.rmtree(tmp, ignore_errors=True)
        earlier = [p.name for _, p in list_checkpoints(output_dir, warn=False)]
        kept = f"the earlier checkpoints ({', '.join(earlier)}) are intact" if earlier else "no earlier checkpoint"
        raise LitebertError(
            f"checkpoint step-{step} could not be written: {exc}; {kept}: free space, then rerun with --resume auto"
        ) from None
    barrier()
    if rank == 0:
        files = {}
        for p in sorted(tmp.rglob("*")):
            if p.is_file():
                files[str(p.relative_to(tmp))] = {"bytes": p.stat().st_size, "sha256": sha256_file(p)}
        atomic_write_json(tmp / COMPLETE_MARKER, {"step": step, "files": files})
        # replaces a stale copy of the same step (e.g. saved again after a resume)
        install_directory(tmp, final)
        if save_total_limit is not None and save_total_limit > 0:
            for _, old in list_checkpoints(output_dir, warn=False)[:-save_total_limit]:
                shutil.rmtree(old, ignore_errors=True)
    barrier()
    return final


def verify_checkpoint(path: str | Path) -> dict:
    """Check ``path`` against its ``COMPLETE`` marker; return the marker. ``LitebertError`` naming the bad file."""
    path = Path(path)
    if not path.is_dir():
        raise LitebertError(f"checkpoint {path} does not exist or is not a directory")
    marker = path / COMPLETE_MARKER
    if not marker.is_file():
        raise LitebertError(f"checkpoint {path} is incomplete (no {COMPLETE_MARKER} marker); resume from another one")
    try:
        info = read_json(marker, what="checkpoint marker", expect=dict)
        files = info["files"]
    except (LitebertError, KeyError) as exc:
        raise LitebertError(f"checkpoint marker {marker} is corrupted ({exc})") from None
    for name, meta in files.items():
        f = path / name
        if not f.is_file():
            raise LitebertError(f"checkpoint file {f} is missing")
        if f.stat().st_size != meta["bytes"] or sha256_file(f) != meta["sha256"]:
            raise LitebertError(
                f"checkpoint file {f} is corrupted (size/sha256 differ from {marker.name}); "
                f"resume from an older checkpoint with --resume PATH"
            )
    return info


def _load(path: Path, map_location="cpu"):
    try:
        return torch.load(path, map_location=map_location, weights_only=False)
    except Exception as exc:  # any unpickling failure is a corrupted file to the user
        raise LitebertError(f"cannot read checkpoint file {path}: {exc}") from None


def load_checkpoint(path: str | Path, *, rank: int, world_size: int, map_location="cpu") -> dict:
    """Read a checkpoint written by :func:`save_checkpoint` after :func:`verify_checkpoint`.

    Returns ``{"model", "optimizer", "scheduler", "scaler" (or None), "rng" (this rank's), "rng_rank",
    "trainer_state", "path"}``. Raises :class:`LitebertError` when a file is missing or corrupt. A checkpoint
    written by another number of processes loads too (1 process ↔ DDP ↔ FSDP; the loop carries the data position
    over): a rank without its own RNG file takes rank 0's, and ``rng_rank`` (the rank whose file was read) says so.
    """
    path = Path(path)
    verify_checkpoint(path)
    try:
        trainer_state = read_json(path / "trainer_state.json", what="trainer state", expect=dict)
    except LitebertError as exc:
        raise LitebertError(f"checkpoint file {path / 'trainer_state.json'} is corrupted ({exc})") from None
    rng_rank = rank if (path / f"rng_state_rank{rank}.pt").is_file() else 0
    scaler_file = path / "scaler.pt"
    return {
        "model": _load(path / "model.pt", map_location),
        "optimizer": _load(path / "optimizer.pt", map_location),
        "scheduler": _load(path / "scheduler.pt", map_location),
        "scaler": _load(scaler_file, map_location) if scaler_file.is_file() else None,
        "rng": _load(path / f"rng_state_rank{rng_rank}.pt"),
        "rng_rank": rng_rank,
        "trainer_state": trainer_state,
        "path": path,
    }


def checkpoint_trainer_state(path: str | Path) -> dict:
    """A checkpoint's ``trainer_state.json`` (step, world size, the caller's ``extra`` ...), without loading the rest.
    Raises :class:`LitebertError` when it is missing or not a JSON object."""
    return read_json(Path(path) / "trainer_state.json", what="checkpoint trainer state", expect=dict)


def stopped_early(run_dir: str | Path) -> str | None:
    """How a run whose newest checkpoint was written when the run stopped before its ``max_steps`` (by
    ``--max-minutes``, early stopping) stopped, e.g. ``"at step 280 of 100000 by --max-minutes"``; None when it
    ran to its end, has no checkpoint, or the checkpoint predates the record (``trainer_state.json``'s
    ``stopped``)."""
    found = list_checkpoints(run_dir, warn=False)
    if not found:
        return None
    step, path = found[-1]
    try:
        stopped = checkpoint_trainer_state(path).get("stopped")
    except LitebertError:
        return None
    if not isinstance(stopped, dict) or not isinstance(stopped.get("max_steps"), int) or step >= stopped["max_steps"]:
        return None
    return f"at step {step} of {stopped['max_steps']} by {stopped.get('by')}"


def checkpoint_precision(path: str | Path) -> str | None:
    """The precision (``fp32``/``bf16``/``fp16``) a checkpoint was trained in, from ``trainer_state.json``
    (``extra.precision``, written by pretrain and finetune); None for checkpoints that predate the record.
    Raises :class:`LitebertError` when ``trainer_state.json`` is missing or not a JSON object."""
    value = (checkpoint_trainer_state(path).get("extra") or {}).get("precision")
    return value if isinstance(value, str) else None
