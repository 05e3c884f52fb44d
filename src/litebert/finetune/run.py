"""Fine-tune, evaluate and predict: one run layer over the task kinds of :mod:`litebert.finetune.kinds`
(sequence classification / regression, token classification, multiple choice, extractive QA).

``finetune(FinetuneConfig)`` runs :func:`litebert.training.train` — the loop that pretraining uses — with the
kind's objective (summed loss) and a dev-set ``eval_fn``. Output directory::

    OUTPUT/best/               the best checkpoint by the kind's first dev metric: an HF model directory
                               (config.json naming the head in ``architectures``, with label2id/id2label,
                               model.safetensors) + tokenizer files
    OUTPUT/eval_results.json   dev metrics of best/ (classification: {"accuracy": ..., "f1": ..., "mcc": ...} as
                               applicable; NER: entity precision/recall/f1, token accuracy), plus "eval_loss",
                               "num_examples", "best_step"
    OUTPUT/predictions.*       dev predictions of best/ (classification, multiple choice: predictions.tsv with
                               index, prediction, label; NER: predictions.txt / .jsonl in the input's layout; QA:
                               predictions.json + nbest_predictions.json (+ null_odds.json for SQuAD v2))
    OUTPUT/test_predictions.*  with --test: the same for the test file (labels when it has them)
    OUTPUT/test_results.json   with a labelled --test file: its metrics
    OUTPUT/finetune_config.json  the settings of the run, the label space, truncation and dropped-row counts
    OUTPUT/run_settings.json   the same with the settings under "finetune_config" (read back by ``--config``)
    OUTPUT/metrics.jsonl, tb/, train.log, checkpoints/   written by the training loop (a checkpoint at every
                               evaluation by default, --save-steps N: what --resume auto continues from)

OUTPUT must be absent or empty, or (``--resume``) an unfinished ``finetune`` run of its own
(:func:`litebert.training.run.check_output_dir`). ``evaluate(EvaluateConfig)`` and ``predict(EvaluateConfig)``
load a fine-tuned directory (litebert's or transformers' head model) and write ``eval_results.json`` / the
predictions file, never over files already there; without ``--max-seq-length`` they use the length the model
was fine-tuned with (``litebert_max_seq_length`` in its ``config.json``).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import random
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from litebert.checkpoint import load_config
from litebert.data import tokenizer_vocabulary
from litebert.errors import LitebertError
from litebert.fileio import atomic_directory, atomic_write_json, finite, read_json
from litebert.finetune.classification import make_objective, run_inference, write_predictions  # noqa: F401
from litebert.finetune.data import LabelSpace
from litebert.finetune.hub_data import HubSplit, hub_source, load_split, read_split
from litebert.finetune.kinds import TASK_TYPES, Features, TaskKind, infer, make_kind
from litebert.finetune.metrics import METRICS
from litebert.finetune.readers import Column, ColumnSpec, ReadResult, read_examples
from litebert.finetune.tasks import HF_PROBLEM_TYPES, PROBLEM_TYPES, TASKS, TaskSpec, get_task
from litebert.hub import HUB_METAVAR, revision_setting
from litebert.optim import OPTIMIZERS
from litebert.precision import PRECISIONS, PrecisionChoice, resolve_precision
from litebert.settings import check, default_of, fail, jsonable, setting

log = logging.getLogger("litebert.finetune")

INITS = ("pretrained", "random")
#: what a resumed fine-tuning run may set differently (:func:`litebert.training.run.check_resume_settings`): none
#: of these changes the weights it trains or the files it predicts (``--test`` is a data file like the others);
#: ``epochs`` and ``max_steps`` are compared as the steps they resolve to
RESUME_MAY_CHANGE = (
    "output_dir",
    "resume",
    "epochs",
    "eval_batch_size",
    "eval_steps",
    "save_steps",
    "logging_steps",
    "device",
    "progress_bar",
    "keep_checkpoints",
)
#: ``--max-seq-length`` of finetune, and of evaluate/predict for a model that does not record its fine-tuned length
DEFAULT_MAX_SEQ_LENGTH = 128


# ------------------------------------------------------------------------------------------------------- configs
@dataclass
class DataOptions:
    """How to read the data files (shared by finetune, evaluate and predict); each field's ``help`` documents it.

    ``header``: ``False`` = the files have no header (``--no-header``); ``None`` = the task's layout, or a header
    when any column is given by name. ``task_type`` (:data:`litebert.finetune.kinds.TASK_TYPES`) is for files of
    one's own; default the task preset's kind. Raises LitebertError ``"--option value: why"`` when invalid.
    """

    task: str | None = setting(
        None,
        metavar="NAME",
        group="data layout",
        help=f"known task: fills in columns, labels and metrics ({', '.join(TASKS)})",
    )
    text_column: Column | None = setting(
        None, metavar="C", group="data layout", help="text column: header name or 0-based index"
    )
    text_pair_column: Column | None = setting(
        None, metavar="C", group="data layout", help="second text column of sentence-pair tasks"
    )
    label_column: Column | None = setting(
        None, metavar="C", group="data layout", help="label column: header name or 0-based index"
    )
    header: bool | None = setting(
        None,
        option="--no-header",
        const=False,
        group="data layout",
        help="the files have no header row (columns by index)",
    )
    delimiter: str | None = setting(
        None, metavar="D", group="data layout", help="field separator: \\t (default for .tsv), ',' (.csv), ';' ..."
    )
    label_separator: str = setting(
        ",", metavar="S", group="data layout", help="separator between the labels of a multi-label field"
    )
    task_type: str | None = setting(
        None,
        choices=TASK_TYPES,
        group="data layout",
        help="kind of task for files of one's own (default: the --task preset's, else classification)",
    )
    word_column: int | None = setting(
        None,
        ge=0,
        metavar="I",
        group="data layout",
        help="token classification: 0-based word column of a CoNLL-style file (default 0)",
    )
    tag_column: int | None = setting(
        None,
        ge=0,
        metavar="I",
        group="data layout",
        help="token classification: 0-based tag column of a CoNLL-style file (default: the last)",
    )
    doc_stride: int | None = setting(
        None,
        ge=0,
        metavar="N",
        group="extractive QA",
        help="QA: tokens shared by consecutive context windows (transformers' meaning; default "
        "min(128, (max_seq_length - 3 - max_query_length) // 2), or as saved with the model)",
    )
    max_query_length: int | None = setting(
        None,
        ge=1,
        metavar="N",
        group="extractive QA",
        help="QA: question tokens kept (default min(64, (max_seq_length - 3) // 2), or as saved with the model)",
    )
    n_best_size: int | None = setting(
        None,
        ge=1,
        metavar="N",
        group="extractive QA",
        help="QA: spans kept per question in nbest_predictions.json (default 20, or as saved)",
    )
    max_answer_length: int | None = setting(
        None, ge=1, metavar="N", group="extractive QA", help="QA: longest answer in tokens (default 30, or as saved)"
    )
    dataset_revision: str | None = setting(
        None,
        metavar="REV",
        group="Hub data",
        help="branch, tag or commit of the --task's Hub data set, read for the splits without a data file (default: "
        "the task table's, else main; evaluate/predict: the commit the model was fine-tuned on)",
    )

    def __post_init__(self) -> None:
        from litebert.finetune.readers import parse_column

        check(self)
        self.text_column = parse_column(self.text_column)
        self.text_pair_column = parse_column(self.text_pair_column)
        self.label_column = parse_column(self.label_column)
        if self.task is not None:
            try:
                get_task(self.task)  # fail early on an unknown name (get_task also takes sst-2, STS-B ...)
            except LitebertError:
                fail(self, "task", f"unknown task; known tasks: {', '.join(TASKS)}")

    def require_source(self) -> None:
        """Raise LitebertError unless these options say what the data is: a task, a text column, or a task type
        other than classification. (``evaluate``/``predict`` accept layout options alone, such as ``--delimiter``,
        and lay them over the layout saved with the model; ``finetune`` needs a source.)"""
        if self.task is None and self.text_column is None and self.task_type in (None, "classification"):
            raise LitebertError(
                "give --task NAME or --text-column (and --label-column) to say where the data is, "
                "or --task-type token/choice/qa for files of one's own"
            )

    @property
    def task_spec(self) -> TaskSpec | None:
        return get_task(self.task) if self.task else None

    def spec_for(self, path: str | Path, *, labels: bool) -> ColumnSpec:
        """The column spec for one file: the task's layout for that file, with the user's columns on top. A file
        whose header fits none of the task's layouts is read with the user's columns over the task's first named
        layout when the user gave any (``--text-column`` ...); without them it is an error (``layout_for``)."""
        user = {
            k: v
            for k, v in (("text", self.text_column), ("text_pair", self.text_pair_column), ("label", self.label_column))
            if v is not None
        }
        spec = None
        if self.task_spec:
            try:
                spec = self.task_spec.layout_for(path, self.delimiter)
            except LitebertError:
                named = [layout.columns for layout in self.task_spec.layouts if layout.signature]
                if not user or not named:
                    raise
                spec = named[0]
        if spec is None:  # the label column is read whenever the file has it, as a task layout's is (predict)
            spec = ColumnSpec(
                text=self.text_column,
                text_pair=self.text_pair_column,
                label=self.label_column,
                header=self.header,
                label_optional=not labels,
            )
        elif user or self.header is not None:
            spec = dataclasses.replace(spec, **user, **({} if self.header is None else {"header": self.header}))
        if not labels and spec.label is not None:
            spec = dataclasses.replace(spec, label_optional=True)
        return spec

    def read(self, path: str | Path, *, require_label: bool) -> ReadResult:
        return read_examples(
            path, self.spec_for(path, labels=require_label), delimiter=self.delimiter, require_label=require_label
        )


@dataclass
class FinetuneConfig:
    """Settings of one fine-tuning run: the ``litebert finetune`` options, one field each (derived from here).

    ``model`` is an HF-format model directory (``config.json`` + weights, tokenizer files): a pretraining
    ``final/``, a transformers ALBERT directory or an albert_zh conversion. ``resume``: None (fresh run into an
    absent or empty ``output_dir``), ``"auto"`` (the newest complete checkpoint of the run in ``output_dir``, or
    step 0 when it has none) or a ``step-N`` directory. ``save_steps`` None: a checkpoint at every evaluation (the
    newest one kept). ``data_seed`` is kept
    apart from ``seed`` so that runs with different seeds see the same subsample. Raises LitebertError
    ``"--option value: why"`` on construction for a bad value.
    """

    model: str = setting(
        metavar=HUB_METAVAR, help="model directory (HF format, e.g. pretraining final/) or Hub id ORG/NAME"
    )
    output_dir: str = setting(
        option="--output", metavar="DIR", help="run directory: new or empty (with --resume: the run's own)"
    )
    train_file: str | None = setting(
        None,
        option="--train",
        metavar="FILE",
        help="training data (TSV, CSV, JSON lines); default: the --task's Hub data set, its train split",
    )
    dev_file: str | None = setting(
        None,
        option="--dev",
        metavar="FILE",
        help="dev data: selects best/; default: the --task's Hub data set, its dev split (GLUE: validation)",
    )
    test_file: str | None = setting(
        None,
        option="--test",
        metavar="FILE",
        help="also predict this file (OUTPUT/test_predictions.*, and test_results.json when it has labels)",
    )
    test_split: str | None = setting(
        None,
        metavar="SPLIT",
        group="Hub data",
        help="as --test, a split of the --task's Hub data set: test (the task's test split), dev, or a Hub split "
        "name; a split without labels (GLUE/CLUE test) is predicted, not scored",
    )
    data: DataOptions = field(default_factory=DataOptions)
    metrics: tuple[str, ...] | None = setting(
        None,
        option="--metric",
        metavar="NAME",
        help=f"metrics; the first picks the best checkpoint (classification: "
        f"{', '.join(METRICS)}; NER: f1, precision, recall, accuracy; "
        "multiple choice: accuracy)",
    )
    problem_type: str | None = setting(
        None, choices=PROBLEM_TYPES, help="default single_label (regression for a regression task)"
    )
    epochs: float = setting(
        3.0, help="passes over the training set (> 0; fractions allowed; a max_steps setting overrides it)"
    )
    max_steps: int | None = setting(None, gt=0, help="optimizer steps (overrides --epochs)")
    batch_size: int = setting(32, gt=0, help="examples per optimizer step (per process)")
    eval_batch_size: int = setting(64, gt=0, help="examples per forward at evaluation")
    learning_rate: float = setting(2e-5, gt=0, help="peak learning rate (linear warm-up, linear decay to 0)")
    warmup_ratio: float = setting(0.1, ge=0, lt=1, help="fraction of the steps spent warming up")
    weight_decay: float = setting(0.01, ge=0, help="decoupled weight decay (not on biases and LayerNorm)")
    max_grad_norm: float = setting(1.0, ge=0, help="global-norm clip; 0 = off")
    optimizer: str = setting("adamw", choices=OPTIMIZERS, help="AdamW or LAMB")
    max_seq_length: int = setting(
        DEFAULT_MAX_SEQ_LENGTH,
        ge=3,
        group="data layout",
        help="tokens per example (sentence pairs: at least 5); longer rows are truncated",
    )
    seed: int = setting(42, help="model init of the head (all weights with --init random), shuffling, dropout")
    data_seed: int = setting(0, help="seed of the --max-*-examples subsample")
    eval_steps: int = setting(0, ge=0, help="evaluate every N steps (0 = once per epoch)")
    save_steps: int | None = setting(
        None,
        ge=0,
        metavar="N",
        help="checkpoint the training state every N steps, what --resume auto continues from (0 = only at the "
        "end; default: at every evaluation); the newest checkpoint is kept",
    )
    logging_steps: int = setting(50, gt=0, help="training log line every N steps")
    early_stopping_patience: int | None = setting(
        None, gt=0, metavar="N", help="stop after N evaluations without improvement"
    )
    max_train_examples: int | None = setting(None, gt=0, metavar="N", help="random subsample of train")
    max_eval_examples: int | None = setting(None, gt=0, metavar="N", help="random subsample of dev")
    init: str = setting(
        "pretrained",
        choices=INITS,
        help="'random': same architecture, fresh weights (the baseline of scripts/compare_pretraining.py)",
    )
    tokenizer: str | None = setting(
        None,
        metavar=HUB_METAVAR,
        group="data layout",
        help="tokenizer directory or Hub id ORG/NAME (default: the model directory)",
    )
    revision: str | None = revision_setting()  # of a Hub id given as --model/--tokenizer
    classifier_dropout: float | None = setting(None, ge=0, lt=1, help="override classifier_dropout_prob")
    hidden_dropout: float | None = setting(None, ge=0, lt=1, help="override hidden/attention dropout")
    precision: str = setting(
        "auto",
        choices=PRECISIONS,
        help="auto: bf16 autocast where the device computes bf16 natively, else fp32 (on resume: "
        "the checkpoint's); bf16/fp16: autocast; weights and checkpoints stay fp32",
    )
    device: str | None = setting(
        None, choices=("cpu", "cuda"), group="data layout", help="default: cuda when available"
    )
    resume: str | None = setting(
        None,
        metavar="auto|PATH",
        help="continue the run in OUTPUT from its newest complete checkpoint (auto; none: from step 0) or from PATH",
    )
    progress_bar: bool = setting(
        True, option="--no-progress", aliases=("--no-progress-bar",), negate=True, help="no progress bar"
    )
    keep_checkpoints: bool = setting(
        True,
        option="--no-checkpoints",
        negate=True,
        help="delete the training-state checkpoints/ at the end (best/ is kept)",
    )

    def __post_init__(self) -> None:
        if isinstance(self.data, dict):
            self.data = DataOptions(**self.data)
        check(self)
        self.data.require_source()
        if self.train_file is None or self.dev_file is None:  # read from the task's Hub data set: it must have one
            hub_source(self.data.task_spec, "--train" if self.train_file is None else "--dev")
        if self.test_split is not None:
            if self.test_file is not None:
                fail(self, "test_split", "give --test FILE or --test-split SPLIT, not both")
            hub_source(self.data.task_spec, "--test")
        if not self.epochs > 0 and self.max_steps is None:
            fail(self, "epochs", "must be > 0 (or give --max-steps)")


@dataclass
class EvaluateConfig:
    """Settings of ``litebert evaluate`` / ``litebert predict`` (their options derive from here).

    ``data``: how to read the file; ``None`` uses what fine-tuning saved in ``config.json``: the task
    (``finetuning_task``) or the user's column options (``litebert_data_options``). ``output_dir`` None writes
    nothing; a directory that already holds a file the command would write is refused. ``max_seq_length`` None:
    the length the model was fine-tuned with (``litebert_max_seq_length`` in ``config.json``; 128 for models that
    do not record it).
    """

    model: str = setting(metavar=HUB_METAVAR, help="fine-tuned model directory (e.g. OUTPUT/best) or Hub id ORG/NAME")
    data_file: str | None = setting(
        None,
        option="--data",
        metavar="FILE",
        help="the file to evaluate / predict; default: a split (--split) of the task's Hub data set",
    )
    split: str | None = setting(
        None,
        metavar="SPLIT",
        group="Hub data",
        help="without --data: the split of the task's Hub data set to read: dev, test (the task's) or a Hub split "
        "name (default: evaluate dev, predict test)",
    )
    output_dir: str | None = setting(
        None,
        option="--output",
        metavar="DIR",
        help="write run_settings.json, eval_results.json (evaluate) and the predictions here (predictions.tsv; "
        "NER predictions.txt/.jsonl; QA predictions.json, nbest_predictions.json); none of them may exist yet "
        "(predict without --output prints the predictions)",
    )
    data: DataOptions | None = None
    metrics: tuple[str, ...] | None = setting(
        None, option="--metric", metavar="NAME", help="metrics (default: the task's, else by problem type)"
    )
    batch_size: int | None = setting(
        None,
        gt=0,
        help="examples per forward (default: 64 on the CPU; on a GPU chosen from its free memory and the length)",
    )
    max_seq_length: int | None = setting(
        None,
        ge=3,
        group="data layout",
        help="tokens per example; longer rows are truncated (default: the length the model was fine-tuned with, "
        f"else {DEFAULT_MAX_SEQ_LENGTH})",
    )
    tokenizer: str | None = setting(
        None,
        metavar=HUB_METAVAR,
        group="data layout",
        help="tokenizer directory or Hub id ORG/NAME (default: the model directory)",
    )
    revision: str | None = revision_setting()  # of a Hub id given as --model/--tokenizer
    device: str | None = setting(
        None, choices=("cpu", "cuda"), group="data layout", help="default: cuda when available"
    )
    max_examples: int | None = setting(None, gt=0, metavar="N", help="only the first N rows")
    #: issue 14 (litebert.inference): how the model runs; docs/deploy.md
    backend: str | None = setting(
        None, choices=("torch", "onnxruntime"), help="default: onnxruntime when --model holds model.onnx, else torch"
    )
    precision: str = setting(
        "auto",
        choices=PRECISIONS,
        help="auto: bf16 autocast where the device computes bf16 natively, else fp32; fp32 with --quantize and with "
        "the onnxruntime backend (it runs the ONNX file as exported); bf16, fp16: autocast (torch backend without "
        "--quantize: refused with either)",
    )
    quantize: str | None = setting(
        None,
        choices=("int8",),
        help="torch backend: dynamic int8 Linear layers (CPU; fp32 activations, so no --precision bf16/fp16)",
    )
    threads: int | None = setting(None, gt=0, metavar="N", help="CPU threads (torch and onnxruntime)")
    progress_bar: bool = setting(
        True,
        option="--no-progress",
        aliases=("--no-progress-bar",),
        negate=True,
        help="no progress bar (shown only when standard error is a terminal)",
    )

    def __post_init__(self) -> None:
        if isinstance(self.data, dict):
            self.data = DataOptions(**self.data)
        check(self)


# ------------------------------------------------------------------------------------------------------- results
@dataclass
class EvalResult:
    """Metrics and predictions of one file.

    Attributes:
        metrics: ``{name: value}`` (plus ``eval_loss``) when the file has labels, else ``{}``.
        predictions: per row, the decoded prediction (label name / float / joined names).
        labels: per row, the gold label string, or ``None`` for unlabelled files.
        num_examples: rows evaluated. truncated: rows cut to ``max_seq_length``.
        dropped: rows of the file the task's layout drops (OCNLI/CMNLI ``-`` labels, XNLI's other languages).
        indices: per row, its 0-based data row in the file (``Example.index``; differs from the position after a
            dropped row), the index ``predictions.tsv`` and predict's standard output give.
        results_file / predictions_file: what was written (``None`` when nothing was).
    """

    metrics: dict[str, float]
    predictions: list[str]
    labels: list[str] | None
    num_examples: int
    truncated: int
    dropped: int = 0
    indices: list[int] = field(default_factory=list)
    results_file: Path | None = None
    predictions_file: Path | None = None


@dataclass
class FinetuneResult:
    """What :func:`finetune` did.

    Attributes:
        output_dir, best_dir: the run directory and its ``best/`` model directory.
        metric: the metric that selected ``best/``; best_metric / best_step: its value and step.
        eval_results: dev metrics of ``best/`` (as in ``eval_results.json``).
        test_results: metrics on a labelled test file, else ``None``.
        steps: optimizer steps run; stopped_early: early stopping fired.
        num_train / num_dev: examples used; truncated: ``{"train": n, "dev": n, "test": n}``.
        labels: the label names in id order; seconds: wall time.
        dropped: rows each file's layout dropped when read (OCNLI/CMNLI ``-`` labels, XNLI's other languages),
            ``{"train": n, "dev": n, "test": n}``.
    """

    output_dir: Path
    best_dir: Path
    metric: str
    best_metric: float | None
    best_step: int | None
    eval_results: dict[str, float]
    test_results: dict[str, float] | None
    steps: int
    stopped_early: bool
    num_train: int
    num_dev: int
    truncated: dict[str, int]
    labels: list[str]
    seconds: float
    dropped: dict[str, int] = field(default_factory=dict)


# ------------------------------------------------------------------------------------------------ model loading
def _device(name: str | None) -> torch.device:
    if name is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise LitebertError("device 'cuda' requested but CUDA is not available")
    return torch.device(name)


def _load_tokenizer(model_dir: str | Path, tokenizer_dir: str | None, vocab_size: int):
    """The tokenizer of the model in ``model_dir`` (whose ``config.json`` says ``vocab_size``), for finetune,
    evaluate and predict: the directory's own tokenizer files, or ``--tokenizer DIR``, which must be the same
    vocabulary. The vocabularies are compared by their fingerprints (``Tokenizer.vocab_fingerprint``, as
    ``prepare``/``pretrain`` compare data and models), so a tokenizer of another vocabulary is refused whatever
    its size; a model directory without tokenizer files can only be checked by size: a tokenizer with more ids
    than the model's embedding rows is refused.

    Raises:
        LitebertError: no tokenizer files (in ``--tokenizer`` DIR, or in the model directory without it); a
            ``--tokenizer`` whose vocabulary is not the model directory's own; more ids than ``vocab_size``.
    """
    from litebert.tokenization import load_tokenizer

    directory = Path(tokenizer_dir or model_dir)
    try:
        tokenizer = load_tokenizer(directory)
    except LitebertError as exc:
        hint = "" if tokenizer_dir else " (pass --tokenizer DIR if the model directory has no tokenizer files)"
        raise LitebertError(f"{exc}{hint}") from exc
    own = tokenizer_vocabulary(model_dir) if directory.resolve() != Path(model_dir).resolve() else None
    mine = tokenizer.vocab_fingerprint() if own is not None else None
    if own is not None and own["vocab_sha256"] != mine:
        raise LitebertError(
            f"--tokenizer {tokenizer_dir} is not the tokenizer of the model {model_dir}: {tokenizer.vocab_size} "
            f"tokens (vocabulary sha256 {mine[:12]}…) vs the model directory's own {own['vocab_size']} tokens "
            f"(sha256 {own['vocab_sha256'][:12]}…); drop --tokenizer to use the model's own tokenizer"
        )
    if tokenizer.vocab_size > vocab_size:
        raise LitebertError(
            f"the tokenizer {directory} has {tokenizer.vocab_size} tokens but the model's vocab_size is {vocab_size} "
            f"({Path(model_dir) / 'config.json'}): tokenizer and model do not belong together"
        )
    return tokenizer


def build_model(
    model_dir: str | Path,
    architecture: str,
    overrides: dict[str, Any],
    *,
    init: str = "pretrained",
    seed: int = 0,
    head_prefixes: tuple[str, ...] = ("classifier.",),
    new_head: tuple[str, ...] = (),
    classifier_dropout: float | None = None,
    hidden_dropout: float | None = None,
    extra: dict | None = None,
):
    """A ``litebert.modeling.<architecture>`` head model with the encoder of ``model_dir``.

    The encoder (``albert.*``) comes from the directory's weights — a pretraining ``final/``
    (``AlbertForPreTraining``: its MLM/SOP heads are dropped), a masked-LM or a fine-tuned model. The head
    (parameters under ``head_prefixes``) is new (initialised from ``seed``) unless the directory already holds one
    of the same shape; weights under ``new_head`` (:meth:`TaskKind.align_head`: a head of other labels) are new
    whatever the directory holds. ``init="random"`` keeps only the architecture. ``overrides`` are ``AlbertConfig`` fields
    (``num_labels``, ``id2label`` …); ``config.json`` names ``architecture`` in ``architectures``.

    Returns:
        ``(model, loading_info)`` with ``loading_info = {"missing", "unexpected", "mismatched"}``.

    Raises:
        LitebertError: no ``config.json``; encoder weights missing from the directory or of another shape.
    """
    from litebert.checkpoint import load_state_dict_file, load_weights
    from litebert.modeling import MODEL_CLASSES

    directory = Path(model_dir)
    config = load_config(directory)
    overrides = {**overrides, "architectures": [architecture]}
    if classifier_dropout is not None:
        overrides["classifier_dropout_prob"] = classifier_dropout
    if hidden_dropout is not None:
        overrides["hidden_dropout_prob"] = hidden_dropout
        overrides["attention_probs_dropout_prob"] = hidden_dropout
    config = dataclasses.replace(config, **overrides)
    config.extra = {**(config.extra or {}), **(extra or {})}
    torch.manual_seed(seed)
    model = MODEL_CLASSES[architecture](config)
    if init == "random":
        return model, {"missing": sorted(model.state_dict()), "unexpected": [], "mismatched": []}
    state, source = load_state_dict_file(directory)
    if new_head:  # left at their seeded init, so they are reported as newly initialised
        state = {k: v for k, v in state.items() if not k.startswith(new_head)}
    report = load_weights(model, state, source, ignore_mismatched_sizes=True)
    encoder_missing = [k for k in report["missing"] if not k.startswith(head_prefixes)]
    if encoder_missing:
        raise LitebertError(
            f"{source}: the weights lack {len(encoder_missing)} encoder tensors "
            f"(e.g. {encoder_missing[:3]}); is this an ALBERT model directory matching its "
            f"config.json?"
        )
    bad_shapes = [k for k in report["mismatched"] if not k.startswith(head_prefixes)]
    if bad_shapes:
        raise LitebertError(f"{source}: tensors whose shape differs from config.json: {bad_shapes[:3]}")
    return model, report


def build_classifier(
    model_dir: str,
    space: LabelSpace,
    *,
    init: str = "pretrained",
    seed: int = 0,
    classifier_dropout: float | None = None,
    hidden_dropout: float | None = None,
    extra: dict | None = None,
):
    """An ``AlbertForSequenceClassification`` for ``space`` (:func:`build_model` with the classification head;
    a missing pooler — masked-LM models have none — is initialised too)."""
    overrides = dict(
        num_labels=space.num_labels,
        id2label=space.id2label,
        label2id={v: k for k, v in space.id2label.items()},
        problem_type=HF_PROBLEM_TYPES[space.problem_type],
    )
    return build_model(
        model_dir,
        "AlbertForSequenceClassification",
        overrides,
        init=init,
        seed=seed,
        head_prefixes=("classifier.", "albert.pooler."),
        classifier_dropout=classifier_dropout,
        hidden_dropout=hidden_dropout,
        extra=extra,
    )


def _load_finetuned(model_dir: str | Path, device: torch.device, architecture: str = "AlbertForSequenceClassification"):
    from litebert.modeling import MODEL_CLASSES

    model = MODEL_CLASSES[architecture].from_pretrained(Path(model_dir))
    return model.to(device).eval()


# ------------------------------------------------------------------------------------------------------ helpers
def _write_json(path: Path, obj) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    return atomic_write_json(path, obj, sort_keys=False)


def _subsample(read: ReadResult, n: int | None, seed: int) -> ReadResult:
    if n is None or n >= len(read.examples):
        return read
    keep = sorted(random.Random(seed).sample(range(len(read.examples)), n))
    return dataclasses.replace(read, examples=[read.examples[i] for i in keep])


def _report_truncation(name: str, path: Path, feats, max_seq_length: int) -> None:
    if feats.truncated:
        log.warning(
            "%s: %d of %d rows of %s are longer than max_seq_length=%d (longest %d tokens) and were truncated",
            name,
            feats.truncated,
            len(feats.lengths),
            path,
            max_seq_length,
            feats.longest,
        )


UNKNOWN_WARN_SHARE = 0.05
"""A split whose tokens are more than this share the unknown token is warned about (as ``prepare`` warns): the
model's tokenizer does not cover its language or script (an English SentencePiece on TNEWS: 40 %)."""


