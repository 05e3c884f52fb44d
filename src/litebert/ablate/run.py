"""``litebert ablate``: run a study's grid of small pretraining runs and evaluate every cell the same way.

Pipeline of :func:`ablate` (each stage cached on disk, so an interrupted study restarts where it stopped):

1. data (``DIR/data/``, each directory named by a hash of what made it): the tokenizer (SentencePiece, trained once
   on the training corpus, or ``tokenizer``), the held-out split (when no ``eval_corpus``: the last ``eval_fraction``
   of every corpus file's lines), the training shards per inter-sentence task and corpus fraction the grid needs,
   and the evaluation shards in **both** SOP and NSP form, so every model is scored on both tasks (paper Table 5).
2. cells: each is an ordinary :func:`litebert.training.pretrain.pretrain` run in ``DIR/<study>/<cell>/`` (seed k ≥ 1
   in ``DIR/<study>/<cell>/seed-k/``). A cell whose ``ablate_result.json`` exists is not rerun (with
   ``finetune_task``, it is fine-tuned when its record lacks that task's metrics of these fine-tuning settings); one
   whose ``final/`` exists is only evaluated; otherwise it runs with ``resume="auto"`` (continues from its newest
   checkpoint). The ``system`` study's "transformers" cell is trained by :mod:`litebert.ablate.system`. Every cell
   records its training- and evaluation-defining settings in ``ablate_plan.json``; a command whose settings differ
   from a planned cell's is refused before anything is written (:mod:`litebert.ablate.provenance`).
3. evaluation (:func:`evaluate_model`): MLM loss/accuracy on the held-out SOP set's masked tokens, and the sentence
   head's accuracy on the held-out SOP set and on the held-out NSP set, with 95 % Wilson intervals.
4. outputs: ``DIR/results.jsonl`` (one record per evaluated cell, every study), ``DIR/<study>.md`` (the table beside
   the paper's numbers) and ``DIR/<study>.png`` (:mod:`litebert.ablate.report`).

Before anything is written the inputs are checked (:func:`check_inputs`); a call that fails leaving no cell with
something to resume removes the directories and files it created, never what was there before.

Sentence labels (``litebert.data.instances``): 0 = A then B, consecutive text of one document; 1 = "not that": B
before A (SOP) or B from another document (NSP). One binary head (``sop_classifier`` on the pooled [CLS], as
transformers' ``sentence_order_label``) is trained on either task and scored on both, so "1" means "abnormal pair"
in both evaluations.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from litebert.ablate.grid import DEFAULT_BASE, STUDIES, Cell, build_grid, check_base, select_cells
from litebert.ablate.provenance import PLAN_FILE, StudyInputs, check_study, current_settings, planned_runs
from litebert.ablate.report import wilson_interval
from litebert.corpus import resolve_corpus_files
from litebert.errors import LitebertError
from litebert.fileio import atomic_directory, atomic_write_json, atomic_write_text, check_output_target
from litebert.hub import HUB_METAVAR, revision_setting
from litebert.settings import check, fail, setting

RESULT_FILE = "ablate_result.json"
#: fields every results.jsonl record has (the issue's contract); more may follow
RESULT_FIELDS = (
    "study",
    "cell",
    "seed",
    "parameters",
    "steps",
    "seconds",
    "mlm_loss",
    "mlm_accuracy",
    "sop_accuracy",
    "nsp_accuracy",
)


@dataclass
class AblateConfig:
    """Settings of ``litebert ablate``: the command's options, one field each (derived from here).

    ``steps`` / ``budget_minutes`` are the equal budget of every cell: optimizer steps, or wall-clock minutes of
    training per cell (the schedule length is then estimated from a timed probe of the cell, and the loop also stops
    at the limit), or both (a schedule of ``steps``, stopped by the time limit if that comes first: for cells run
    side by side on a machine whose load changes). The recipe defaults are scripts/quickstart.sh's phase a.

    Raises :class:`~litebert.errors.LitebertError` ``"--option value: why"`` on construction for a bad value.
    """

    study: str = setting(choices=STUDIES, help="the paper's experiment to rerun (docs/ablations.md)")
    corpus: list[str] = setting(metavar="FILE", help="training corpus files (any format `litebert prepare` reads)")
    output: str = setting(
        metavar="DIR", help="the study directory: data/, <study>/<cell>/, results.jsonl, <study>.md, <study>.png"
    )
    eval_corpus: list[str] | None = setting(
        None, metavar="FILE", help="held-out corpus (default: the last --eval-fraction of every corpus file's lines)"
    )
    cells: list[str] | None = setting(None, metavar="CELL", help="run only these cells of the grid (default: all)")
    steps: int | None = setting(None, gt=0, help="optimizer steps per cell (the schedule)")
    budget_minutes: float | None = setting(
        None,
        gt=0,
        help="wall-clock training minutes per cell (alone: the "
        "steps come from a timed probe; with --steps: a time "
        "limit on that schedule)",
    )
    base_config: str | None = setting(
        None, metavar="JSON", help="base model config.json or preset (default: the quick-start model, E64 H128 L4)"
    )
    seeds: int = setting(1, ge=1, help="pretraining runs per cell (seeds 42, 43, ...)")
    finetune_task: str | None = setting(
        None,
        metavar="NAME",
        help="fine-tune every cell briefly on this task (sst2, mrpc, chnsenticorp), record its dev metrics",
    )
    finetune_steps: int = setting(300, gt=0, help="optimizer steps of that fine-tuning")
    finetune_data: str | None = setting(
        None, metavar="DIR", help="train.tsv + dev.tsv of --finetune-task (default: the shared data directory's copy)"
    )
    tokenizer: str | None = setting(
        None,
        metavar=HUB_METAVAR,
        help="tokenizer directory or Hub id ORG/NAME (default: train SentencePiece on the corpus, once, with the base vocab_size)",
    )
    revision: str | None = revision_setting()  # of a Hub id given as --tokenizer
    max_seq_length: int = setting(64, ge=8, help="tokens per pretraining pair")
    batch_size: int = setting(64, gt=0, help="sequences per step")
    optimizer: str = setting("adamw", choices=("lamb", "adamw"), help="optimizer of every cell")
    learning_rate: float = setting(2e-3, gt=0, help="peak learning rate")
    warmup_ratio: float = setting(0.1, ge=0, lt=1, help="fraction of the schedule spent warming up")
    masked_lm_prob: float = setting(0.3, gt=0, le=1, help="fraction of tokens masked")
    max_predictions_per_seq: int = setting(20, gt=0, help="the most masked tokens per pair")
    eval_fraction: float = setting(0.05, gt=0, lt=1, help="held-out share of every corpus file without --eval-corpus")
    max_eval_sequences: int | None = setting(
        None, gt=0, help="evaluate on at most this many held-out pairs per task (default: all)"
    )
    eval_batch_size: int = setting(128, gt=0, help="pairs per evaluation batch")
    save_steps: int = setting(500, ge=0, help="checkpoint every N steps (what an interrupted cell resumes from)")
    data_seed: int = setting(12345, help="seed of `prepare` (pairs and masks)")
    workers: int = setting(1, ge=1, help="processes of `prepare`")
    threads: int | None = setting(None, gt=0, help="torch intra-op threads (default: leave as is)")
    progress_bar: bool = setting(False, help="tqdm bars of the training loops")

    def __post_init__(self) -> None:
        if isinstance(self.corpus, (str, os.PathLike)):
            self.corpus = [self.corpus]
        check(self)
        if not self.corpus:
            fail(self, "corpus", "give at least one corpus file")
        if self.steps is None and self.budget_minutes is None:
            raise LitebertError(
                "give --steps N or --budget-minutes M (or both: the schedule spans N steps and the "
                "time limit stops it), the budget of every cell"
            )


@dataclass
class AblateResult:
    output: Path
    #: the records of this study's cells (run now or before), grid order
    records: list[dict]
    #: cells run (trained) in this call, as "cell/seed"
    trained: list[str] = field(default_factory=list)
    table: Path | None = None
    plot: Path | None = None


# ---------------------------------------------------------------------------------------------- helpers
def _write_json(path: Path, obj) -> None:
    atomic_write_json(path, obj, default=str)


def _digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:12]


def _file_identity(files: list[str]) -> list:
    from litebert.corpus import resolve_corpus_files

    out = []
    for f in resolve_corpus_files(files):
        st = f.stat()
        out.append([str(f.resolve()), st.st_size, int(st.st_mtime)])
    return out


def _cached_dir(root: Path, name: str, build, built: list[Path] | None = None) -> Path:
    """``root/name``, built by ``build(tmp_dir)`` in a temporary directory and installed: complete or absent.
    When it is built now, it is appended to ``built``."""
    final = root / name
    if not final.is_dir():
        with atomic_directory(final) as tmp:
            build(tmp)
        if built is not None:
            built.append(final)
    return final


def _cut_lines(files: list[str], out_dir: Path, keep) -> list[str]:
    """Write ``keep(lines)`` of every file (by line) into ``out_dir`` under the file's own name; returns the paths."""
    from litebert.corpus import resolve_corpus_files

    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, f in enumerate(resolve_corpus_files(files)):
        lines = f.read_bytes().splitlines(keepends=True)
        dest = out_dir / f"{i}-{f.name}"
        dest.write_bytes(b"".join(keep(lines)))
        paths.append(str(dest))
    return paths


