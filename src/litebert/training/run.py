"""The run layer shared by the commands that train (``pretrain``, ``finetune``, and those to come).

What every run does around the training loop, in one place:

- :func:`start` / :func:`teardown`: the process group under ``torchrun`` (one process: nothing to do);
- :func:`check_output_dir`: the output-directory policy, before anything is written. A run writes into an absent or
  empty directory, or, with ``--resume``, into a run of its own command (``run_settings.json``) that is
  unfinished, or finished and kept its checkpoints where the command can extend a run (pretrain's larger
  ``--max-steps``); never into the directory it reads (``--model``, ``--data`` ...), a model
  directory (``config.json`` + weights), another command's run or anything else. The caller names the files it put
  there itself (``litebert ablate``'s plan): those do not count;
- :func:`check_no_overwrite`: ``evaluate``/``predict`` write into any directory, but never over a file there;
- :func:`resolve_resume`: resume resolution. A fresh run (``resume=None``) into a directory that holds checkpoints
  is refused (nothing is overwritten); ``"auto"`` picks the newest complete checkpoint in ``OUTPUT/checkpoints``
  (rank 0 decides, every rank gets the same path; none: a fresh start, said in the log); a path must be a
  checkpoint directory. The training loop calls it too, so both agree;
- :func:`resolve_run_precision`: ``--precision`` resolved for this device (:mod:`litebert.precision`); a resumed
  run passes the precision its checkpoint records, so ``auto`` keeps it;
- :func:`check_resume_settings`: a resumed run must train on the trajectory its checkpoint started: its settings are
  compared with the ones the run recorded (``run_settings.json``, the checkpoint's ``trainer_state.json``), and a
  change of anything but what the caller lets change (logging, evaluation, saving, workers, device ...) is refused;
- :func:`check_checkpoint_fits`: a resumed run's checkpoint must be one of the same command and model: one of
  another command's run (a finetune checkpoint given to pretrain) or whose model state does not load into this
  run's model is refused with one line saying what it holds and what was expected (:func:`state_mismatch`);
- :func:`write_run_settings`: ``OUTPUT/run_settings.json``, the resolved settings of the run under
  ``"<command>_config"`` (what ``litebert <command> --config run_settings.json`` reads back) plus the caller's
  record (world size, device, model config ...), the versions, the command line and the start time. It is the
  first settings file of a run, also of one started with ``--resume PATH`` into a new or empty directory; a later
  segment (a resume in a directory that has one) keeps it and writes ``run_settings.resume-step-N.json`` beside it;
- ``final/`` and ``best/`` are installed with :func:`litebert.fileio.atomic_directory` (a temporary directory
  swapped in), so a reader never sees a half-written model directory.
"""

from __future__ import annotations

import json
import os
import platform
import re
import sys
import time
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

from litebert.checkpoint import CONFIG_NAME, PYTORCH_NAME, SAFETENSORS_INDEX_NAME, SAFETENSORS_NAME
from litebert.errors import LitebertError
from litebert.fileio import RUN_SETTINGS_NAME, atomic_write_json, listing, read_json, run_command, sha256_file
from litebert.hub import sources
from litebert.inference import ONNX_NAME
from litebert.precision import PrecisionChoice, resolve_precision
from litebert.settings import option_name, to_dict
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


#: files beside ``config.json`` that make a directory a model directory (which no run writes into)
_WEIGHT_NAMES = (SAFETENSORS_NAME, SAFETENSORS_INDEX_NAME, PYTORCH_NAME, ONNX_NAME)
_NOTHING = "(nothing was written)"


def _holds_checkpoints(out: Path, existing: list[tuple[int, Path]]) -> LitebertError:
    return LitebertError(
        f"{out} already holds checkpoints (newest {existing[-1][1].name}); pass "
        "--resume auto to continue, or choose another --output (nothing was overwritten)"
    )