def _report_unknown(name: str, path: Path, feats, tokenizer, sample: int = 2000) -> None:
    """Warn when more than :data:`UNKNOWN_WARN_SHARE` of the text tokens of the first ``sample`` features of a split
    are the tokenizer's unknown token: a model cannot learn or predict from text it sees as ``<unk>``."""
    unk, special = tokenizer.unk_token_id, np.asarray(tokenizer.all_special_ids)
    n = min(sample, len(feats.items))
    if not n:
        return
    ids = np.concatenate([_flat_ids(feats.items[i]["input_ids"]) for i in range(n)])
    ids = ids[~np.isin(ids, special[special != unk])]
    share = float(np.mean(ids == unk)) if len(ids) else 0.0
    if share > UNKNOWN_WARN_SHARE:
        log.warning(
            "%s: %.1f%% of the tokens of %s%s are the unknown token %r: the model's tokenizer does not cover this "
            "data (another language or script?); a model pretrained with a tokenizer of its text would see it",
            name,
            100 * share,
            path,
            f" (first {n} rows)" if n < len(feats.items) else "",
            tokenizer.special_tokens["unk"],
        )


def _flat_ids(ids) -> np.ndarray:
    """A feature's ``input_ids`` as one flat array: a list, an array or tensor, or (multiple choice) one list per
    option, of different lengths."""
    if isinstance(ids, (list, tuple)) and ids and not np.isscalar(ids[0]):
        return np.concatenate([_flat_ids(option) for option in ids])
    return np.asarray(ids, dtype=np.int64).ravel()