# ---------------------------------------------------------------------------------------------- inputs
def _input_files(option: str, paths: list[str]) -> list[Path]:
    """The files ``paths`` name (directories expanded), resolved; LitebertError naming ``option`` when one is missing,
    unreadable or empty."""
    from litebert.corpus import resolve_corpus_files

    try:
        return [f.resolve() for f in resolve_corpus_files(paths)]
    except LitebertError as exc:
        raise LitebertError(f"{option}: {exc}") from None
    except OSError as exc:
        raise LitebertError(f"{option} {exc.filename or ' '.join(paths)}: cannot read it ({exc.strerror})") from None


def _tokenizer_fingerprint(path: str) -> str:
    """The vocabulary fingerprint of the tokenizer directory ``path``; LitebertError when it is not one."""
    from litebert.tokenization import load_tokenizer

    if not Path(path).is_dir():
        raise LitebertError(f"--tokenizer {path}: no such directory")
    try:
        return load_tokenizer(path).vocab_fingerprint()
    except LitebertError as exc:
        raise LitebertError(f"--tokenizer {path}: not a tokenizer directory ({exc})") from None
    except (OSError, RuntimeError, ValueError) as exc:
        raise LitebertError(f"--tokenizer {path}: cannot read it as a tokenizer ({exc})") from None