def _finished_run(out: Path, command: str, finished: str, model: str, extend: bool) -> LitebertError:
    """The refusal of a fresh run into a finished run of its own command: where that run's model is, and what to do
    (never ``--resume auto`` alone: it would not run the command again)."""
    what = f"its model is in {out / model}" if (out / model / CONFIG_NAME).is_file() else finished
    further = "pass --resume auto with a larger --max-steps to train it further, or " if extend else ""
    stopped = S.stopped_early(out) if extend else None
    if stopped is not None:  # its own --max-steps are not reached: the same settings continue it
        return LitebertError(
            f"--output {out} holds a `litebert {command}` run stopped {stopped} ({what}): continue it with "
            f"--resume auto (the same --max-steps), or choose a new --output, or remove {out} to run it again "
            f"{_NOTHING}"
        )
    return LitebertError(
        f"--output {out} holds a finished `litebert {command}` run ({what}): {further}choose a new --output, or "
        f"remove {out} to run it again {_NOTHING}"
    )


def check_output_dir(
    output_dir: str | os.PathLike,
    command: str,
    resume: str | os.PathLike | None,
    *,
    finished: str,
    model: str | None = None,
    may_extend: bool = True,
    sources: Mapping[str, str | os.PathLike | None] | None = None,
    caller_files: Collection[str] = (),
) -> None:
    """Refuse an output directory that a run of ``command`` must not write into (see the module docstring).

    Reads only; call it before anything is written. In a process group (call it after :func:`start`) rank 0 alone
    looks at the directory and every rank gets its verdict (:func:`_rank0_verdict`): a rank that checked by itself
    could run after another rank's first writes (``init_process_group`` is no barrier: with nccl it returns before
    the other ranks have joined) and refuse the run that rank started. ``finished`` names what a finished run of
    ``command`` leaves (``final`` for pretrain, ``eval_results.json`` for finetune), ``model`` the model directory
    it leaves (default ``finished``; ``best`` for finetune), named when a fresh run into it is refused;
    ``may_extend``: a finished run that kept its checkpoints may be resumed, to be continued further (pretrain, with
    a larger ``--max-steps``); without it (finetune, whose steps cannot grow) resuming a finished run could only
    rewrite its results, and is refused like a fresh run into it; ``sources`` maps an option to the directory it
    reads (``{"--model": ...}``); ``caller_files`` are names the calling code put into the directory itself before
    the run (``litebert ablate``'s ``ablate_plan.json``), which do not make it non-empty.
    Names starting with a dot (the temporary files of an interrupted atomic write) do not count either.

    Raises:
        LitebertError: the directory is one of ``sources``; is a file; holds a model (``config.json`` + weights);
            holds a run of another command; a fresh run (``resume`` None) into a directory that holds anything (a
            finished run of ``command``: checked first, the message names its model and never offers ``--resume
            auto`` alone);
            a resumed run into a directory that holds no run of ``command``, or a finished one without checkpoints
            (without ``may_extend``: any finished one).
    """
    _rank0_verdict(
        _check_output_dir,
        output_dir,
        command,
        resume,
        finished,
        model or finished,
        may_extend,
        sources or {},
        caller_files,
    )


def _rank0_verdict(decide: Callable[..., Any], *args: Any) -> Any:
    """``decide(*args)`` on rank 0, its result (or its LitebertError) on every rank: one broadcast, which also
    holds every rank until rank 0 has decided. Without a process group: ``decide(*args)``."""
    if not D.is_dist():
        return decide(*args)
    verdict: tuple[Any, str | None] = (None, None)
    failure: BaseException | None = None
    if D.is_main_rank():
        try:
            verdict = (decide(*args), None)
        except Exception as exc:  # every rank must hear of it, or the others would wait at the broadcast forever
            verdict, failure = (None, str(exc) if isinstance(exc, LitebertError) else f"rank 0: {exc!r}"), exc
    result, error = D.broadcast_object(verdict)
    if failure is not None:
        raise failure
    if error is not None:
        raise LitebertError(error)
    return result