def _dropped(read) -> int:
    """Rows of a file that its layout dropped when read (``ReadResult.skipped``: OCNLI/CMNLI ``-`` labels, XNLI's
    other languages); 0 for a kind whose reader drops none and keeps no count (QA)."""
    return getattr(read, "skipped", 0)


def _report_dropped(name: str, read) -> None:
    """Log the rows of ``read``'s file that its layout dropped (:func:`_dropped`), as truncation is."""
    if _dropped(read):
        log.info(
            "%s: %d of %d rows of %s were dropped (%s); %d read",
            name,
            read.skipped,
            read.skipped + len(read.examples),
            read.path,
            read.skip_reason or "by the task's layout",
            len(read.examples),
        )


def _check_seq_length(config, max_seq_length: int, model_dir) -> None:
    """Refuse sequences longer than the model's position table; ``config`` is its ``config.json`` (read before the
    weights, so a wrong --max-seq-length costs no loading)."""
    if max_seq_length > config.max_position_embeddings:
        raise LitebertError(
            f"max_seq_length {max_seq_length} exceeds the model's max_position_embeddings "
            f"{config.max_position_embeddings} ({model_dir}/config.json)"
        )


def _check_min_seq_length(kind: TaskKind, max_seq_length: int) -> None:
    """Refuse a ``max_seq_length`` too small for one token of each text of ``kind``'s features
    (:meth:`TaskKind.min_seq_length`: sentence pairs need 5 positions, single texts 3); known from the options, so
    called before any file is read."""
    need, layout = kind.min_seq_length()
    if max_seq_length < need:
        what = f"--task {kind.data.task}" if kind.data.task else f"a {kind.name} task"
        raise LitebertError(
            f"--max-seq-length {max_seq_length}: {what} needs at least {need} positions ({layout}, one token of "
            "each text)"
        )


