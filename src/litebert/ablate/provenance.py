"""What made an ablation cell: its training- and evaluation-defining settings, recorded when the cell is planned and
compared with the command on every rerun, so that a finished or half-finished cell is never reused under settings it
was not trained or scored with, and every row of a study's table is scored on the same held-out set.

A setting is *training-defining* when changing it changes the trained weights: the cell's effective model config,
the schedule (``--steps``, ``--budget-minutes``, the warmup steps), ``--batch-size``, ``--optimizer``,
``--learning-rate``, the data (the corpus files and their sizes, the held-out split, the tokenizer's vocabulary, the
sentence task, the corpus fraction, ``--max-seq-length``, the masking, ``--data-seed``) and the seed. It is
*evaluation-defining* when changing it changes what the held-out evaluation measures: ``--eval-corpus`` (the files
and their sizes) and ``--max-eval-sequences`` (the held-out split, the tokenizer, the sequence length, the masking
and ``--data-seed`` define both). Threads, the checkpoint interval, ``--eval-batch-size``, the output path, the
selected cells, progress bars and ``prepare``'s workers are not.

A cell planned by this version stores the settings under ``"settings"`` in its ``ablate_plan.json``. A cell planned
before (no ``"settings"``) is described from what it did store: the plan (steps, budget, seed, cell definition),
``run_settings.json`` (the pretraining settings, the data manifest's settings and tokenizer fingerprint, and the
``litebert ablate`` command line that made it, for the corpus files; the evaluation settings from the command line of
the cell's last training segment, the call that scored it) and, for every cell, ``cell_model_config.json``
(the effective model config: a cell copied from an identical cell of another study compares equal whatever its
override dict says). A cell planned before the evaluation settings were recorded takes them from its command line
likewise. A setting a cell did not store is not compared. Paths are compared as the files they name
(resolved, relative ones against the working directory), never as strings.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from litebert.errors import LitebertError
from litebert.fileio import read_json

PLAN_FILE = "ablate_plan.json"
CELL_CONFIG_FILE = "cell_model_config.json"
#: ``"tokenizer"`` of a cell whose tokenizer was trained on its corpus (no ``--tokenizer``)
TRAINED_TOKENIZER = "trained on the corpus"
#: ``"held_out"`` of a cell evaluated on ``--eval-corpus`` (its training files are the whole corpus)
HELD_OUT_CORPUS = "--eval-corpus"

#: setting -> how the error message names it
LABELS = {
    "system": "system",
    "inter_sentence_task": "inter-sentence task",
    "data_fraction": "corpus fraction",
    "seed": "seed",
    "steps": "--steps",
    "budget_minutes": "--budget-minutes",
    "batch_size": "--batch-size",
    "optimizer": "--optimizer",
    "learning_rate": "--learning-rate",
    "warmup_steps": "warmup steps (--warmup-ratio x steps)",
    "max_seq_length": "--max-seq-length",
    "masked_lm_prob": "--masked-lm-prob",
    "max_predictions_per_seq": "--max-predictions-per-seq",
    "data_seed": "--data-seed",
    "corpus": "--corpus",
    "corpus_bytes": "corpus file sizes (bytes)",
    "held_out": "held-out text (--eval-corpus / --eval-fraction)",
    "tokenizer": "--tokenizer",
    "eval_corpus": "--eval-corpus",
    "eval_corpus_bytes": "held-out corpus file sizes (bytes)",
    "max_eval_sequences": "--max-eval-sequences",
}


@dataclass(frozen=True)
class StudyInputs:
    """The checked inputs of a ``litebert ablate`` command (:func:`litebert.ablate.run.check_inputs`).

    Attributes:
        corpus: the training corpus files (directories expanded), resolved to absolute paths, in order.
        corpus_bytes: their sizes in bytes.
        eval_corpus: the held-out corpus files, resolved, or None (held out from the corpus).
        eval_corpus_bytes: their sizes in bytes, or None.
        tokenizer: the vocabulary fingerprint (hex SHA-256, :meth:`litebert.tokenization.Tokenizer.vocab_fingerprint`)
            of ``--tokenizer``, or None when the tokenizer is trained on the corpus.
    """

    corpus: tuple[str, ...]
    corpus_bytes: tuple[int, ...]
    eval_corpus: tuple[str, ...] | None
    eval_corpus_bytes: tuple[int, ...] | None
    tokenizer: str | None


def held_out(eval_corpus: bool, eval_fraction: float) -> str:
    """The ``"held_out"`` setting: which text is not trained on (it decides the training files)."""
    return HELD_OUT_CORPUS if eval_corpus else f"the last {eval_fraction:g} of every corpus file's lines"


def current_settings(cfg, cell, seed: int, inputs: StudyInputs, max_steps: int) -> dict:
    """The training- and evaluation-defining settings the command ``cfg`` gives ``cell`` (seed ``seed``), except the
    model config.

    ``max_steps``: the cell's schedule (``--steps``, or the planned estimate under ``--budget-minutes`` alone), of
    which ``--warmup-ratio`` makes the warmup steps. ``"steps"`` is ``cfg.steps``: None when the schedule is estimated.
    ``"eval_corpus"`` and ``"eval_corpus_bytes"`` are there only with ``--eval-corpus`` (without it ``"held_out"``
    says which text is held out).
    """
    evaluation: dict = {"max_eval_sequences": cfg.max_eval_sequences}
    if inputs.eval_corpus is not None:
        evaluation.update(eval_corpus=list(inputs.eval_corpus), eval_corpus_bytes=list(inputs.eval_corpus_bytes or ()))
    return {
        "system": cell.system,
        "inter_sentence_task": cell.inter_sentence_task,
        "data_fraction": cell.data_fraction,
        "seed": seed,
        "steps": cfg.steps,
        "budget_minutes": cfg.budget_minutes,
        "batch_size": cfg.batch_size,
        "optimizer": cfg.optimizer,
        "learning_rate": cfg.learning_rate,
        "warmup_steps": int(cfg.warmup_ratio * max_steps),
        "max_seq_length": cfg.max_seq_length,
        "masked_lm_prob": cfg.masked_lm_prob,
        "max_predictions_per_seq": cfg.max_predictions_per_seq,
        "data_seed": cfg.data_seed,
        "corpus": list(inputs.corpus),
        "corpus_bytes": list(inputs.corpus_bytes),
        "held_out": held_out(inputs.eval_corpus is not None, cfg.eval_fraction),
        "tokenizer": inputs.tokenizer or TRAINED_TOKENIZER,
        **evaluation,
    }


def model_settings(path: Path) -> dict | None:
    """The effective model config a cell trains (``cell_model_config.json``) as ``AlbertConfig.to_dict()``, or None
    when the cell has none yet. Raises :class:`LitebertError` for an unreadable file."""
    from litebert.config import AlbertConfig

    if not path.is_file():
        return None
    return AlbertConfig.from_dict(read_json(path, what="cell model config", expect=dict), str(path)).to_dict()


def stored_settings(run: Path, plan: dict | None = None) -> dict:
    """The training- and evaluation-defining settings the cell run directory ``run`` was planned with, with
    ``"model"`` (see the module docstring); only those it stored. ``plan``: its ``ablate_plan.json``, when already
    read. Raises :class:`LitebertError` for an unreadable plan or config."""
    if plan is None:
        plan = read_json(run / PLAN_FILE, what="ablate plan", expect=dict)
    settings = dict(plan.get("settings") or _legacy_settings(run, plan))
    if "max_eval_sequences" not in settings:  # planned before the evaluation settings were recorded
        settings.update({k: v for k, v in _legacy_evaluation(run).items() if k not in settings})
    model = model_settings(run / CELL_CONFIG_FILE)
    if model is not None:
        settings["model"] = model
    return settings


def _legacy_settings(run: Path, plan: dict) -> dict:
    """What a cell planned before ``"settings"`` existed says about its settings."""
    out: dict = {}
    definition = plan.get("cell_definition") or {}
    for key in ("system", "inter_sentence_task", "data_fraction"):
        if key in definition:
            out[key] = definition[key]
    if "seed" in plan:
        out["seed"] = plan["seed"]
    if "max_minutes" in plan:
        out["budget_minutes"] = plan["max_minutes"]
        if plan["max_minutes"] is None and "max_steps" in plan:  # no time budget: the steps were given
            out["steps"] = plan["max_steps"]
    if not (run / "run_settings.json").is_file():  # the transformers arm, or a cell that never started
        return out
    recorded = read_json(run / "run_settings.json", what="run settings", expect=dict)
    pretrain = recorded.get("pretrain_config") or {}
    for key in ("batch_size", "optimizer", "learning_rate", "warmup_steps"):
        if key in pretrain:
            out[key] = pretrain[key]
    manifest = recorded.get("data_manifest") or {}
    data = manifest.get("settings") or {}
    for ours, theirs in (
        ("max_seq_length", "max_seq_length"),
        ("masked_lm_prob", "masked_lm_prob"),
        ("max_predictions_per_seq", "max_predictions_per_seq"),
        ("data_seed", "seed"),
    ):
        if theirs in data:
            out[ours] = data[theirs]
    options = _ablate_options(recorded.get("argv"))
    if options is None:
        return out
    from_file = "--config" in options  # the options it does not name may have come from that file
    corpus = _resolved(options.get("--corpus"))
    if corpus is not None:
        out["corpus"] = corpus
    if "--eval-corpus" in options:
        out["held_out"] = HELD_OUT_CORPUS
    elif "--eval-fraction" in options or not from_file:
        from litebert.ablate.run import AblateConfig

        fraction = options.get("--eval-fraction") or [AblateConfig.__dataclass_fields__["eval_fraction"].default]
        out["held_out"] = held_out(False, float(fraction[0]))
    fingerprint = (manifest.get("tokenizer") or {}).get("vocab_sha256")
    if "--tokenizer" in options:
        if fingerprint:
            out["tokenizer"] = fingerprint
    elif not from_file:
        out["tokenizer"] = TRAINED_TOKENIZER
    return out


_RESUME_SEGMENT = re.compile(r"step-(\d+)(?:-(\d+))?\.json$")


def _legacy_evaluation(run: Path) -> dict:
    """The evaluation settings (``max_eval_sequences``, ``eval_corpus``) of the ``litebert ablate`` command line
    that ran the cell's last training segment (``run_settings.resume-step-N.json`` of the highest N, else
    ``run_settings.json``): the call that scored it. Empty when there is no such command line."""
    segments = sorted(
        run.glob("run_settings.resume-step-*.json"),
        # step-N, then step-N-2, -3 ... (later resumes from the same checkpoint)
        key=lambda p: (int(m.group(1)), int(m.group(2) or 1)) if (m := _RESUME_SEGMENT.search(p.name)) else (-1, 0),
    )
    path = segments[-1] if segments else run / "run_settings.json"
    if not path.is_file():
        return {}
    options = _ablate_options(read_json(path, what="run settings", expect=dict).get("argv"))
    if options is None:
        return {}
    from_file = "--config" in options  # the options it does not name may have come from that file
    out: dict = {}
    given = options.get("--max-eval-sequences")
    if given:
        if given[0].isdigit():  # (the command parsed it: it is)
            out["max_eval_sequences"] = int(given[0])
    elif not from_file:
        out["max_eval_sequences"] = None
    eval_corpus = _resolved(options.get("--eval-corpus"))
    if eval_corpus is not None:
        out["eval_corpus"] = eval_corpus
    return out


def _ablate_options(argv) -> dict[str, list[str]] | None:
    """``{"--option": [values]}`` of a recorded ``litebert ablate ...`` command line, or None for another command."""
    if not isinstance(argv, list) or "ablate" not in argv[1:3]:
        return None
    options: dict[str, list[str]] = {}
    current = None
    for token in argv[argv.index("ablate", 1) + 1 :]:
        token = str(token)
        if token.startswith("--"):
            name, eq, value = token.partition("=")
            options.setdefault(name, [])
            current = None if eq else name
            if eq:
                options[name].append(value)
        elif current is not None:
            options[current].append(token)
    return options


def _resolved(paths: list[str] | None) -> list[str] | None:
    """The corpus files ``paths`` name (directories expanded), resolved against the working directory; None when
    they cannot be found from here (then the corpus is not compared)."""
    from litebert.corpus import resolve_corpus_files

    if not paths:
        return None
    try:
        return [str(f.resolve()) for f in resolve_corpus_files(paths)]
    except (LitebertError, OSError):
        return None


def differences(stored: dict, current: dict) -> list[str]:
    """``"<setting> <stored> -> <current>"`` for every setting both name that differs (model config: per field)."""
    out = []
    for key, new in current.items():
        if key not in stored:
            continue
        old = stored[key]
        if key == "model":
            for name in sorted(set(old) | set(new)):
                if old.get(name) != new.get(name):
                    out.append(f"model {name} {_show(old.get(name))} -> {_show(new.get(name))}")
        elif old != new and not (_number(old) and _number(new) and float(old) == float(new)):
            out.append(f"{LABELS.get(key, key)} {_show(old, key)} -> {_show(new, key)}")
    return out


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _show(value, key: str = "") -> str:
    if value is None:
        return "all" if key == "max_eval_sequences" else "none"
    if key == "tokenizer" and value != TRAINED_TOKENIZER:
        return f"vocabulary sha256 {str(value)[:12]}"
    if isinstance(value, list):
        return " ".join(map(str, value))
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def planned_runs(study_dir: Path) -> list[tuple[Path, str, int]]:
    """``(run directory, cell name, seed index)`` of every cell run under ``study_dir`` that has a plan."""
    runs = []
    if not study_dir.is_dir():
        return runs
    for cell_dir in sorted(p for p in study_dir.iterdir() if p.is_dir()):
        if (cell_dir / PLAN_FILE).is_file():
            runs.append((cell_dir, cell_dir.name, 0))
        for seed_dir in sorted(cell_dir.glob("seed-*")):
            index = seed_dir.name[len("seed-") :]
            if index.isdigit() and (seed_dir / PLAN_FILE).is_file():
                runs.append((seed_dir, cell_dir.name, int(index)))
    return runs


def check_study(cfg, base, root: Path, inputs: StudyInputs) -> None:
    """Refuse the command ``cfg`` when a planned cell of its study under ``root`` (any cell and seed, selected or not:
    ``DIR/<study>.md`` reports them all) was planned with other training- or evaluation-defining settings.

    Raises :class:`LitebertError`, one line naming the first such cell, each differing setting with its stored and
    its current value, and what to do (the cell's settings, a new ``--output``, or deleting the cell's directory).
    """
    from litebert.ablate.grid import build_grid

    grid = {c.name: c for c in build_grid(cfg.study, base)}
    refused: list[tuple[Path, str, list[str]]] = []
    for run, name, index in planned_runs(root / cfg.study):
        label = f"{cfg.study}/{name}" + (f"/seed-{index}" if index else "")
        cell = grid.get(name)
        if cell is None:
            refused.append((run, label, [f"not a cell of this {cfg.study} grid (its cells: {', '.join(grid)})"]))
            continue
        plan = read_json(run / PLAN_FILE, what="ablate plan", expect=dict)
        stored = stored_settings(run, plan)
        max_steps = int(plan.get("max_steps") or cfg.steps or 0)
        current = current_settings(cfg, cell, 42 + index, inputs, max_steps)
        current["model"] = cell.config(base).to_dict()
        diffs = differences(stored, current)
        if diffs:
            refused.append((run, label, diffs))
    if not refused:
        return
    run, label, diffs = refused[0]
    more = f" ({len(refused) - 1} more cell(s) differ: {', '.join(r[1] for r in refused[1:])})" if refused[1:] else ""
    raise LitebertError(
        f"{label} was planned with other settings than this command: {'; '.join(diffs)}{more}; rerun with the "
        f"settings it was planned with, give a new --output, or delete {os.fspath(run)} to train it again"
    )