def _check_output(root: Path) -> None:
    """LitebertError when ``root`` (``--output``) is not, and cannot become, a writable directory."""
    there = root if root.exists() else next((p for p in root.parents if p.exists()), Path("."))
    if not there.is_dir():
        where = "" if there == root else f" ({there} is a file)"
        raise LitebertError(
            f"--output {root}: not a directory{where}; give a new directory or the study directory of an earlier "
            "`litebert ablate`"
        )
    if not os.access(there, os.W_OK | os.X_OK):
        raise LitebertError(f"--output {root}: {there} is not writable")
    # ablate adds to its directory (data/, <study>/, results.jsonl): only into a study directory of its own
    check_output_target(
        root, replaceable=is_study_dir, earlier="a study directory of an earlier `litebert ablate`", overwrite=True
    )


def is_study_dir(root: Path) -> bool:
    """Whether ``root`` is a study directory of ``litebert ablate``: one holding a ``<study>.settings.json`` (written
    before anything else), ``results.jsonl`` or a ``<study>/`` with planned cells (``ablate_plan.json``: studies of
    versions before the settings file)."""
    return (
        (root / "results.jsonl").is_file()
        or any((root / f"{s}.settings.json").is_file() for s in STUDIES)
        or any(planned_runs(root / s) for s in STUDIES)
    )


def check_inputs(cfg: AblateConfig) -> StudyInputs:
    """Check what ``cfg`` reads and writes before anything is written, and identify it.

    The corpus and held-out corpus files must exist, be readable and hold text; ``--tokenizer`` must be a tokenizer
    directory; ``--output`` must be (or be creatable as) a writable directory, absent, empty or a study directory
    (:func:`is_study_dir`). Returns their identities
    (:class:`~litebert.ablate.provenance.StudyInputs`: resolved paths, sizes in bytes, vocabulary fingerprint).
    Raises :class:`LitebertError` naming the option and the file.
    """
    corpus = _input_files("--corpus", cfg.corpus)
    eval_corpus = _input_files("--eval-corpus", cfg.eval_corpus) if cfg.eval_corpus else None
    tokenizer = _tokenizer_fingerprint(cfg.tokenizer) if cfg.tokenizer else None
    _check_output(Path(cfg.output))
    return StudyInputs(
        corpus=tuple(str(f) for f in corpus),
        corpus_bytes=tuple(f.stat().st_size for f in corpus),
        eval_corpus=tuple(str(f) for f in eval_corpus) if eval_corpus is not None else None,
        eval_corpus_bytes=tuple(f.stat().st_size for f in eval_corpus) if eval_corpus is not None else None,
        tokenizer=tokenizer,
    )