def untrained_positions_warning(config, max_seq_length: int, encoded: dict[str, Any], model_dir) -> str | None:
    """The warning for fine-tuning a pretrained model on sequences longer than it was pretrained on, or None.

    ``litebert pretrain`` writes ``pretraining_max_seq_length`` (L) into ``config.json``: the position vectors
    ``P[L:]`` never received a gradient and are still their random initialisation, so every token at a position
    ≥ L enters the encoder with noise that the pretrained layers never saw (BERT pretrains its last 10 % of steps at
    512 for this reason, Devlin et al. 2019 §A.2). ``encoded`` maps a split name to its features (anything with
    ``lengths``); the message counts the rows longer than L in each. Models without the key (transformers',
    converted TF checkpoints) give None.
    """
    trained = config.extra.get("pretraining_max_seq_length")
    if not trained or max_seq_length <= int(trained):
        return None
    trained = int(trained)
    counts = ", ".join(
        f"{sum(n > trained for n in enc.lengths)} of {len(enc.lengths)} {name} rows" for name, enc in encoded.items()
    )
    return (
        f"max_seq_length={max_seq_length} but {model_dir} was pretrained on sequences of at most {trained} "
        f"tokens: positions {trained}-{max_seq_length - 1} were never trained ({counts} reach them); use "
        f"--max-seq-length {trained}, or pretrain (or continue with --init-from) on {max_seq_length}-token data"
    )


# --------------------------------------------------------------------------------------------------- finetune
@dataclass
class _Split:
    """One data file of a run: what was read, its features (None until evaluate/predict featurize it in chunks)
    and, once known, the model's outputs and mean loss."""

    read: ReadResult
    feats: Features | None
    outputs: tuple[list, float | None] | None = None
    #: predict on labels the model cannot score: the file as read (its labels written beside the predictions),
    #: while ``read`` is the same rows unlabelled (run, not scored)
    written: ReadResult | None = None