def _check_output_dir(output_dir, command, resume, finished, model, may_extend, sources, caller_files) -> None:
    out = Path(output_dir)
    for option, source in sources.items():
        if source is not None and out.resolve() == Path(source).resolve():
            raise LitebertError(
                f"--output {out} is the {option} directory, which the run reads: choose a new --output {_NOTHING}"
            )
    if not out.exists():
        return
    if not out.is_dir():
        raise LitebertError(f"--output {out} is a file, not a directory: choose a new --output {_NOTHING}")
    names = sorted(p.name for p in out.iterdir() if not p.name.startswith(".") and p.name not in caller_files)
    if not names:
        return
    _refuse_model_dir(out)
    owner = run_command(out)
    if owner is not None and owner != command:
        raise LitebertError(
            f"--output {out} holds a `litebert {owner}` run (run_settings.json): choose a new or empty --output "
            f"{_NOTHING}"
        )
    checkpoints = S.list_checkpoints(out, warn=False)
    done = (out / finished).exists()
    if resume is None:
        if owner == command and done:  # before the checkpoints it kept: rerunning it is not resuming it
            raise _finished_run(out, command, finished, model, extend=may_extend and bool(checkpoints))
        if checkpoints:
            raise _holds_checkpoints(out, checkpoints)
        if owner == command:
            raise LitebertError(
                f"--output {out} holds an interrupted `litebert {command}` run with no checkpoint: pass --resume "
                f"auto to start it over there, or choose a new or empty --output {_NOTHING}"
            )
        raise LitebertError(
            f"--output {out} is not empty (holds {listing(names)}): choose a new or empty --output {_NOTHING}"
        )
    if not checkpoints and owner is None:
        raise LitebertError(
            f"--output {out} holds no `litebert {command}` run to resume ({listing(names)}): choose a new or empty "
            f"--output {_NOTHING}"
        )
    if done and not checkpoints:
        raise LitebertError(
            f"--output {out} holds a finished `litebert {command}` run ({finished}) without checkpoints, nothing to "
            f"resume: choose a new or empty --output {_NOTHING}"
        )
    if done and not may_extend:
        raise LitebertError(
            f"--output {out} holds a finished `litebert {command}` run ({finished}): a finished run is not resumed, "
            f"so its results stay as they are; choose a new or empty --output {_NOTHING}"
        )


def _refuse_model_dir(out: Path) -> None:
    """Refuse an ``--output`` that is a model directory (``config.json`` and weights): no command writes into one
    (its files would make it look like a run to ``litebert info`` and to the next command)."""
    weights = [w for w in _WEIGHT_NAMES if (out / w).is_file()]
    if (out / CONFIG_NAME).is_file() and weights:
        raise LitebertError(
            f"--output {out} holds a model ({CONFIG_NAME}, {weights[0]}): a run never writes into a model "
            f"directory; choose a new or empty --output {_NOTHING}"
        )


def check_no_overwrite(output_dir: str | os.PathLike, command: str, names: Collection[str]) -> None:
    """Refuse an output directory that already holds one of ``names``, the files ``command`` would write there
    (``evaluate``/``predict`` write into any directory, but never over a file, e.g. a finetune run's own
    ``predictions.tsv`` or ``run_settings.json``). Creates nothing: it writes and removes one empty probe file in
    ``output_dir``'s nearest existing directory, so that an output that cannot be written is refused before the
    model runs over the data, not after.

    Raises:
        LitebertError: ``output_dir`` or one of its parents is a file; its nearest existing directory cannot be
            written (read-only file system, permissions, /proc); it is a model directory; or naming the first such
            file (and the run that wrote the directory's ``run_settings.json``).
    """
    import tempfile

    out = Path(output_dir)
    for path in (out, *out.parents):
        if path.exists():
            if not path.is_dir():
                raise LitebertError(f"--output {out}: {path} is a file, not a directory: choose another --output")
            break
    try:
        fd, probe = tempfile.mkstemp(prefix=".litebert-write-probe-", dir=path)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise LitebertError(
            f"--output {out}: cannot write in {path} ({exc.strerror or exc}): choose another --output"
        ) from None
    _refuse_model_dir(out)
    taken = [name for name in names if (out / name).exists()]
    if not taken:
        return
    owner = run_command(out)
    whose = f" (of a `litebert {owner}` run)" if owner else ""
    raise LitebertError(
        f"--output {out} already holds {taken[0]}{whose}, which {command} would overwrite: choose another --output "
        f"{_NOTHING}"
    )


