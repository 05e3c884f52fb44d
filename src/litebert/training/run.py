"""The run layer shared by the commands that train (``pretrain``, ``finetune``, and those to come).

What every run does around the training loop, in one place:

- :func:`start` / :func:`teardown`: the process group under ``torchrun`` (one process: nothing to do);
- :func:`resolve_resume`: the output-directory policy and resume resolution. A fresh run (``resume=None``) into a
  directory that holds checkpoints is refused (nothing is overwritten); ``"auto"`` picks the newest complete
  checkpoint in ``OUTPUT/checkpoints`` (rank 0 decides, every rank gets the same path; none: a fresh start); a
  path must be a checkpoint directory. The training loop calls it too, so both agree;
- :func:`resolve_run_precision`: ``--precision`` resolved for this device (:mod:`litebert.precision`); a resumed
  run passes the precision its checkpoint records, so ``auto`` keeps it;
- :func:`write_run_settings`: ``OUTPUT/run_settings.json``, the resolved settings of the run under
  ``"<command>_config"`` (what ``litebert <command> --config run_settings.json`` reads back) plus the caller's
  record (world size, device, model config ...), the versions, the command line and the start time. A resumed
  run keeps the original file and writes ``run_settings.resume-step-N.json`` beside it;
- ``final/`` and ``best/`` are installed with :func:`litebert.fileio.atomic_directory` (a temporary directory
  swapped in), so a reader never sees a half-written model directory.
"""

from __future__ import annotations

import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import torch

from litebert.errors import LitebertError
from litebert.fileio import atomic_write_json
from litebert.precision import PrecisionChoice, resolve_precision
from litebert.settings import to_dict
from litebert.training import distributed as D
from litebert.training import state as S


def start(device: str | None = None) -> D.DistInfo:
    """Join the process group under ``torchrun`` (one process: nothing to join) and pick the device."""
    return D.init_distributed(device)


def teardown(sync: bool = False) -> None:
    """Leave the process group (no-op without one); call it in a ``finally`` of the run, and with ``sync=True``
    (all ranks meet at a barrier first) where every rank is known to get there: see
    :func:`litebert.training.distributed.destroy_distributed`."""
    D.destroy_distributed(sync)


def resolve_resume(
    output_dir: str | os.PathLike,
    resume: str | os.PathLike | None,
    dist: D.DistInfo | None = None,
    *,
    verify: bool = False,
) -> Path | None:
    """The checkpoint a run continues from, or None for a fresh start (see the module docstring).

    ``verify`` also checks the checkpoint's sizes and checksums now, before the run writes anything.

    Raises:
        LitebertError: a fresh run into a directory with checkpoints; a ``resume`` path that is not a directory;
            (``verify``) an incomplete or corrupted checkpoint.
    """
    out = Path(output_dir)
    if resume is None:
        existing = S.list_checkpoints(out, warn=False)
        if existing:
            raise LitebertError(
                f"{out} already holds checkpoints (newest {existing[-1][1].name}); pass "
                "--resume auto to continue, or choose another --output (nothing was overwritten)"
            )
        return None
    if str(resume) == "auto":
        is_main = dist is None or dist.is_main
        path = D.broadcast_object(S.find_latest_checkpoint(out) if is_main else None)
    else:
        path = Path(resume)
        if not path.is_dir():
            raise LitebertError(f"--resume {path}: no such checkpoint directory")
    if path is not None and verify:
        S.verify_checkpoint(path)
    return path


def resolve_run_precision(requested: str, device: torch.device, resume_from: Path | None) -> PrecisionChoice:
    """:func:`litebert.precision.resolve_precision` for a training run: when it resumes from ``resume_from``, the
    precision recorded in that checkpoint (``trainer_state.json`` ``extra.precision``) is what ``auto`` keeps.
    Callers store ``choice.precision`` in the loop's ``extra_state`` under ``"precision"``."""
    recorded = S.checkpoint_precision(resume_from) if resume_from is not None else None
    return resolve_precision(requested, device, checkpoint_precision=recorded)


def run_settings(command: str, cfg: Any, record: dict | None = None) -> dict:
    """The content of ``run_settings.json``: ``{"command", "<command>_config": settings, **record, "versions",
    "argv", "started"}``."""
    return {
        "command": command,
        f"{command}_config": to_dict(cfg),
        **(record or {}),
        "versions": {"python": platform.python_version(), "torch": torch.__version__},
        "argv": sys.argv,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def write_run_settings(output_dir: str | os.PathLike, settings: dict, resumed_from: Path | None = None) -> Path:
    """Write ``settings`` (:func:`run_settings`) to ``OUTPUT/run_settings.json`` (atomically), or, for a resumed
    run, to ``run_settings.resume-<checkpoint>.json`` so that the original stays. Returns the path."""
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    name = "run_settings.json" if resumed_from is None else f"run_settings.resume-{resumed_from.name}.json"
    return atomic_write_json(out / name, settings, sort_keys=False, default=str)


__all__ = ["resolve_resume", "resolve_run_precision", "run_settings", "start", "teardown", "write_run_settings"]