@dataclass
class _Data:
    """The splits of a run, their tokenizer, and ``new_head``: the head weights of ``--model`` that must be newly
    initialised for these labels (:meth:`TaskKind.align_head`)."""

    tokenizer: Any
    train: _Split
    dev: _Split
    test: _Split | None
    new_head: tuple[str, ...] = ()
    sources: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def hub_dataset(self) -> dict[str, Any] | None:
        """The Hub data set the model is trained on (dataset, config, revision; ``litebert_hub_dataset`` in
        ``config.json``: evaluate/predict read it again), or None when train came from a file."""
        train = self.sources.get("train", {})
        return {k: train[k] for k in ("dataset", "config", "revision")} if "dataset" in train else None

    @property
    def truncated(self) -> dict[str, int]:
        out = {"train": self.train.feats.truncated, "dev": self.dev.feats.truncated}
        if self.test is not None:
            out["test"] = self.test.feats.truncated
        return out

    @property
    def dropped(self) -> dict[str, int]:
        """Rows each file's layout dropped when it was read (before any subsampling)."""
        out = {"train": _dropped(self.train.read), "dev": _dropped(self.dev.read)}
        if self.test is not None:
            out["test"] = _dropped(self.test.read)
        return out


def _load_data(cfg: FinetuneConfig, kind: TaskKind) -> _Data:
    """Read train/dev(/test), fit the kind on train and align its label ids with a head ``--model`` already has
    (pretrained init), subsample, load the tokenizer and featurize (dev/test labels are checked against train's
    here: unseen labels fail or are counted, as the kind says)."""
    model_config = load_config(cfg.model)  # model and tokenizer first: a mistyped --model before any download
    _check_seq_length(model_config, cfg.max_seq_length, cfg.model)  # from config.json, before any file is read
    _check_min_seq_length(kind, cfg.max_seq_length)
    tokenizer = _load_tokenizer(cfg.model, cfg.tokenizer, model_config.vocab_size)
    sources = _finetune_sources(cfg, kind)
    train_read = _read(kind, sources["train"], require_labels=True)
    dev_read = _read(kind, sources["dev"], require_labels=True)
    kind.fit(train_read)
    new_head = kind.align_head(model_config) if cfg.init == "pretrained" else ()
    train_read = _subsample(train_read, cfg.max_train_examples, cfg.data_seed)
    dev_read = _subsample(dev_read, cfg.max_eval_examples, cfg.data_seed)
    train = _Split(train_read, kind.featurize(train_read, tokenizer, cfg.max_seq_length, "train"))
    dev = _Split(dev_read, kind.featurize(dev_read, tokenizer, cfg.max_seq_length, "dev"))
    test = None
    if "test" in sources:
        test_read = _read(kind, sources["test"], require_labels=False)
        test = _Split(test_read, kind.featurize(test_read, tokenizer, cfg.max_seq_length, "test"))
    for name, split in (("train", train), ("dev", dev), ("test", test)):
        if split is not None:
            _report_dropped(name, split.read)
            _report_truncation(name, split.read.path, split.feats, cfg.max_seq_length)
            _report_unknown(name, split.read.path, split.feats, tokenizer)
    return _Data(tokenizer, train, dev, test, new_head, {k: _source_record(v) for k, v in sources.items()})


def _finetune_sources(cfg: FinetuneConfig, kind: TaskKind) -> dict[str, str | HubSplit]:
    """Each split's data: its file when given (a file wins), else the split of the task's Hub data set
    (:func:`litebert.finetune.hub_data.load_split`, all read before any training: a bad id fails first)."""
    files = {"train": cfg.train_file, "dev": cfg.dev_file, "test": cfg.test_file}
    hub_splits = {"train": "train", "dev": "dev", "test": cfg.test_split}
    sources: dict[str, str | HubSplit] = {}
    for name, file in files.items():
        if file is not None:
            sources[name] = file
        elif hub_splits[name] is not None:
            sources[name] = load_split(cfg.data.task_spec, hub_splits[name], cfg.data.dataset_revision, kind=kind.name)
    return sources


def _read(kind: TaskKind, source: str | HubSplit, *, require_labels: bool):
    """A data file through the kind's reader, or a Hub split through its row reader."""
    if isinstance(source, HubSplit):
        return read_split(kind, source, require_labels=require_labels)
    return kind.read(source, require_labels=require_labels)


def _source_record(source: str | HubSplit) -> dict[str, Any]:
    """What ``run_settings.json`` records of a split's data: ``{"file"}`` or the Hub split's
    (:meth:`HubSplit.record`: dataset, config, split, resolved revision, rows)."""
    return source.record() if isinstance(source, HubSplit) else {"file": str(source)}


def _build_for_training(cfg: FinetuneConfig, kind: TaskKind, data: _Data):
    """The head model of ``kind`` over ``cfg.model``'s encoder, checked against the data; returns
    ``(model, untrained_positions_warning)``."""
    model, load_info = build_model(
        cfg.model,
        kind.architecture,
        kind.config_overrides(),
        init=cfg.init,
        seed=cfg.seed,
        head_prefixes=kind.head_prefixes,
        new_head=data.new_head,
        classifier_dropout=cfg.classifier_dropout,
        hidden_dropout=cfg.hidden_dropout,
        # the length evaluate/predict then use by default (QA's kind records it too)
        extra={
            **kind.config_extra(),
            "litebert_max_seq_length": cfg.max_seq_length,
            **({"litebert_hub_dataset": data.hub_dataset} if data.hub_dataset else {}),
        },
    )
    positions_warning = (
        untrained_positions_warning(
            model.config, cfg.max_seq_length, {"train": data.train.feats, "dev": data.dev.feats}, cfg.model
        )
        if cfg.init == "pretrained"
        else None
    )
    if positions_warning:
        log.warning("finetune: %s", positions_warning)
    log.info(
        "finetune: %s init; newly initialised: %s",
        cfg.init,
        (", ".join(load_info["missing"]) or "(none)") if cfg.init == "pretrained" else "all weights",
    )
    return model, positions_warning


def _in_chunks(kind: TaskKind, dist, read) -> bool:
    """Whether evaluate/predict featurize ``read`` in chunks that overlap the device: one process on a GPU, a
    kind that can merge chunks (classification), a file longer than one chunk. On the CPU never: the CPU computes
    the model itself, and its outputs stay those of whole-file length buckets."""
    from litebert.finetune.kinds import CHUNK_ROWS

    return (
        dist.world_size == 1
        and dist.device.type != "cpu"
        and hasattr(kind, "merge_features")
        and len(read.examples) > CHUNK_ROWS
    )


def _chunked_split(kind: TaskKind, model, read, tokenizer, seq: int, batch_size: int, dist, progress=None) -> _Split:
    """``read`` featurized and run in chunks (:func:`kinds.infer_in_chunks`): a split whose outputs are known."""
    from litebert.finetune.kinds import infer_in_chunks

    feats, outputs, loss = infer_in_chunks(
        kind, model, read, tokenizer, seq, batch_size, tokenizer.pad_token_id, dist.device, progress=progress
    )
    _report_truncation("data", read.path, feats, seq)
    return _Split(read, feats, (outputs, loss))


def evaluate_split(
    kind: TaskKind, model, split: _Split, batch_size: int, pad_token_id: int, dist, progress=None
) -> tuple[Any, dict[str, float]]:
    """Predictions of ``model`` for every example of ``split`` and, when it has labels, the kind's metrics plus
    ``eval_loss`` (mean per loss unit). A split whose ``outputs`` are known (:func:`_chunked_split`) is not run
    again. ``progress``: called with each batch's row count (:func:`kinds.run_features`)."""
    if split.outputs is not None:
        outputs, loss = split.outputs
    else:
        outputs, loss = infer(kind, model, split.feats, batch_size, pad_token_id, dist, progress=progress)
    preds = kind.postprocess(outputs, split.feats, split.read)
    metrics: dict[str, float] = {}
    if split.read.has_labels:
        metrics = kind.score(preds, split.read, split.feats)
        metrics["eval_loss"] = float(loss) if loss is not None else float("nan")
    return preds, metrics


class _BestKeeper:
    """The loop's ``eval_fn`` (dev metrics + ``eval_loss``, predictions kept for the final files) and ``on_best``
    (installs ``OUTPUT/best``: model, tokenizer, ``best_eval.json``, the model card ``README.md``)."""

    def __init__(self, out: Path, kind: TaskKind, data: _Data, eval_batch_size: int, dist):
        self.out, self.kind, self.data, self.eval_batch_size, self.dist = out, kind, data, eval_batch_size, dist
        self.best_dir = out / "best"
        self.last: dict[str, Any] = {}  # predictions of the latest evaluation, kept with best/ (no second dev pass)
        self.best: dict[str, Any] = {}

    def eval_fn(self, m) -> dict[str, float]:
        from litebert.training.distributed import unwrap_model

        preds, metrics = evaluate_split(
            self.kind, unwrap_model(m), self.data.dev, self.eval_batch_size, self.data.tokenizer.pad_token_id, self.dist
        )
        self.last.update(preds=preds, metrics=dict(metrics))
        return metrics

    def on_best(self, raw_model, eval_metrics: dict[str, float], step: int) -> None:
        from litebert.training.modelcard import write_model_card

        self.kind.update_config(raw_model.config)  # what the kind chose on dev (QA: the null-score threshold)
        with atomic_directory(self.best_dir) as tmp:  # a kill mid-save keeps the previous best/ whole
            raw_model.save_pretrained(tmp)
            self.data.tokenizer.save(tmp)
            _write_json(tmp / "best_eval.json", {**eval_metrics, "step": step})
            write_model_card(tmp, self.out)  # README.md: the Hub's model card, from the files above
        self.best.clear()
        self.best.update(self.last)
        primary = self.kind.metrics[0]
        log.info("finetune: new best %s=%.4f at step %d -> %s", primary, eval_metrics[primary], step, self.best_dir)