# ---------------------------------------------------------------------------------------------- data stage
class StudyData:
    """The cached data of a study directory: tokenizer, held-out split, training and evaluation shards.

    ``inputs``: :func:`check_inputs` of ``cfg`` (checked here when not given).
    """

    def __init__(
        self, cfg: AblateConfig, root: Path, base_config, log=print, inputs: StudyInputs | None = None
    ) -> None:
        self.inputs = inputs if inputs is not None else check_inputs(cfg)
        self.cfg, self.root, self.log = cfg, root / "data", log
        self.root.mkdir(parents=True, exist_ok=True)
        self.base = base_config
        self._eval_sets: dict[str, str] | None = None
        #: the data directories built by this object (the others were cached by an earlier call)
        self.built: list[Path] = []
        #: a file cut from the corpus -> (the corpus file, None for a training part or --eval-fraction for a held-out
        #: part), so that errors name the user's file and line (see _user_paths)
        self._origins: dict[str, tuple[Path, float | None]] = {}
        ident = _file_identity(cfg.corpus)
        if cfg.eval_corpus:
            self.train_files, self.eval_files = list(cfg.corpus), list(cfg.eval_corpus)
            _file_identity(cfg.eval_corpus)  # missing/empty files fail here
        else:
            frac = cfg.eval_fraction
            key = _digest({"corpus": ident, "eval_fraction": frac})

            def split(tmp: Path) -> None:
                _cut_lines(cfg.corpus, tmp / "train", lambda ls: ls[: len(ls) - max(1, int(len(ls) * frac))])
                _cut_lines(cfg.corpus, tmp / "eval", lambda ls: ls[len(ls) - max(1, int(len(ls) * frac)) :])

            d = _cached_dir(self.root, f"split-{key}", split, self.built)
            self.train_files = sorted(str(p) for p in (d / "train").iterdir())
            self.eval_files = sorted(str(p) for p in (d / "eval").iterdir())
            for i, f in enumerate(resolve_corpus_files(cfg.corpus)):
                self._origins[str(d / "train" / f"{i}-{f.name}")] = (f, None)
                self._origins[str(d / "eval" / f"{i}-{f.name}")] = (f, frac)
        with self._user_paths():
            self.tokenizer = self._tokenizer()

    @contextlib.contextmanager
    def _user_paths(self):
        """Re-raise a LitebertError naming a file this object cut from the corpus (deleted when the call fails) with
        the user's corpus file, and the line there, instead."""
        try:
            yield
        except LitebertError as exc:
            msg = str(exc)
            for path in sorted(self._origins, key=len, reverse=True):
                if path not in msg:
                    continue
                orig, held_out = self._origins[path]
                offset = 0
                if held_out is not None:  # the held-out part is the last max(1, n * frac) lines
                    n = len(orig.read_bytes().splitlines())
                    offset = n - max(1, int(n * held_out))
                part = "held-out" if held_out is not None else "training"
                msg = re.sub(
                    re.escape(path) + r"(:(\d+))?",
                    lambda m, orig=orig, offset=offset, part=part: (
                        f"{orig}:{int(m.group(2)) + offset}" if m.group(2) else f"{orig} (its {part} part)"
                    ),
                    msg,
                )
            if msg == str(exc):
                raise
            raise LitebertError(msg) from None

    def _tokenizer(self) -> str:
        if self.cfg.tokenizer:
            return self.cfg.tokenizer
        from litebert.tokenization import train_tokenizer

        vocab = self.base.vocab_size
        key = _digest({"corpus": _file_identity(self.train_files), "vocab": vocab, "kind": "sentencepiece"})

        def build(tmp: Path) -> None:
            self.log(f"ablate: training a SentencePiece tokenizer ({vocab} ids) on {len(self.train_files)} file(s)")
            train_tokenizer(self.train_files, "sentencepiece", vocab, tmp)

        return str(_cached_dir(self.root, f"tokenizer-{key}", build, self.built))

    def _prepared(self, kind: str, files: list[str], task: str) -> str:
        from litebert.data import PrepareConfig, prepare

        cfg = self.cfg
        settings = {
            "max_seq_length": cfg.max_seq_length,
            "max_predictions_per_seq": cfg.max_predictions_per_seq,
            "masked_lm_prob": cfg.masked_lm_prob,
            "inter_sentence_task": task,
            "seed": cfg.data_seed,
            "max_position_embeddings": self.base.max_position_embeddings,
        }
        key = _digest({"files": _file_identity(files), "tokenizer": str(Path(self.tokenizer).resolve()), **settings})

        def build(tmp: Path) -> None:
            self.log(f"ablate: preparing {kind} data ({task}) -> {self.root}/{kind}-{task}-{key}")
            res = prepare(
                PrepareConfig(
                    corpus=files,
                    tokenizer=self.tokenizer,
                    output=str(tmp),
                    workers=cfg.workers,
                    progress=False,
                    overwrite=True,
                    **settings,
                )
            )
            self.log(res.summary)

        return str(_cached_dir(self.root, f"{kind}-{task}-{key}", build, self.built))

    def _prepared_named(self, kind: str, files: list[str], task: str) -> str:
        """:meth:`_prepared`, its errors naming the user's corpus files (:meth:`_user_paths`)."""
        with self._user_paths():
            return self._prepared(kind, files, task)

    def train(self, task: str, fraction: float = 1.0) -> str:
        """Training shards for sentence task ``task`` from the first ``fraction`` of every training file's lines."""
        files = self.train_files
        if fraction < 1.0:
            key = _digest({"corpus": _file_identity(files), "fraction": fraction})
            d = _cached_dir(
                self.root,
                f"fraction-{key}",
                lambda tmp: _cut_lines(files, tmp, lambda ls: ls[: max(1, int(len(ls) * fraction))]),
                self.built,
            )
            for j, (given, f) in enumerate(zip(files, resolve_corpus_files(files))):  # (files are files, not dirs)
                self._origins[str(d / f"{j}-{f.name}")] = self._origins.get(given, (f, None))
            files = sorted(str(p) for p in d.iterdir())
        return self._prepared_named(f"train{'' if fraction >= 1 else f'-{fraction:g}'}", files, task)

    def eval_sets(self) -> dict[str, str]:
        """{"sop": shards, "nsp": shards} of the held-out text (prepared on the first call)."""
        if self._eval_sets is None:
            self._eval_sets = {task: self._prepared_named("eval", self.eval_files, task) for task in ("sop", "nsp")}
        return self._eval_sets