def resolve_resume(
    output_dir: str | os.PathLike,
    resume: str | os.PathLike | None,
    dist: D.DistInfo | None = None,
    *,
    verify: bool = False,
    log: Callable[[str], Any] | None = None,
) -> Path | None:
    """The checkpoint a run continues from, or None for a fresh start (see the module docstring).

    ``verify`` also checks the checkpoint's sizes and checksums now, before the run writes anything. ``log``
    (rank 0's) is told when ``"auto"`` finds no checkpoint, so a restart from step 0 is never silent. In a process
    group rank 0 decides and every rank gets its answer (or its error): one broadcast, every rank calls it.

    Raises:
        LitebertError: a fresh run into a directory with checkpoints; a ``resume`` path that is not a directory;
            (``verify``) an incomplete or corrupted checkpoint.
    """
    is_main = dist is None or dist.is_main
    path = _rank0_verdict(_resolve_resume, Path(output_dir), resume, verify)
    if resume is not None and str(resume) == "auto" and path is None and is_main and log is not None:
        log(f"--resume auto: no checkpoint in {output_dir}, starting from step 0")
    return path


def _resolve_resume(out: Path, resume, verify: bool) -> Path | None:
    if resume is None:
        existing = S.list_checkpoints(out, warn=False)
        if existing:
            raise _holds_checkpoints(out, existing)
        return None
    if str(resume) == "auto":
        path = S.find_latest_checkpoint(out)
    else:
        path = Path(resume)
        if not path.is_dir():
            raise LitebertError(f"--resume {path}: no such checkpoint directory")
        if not (path / S.COMPLETE_MARKER).exists() and (S.checkpoints_dir(path).is_dir() or _has_settings(path)):
            found = S.list_checkpoints(path, warn=False)
            newest = f" (its newest checkpoint is {found[-1][1]})" if found else " (it holds no complete checkpoint)"
            step = found[-1][1] if found else f"{S.checkpoints_dir(path)}/step-N"
            raise LitebertError(f"--resume {path} is a run directory: use --resume auto{newest} or --resume {step}")
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
    """The content of ``run_settings.json``: ``{"command", "<command>_config": settings, **record, "hub",
    "versions", "argv", "cwd", "started"}`` (``cwd``: what the relative paths of the settings are relative to;
    ``hub``: for a model or tokenizer downloaded from the Hub, its id and commit, :func:`litebert.hub.sources`)."""
    settings = to_dict(cfg)
    return {
        "command": command,
        f"{command}_config": settings,
        **(record or {}),
        **({"hub": hub} if (hub := sources(settings)) else {}),
        "versions": {"python": platform.python_version(), "torch": torch.__version__},
        "argv": sys.argv,
        "cwd": os.getcwd(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


#: config fields that make up one process's share of an optimizer step's batch
_BATCH_FIELDS = ("batch_size", "gradient_accumulation_steps")
#: config fields :func:`check_resume_settings` compares by their own rules, never as plain values
_OWN_RULES = (*_BATCH_FIELDS, "max_steps", "precision")
# run_settings.resume-step-K.json, and -2, -3 ... for later resumes from the same checkpoint
_RESUME_FILE = re.compile(r"^run_settings\.resume-step-(\d+)(?:-(\d+))?\.json$")


def _recorded_settings(run_dir: Path, command: str, step: int) -> dict | None:
    """The settings of the segment of the run that wrote the checkpoint of ``step``: the newest readable
    ``run_settings.resume-step-K.json`` with K < ``step`` (a resume from step K wrote it), else
    ``run_settings.json``; None when the run recorded none (of ``command``)."""
    found = [(-1, 0, run_dir / "run_settings.json")]
    if run_dir.is_dir():
        for path in run_dir.iterdir():
            m = _RESUME_FILE.match(path.name)
            if m and int(m.group(1)) < step:
                found.append((int(m.group(1)), int(m.group(2) or 1), path))
    for *_, path in sorted(found, reverse=True):
        if not path.is_file():
            continue
        try:
            record = read_json(path, what="run settings", expect=dict)
        except LitebertError:
            continue
        if record.get("command") == command and isinstance(record.get(f"{command}_config"), dict):
            return record
    return None


def _flat(settings: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"data": {"task": ...}}`` → ``{"data.task": ...}``."""
    flat: dict[str, Any] = {}
    for key, value in settings.items():
        if isinstance(value, Mapping):
            flat.update(_flat(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _option(cfg: Any, key: str) -> str:
    """The command-line option of the (dotted, for nested configs) field ``key`` of ``cfg``."""
    *outer, name = key.split(".")
    for part in outer:
        cfg = getattr(cfg, part, None)
    return option_name(cfg, name) if cfg is not None else "--" + name.replace("_", "-")


def _fingerprint(path: Path) -> Any:
    """What a file or directory holds, to tell a copy from another one: a file's sha256; a prepared data directory's
    ``manifest.json`` (which holds its shards' checksums); another directory's files with their sha256."""
    if path.is_file():
        return sha256_file(path)
    if (path / "manifest.json").is_file():
        return sha256_file(path / "manifest.json")
    return sorted((str(f.relative_to(path)), sha256_file(f)) for f in path.rglob("*") if f.is_file())


def _same(old: Any, new: Any, old_cwd: str) -> bool:
    """Equal values; two strings also when they name the same file (a relative path recorded by the first run is
    taken relative to the directory it ran in, so ``data`` and ``/abs/data`` compare equal) or, both existing, a
    copy of it (a run moved or copied with its data, e.g. a copied ``litebert ablate`` study)."""
    if old == new:
        return True
    if not (isinstance(old, str) and isinstance(new, str) and old and new):
        return False
    old_path, new_path = (Path(old_cwd) / old).resolve(), Path(new).resolve()
    if old_path == new_path:
        return True
    both = old_path.exists() and new_path.exists() and old_path.is_dir() == new_path.is_dir()
    return both and _fingerprint(old_path) == _fingerprint(new_path)


def check_resume_settings(
    resume_from: Path | None,
    settings: Mapping[str, Any],
    cfg: Any,
    *,
    steps: int,
    may_change: Collection[str],
    may_extend: bool = False,
    records: Mapping[str, str] | None = None,
) -> None:
    """Refuse to continue ``resume_from`` with settings that change the training trajectory it is on.

    ``settings`` is this run's :func:`run_settings` (with ``world_size``, ``global_batch_size`` and ``precision`` in
    its record), ``cfg`` its config (for the option names), ``steps`` the optimizer steps it runs to. It is compared
    with the settings recorded by the run segment that wrote the checkpoint (:func:`_recorded_settings`, in the
    checkpoint's run directory) and with the checkpoint's ``trainer_state.json``:

    - every field of ``cfg`` except those in ``may_change`` (logging, evaluation, saving, workers, device ...);
      strings that name the same file are equal, however written;
    - the batch: with the checkpoint's number of processes ``batch_size`` (and ``gradient_accumulation_steps``) as
      they were; with another only the global batch (processes × batch × accumulation), whose data position the
      loop carries over;
    - ``steps``: never below the checkpoint's step; otherwise as recorded (top-level ``max_steps`` of the record,
      else the config's), or, with ``may_extend`` (pretrain), larger (the schedule then decays to the new end);
    - ``precision``: an explicit ``--precision`` other than the checkpoint's (``auto`` keeps it, or falls back to
      fp32 on a device that cannot compute it: allowed);
    - ``records``: top-level keys of the record (dotted, e.g. ``data_manifest.settings``) compared too, key by key
      where both have one, named by the label given (``--data``).

    A run that recorded no settings is checked on steps and precision only. Reads only; call it on every rank.

    Raises:
        LitebertError: one line naming each changed setting as ``old → new`` and what to do instead.
    """
    if resume_from is None:
        return
    command = settings["command"]
    state = S.checkpoint_trainer_state(resume_from)
    step = int(state.get("step", 0))
    extra = state.get("extra") or {}
    new = json.loads(json.dumps(dict(settings), default=str))  # the values as a record holds them
    recorded = _recorded_settings(resume_from.parent.parent, command, step)
    changes: list[str] = []
    old_steps = None
    if recorded is not None:
        old_cwd = recorded.get("cwd") or os.getcwd()
        old_cfg, new_cfg = _flat(recorded[f"{command}_config"]), _flat(new[f"{command}_config"])
        ignore = {*may_change, *_OWN_RULES}
        for key, value in new_cfg.items():
            if key not in ignore and key in old_cfg and not _same(old_cfg[key], value, old_cwd):
                changes.append(f"{_option(cfg, key)} {old_cfg[key]!r} → {value!r}")
        old_ws = int(state.get("world_size", recorded.get("world_size", 1)))
        if old_ws == int(new.get("world_size", 1)):
            for key in _BATCH_FIELDS:
                if key in old_cfg and key in new_cfg and old_cfg[key] != new_cfg[key]:
                    changes.append(f"{_option(cfg, key)} {old_cfg[key]!r} → {new_cfg[key]!r}")
        else:
            old_gbs = extra.get("global_batch_size", recorded.get("global_batch_size"))
            if old_gbs is not None and old_gbs != new.get("global_batch_size"):
                changes.append(
                    f"global batch (processes × {' × '.join(_option(cfg, k) for k in _BATCH_FIELDS if k in new_cfg)})"
                    f" {old_gbs} → {new.get('global_batch_size')}"
                )
        for prefix, label in (records or {}).items():
            old_rec, new_rec = _flat(_dig(recorded, prefix)), _flat(_dig(new, prefix))
            for key, value in new_rec.items():
                if key in old_rec and old_rec[key] != value:
                    changes.append(f"{label} ({key}) {old_rec[key]!r} → {value!r}")
        old_steps = recorded.get("max_steps", old_cfg.get("max_steps"))
    steps_option = _option(cfg, "max_steps")
    if steps < step:
        changes.append(f"{steps_option} {steps} is below the checkpoint's step {step}")
    elif old_steps is not None and steps != old_steps and not (may_extend and steps > old_steps):
        changes.append(f"{steps_option} {old_steps} → {steps}")
    precision = new.get("precision") or {}
    saved = extra.get("precision")
    if precision.get("requested", "auto") != "auto" and saved is not None and precision.get("precision") != saved:
        changes.append(f"{_option(cfg, 'precision')} {saved!r} → {precision.get('precision')!r}")
    if changes:
        grow = f" ({steps_option} may only grow)" if may_extend else ""
        raise LitebertError(
            f"--resume: {resume_from} was trained with other settings: {'; '.join(changes)}. Resume with the run's "
            f"settings{grow}, or start a new run with a new --output {_NOTHING}"
        )


def _names(keys: Collection[str], limit: int) -> str:
    """``a, b, c (+N more)``: the first ``limit`` of ``keys`` in order."""
    keys = list(keys)
    more = f" (+{len(keys) - limit} more)" if len(keys) > limit else ""
    return ", ".join(keys[:limit]) + more


def state_mismatch(expected: Mapping[str, Any], found: Mapping[str, Any], limit: int = 3) -> str | None:
    """What keeps the state dict ``found`` (read from a checkpoint) from loading strictly into a model whose state
    dict is ``expected``, as one line naming a few keys of each kind: ``missing a, b (+3 more); unexpected c;
    other shapes (here / in the checkpoint): d 1000x32 / 3000x32``; None when it loads. Values are tensors (or
    anything with a ``shape``); ``limit`` names at most that many keys of each kind."""

    def dims(value: Any) -> str:
        return "x".join(map(str, getattr(value, "shape", ()))) or "scalar"

    missing = [k for k in expected if k not in found]
    unexpected = [k for k in found if k not in expected]
    resized = [
        f"{k} {dims(v)} / {dims(found[k])}" for k, v in expected.items() if k in found and dims(v) != dims(found[k])
    ]
    parts = []
    if missing:
        parts.append(f"missing {_names(missing, limit)}")
    if unexpected:
        parts.append(f"unexpected {_names(unexpected, limit)}")
    if resized:
        parts.append(f"other shapes (here / in the checkpoint): {_names(resized, limit)}")
    return "; ".join(parts) or None


def _architecture(state: Mapping[str, Any]) -> str:
    """The :mod:`litebert.modeling` class a model state dict is of, told by its head parameters."""
    if "sop_classifier.classifier.weight" in state:
        return "AlbertForPreTraining"
    if "predictions.dense.weight" in state:
        return "AlbertForMaskedLM"
    if "qa_outputs.weight" in state:
        return "AlbertForQuestionAnswering"
    if "classifier.weight" in state:
        if "albert.pooler.weight" not in state:
            return "AlbertForTokenClassification"
        if tuple(getattr(state["classifier.weight"], "shape", ()))[:1] == (1,):  # one score per option, or regression
            return "AlbertForMultipleChoice or AlbertForSequenceClassification"
        return "AlbertForSequenceClassification"
    return "AlbertModel"


def _checkpoint_command(checkpoint: Path) -> str | None:
    """The command whose run wrote ``checkpoint`` (``RUN/checkpoints/step-N``): the ``run_settings.json`` of its run
    directory, else ``finetune`` when its ``trainer_state.json`` holds a fine-tuning run's settings (``extra``)."""
    owner = run_command(checkpoint.parent.parent)
    if owner is None and "finetune" in (S.checkpoint_trainer_state(checkpoint).get("extra") or {}):
        owner = "finetune"
    return owner


def check_checkpoint_fits(resume_from: Path | None, command: str, model: nn.Module) -> None:
    """Refuse a checkpoint that this run's ``model`` (before any DDP/FSDP/compile wrapping) cannot continue from:
    one written by another command's run (:func:`_checkpoint_command`), or whose ``model.pt`` does not load strictly
    into ``model`` (other heads, other sizes: :func:`state_mismatch`). Reads only (``model.pt`` memory-mapped); call
    it on every rank after :func:`resolve_resume` (which verified the checkpoint's files) and before anything is
    written, so a refused resume leaves the output as it was.

    Raises:
        LitebertError: one line saying what the checkpoint holds and what was expected, e.g. ``--resume P: a
            `litebert finetune` checkpoint (AlbertForSequenceClassification), not a `litebert pretrain` one
            (AlbertForPreTraining)``; or a ``model.pt`` that cannot be read.
    """
    if resume_from is None:
        return
    path = resume_from / "model.pt"
    try:
        state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as exc:  # any unpickling failure is a corrupted file to the user
        raise LitebertError(f"cannot read checkpoint file {path}: {' '.join(str(exc).split())}") from None
    if not isinstance(state, Mapping):
        raise LitebertError(f"checkpoint file {path} holds a {type(state).__name__}, not a model state dict")
    holds, wanted = _architecture(state), type(model).__name__
    owner = _checkpoint_command(resume_from)
    if owner is not None and owner != command:
        raise LitebertError(
            f"--resume {resume_from}: a `litebert {owner}` checkpoint ({holds}), not a `litebert {command}` one "
            f"({wanted}): resume from a checkpoint of a `litebert {command}` run, or start without --resume {_NOTHING}"
        )
    mismatch = state_mismatch(model.state_dict(), state)
    if mismatch:
        its = "its model" if holds == wanted else f"its model ({holds})"
        raise LitebertError(
            f"--resume {resume_from}: {its} does not fit this run's {wanted}: {mismatch}; resume from a checkpoint "
            f"of this model, or start a fresh run without --resume into a new --output {_NOTHING}"
        )


def _dig(record: Mapping[str, Any], dotted: str) -> Mapping[str, Any]:
    for part in dotted.split("."):
        record = record.get(part) if isinstance(record, Mapping) else None
    return record if isinstance(record, Mapping) else {}


def _has_settings(out: Path) -> bool:
    """Whether ``out`` holds a settings file of a run: ``run_settings.json`` or a ``run_settings.resume-*.json``."""
    if (out / RUN_SETTINGS_NAME).is_file():
        return True
    return out.is_dir() and any(_RESUME_FILE.match(p.name) for p in out.iterdir())


def write_run_settings(output_dir: str | os.PathLike, settings: dict, resumed_from: Path | None = None) -> Path:
    """Write ``settings`` (:func:`run_settings`) atomically to ``OUTPUT/run_settings.json``, the first settings file
    of a run: that of a fresh run, and that of a run resumed from ``resumed_from`` into a directory that holds no
    settings file yet (``--resume PATH`` into a new or empty ``--output``: the file marks the directory as the
    command's run and repeats it with ``--config``). A resumed run in a directory that has one writes
    ``run_settings.resume-<checkpoint>.json`` beside it, so that the original stays. Returns the path."""
    out = Path(output_dir)
    name = RUN_SETTINGS_NAME
    if resumed_from is not None and _has_settings(out):
        name = f"run_settings.resume-{resumed_from.name}.json"
        n = 1
        while (out / name).exists():  # another resume from the same checkpoint: keep the earlier record too
            n += 1
            name = f"run_settings.resume-{resumed_from.name}-{n}.json"
    out.mkdir(parents=True, exist_ok=True)
    return atomic_write_json(out / name, settings, sort_keys=False, default=str)


__all__ = [
    "check_checkpoint_fits",
    "check_no_overwrite",
    "check_output_dir",
    "check_resume_settings",
    "resolve_resume",
    "resolve_run_precision",
    "run_command",
    "run_settings",
    "start",
    "state_mismatch",
    "teardown",
    "write_run_settings",
]