def _finish(
    cfg: FinetuneConfig, kind: TaskKind, data: _Data, keeper: _BestKeeper, model, result, t0: float, precision
) -> FinetuneResult:
    """Rank 0 after training: dev results and predictions of ``best/`` (and the test file), the result."""
    from litebert.training.distributed import DistInfo, unwrap_model

    out, best_dir, primary = Path(cfg.output_dir), keeper.best_dir, kind.metrics[0]
    if not cfg.keep_checkpoints and (out / "checkpoints").exists():
        shutil.rmtree(out / "checkpoints")
    if not best_dir.exists():  # no evaluation produced a best (cannot happen with eval_fn; keep the last model)
        keeper.on_best(unwrap_model(model), result.last_eval or {primary: float("nan")}, result.step)
    local = DistInfo(device=keeper.dist.device)
    pad = data.tokenizer.pad_token_id
    if "preds" in keeper.best:
        preds, eval_results = keeper.best["preds"], keeper.best["metrics"]
    else:  # best/ came from elsewhere (no evaluation ran in this process): evaluate it now
        with precision.autocast(local.device):
            preds, eval_results = evaluate_split(
                kind,
                _load_finetuned(best_dir, local.device, kind.architecture),
                data.dev,
                cfg.eval_batch_size,
                pad,
                local,
            )
    best_info = read_json(best_dir / "best_eval.json", what="best_eval.json", expect=dict)
    _write_json(
        out / "eval_results.json",
        {
            **eval_results,
            "num_examples": len(data.dev.read.examples),
            "best_step": best_info.get("step"),
            "truncated": data.dev.feats.truncated,
        },
    )
    kind.write_predictions(out / kind.predictions_name, data.dev.read, preds)
    test_results = None
    if data.test is not None:
        best_model = _load_finetuned(best_dir, local.device, kind.architecture)
        with precision.autocast(local.device):
            tpreds, tmetrics = evaluate_split(kind, best_model, data.test, cfg.eval_batch_size, pad, local)
        kind.write_predictions(out / f"test_{kind.predictions_name}", data.test.read, tpreds)
        if data.test.read.has_labels:
            test_results = tmetrics
            _write_json(out / "test_results.json", {**test_results, "num_examples": len(data.test.read.examples)})
    seconds = time.time() - t0
    log.info(
        "finetune: done in %.0fs; best %s=%.4f at step %s; dev %s",
        seconds,
        primary,
        eval_results[primary],
        best_info.get("step"),
        json.dumps(finite(eval_results)),
    )
    return FinetuneResult(
        output_dir=out,
        best_dir=best_dir,
        metric=primary,
        best_metric=result.best_metric,
        best_step=best_info.get("step"),
        eval_results=eval_results,
        test_results=test_results,
        steps=result.step,
        stopped_early=result.stopped_early,
        num_train=len(data.train.feats),
        num_dev=len(data.dev.feats),
        truncated=data.truncated,
        labels=list(kind.labels),
        seconds=seconds,
        dropped=data.dropped,
    )


def finetune(cfg: FinetuneConfig) -> FinetuneResult:
    """Fine-tune ``cfg.model`` on ``cfg.train_file``, keep the best dev checkpoint in ``OUTPUT/best``.

    The task kind (:mod:`litebert.finetune.kinds`: classification, token, choice, qa — from ``--task`` or
    ``--task-type``) supplies reading, features, the head, the objective, post-processing, metrics and the
    prediction files; this function is the same for all of them.

    Under ``torchrun`` (``WORLD_SIZE`` > 1) the model is trained with DDP, ``cfg.batch_size`` sequences per
    process and micro-batch; dev features are sharded over the ranks and gathered (:func:`kinds.infer`);
    rank 0 alone writes ``OUTPUT/`` and every rank returns its :class:`FinetuneResult`. Logs a warning when
    ``max_seq_length`` exceeds the model's ``pretraining_max_seq_length`` (:func:`untrained_positions_warning`).

    ``cfg.output_dir`` must be absent or empty, or, with ``cfg.resume``, an unfinished finetune run of its own
    (:func:`litebert.training.run.check_output_dir`; under ``torchrun`` rank 0 decides after joining the process group
    and every rank gets its verdict, so no rank can see another's first writes; more processes on a node than GPUs
    are refused before anything is read); the training state is checkpointed every ``cfg.save_steps``
    steps (default: at every evaluation), and ``resume="auto"`` continues from the newest complete checkpoint to the
    weights, metrics and ``metrics.jsonl`` of an uninterrupted run.

    Raises:
        LitebertError: bad files (the kind's readers), a dev label unseen in training, an unknown metric for the
            problem type, a model directory without weights or tokenizer, an output directory a run must not write
            into (the model directory, another run, a finished run, anything else that is not empty).
    """
    from litebert.training.run import start, teardown

    t0 = time.time()
    out = Path(cfg.output_dir)
    # under torchrun: DDP over WORLD_SIZE processes, each a micro-batch of cfg.batch_size (global batch
    # batch_size x world_size), dev features sharded and gathered; rank 0 alone writes OUTPUT/.
    # More processes on a node than GPUs: refused here, before anything is read or written.
    dist = start(cfg.device)
    try:
        return _finetune(cfg, dist, out, t0)
    finally:
        teardown()  # an error on some rank: leave the group without waiting (after a normal end: nothing left)


def _finetune(cfg: FinetuneConfig, dist, out: Path, t0: float) -> FinetuneResult:
    from litebert.optim import build_optimizer, build_scheduler
    from litebert.training import TrainingArgs, make_batch_factory, train
    from litebert.training import distributed as D
    from litebert.training.distributed import unwrap_model, wrap_model
    from litebert.training.run import (
        check_checkpoint_fits,
        check_output_dir,
        check_resume_settings,
        resolve_resume,
        resolve_run_precision,
        teardown,
        write_run_settings,
    )
    from litebert.training.run import run_settings as make_run_settings

    check_output_dir(  # in a process group rank 0 decides for every rank, before any rank writes
        out,
        "finetune",
        cfg.resume,
        finished="eval_results.json",
        model="best",
        may_extend=False,  # its steps cannot grow: resuming a finished run would only rewrite its results
        sources={"--model": cfg.model, "--tokenizer": cfg.tokenizer},
    )
    kind = make_kind(cfg.data, problem_type=cfg.problem_type, metrics=cfg.metrics)
    data = _load_data(cfg, kind)
    model, positions_warning = _build_for_training(cfg, kind, data)
    model = wrap_model(model.to(dist.device), dist)

    steps_per_epoch = math.ceil(len(data.train.feats) / (cfg.batch_size * dist.world_size))
    max_steps = cfg.max_steps or max(1, math.ceil(steps_per_epoch * cfg.epochs))
    eval_steps = cfg.eval_steps or steps_per_epoch
    save_steps = eval_steps if cfg.save_steps is None else cfg.save_steps
    optimizer = build_optimizer(unwrap_model(model), cfg.optimizer, lr=cfg.learning_rate, weight_decay=cfg.weight_decay)
    scheduler = build_scheduler(optimizer, warmup_steps=round(cfg.warmup_ratio * max_steps), max_steps=max_steps)
    batches = make_batch_factory(
        data.train.feats.items,
        cfg.batch_size,
        kind.collator(data.tokenizer.pad_token_id),
        seed=cfg.seed,
        shuffle=True,
        drop_last=False,
        rank=dist.rank,
        world_size=dist.world_size,
    )
    objective, count = kind.objective(dist.device)
    keeper = _BestKeeper(out, kind, data, cfg.eval_batch_size, dist)

    run_settings = {
        "finetune_config": jsonable(dataclasses.asdict(cfg)),
        **kind.settings(),
        "num_train": len(data.train.feats),
        "num_dev": len(data.dev.feats),
        "max_steps": max_steps,
        "steps_per_epoch": steps_per_epoch,
        "eval_steps": eval_steps,
        "save_steps": save_steps,
        "truncated": data.truncated,
        "dropped": data.dropped,
        "data_sources": data.sources,
        "untrained_positions_warning": positions_warning,
        "world_size": dist.world_size,
        "global_batch_size": cfg.batch_size * dist.world_size,
    }
    if hasattr(kind, "columns") and cfg.train_file is not None:
        run_settings["columns"] = {"train": kind.columns(cfg.train_file)}
    resume_from = resolve_resume(out, cfg.resume, dist, verify=True, log=log.info)  # before anything is written
    precision = resolve_run_precision(cfg.precision, dist.device, resume_from)
    log.info("finetune: %s", precision)
    run_settings["precision"] = precision.to_dict()
    settings = make_run_settings("finetune", cfg, {k: v for k, v in run_settings.items() if k != "finetune_config"})
    # every rank refuses a resume that would change the run's trajectory or its data files
    check_checkpoint_fits(resume_from, "finetune", unwrap_model(model))  # a pretrain checkpoint, another head ...
    check_resume_settings(resume_from, settings, cfg, steps=max_steps, may_change=RESUME_MAY_CHANGE)
    out.mkdir(parents=True, exist_ok=True)  # only now: a run refused above leaves no --output behind
    if dist.is_main:
        # run_settings.json first: it marks the directory as a finetune run (check_output_dir) from the start
        write_run_settings(out, settings, resume_from)
        _write_json(out / "finetune_config.json", run_settings)
    args = TrainingArgs(
        output_dir=out,
        max_steps=max_steps,
        max_grad_norm=cfg.max_grad_norm or None,
        logging_steps=min(cfg.logging_steps, max_steps),
        eval_steps=eval_steps,
        save_steps=save_steps,
        save_total_limit=1,
        precision=precision.precision,
        metric_for_best=kind.metrics[0],
        greater_is_better=True,
        early_stopping_patience=cfg.early_stopping_patience,
        progress_bar=cfg.progress_bar,
        resume=None if resume_from is None else str(resume_from),
        log_prefix=f"finetune {cfg.data.task or Path(cfg.train_file or '').name}",
    )
    result = train(
        model,
        optimizer,
        scheduler,
        batches,
        objective,
        count,
        args,
        eval_fn=keeper.eval_fn,
        on_best=keeper.on_best,
        dist=dist,
        extra_state={
            "finetune": run_settings["finetune_config"],
            "precision": precision.precision,
            "global_batch_size": run_settings["global_batch_size"],
        },
    )
    final = _finish(cfg, kind, data, keeper, model, result, t0, precision) if dist.is_main else None
    if dist.distributed:  # under torchrun the other ranks wait for rank 0's results
        final = D.broadcast_object(final)
        teardown(sync=True)
    return final