# ---------------------------------------------------------------------------------------------- evaluation
def evaluate_model(model, eval_sets: dict[str, str], batch_size: int = 128, max_sequences: int | None = None) -> dict:
    """Held-out scores of an ``AlbertForPreTraining`` (put in eval mode; on its own device).

    ``eval_sets``: {"sop": dir, "nsp": dir} prepared shards (masks from the data's seed, epoch 0: the same for every
    model). Returns ``mlm_loss`` (mean cross-entropy per masked token of the SOP set, nats), ``mlm_accuracy``,
    ``mlm_tokens``, and for each task t in (sop, nsp): ``t_accuracy``, ``t_sequences``, ``t_ci95`` [low, high] (95 %
    Wilson interval), ``t_accuracy_label0`` / ``t_accuracy_label1`` (accuracy on the in-order pairs / on the
    swapped (SOP) or other-document (NSP) pairs) and ``t_label1_fraction``. At most ``max_sequences`` sequences per
    set (the first ones, in order).
    """
    import torch.nn.functional as F

    from litebert.training.loop import make_batch_factory
    from litebert.training.pretrain import _read_data

    device = next(model.parameters()).device
    model.eval()
    out: dict = {}
    for task, path in eval_sets.items():
        _, dataset = _read_data(path, f"{task} evaluation data")
        batches = make_batch_factory(dataset, batch_size, dataset.collator(), seed=0, shuffle=False, drop_last=False)
        mlm_sum = mlm_n = mlm_correct = 0.0
        seen = [0.0, 0.0]  # sequences with label 0, 1
        correct = [0.0, 0.0]  # of which the head got right
        with torch.no_grad():
            for batch in batches(0, 0):
                n_done = seen[0] + seen[1]
                if max_sequences is not None and n_done >= max_sequences:
                    break
                if max_sequences is not None:
                    batch = {k: v[: int(max_sequences - n_done)] for k, v in batch.items()}
                batch = {k: v.to(device) for k, v in batch.items()}
                labels = batch["labels"]  # (B, S), -100 = not predicted
                res = model(
                    input_ids=batch["input_ids"],
                    attention_mask=batch["attention_mask"],
                    token_type_ids=batch["token_type_ids"],
                    labels=labels,
                )
                target = labels[labels != -100]  # (P,), aligned with prediction_logits (P, V)
                logits = res.prediction_logits.float()
                if target.numel():
                    mlm_sum += float(F.cross_entropy(logits, target, reduction="sum"))
                    mlm_correct += float((logits.argmax(-1) == target).sum())
                    mlm_n += target.numel()
                pred = res.sop_logits.argmax(-1)  # (B,)
                gold = batch["sentence_order_label"].reshape(-1)
                for lab in (0, 1):
                    sel = gold == lab
                    seen[lab] += float(sel.sum())
                    correct[lab] += float((pred[sel] == lab).sum())
        n = seen[0] + seen[1]
        if task == "sop":
            out["mlm_loss"] = mlm_sum / max(mlm_n, 1.0)
            out["mlm_accuracy"] = mlm_correct / max(mlm_n, 1.0)
            out["mlm_tokens"] = int(mlm_n)
            out["mlm_ci95"] = list(wilson_interval(mlm_correct, mlm_n))
        out[f"{task}_accuracy"] = (correct[0] + correct[1]) / max(n, 1.0)
        out[f"{task}_sequences"] = int(n)
        out[f"{task}_ci95"] = list(wilson_interval(correct[0] + correct[1], n))
        out[f"{task}_accuracy_label0"] = correct[0] / seen[0] if seen[0] else float("nan")
        out[f"{task}_accuracy_label1"] = correct[1] / seen[1] if seen[1] else float("nan")
        out[f"{task}_label1_fraction"] = seen[1] / max(n, 1.0)
    return out


# ---------------------------------------------------------------------------------------------- one cell
def _load_base(base_config: str | None):
    """The base model config: ``--base-config`` (a config.json or preset), or :data:`DEFAULT_BASE`. Raises
    :class:`LitebertError` for an unreadable config or one the cells are not defined for
    (:func:`~litebert.ablate.grid.check_base`)."""
    from litebert.config import AlbertConfig

    if base_config is None:
        return AlbertConfig(**DEFAULT_BASE)
    base = AlbertConfig.load(base_config)
    check_base(base, f"--base-config {base_config}")
    return base


def run_dir(root: Path, cell: Cell, seed_index: int) -> Path:
    """``DIR/<study>/<cell>/`` for the first seed, ``DIR/<study>/<cell>/seed-k/`` for seed k ≥ 1."""
    d = root / cell.study / cell.name
    return d if seed_index == 0 else d / f"seed-{seed_index}"


