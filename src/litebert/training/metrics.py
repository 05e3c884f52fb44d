"""What the user sees of a run: log lines, ``OUTPUT/metrics.jsonl``, TensorBoard events in ``OUTPUT/tb/``.

Only rank 0 creates a :class:`MetricsLogger` that writes; on other ranks ``enabled=False`` makes every call a
no-op, so the loop needs no ``if rank == 0`` around logging.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from tqdm.auto import tqdm

from litebert.fileio import atomic_write_text


def format_record(record: dict, prefix: str = "", max_steps: int | None = None) -> str:
    """One greppable line: ``[prefix] train step 100/1000 | loss 7.1234 | mlm_accuracy 0.1234 | lr 1.00e-03``."""
    step = f"{record['step']}/{max_steps}" if max_steps else str(record["step"])
    parts = [f"{prefix + ' ' if prefix else ''}{record['split']} step {step}"]
    for key, value in record.items():
        if key in ("step", "split"):
            continue
        if isinstance(value, float):
            if key == "learning_rate":
                text = f"{value:.3e}"
            elif key == "tokens_per_second":
                text = f"{value:.0f}"
            elif key == "steps_per_second":
                text = f"{value:.2f}"
            elif math.isfinite(value) and abs(value) >= 1e4:
                text = f"{value:.4g}"
            else:
                text = f"{value:.4f}"
        else:
            text = str(value)
        parts.append(f"{key} {text}")
    return " | ".join(parts)


def json_safe(record: dict) -> dict:
    """``record`` with each non-finite float (inf, NaN: not JSON) replaced by None, their keys in ``non_finite``."""
    bad = [k for k, v in record.items() if isinstance(v, float) and not math.isfinite(v)]
    if not bad:
        return record
    return {**{k: (None if k in bad else v) for k, v in record.items()}, "non_finite": bad}


class MetricsLogger:
    """Append JSON records to ``metrics.jsonl``, scalars to TensorBoard, lines to stdout and ``train.log``.

    ``resume_step``: when resuming, records with ``step > resume_step`` left by the interrupted run are dropped
    from ``metrics.jsonl`` first, so the file reads as one uninterrupted run. ``None``: a fresh run (file truncated).
    TensorBoard gets the same cut: the new event file starts with a purge marker at ``resume_step + 1``, which makes
    readers drop the interrupted run's scalars after the checkpoint and keep those of the checkpoint's own step
    (logged and evaluated before it was saved, and not written again).
    """

    def __init__(
        self,
        output_dir: str | Path,
        *,
        enabled: bool = True,
        resume_step: int | None = None,
        prefix: str = "",
        max_steps: int | None = None,
        tensorboard: bool = True,
    ) -> None:
        self.enabled = enabled
        self.prefix = prefix
        self.max_steps = max_steps
        self._tb = None
        if not enabled:
            return
        out = Path(output_dir)
        out.mkdir(parents=True, exist_ok=True)
        self.jsonl_path = out / "metrics.jsonl"
        kept: list[str] = []
        if resume_step is not None and self.jsonl_path.exists():
            for line in self.jsonl_path.read_text().splitlines():
                try:
                    if json.loads(line)["step"] <= resume_step:
                        kept.append(line)
                except (ValueError, KeyError, TypeError):
                    continue  # a line cut short by a kill
        atomic_write_text(self.jsonl_path, "".join(k + "\n" for k in kept))
        self._jsonl = open(self.jsonl_path, "a")  # noqa: SIM115 - open for the whole run, closed by close()
        self._log = open(out / "train.log", "a")  # noqa: SIM115
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter

                purge = resume_step + 1 if resume_step is not None else None  # purges steps >= purge
                self._tb = SummaryWriter(log_dir=str(out / "tb"), purge_step=purge)
            except ImportError:  # tensorboard is a dependency, but do not die over a missing log sink
                self._tb = None

    def text(self, line: str) -> None:
        """A free-form line to stdout (above the progress bar) and ``train.log``."""
        if not self.enabled:
            return
        tqdm.write(line, file=sys.stdout)
        self._log.write(line + "\n")
        self._log.flush()

    def record(self, record: dict) -> None:
        """Log one ``{"step", "split", ...}`` record everywhere. ``metrics.jsonl`` stays strict JSON: a non-finite
        value is written as ``null`` and its key listed under ``"non_finite"``."""
        if not self.enabled:
            return
        self._jsonl.write(json.dumps(json_safe(record), allow_nan=False) + "\n")
        self._jsonl.flush()
        self.text(format_record(record, self.prefix, self.max_steps))
        if self._tb is not None:
            for key, value in record.items():
                if key not in ("step", "split") and isinstance(value, (int, float)) and not isinstance(value, bool):
                    self._tb.add_scalar(f"{record['split']}/{key}", value, record["step"])
            self._tb.flush()

    def close(self) -> None:
        if not self.enabled:
            return
        self._jsonl.close()
        self._log.close()
        if self._tb is not None:
            self._tb.close()


def read_metrics(output_dir: str | Path) -> list[dict]:
    """The records of ``output_dir/metrics.jsonl`` (a line cut short by a kill is skipped)."""
    path = Path(output_dir) / "metrics.jsonl"
    records = []
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                records.append(json.loads(line))
            except ValueError:
                continue
    return records