# ------------------------------------------------------------------------------------------ evaluate / predict
def _output_files(kind: TaskKind, command: str) -> list[str]:
    """What ``evaluate``/``predict`` write into ``--output``: the kind's predictions file with the names its
    ``write_predictions`` may use beside it (NER's ``.jsonl`` variant, QA's ``nbest_predictions`` and
    ``null_odds``), ``eval_results.json`` (evaluate) and ``run_settings.json``."""
    name = kind.predictions_name
    names = [
        name,
        f"{Path(name).stem}.jsonl",
        *(name.replace("predictions", x) for x in ("nbest_predictions", "null_odds")),
    ]
    names += [*(["eval_results.json"] if command == "evaluate" else []), "run_settings.json"]
    return list(dict.fromkeys(names))


def _eval_seq_length(cfg: EvaluateConfig, config, kind: TaskKind, directory: Path) -> int:
    """``--max-seq-length`` of evaluate/predict: the one given, else the one the model was fine-tuned with
    (``litebert_max_seq_length`` in ``config.json``), else :data:`DEFAULT_MAX_SEQ_LENGTH`. A given length other
    than the fine-tuned one is warned about (QA's kind says so itself, per window)."""
    saved = (config.extra or {}).get("litebert_max_seq_length")
    saved = int(saved) if isinstance(saved, int) and not isinstance(saved, bool) else None
    if cfg.max_seq_length is None:
        if saved is None:
            log.info(
                "%s/config.json does not record the length it was fine-tuned with: --max-seq-length %d",
                directory,
                DEFAULT_MAX_SEQ_LENGTH,
            )
        return DEFAULT_MAX_SEQ_LENGTH if saved is None else saved
    if saved is not None and saved != cfg.max_seq_length and kind.name != "qa":
        log.warning(
            "%s was fine-tuned with --max-seq-length %d; this run cuts rows at %d tokens, so its truncation, loss "
            "and metrics differ from fine-tuning's dev evaluation (drop --max-seq-length to use %d)",
            directory,
            saved,
            cfg.max_seq_length,
            saved,
        )
    return cfg.max_seq_length


#: data options that name what the data is; without one, evaluate/predict start from the layout saved with the model
_LAYOUT_KEYS = ("task", "text_column", "task_type")
"""The options that replace the layout saved with a model; any other (``--label-column``, ``--delimiter`` ...) is
laid over it."""


def _non_default(options: DataOptions) -> dict:
    """The fields of ``options`` that differ from :class:`DataOptions`' defaults."""
    return {
        f.name: getattr(options, f.name)
        for f in dataclasses.fields(options)
        if getattr(options, f.name) != default_of(f)
    }


def _prepare_eval(cfg: EvaluateConfig, command: str):
    """Everything ``evaluate``/``predict`` need before the forward passes; refuses an ``--output`` that holds a
    file they would write before anything is loaded (:func:`litebert.training.run.check_no_overwrite`)."""
    from litebert.training import distributed as D
    from litebert.training.run import check_no_overwrite

    need_labels = command == "evaluate"

    directory = Path(cfg.model)
    config = load_config(directory)
    extra = config.extra or {}
    data = cfg.data
    saved_task, saved_columns = extra.get("finetuning_task"), extra.get("litebert_data_options")
    saved_type = extra.get("litebert_task_type")
    # no task, column or task type given: the layout saved with the model, with any layout option given laid over it
    # (--label-column, --delimiter, --no-header ...); one of those three replaces the saved layout
    if data is None or not any(getattr(data, k) is not None for k in _LAYOUT_KEYS):
        if not saved_task and not saved_columns and saved_type in (None, "classification"):
            raise LitebertError(f"{directory}/config.json names no finetuning_task: give --task or --text-column")
        given = {} if data is None else _non_default(data)
        data = DataOptions(
            task=saved_task if saved_task in TASKS else None,
            task_type=saved_type if saved_type != "classification" else None,
            **{**(saved_columns or {}), **given},
        )
    data.require_source()
    kind = make_kind(data, metrics=cfg.metrics)
    if cfg.output_dir:
        check_no_overwrite(cfg.output_dir, command, _output_files(kind, command))
    heads = {
        "AlbertForSequenceClassification",
        "AlbertForTokenClassification",
        "AlbertForQuestionAnswering",
        "AlbertForMultipleChoice",
    }
    saved_heads = [a for a in (config.architectures or []) if a in heads]
    if config.architectures and not saved_heads:  # e.g. a pretraining final/: the head would be random weights
        raise LitebertError(
            f"{directory} holds an {config.architectures[0]}, not a fine-tuned model: its task head "
            "would be random; give a `litebert finetune` output (OUTPUT/best)"
        )
    if saved_heads and kind.architecture not in saved_heads:
        raise LitebertError(
            f"{directory} holds an {saved_heads[0]} but the data options ask for a {kind.name} task "
            f"({kind.architecture}); drop --task/--task-type to use the task saved with the model"
        )
    kind.from_config(config)
    seq = _eval_seq_length(cfg, config, kind, directory)
    _check_seq_length(config, seq, directory)
    _check_min_seq_length(kind, seq)
    # under torchrun each rank predicts every W-th feature (kinds.infer) and rank 0 alone writes
    dist = (
        D.init_distributed(cfg.device)
        if int(os.environ.get("WORLD_SIZE", "1")) > 1
        else D.DistInfo(device=_device(cfg.device))
    )
    backend, precision = _eval_runtime(cfg, directory, dist.device)  # option conflicts: before the data is read
    tokenizer = _load_tokenizer(cfg.model, cfg.tokenizer, config.vocab_size)  # a wrong --tokenizer: before a download
    source = _eval_source(cfg, data, extra, command, kind)
    read = _read(kind, source, require_labels=need_labels)
    if cfg.max_examples is not None:
        read = dataclasses.replace(read, examples=read.examples[: cfg.max_examples])
    written = None
    unscorable = kind.unscorable(read) if command == "predict" and read.has_labels else None
    if unscorable:  # e.g. new data whose label column holds other names, or blanks: predicted, not scored
        log.warning("predict: %s: its rows are predicted, not scored (no metrics)", unscorable)
        written, read = read, dataclasses.replace(read, has_labels=False)
    # on a GPU a long file is featurized in chunks while the device runs (_evaluate_file); else all of it now
    feats = None if _in_chunks(kind, dist, read) else kind.featurize(read, tokenizer, seq, "data")
    _report_dropped("data", read)
    if feats is not None:
        _report_truncation("data", read.path, feats, seq)
        _report_unknown("data", read.path, feats, tokenizer)
    log.info("%s: %s backend, %s", command, backend, precision)
    from litebert.inference import load_runner

    # bf16/fp16 run as autocast around the fp32 torch runner (_evaluate_file), the numerics of fine-tuning's own
    # evaluation; the onnxruntime backend and --quantize run fp32 (_eval_runtime)
    model = load_runner(
        directory,
        kind.architecture,
        backend=backend,
        precision="fp32",
        quantize=cfg.quantize,
        threads=cfg.threads,
        device=dist.device,
    )
    record = {
        "backend": backend,
        "precision": precision.to_dict(),
        "max_seq_length": seq,
        "dropped": _dropped(read),
        "data_source": _source_record(source),
    }
    kernel = getattr(model, "kernel", None)  # the torch runner's Linear kernels (inference.TorchRunner)
    if kernel is not None and precision.dtype is None:  # under autocast the Linear layers run torch's bf16/fp16 path
        record["linear_kernel"] = kernel
        log.info("%s: Linear layers on %s", command, _KERNEL_NAMES[kernel])
    return kind, _Split(read, feats, written=written), tokenizer, model, dist, precision, record