def _estimate_steps(model_config, data_dir: str, cfg: AblateConfig, minutes: float, log=print) -> int:
    """Optimizer steps that fit in ``minutes``: time a few real steps of this cell (model, optimizer, batch)."""
    from litebert.modeling import AlbertForPreTraining
    from litebert.optim import build_optimizer
    from litebert.training.loop import make_batch_factory
    from litebert.training.pretrain import _pretraining_sums, _read_data

    _, dataset = _read_data(data_dir, "--data")
    torch.manual_seed(0)
    model = AlbertForPreTraining(model_config)
    opt = build_optimizer(model, cfg.optimizer, lr=1e-5, weight_decay=0.01)
    batches = iter(make_batch_factory(dataset, cfg.batch_size, dataset.collator(), seed=0)(0, 0))
    model.train()
    times = []
    for i in range(8):
        batch = next(batches)
        t = time.perf_counter()
        sums, _ = _pretraining_sums(model, batch)
        (sums["mlm_loss"] / 1000 + sums["sop_loss"] / 1000).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if i >= 2:  # the first steps warm up allocators and caches
            times.append(time.perf_counter() - t)
    per_step = sorted(times)[len(times) // 2]
    steps = max(10, int(minutes * 60 / per_step))
    log(f"ablate: about {per_step * 1000:.0f} ms per step -> {steps} steps in {minutes:g} minutes")
    return steps


def _finetune_metric(model_dir: Path, out: Path, cfg: AblateConfig, seed: int, log=print) -> dict:
    """A short fine-tuning run of ``model_dir`` on the task preset; {"finetune_task", "finetune_settings",
    "finetune_<metric>"}."""
    from litebert.ablate.finetune_cell import short_finetune

    return short_finetune(
        model_dir, out, cfg.finetune_task, cfg.finetune_steps, seed, cfg.finetune_data, cfg.max_seq_length, log
    )


def _with_finetune(cfg: AblateConfig, record: dict, out: Path, log=print) -> dict:
    """``record`` (of the cell run directory ``out``) with the dev metrics of ``--finetune-task``: fine-tuned now,
    from ``out/final``, unless the record already holds that task's metrics of the same fine-tuning settings
    (``finetune_settings``: steps, data, seed, length), or no task is given. Metrics of another task or settings are
    replaced (another task's run stays in ``out/finetune-<task>/``; one of other settings is redone there). Raises :class:`LitebertError` when the
    cell's ``final/`` model is gone."""
    from litebert.ablate.finetune_cell import finetune_settings

    if not cfg.finetune_task or (
        record.get("finetune_task") == cfg.finetune_task
        and record.get("finetune_settings")
        == finetune_settings(
            cfg.finetune_task, cfg.finetune_steps, record["seed"], cfg.finetune_data, cfg.max_seq_length
        )
    ):
        return record
    final = out / "final"
    if not (final / "config.json").is_file():
        raise LitebertError(
            f"{record['study']}/{record['cell']} seed {record['seed']}: --finetune-task {cfg.finetune_task} needs "
            f"the cell's model {final}, which is gone: delete {out} to train the cell again, or drop --finetune-task"
        )
    replaced = f" (replacing its {record['finetune_task']} metrics)" if "finetune_task" in record else ""
    log(f"ablate: {record['cell']} seed {record['seed']}: fine-tuning on {cfg.finetune_task}{replaced}")
    kept = {k: v for k, v in record.items() if not k.startswith("finetune_")}
    return {**kept, **_finetune_metric(final, out / f"finetune-{cfg.finetune_task}", cfg, record["seed"], log)}


def _resumable(out: Path) -> bool:
    """Whether the cell run directory ``out`` holds something a rerun continues from: a result, a final model or a
    complete checkpoint."""
    from litebert.training.state import list_checkpoints

    return (out / RESULT_FILE).is_file() or (out / "final").is_dir() or bool(list_checkpoints(out, warn=False))


def run_cell(
    cfg: AblateConfig,
    cell: Cell,
    seed_index: int,
    data: StudyData,
    eval_sets: dict[str, str] | None,
    base,
    log=print,
) -> tuple[dict, bool]:
    """Train (or resume) and evaluate one cell; returns (its results record, whether it trained now). A finished cell
    (``ablate_result.json``) returns its record, fine-tuned first when ``cfg.finetune_task`` is new to it.

    ``eval_sets``: the held-out shards, or None for ``data.eval_sets()`` (prepared when a cell first needs them).
    Raises :class:`LitebertError` when the cell's training data holds less than one batch (before its directory is
    made), or any error of ``pretrain``/evaluation; then a cell directory this call made is removed again unless it
    holds something to resume (a complete checkpoint).
    """
    from litebert.training.pretrain import _read_data

    out = run_dir(Path(cfg.output), cell, seed_index)
    result_path = out / RESULT_FILE
    if result_path.is_file():  # finished: not retrained, fine-tuned when --finetune-task is new to it
        record = json.loads(result_path.read_text(encoding="utf-8"))
        finetuned = _with_finetune(cfg, record, out, log)
        if finetuned is not record:
            _write_json(result_path, finetuned)
        return finetuned, False
    eval_sets = eval_sets if eval_sets is not None else data.eval_sets()
    train_dir = data.train(cell.inter_sentence_task, cell.data_fraction)
    manifest, dataset = _read_data(train_dir, "--data")
    if len(dataset) < cfg.batch_size:
        raise LitebertError(
            f"{cell.study}/{cell.name}: its training data holds {len(dataset)} pair(s), less than one batch of "
            f"--batch-size {cfg.batch_size}: give more text (--corpus) or a smaller --batch-size"
        )
    cell_dir = Path(cfg.output) / cell.study / cell.name
    made = [d for d in dict.fromkeys((cell_dir, out)) if not d.exists()]  # what mkdir creates, outermost first
    out.mkdir(parents=True, exist_ok=True)
    try:
        return _train_and_evaluate(cfg, cell, seed_index, data, eval_sets, base, train_dir, manifest, dataset, log)
    except Exception:
        if made and not _resumable(out):
            shutil.rmtree(made[0], ignore_errors=True)
        raise


def _train_and_evaluate(
    cfg: AblateConfig, cell: Cell, seed_index: int, data: StudyData, eval_sets, base, train_dir, manifest, dataset, log
) -> tuple[dict, bool]:
    """:func:`run_cell` once its directory exists: plan, train (or resume), evaluate, write ``ablate_result.json``."""
    from litebert.modeling import AlbertForPreTraining
    from litebert.training.pretrain import PretrainConfig, model_config_for_data, pretrain

    out = run_dir(Path(cfg.output), cell, seed_index)
    result_path = out / RESULT_FILE
    seed = 42 + seed_index
    cell_config = cell.config(base)
    cell_config_path = out / "cell_model_config.json"
    plan_path = out / PLAN_FILE
    if not plan_path.is_file() or not cell_config_path.is_file():  # a planned cell's config was checked: keep it
        _write_json(cell_config_path, cell_config.to_dict())
    model_config = model_config_for_data(str(cell_config_path), manifest, log=lambda *a: None)

    if plan_path.is_file():
        plan = json.loads(plan_path.read_text(encoding="utf-8"))
    else:
        steps = cfg.steps or _estimate_steps(model_config, train_dir, cfg, cfg.budget_minutes, log)
        plan = {
            "study": cell.study,
            "cell": cell.name,
            "seed": seed,
            "max_steps": steps,
            "max_minutes": cfg.budget_minutes,
            "train_data": train_dir,
            "eval_data": eval_sets,
            "cell_definition": dataclasses.asdict(cell),
            # what check_study compares on every rerun (litebert.ablate.provenance)
            "settings": current_settings(cfg, cell, seed, data.inputs, steps),
        }
        _write_json(plan_path, plan)
    trained = False
    t0 = time.perf_counter()
    cpu0 = time.process_time()
    if cell.system == "transformers":
        from litebert.ablate.system import train_transformers

        final = out / "final"
        if not (final / "config.json").is_file():
            info = train_transformers(
                model_config,
                data.train_files,
                data.tokenizer,
                out,
                plan["max_steps"],
                cfg,
                seed,
                max_minutes=plan["max_minutes"],
            )
            info["cpu_seconds"] = time.process_time() - cpu0
            _write_json(out / "transformers_run.json", info)
            trained = True
        info = json.loads((out / "transformers_run.json").read_text(encoding="utf-8"))
        steps_done, seconds, tokens = info["steps"], info["seconds"], info["tokens"]
    else:
        if not (out / "final" / "config.json").is_file():
            warmup = int(cfg.warmup_ratio * plan["max_steps"])
            res = pretrain(
                PretrainConfig(
                    data=train_dir,
                    output=str(out),
                    model_config=str(cell_config_path),
                    optimizer=cfg.optimizer,
                    learning_rate=cfg.learning_rate,
                    warmup_steps=warmup,
                    max_steps=plan["max_steps"],
                    max_minutes=plan["max_minutes"],
                    batch_size=cfg.batch_size,
                    logging_steps=50,
                    save_steps=cfg.save_steps,
                    save_total_limit=2,
                    seed=seed,
                    resume="auto",
                    device="cpu",
                    progress_bar=cfg.progress_bar,
                ),
                caller_files=(plan_path.name, cell_config_path.name),  # ablate's own files in the cell directory
            )
            # the whole run's training time: a resumed cell adds what its checkpoint recorded of earlier segments
            _write_json(
                out / "pretrain_result.json",
                {
                    "step": res.step,
                    "seconds": res.train_seconds,
                    "cpu_seconds": res.train_cpu_seconds,
                    "seconds_this_call": res.seconds,
                },
            )
            trained = True
        info = json.loads((out / "pretrain_result.json").read_text(encoding="utf-8"))
        steps_done, seconds = info["step"], info["seconds"]
        mean_len = (
            float(dataset.lengths.double().mean())
            if torch.is_tensor(dataset.lengths)
            else float(dataset.lengths.mean())
        )
        tokens = round(steps_done * cfg.batch_size * mean_len)
    model = AlbertForPreTraining.from_pretrained(out / "final")
    metrics = evaluate_model(model, eval_sets, cfg.eval_batch_size, cfg.max_eval_sequences)
    record = {
        "study": cell.study,
        "cell": cell.name,
        "seed": seed,
        "system": cell.system,
        "parameters": model.num_parameters(),
        "steps": steps_done,
        "max_steps": plan["max_steps"],
        "seconds": round(seconds, 1),
        "cpu_seconds": round(info.get("cpu_seconds", float("nan")), 1),
        "tokens": tokens,
        "inter_sentence_task": cell.inter_sentence_task,
        "data_fraction": cell.data_fraction,
        "budget_minutes": plan["max_minutes"],
        "model": {
            k: getattr(model_config, k)
            for k in (
                "vocab_size",
                "embedding_size",
                "hidden_size",
                "num_hidden_layers",
                "num_hidden_groups",
                "num_attention_heads",
                "intermediate_size",
                "sharing",
                "hidden_dropout_prob",
            )
        },
        **metrics,
    }
    record = _with_finetune(cfg, record, out, log)
    record["wall_seconds_this_call"] = round(time.perf_counter() - t0, 1)
    _write_json(result_path, record)
    return record, trained


# ---------------------------------------------------------------------------------------------- results
def collect_records(root: Path) -> list[dict]:
    """Every cell record under ``root`` (all studies), in study order, then cell directory order, then seed."""
    records = []
    for study in STUDIES:
        d = root / study
        if not d.is_dir():
            continue
        for path in sorted(d.glob(f"*/{RESULT_FILE}")) + sorted(d.glob(f"*/seed-*/{RESULT_FILE}")):
            records.append(json.loads(path.read_text(encoding="utf-8")))
    return records


def write_results(root: Path) -> Path:
    """``root/results.jsonl`` rewritten (atomically) from every cell's record."""
    lines = [json.dumps(rec, default=str) + "\n" for rec in collect_records(root)]
    return atomic_write_text(root / "results.jsonl", "".join(lines))


@dataclass(frozen=True)
class _NewPaths:
    """What a call of :func:`ablate` may create that did not exist before it wrote anything: so that a call that
    fails can remove its own leftovers, and nothing else."""

    root: Path
    study: str
    #: the output directory and those of its ancestors that do not exist yet, outermost first
    dirs: tuple[Path, ...]
    data: bool
    study_dir: bool
    settings: bool

    @classmethod
    def before(cls, root: Path, study: str) -> _NewPaths:
        missing = tuple(p for p in (*reversed(root.parents), root) if not p.exists())
        return cls(
            root,
            study,
            missing,
            data=not (root / "data").exists(),
            study_dir=not (root / study).exists(),
            settings=not (root / f"{study}.settings.json").exists(),
        )

    def undo(self, built: list[Path]) -> None:
        """After a failure that left no planned cell in the study (:func:`run_cell` removes a cell it made with
        nothing to resume): remove the study settings file, the study directory and the data directory this call
        created (in a data directory of earlier calls: the data directories it ``built``), then its output
        directories when they are left empty."""
        if planned_runs(self.root / self.study):
            return
        if self.settings:
            (self.root / f"{self.study}.settings.json").unlink(missing_ok=True)
        if self.study_dir:
            shutil.rmtree(self.root / self.study, ignore_errors=True)
        for d in [self.root / "data"] if self.data else built:
            shutil.rmtree(d, ignore_errors=True)
        for d in reversed(self.dirs):  # innermost first, and only when empty: never another run's files
            if d.is_dir() and not any(d.iterdir()):
                d.rmdir()


def _make_output(root: Path) -> None:
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LitebertError(f"--output {root}: cannot create the directory ({exc.strerror or exc})") from None


def ablate(cfg: AblateConfig, log=print) -> AblateResult:
    """Run (or finish) ``cfg.study``'s grid; see the module docstring.

    Nothing is written before the inputs are checked (:func:`check_inputs`) and every planned cell of the study
    agrees with ``cfg`` on its training- and evaluation-defining settings
    (:func:`litebert.ablate.provenance.check_study`); a call that fails leaving no cell with something to resume
    removes what it created.

    Raises :class:`LitebertError` for an unknown study or cell, a bad base config (also one with ``inner_group_num``
    other than 1), a missing, unreadable or empty
    corpus file, a directory that is not a tokenizer, an ``--output`` that cannot be a directory, a planned cell with
    other settings, a base config that transformers cannot represent (system study), training data of less than one
    batch, or any error of ``prepare``/``pretrain``.
    """
    from litebert.ablate.report import write_report

    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    root = Path(cfg.output)
    base = _load_base(cfg.base_config)
    cells = select_cells(build_grid(cfg.study, base), cfg.cells)  # unknown cells fail before any work
    if cfg.study == "system" and not base.hf_compatible:
        raise LitebertError(
            f"--base-config: the system study needs a model transformers can build ({base.hf_incompatibility})"
        )
    if cfg.finetune_task:
        from litebert.ablate.finetune_cell import task_files

        task_files(cfg.finetune_task, cfg.finetune_data)  # a missing task file fails before any training
    inputs = check_inputs(cfg)
    check_study(cfg, base, root, inputs)  # the settings file below then describes every cell of the study
    new = _NewPaths.before(root, cfg.study)
    records, trained = [], []
    data = None
    try:
        _make_output(root)
        _write_json(root / f"{cfg.study}.settings.json", dataclasses.asdict(cfg))
        data = StudyData(cfg, root, base, log, inputs)
        for cell in cells:
            for k in range(cfg.seeds):
                log(f"ablate: {cfg.study}/{cell.name} seed {42 + k}")
                rec, did = run_cell(cfg, cell, k, data, None, base, log)
                records.append(rec)
                if did:
                    trained.append(f"{cell.name}/{rec['seed']}")
                write_results(root)
                log(
                    f"ablate: {cell.name} seed {rec['seed']}: {rec['parameters']:,} parameters, {rec['steps']} "
                    f"steps, mlm_accuracy {rec['mlm_accuracy']:.4f}, sop_accuracy {rec['sop_accuracy']:.4f}, "
                    f"nsp_accuracy {rec['nsp_accuracy']:.4f}"
                )
    except Exception:
        new.undo(data.built if data is not None else [])
        raise
    grid = build_grid(cfg.study, base)
    order = {c.name: i for i, c in enumerate(grid)}
    mine = sorted(
        (r for r in collect_records(root) if r["study"] == cfg.study),
        key=lambda r: (order.get(r["cell"], len(order)), r["seed"]),
    )
    table, plot = write_report(root, cfg.study, mine, {c.name: c.paper_key for c in grid})
    return AblateResult(output=root, records=records, trained=trained, table=table, plot=plot)