def _eval_source(cfg: EvaluateConfig, data: DataOptions, extra: dict, command: str, kind: TaskKind) -> str | HubSplit:
    """``--data FILE``, else a split of the task's Hub data set: ``--split`` (default evaluate ``dev``, predict
    ``test``) at ``--dataset-revision``, else at the commit the model was fine-tuned on when it was fine-tuned on
    this data set (``litebert_hub_dataset`` in its ``config.json``), else the table's.

    Raises:
        LitebertError: neither a file nor a task with a Hub data set; :func:`load_split`'s errors.
    """
    if cfg.data_file is not None:
        if cfg.split is not None:
            raise LitebertError(f"--split {cfg.split} reads the task's Hub data set: drop it or --data")
        return cfg.data_file
    task = data.task_spec
    hub_source(task, "--data")
    revision = data.dataset_revision
    trained = extra.get("litebert_hub_dataset") or {}
    if revision is None and trained.get("dataset") == task.hub.dataset and trained.get("config") == task.hub.config:
        revision = trained.get("revision")
    split = cfg.split or ("dev" if command == "evaluate" else "test")
    return load_split(task, split, revision, kind=kind.name)


_KERNEL_NAMES = {
    "onednn": "oneDNN's prepacked fp32 GEMM (AVX-512 CPU)",
    "blas": "nn.Linear's BLAS",
    "int8": "dynamic int8 (torch.ao quantize_dynamic)",
    "bf16": "bf16 weights",
}


def _eval_runtime(cfg: EvaluateConfig, directory: Path, device: torch.device) -> tuple[str, PrecisionChoice]:
    """The backend and precision ``evaluate``/``predict`` run ``directory`` with (docs/deploy.md), checked before
    any data is read.

    Backend: ``--backend``, else onnxruntime when the directory holds ``model.onnx``, else torch. Precision: the
    onnxruntime backend runs the ONNX file as exported (fp32 activations; int8 weights when exported with
    ``--quantize int8``), and ``--quantize int8`` runs torch's dynamic int8 Linear layers, which take float32
    activations only (torch refuses bf16 input to them, also under autocast, where the attention hands them bf16):
    with either, ``auto`` is fp32. Otherwise :func:`~litebert.precision.resolve_precision` (bf16/fp16 autocast).

    Raises:
        LitebertError: ``--quantize`` with the onnxruntime backend (quantize at export instead) or with a device
            other than the CPU; an explicit ``--precision bf16/fp16`` with the onnxruntime backend or ``--quantize``.
    """
    from litebert.inference import check_backend_files, onnx_dir

    backend = cfg.backend or ("onnxruntime" if onnx_dir(directory) else "torch")
    explicit = cfg.precision not in ("auto", "fp32")
    check_backend_files(directory, backend)  # before the data is read (load_runner checks it again, for library use)
    if backend == "onnxruntime":
        if cfg.quantize:
            raise LitebertError(
                f"--quantize {cfg.quantize} with the onnxruntime backend: quantize at export instead "
                "(`litebert export SOURCE --output DIR --format onnx --quantize int8`)"
            )
        if explicit:
            raise LitebertError(
                f"--precision {cfg.precision} with the onnxruntime backend: it runs {directory}/model.onnx as "
                "exported (fp32, or int8 with `litebert export --quantize int8`); drop --precision, or use "
                "--backend torch on a directory with torch weights"
            )
        return backend, PrecisionChoice("fp32", cfg.precision, "the onnxruntime backend runs the ONNX file as exported")
    if cfg.quantize:
        if device.type != "cpu":
            raise LitebertError(f"--quantize {cfg.quantize} (dynamic int8) runs on the CPU only; drop --device cuda")
        if explicit:
            raise LitebertError(
                f"--quantize {cfg.quantize} and --precision {cfg.precision}: torch's dynamic int8 Linear layers take "
                f"float32 activations only; drop --precision {cfg.precision} (int8 runs fp32 around its integer "
                "matmuls) or --quantize"
            )
        return backend, PrecisionChoice("fp32", cfg.precision, f"--quantize {cfg.quantize} runs fp32 activations")
    return backend, resolve_precision(cfg.precision, device)


def _evaluate_file(cfg: EvaluateConfig, name: str) -> EvalResult:
    kind, split, tokenizer, model, dist, precision, record = _prepare_eval(cfg, name)
    if cfg.batch_size is None:  # recorded in run_settings.json as the number used
        from litebert.inference import device_batch_size

        cfg = dataclasses.replace(
            cfg, batch_size=device_batch_size(dist.device, load_config(Path(cfg.model)), record["max_seq_length"])
        )
        log.info("%s: batch size %d", name, cfg.batch_size)
    # the model's input rows (QA: windows); under torchrun rank 0 shows its share
    total = len(split.read.examples) if split.feats is None else len(split.feats)
    shown = cfg.progress_bar and dist.is_main and sys.stderr.isatty()
    bar = tqdm(total=-(-total // dist.world_size), unit="row", desc=name, disable=not shown, leave=False)
    with precision.autocast(dist.device), bar:
        if split.feats is None:  # featurized in chunks that overlap the device (kinds.infer_in_chunks)
            seq = record["max_seq_length"]
            chunked = _chunked_split(kind, model, split.read, tokenizer, seq, cfg.batch_size, dist, bar.update)
            split = dataclasses.replace(chunked, written=split.written)
        preds, metrics = evaluate_split(kind, model, split, cfg.batch_size, tokenizer.pad_token_id, dist, bar.update)
    read = split.written or split.read
    labels = [ex.label for ex in read.examples] if read.has_labels else None
    res = EvalResult(
        metrics=metrics,
        predictions=[kind.decode(p) for p in preds],
        labels=labels,
        num_examples=len(read.examples),
        truncated=split.feats.truncated,
        dropped=_dropped(read),
        indices=[getattr(ex, "index", i) for i, ex in enumerate(read.examples)],
    )
    if cfg.output_dir and dist.is_main:
        out = Path(cfg.output_dir)
        from litebert.training.run import run_settings, write_run_settings

        write_run_settings(out, run_settings(name, cfg, record))
        if name == "evaluate":
            res.results_file = _write_json(
                out / "eval_results.json", {**metrics, "num_examples": len(preds), "truncated": split.feats.truncated}
            )
        res.predictions_file = kind.write_predictions(out / kind.predictions_name, read, preds)
    if name == "evaluate":
        log.info("evaluate: %s on %d rows of %s", json.dumps(finite(metrics)), len(preds), read.path)
    if dist.distributed:
        from litebert.training.run import teardown

        teardown(sync=True)
    return res


def evaluate(cfg: EvaluateConfig) -> EvalResult:
    """Metrics of a fine-tuned model on a labelled file; writes ``OUTPUT/eval_results.json`` and the kind's
    predictions file (``predictions.tsv`` for classification) when ``cfg.output_dir`` is set. The task kind comes
    from the model's ``config.json`` (``litebert_task_type``, ``finetuning_task``). Under ``torchrun`` the
    features are shared out over the ranks (:func:`kinds.infer`), every rank returns the whole result, and rank 0
    alone writes. Rows are cut at ``cfg.max_seq_length``, by default the length the model was fine-tuned with, so
    the loss and truncation count on fine-tuning's dev file are those of fine-tuning's own dev evaluation.

    Raises:
        LitebertError: ``cfg.output_dir`` already holds a file this would write (``eval_results.json``, the
            predictions, ``run_settings.json``), the file has no label column, a label the model does not know
            (``file:line``), and the reader's errors.
    """
    return _evaluate_file(cfg, "evaluate")


def predict(cfg: EvaluateConfig) -> EvalResult:
    """Predictions of a fine-tuned model for every example of a file (labels optional); writes the kind's
    predictions file (``predictions.tsv``: ``index  prediction [label]`` for classification) when
    ``cfg.output_dir`` is set. Metrics are computed when the file has labels the model knows; labels it does not
    know (other names, blanks) are written but not scored (a warning names the first). Under ``torchrun``, the default
    length and the errors: as :func:`evaluate` (an ``output_dir`` holding the predictions or a
    ``run_settings.json`` is refused)."""
    return _evaluate_file(cfg, "predict")
