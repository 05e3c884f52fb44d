"""Fine-tune, evaluate and predict: sequence classification / regression on labelled text files.

``finetune(FinetuneConfig)`` runs :func:`litebert.training.train` — the loop that pretraining uses — with a
classification objective (summed loss, units = examples) and a dev-set ``eval_fn``. Output directory::

    OUTPUT/best/               the best checkpoint by the first dev metric: an HF model directory
                               (config.json with label2id/id2label/problem_type, model.safetensors) + tokenizer files
    OUTPUT/eval_results.json   dev metrics of best/ ({"accuracy": ..., "f1": ..., "mcc": ...} as applicable,
                               plus "eval_loss", "num_examples", "best_step")
    OUTPUT/predictions.tsv     dev predictions of best/: index, prediction, label
    OUTPUT/test_predictions.tsv  with --test: index, prediction (and label when the test file has labels)
    OUTPUT/test_results.json   with a labelled --test file: its metrics
    OUTPUT/finetune_config.json  the settings of the run, the label space, truncation counts
    OUTPUT/metrics.jsonl, tb/, train.log, checkpoints/   written by the training loop

``evaluate(EvaluateConfig)`` and ``predict(EvaluateConfig)`` load a fine-tuned directory (litebert's or
transformers' ``AlbertForSequenceClassification``) and write ``eval_results.json`` / ``predictions.tsv``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import random
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from litebert.errors import LitebertError
from litebert.finetune.data import (Encoded, EncodedDataset, LabelSpace, PadCollator, build_label_space,
                                    encode_examples, label_space_from_config)
from litebert.finetune.metrics import check_metrics, compute_metrics, default_metrics
from litebert.finetune.readers import Column, ColumnSpec, ReadResult, read_examples
from litebert.finetune.tasks import HF_PROBLEM_TYPES, PROBLEM_TYPES, TASKS, TaskSpec, get_task
from litebert.precision import PRECISIONS, resolve_precision

log = logging.getLogger("litebert.finetune")

OPTIMIZERS = ("adamw", "lamb")
INITS = ("pretrained", "random")


# ------------------------------------------------------------------------------------------------------- configs
@dataclass
class DataOptions:
    """How to read the data files (shared by finetune, evaluate and predict).

    Attributes:
        task: a preset name (:data:`litebert.finetune.tasks.TASKS`) that fills in columns, labels and metrics.
        text_column / text_pair_column / label_column: header name or 0-based index; override the task's.
        header: ``False`` = the files have no header (``--no-header``); ``None`` = the task's layout, or a header
            when any column is given by name.
        delimiter: field separator (``\\t``, ``,``, ``tab``, ``comma`` ...); default from the file extension.
        label_separator: separator between labels of a multi-label field.
    """

    task: str | None = None
    text_column: Column | None = None
    text_pair_column: Column | None = None
    label_column: Column | None = None
    header: bool | None = None
    delimiter: str | None = None
    label_separator: str = ","

    def __post_init__(self) -> None:
        from litebert.finetune.readers import parse_column
        self.text_column = parse_column(self.text_column)
        self.text_pair_column = parse_column(self.text_pair_column)
        self.label_column = parse_column(self.label_column)
        if self.task is not None:
            get_task(self.task)  # fail early on an unknown name
        if self.task is None and self.text_column is None:
            raise LitebertError("give --task NAME or --text-column (and --label-column) to say where the data is")

    @property
    def task_spec(self) -> TaskSpec | None:
        return get_task(self.task) if self.task else None

    def spec_for(self, path: str | Path, *, labels: bool) -> ColumnSpec:
        """The column spec for one file: the task's layout for that file, with the user's columns on top."""
        spec = self.task_spec.layout_for(path, self.delimiter) if self.task_spec else None
        user = {k: v for k, v in (("text", self.text_column), ("text_pair", self.text_pair_column),
                                  ("label", self.label_column)) if v is not None}
        if spec is None:
            spec = ColumnSpec(text=self.text_column, text_pair=self.text_pair_column,
                              label=self.label_column if labels else None, header=self.header,
                              label_optional=not labels)
        elif user or self.header is not None:
            spec = dataclasses.replace(spec, **user, **({} if self.header is None else {"header": self.header}))
        if not labels and spec.label is not None:
            spec = dataclasses.replace(spec, label_optional=True)
        return spec

    def read(self, path: str | Path, *, require_label: bool) -> ReadResult:
        return read_examples(path, self.spec_for(path, labels=require_label), delimiter=self.delimiter,
                             require_label=require_label)


@dataclass
class FinetuneConfig:
    """Settings of one fine-tuning run (``litebert finetune``); validated on construction.

    Attributes:
        model: a model directory (HF format: ``config.json`` + weights, tokenizer files), e.g. ``OUTPUT/final`` of
            pretraining, a transformers ALBERT directory or an albert_zh conversion.
        train_file / dev_file / test_file: data files (TSV, CSV, JSON lines).
        output_dir: where everything goes (see the module docstring).
        data: how to read the files.
        metrics: metric names; default the task's, else by problem type. The first selects the best checkpoint.
        problem_type: ``single_label`` (default; ``regression`` for a regression task), ``multi_label``,
            ``regression``.
        epochs: passes over the training set (fractions allowed); ignored when ``max_steps`` is set.
        max_steps: optimizer steps; overrides ``epochs``.
        batch_size: examples per optimizer step. eval_batch_size: examples per forward at evaluation.
        learning_rate: peak learning rate after linear warm-up; linear decay to 0 at the last step.
        warmup_ratio: fraction of the steps spent warming up, in [0, 1).
        weight_decay: decoupled weight decay (not on biases and LayerNorm).
        max_grad_norm: global gradient-norm clip (0 = off).
        optimizer: ``adamw`` (default) or ``lamb``.
        max_seq_length: tokens per example including ``[CLS]``/``[SEP]``; longer rows are truncated and counted.
        seed: model init of the head (and of all weights with ``init="random"``), shuffling, dropout.
        data_seed: seed of the ``max_train_examples``/``max_eval_examples`` subsample (kept apart from ``seed`` so
            that runs with different seeds see the same examples).
        eval_steps: evaluate on dev every N steps; 0 = once per epoch.
        logging_steps: training log line every N steps.
        early_stopping_patience: stop after N evaluations without a better dev metric; None = never.
        resume: None (fresh run; refused if ``OUTPUT/checkpoints/`` holds checkpoints), ``"auto"`` (continue from
            the newest complete checkpoint in ``OUTPUT/checkpoints/``) or a ``step-N`` directory.
        max_train_examples / max_eval_examples: random subsample of the train / dev rows (None = all).
        init: ``pretrained`` (load the weights) or ``random`` (same architecture, fresh weights: the baseline).
        tokenizer: tokenizer directory; default ``model``.
        classifier_dropout: overrides ``classifier_dropout_prob`` of the model config.
        hidden_dropout: overrides ``hidden_dropout_prob`` (and attention dropout) of the model config.
        precision: ``auto`` (bf16 autocast where the device computes bf16 natively, else fp32; on resume the
            checkpoint's), ``fp32``, ``bf16`` or ``fp16``: see :mod:`litebert.precision`.
        device: ``None`` (CUDA when available), ``cpu`` or ``cuda``.
        progress_bar: tqdm bar in the training loop.
        keep_checkpoints: keep the loop's training-state ``checkpoints/`` (optimizer etc.); ``best/`` is always kept.
    """

    model: str
    train_file: str
    dev_file: str
    output_dir: str
    test_file: str | None = None
    data: DataOptions = field(default_factory=DataOptions)
    metrics: tuple[str, ...] | None = None
    problem_type: str | None = None
    epochs: float = 3.0
    max_steps: int | None = None
    batch_size: int = 32
    eval_batch_size: int = 64
    learning_rate: float = 2e-5
    warmup_ratio: float = 0.1
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0
    optimizer: str = "adamw"
    max_seq_length: int = 128
    seed: int = 42
    data_seed: int = 0
    eval_steps: int = 0
    logging_steps: int = 50
    early_stopping_patience: int | None = None
    max_train_examples: int | None = None
    max_eval_examples: int | None = None
    init: str = "pretrained"
    tokenizer: str | None = None
    classifier_dropout: float | None = None
    hidden_dropout: float | None = None
    precision: str = "auto"
    device: str | None = None
    resume: str | None = None
    progress_bar: bool = True
    keep_checkpoints: bool = True

    def __post_init__(self) -> None:
        def fail(name: str, why: str) -> None:
            raise LitebertError(f"finetune: {name} {why}")

        if isinstance(self.data, dict):
            self.data = DataOptions(**self.data)
        if self.problem_type is not None and self.problem_type not in PROBLEM_TYPES:
            fail("problem_type", f"must be one of {', '.join(PROBLEM_TYPES)}, got {self.problem_type!r}")
        if self.optimizer not in OPTIMIZERS:
            fail("optimizer", f"must be one of {', '.join(OPTIMIZERS)}, got {self.optimizer!r}")
        if self.init not in INITS:
            fail("init", f"must be one of {', '.join(INITS)}, got {self.init!r}")
        if not self.epochs > 0 and self.max_steps is None:
            fail("epochs", f"must be > 0, got {self.epochs}")
        for name in ("batch_size", "eval_batch_size", "logging_steps"):
            if int(getattr(self, name)) < 1:
                fail(name, f"must be >= 1, got {getattr(self, name)}")
        for name in ("max_steps", "max_train_examples", "max_eval_examples", "early_stopping_patience"):
            value = getattr(self, name)
            if value is not None and value < 1:
                fail(name, f"must be >= 1 (or unset), got {value}")
        if self.eval_steps < 0:
            fail("eval_steps", f"must be >= 0, got {self.eval_steps}")
        if self.precision not in PRECISIONS:
            fail("precision", f"must be one of {', '.join(PRECISIONS)}, got {self.precision!r}")
        if not 0 <= self.warmup_ratio < 1:
            fail("warmup_ratio", f"must be in [0, 1), got {self.warmup_ratio}")
        if not self.learning_rate > 0:
            fail("learning_rate", f"must be > 0, got {self.learning_rate}")
        if self.max_seq_length < 4:
            fail("max_seq_length", f"must be >= 4, got {self.max_seq_length}")
        for name in ("classifier_dropout", "hidden_dropout"):
            value = getattr(self, name)
            if value is not None and not 0 <= value < 1:
                fail(name, f"must be in [0, 1), got {value}")
        if self.metrics is not None:
            self.metrics = tuple(self.metrics)


@dataclass
class EvaluateConfig:
    """Settings of ``litebert evaluate`` / ``litebert predict``.

    Attributes:
        model: a fine-tuned model directory (``config.json`` with ``id2label``; tokenizer files or ``tokenizer``).
        data_file: the file to evaluate / predict.
        output_dir: where ``eval_results.json`` / ``predictions.tsv`` go (default: the model directory's
            ``eval``/``predict`` subdirectory is NOT used; ``None`` writes nothing).
        data: how to read the file; ``None`` uses what fine-tuning saved in ``config.json``: the task
            (``finetuning_task``) or the user's column options (``litebert_data_options``).
        metrics: metric names (default: the task's or by problem type).
        batch_size, max_seq_length, tokenizer, device, precision: as in :class:`FinetuneConfig`.
        max_examples: evaluate only the first N rows.
    """

    model: str
    data_file: str
    output_dir: str | None = None
    data: DataOptions | None = None
    metrics: tuple[str, ...] | None = None
    batch_size: int = 64
    max_seq_length: int = 128
    tokenizer: str | None = None
    device: str | None = None
    max_examples: int | None = None
    precision: str = "auto"

    def __post_init__(self) -> None:
        if isinstance(self.data, dict):
            self.data = DataOptions(**self.data)
        if self.precision not in PRECISIONS:
            raise LitebertError(f"evaluate: precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}")
        if self.batch_size < 1:
            raise LitebertError(f"evaluate: batch_size must be >= 1, got {self.batch_size}")
        if self.max_seq_length < 4:
            raise LitebertError(f"evaluate: max_seq_length must be >= 4, got {self.max_seq_length}")


# ------------------------------------------------------------------------------------------------------- results
@dataclass
class EvalResult:
    """Metrics and predictions of one file.

    Attributes:
        metrics: ``{name: value}`` (plus ``eval_loss``) when the file has labels, else ``{}``.
        predictions: per row, the decoded prediction (label name / float / joined names).
        labels: per row, the gold label string, or ``None`` for unlabelled files.
        num_examples: rows evaluated. truncated: rows cut to ``max_seq_length``.
        results_file / predictions_file: what was written (``None`` when nothing was).
    """

    metrics: dict[str, float]
    predictions: list[str]
    labels: list[str] | None
    num_examples: int
    truncated: int
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


# ------------------------------------------------------------------------------------------------ model loading
def _device(name: str | None) -> torch.device:
    if name is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise LitebertError("device 'cuda' requested but CUDA is not available")
    return torch.device(name)


def _load_tokenizer(model_dir: str, tokenizer_dir: str | None):
    from litebert.tokenization import load_tokenizer
    directory = Path(tokenizer_dir or model_dir)
    try:
        return load_tokenizer(directory)
    except LitebertError as exc:
        hint = "" if tokenizer_dir else " (pass --tokenizer DIR if the model directory has no tokenizer files)"
        raise LitebertError(f"{exc}{hint}") from exc


def build_classifier(model_dir: str, space: LabelSpace, *, init: str = "pretrained", seed: int = 0,
                     classifier_dropout: float | None = None, hidden_dropout: float | None = None,
                     extra: dict | None = None):
    """An ``AlbertForSequenceClassification`` for ``space`` with the encoder of ``model_dir``.

    The encoder (``albert.*``) comes from the directory's weights — a pretraining ``final/``
    (``AlbertForPreTraining``: its MLM/SOP heads are dropped), a masked-LM or a classification model. The
    classifier is new (initialised from ``seed``) unless the directory already holds one of the same shape; a
    missing pooler (masked-LM models have none) is initialised too. ``init="random"`` keeps only the architecture.

    Raises:
        LitebertError: no ``config.json``; encoder weights missing from the directory.
    """
    from litebert.checkpoint import load_config, load_state_dict_file, load_weights
    from litebert.modeling import AlbertForSequenceClassification

    directory = Path(model_dir)
    config = load_config(directory)
    overrides: dict[str, Any] = dict(num_labels=space.num_labels, id2label=space.id2label,
                                     label2id={v: k for k, v in space.id2label.items()},
                                     problem_type=HF_PROBLEM_TYPES[space.problem_type],
                                     architectures=["AlbertForSequenceClassification"])
    if classifier_dropout is not None:
        overrides["classifier_dropout_prob"] = classifier_dropout
    if hidden_dropout is not None:
        overrides["hidden_dropout_prob"] = hidden_dropout
        overrides["attention_probs_dropout_prob"] = hidden_dropout
    config = dataclasses.replace(config, **overrides)
    config.extra = {**(config.extra or {}), **(extra or {})}
    torch.manual_seed(seed)
    model = AlbertForSequenceClassification(config)
    if init == "random":
        return model, {"missing": sorted(model.state_dict()), "unexpected": [], "mismatched": []}
    state, source = load_state_dict_file(directory)
    report = load_weights(model, state, source, ignore_mismatched_sizes=True)
    encoder_missing = [k for k in report["missing"] if k.startswith("albert.") and not k.startswith("albert.pooler.")]
    if encoder_missing:
        raise LitebertError(f"{source}: the weights lack {len(encoder_missing)} encoder tensors "
                            f"(e.g. {encoder_missing[:3]}); is this an ALBERT model directory matching its config.json?")
    bad_shapes = [k for k in report["mismatched"] if not k.startswith("classifier.")]
    if bad_shapes:
        raise LitebertError(f"{source}: tensors whose shape differs from config.json: {bad_shapes[:3]}")
    return model, report


# --------------------------------------------------------------------------------------------- loss + inference
def _forward_logits(model, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                token_type_ids=batch["token_type_ids"])
    return out.logits if hasattr(out, "logits") else out[0]


def _loss_sum(logits: torch.Tensor, labels: torch.Tensor, problem_type: str) -> torch.Tensor:
    """Summed loss of a batch: cross-entropy (``[B, C]`` vs ``int64 [B]``), squared error (``[B, 1]`` vs
    ``float [B]``), or binary cross-entropy over all ``B × L`` entries (multi-label) — transformers' losses, summed."""
    logits = logits.float()
    if problem_type == "regression":
        return F.mse_loss(logits.squeeze(-1), labels.float(), reduction="sum")
    if problem_type == "multi_label":
        return F.binary_cross_entropy_with_logits(logits, labels.float(), reduction="sum")
    return F.cross_entropy(logits, labels, reduction="sum")


def make_objective(problem_type: str, device: torch.device):
    """The fine-tuning objective for :func:`litebert.training.train`: one term ``loss`` summed over the batch
    (units: examples; label entries for multi-label) and the ratio ``accuracy`` (classification)."""
    from litebert.training import LossOutput

    def objective(model, batch):
        batch = {k: v.to(device) for k, v in batch.items()}
        logits = _forward_logits(model, batch)
        loss = _loss_sum(logits, batch["labels"], problem_type)
        ratios = {}
        if problem_type == "single_label":
            correct = (logits.detach().argmax(-1) == batch["labels"]).sum().item()
            ratios["accuracy"] = (float(correct), float(len(logits)))
        return LossOutput(sums={"loss": loss}, ratios=ratios)

    def count(batch):
        labels = batch["labels"]
        return {"loss": int(labels.numel())}

    return objective, count


@torch.no_grad()
def run_inference(model, encoded, space: LabelSpace, batch_size: int, pad_token_id: int,
                  device: torch.device) -> tuple[np.ndarray, np.ndarray, float | None]:
    """Predict every row of ``encoded``.

    Returns:
        ``(predictions, raw, loss)``: class ids ``int64 [N]`` / values ``float [N]`` / 0-1 ``int64 [N, L]``;
        the raw outputs ``float32 [N, C]`` (logits); the mean loss per unit when labels are known, else ``None``.
    Rows are batched by length (less padding on CPU) and returned in file order.
    """
    was_training = model.training
    model.eval()
    dataset = EncodedDataset(encoded)
    collate = PadCollator(pad_token_id, space.problem_type)
    order = np.argsort(np.asarray(encoded.lengths), kind="stable")
    logits_out: list[np.ndarray] = [None] * len(dataset)  # type: ignore[list-item]
    loss_sum, units = 0.0, 0
    for start in range(0, len(order), batch_size):
        idx = order[start: start + batch_size]
        batch = {k: v.to(device) for k, v in collate([dataset[int(i)] for i in idx]).items()}
        logits = _forward_logits(model, batch).float()
        if "labels" in batch:
            loss_sum += float(_loss_sum(logits, batch["labels"], space.problem_type))
            units += batch["labels"].numel()
        for row, i in enumerate(idx):
            logits_out[int(i)] = logits[row].cpu().numpy()
    model.train(was_training)
    raw = np.stack(logits_out) if logits_out else np.zeros((0, space.num_labels), np.float32)  # (N, C)
    if space.problem_type == "regression":
        preds = raw[:, 0].astype(np.float64)
    elif space.problem_type == "multi_label":
        preds = (raw > 0).astype(np.int64)  # sigmoid > 0.5
    else:
        preds = raw.argmax(-1).astype(np.int64)
    return preds, raw, (loss_sum / units if units else None)


def _targets_array(encoded, space: LabelSpace) -> np.ndarray:
    if space.problem_type == "regression":
        return np.asarray(encoded.targets, dtype=np.float64)
    return np.asarray(encoded.targets, dtype=np.int64)


def write_predictions(path: Path, indices: list[int], predictions: list[str], labels: list[str] | None) -> Path:
    """``index<TAB>prediction[<TAB>label]`` with a header, one row per example read; ``index`` is the example's
    0-based data row in its file (``Example.index``), so rows match the file also after subsampling."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["index\tprediction" + ("\tlabel" if labels is not None else "")]
    for i, (index, pred) in enumerate(zip(indices, predictions, strict=True)):
        lines.append(f"{index}\t{pred}" + (f"\t{labels[i]}" if labels is not None else ""))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _write_json(path: Path, obj) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def _subsample(read: ReadResult, n: int | None, seed: int) -> ReadResult:
    if n is None or n >= len(read.examples):
        return read
    keep = sorted(random.Random(seed).sample(range(len(read.examples)), n))
    return dataclasses.replace(read, examples=[read.examples[i] for i in keep])


def sharded_inference(model, encoded, space: LabelSpace, batch_size: int, pad_token_id: int, dist
                      ) -> tuple[np.ndarray, float | None]:
    """:func:`run_inference` over ``dist.world_size`` processes: rank ``r`` predicts rows ``r, r + W, …`` and the
    predictions and losses are all-gathered, so every rank returns the whole dev set's ``(predictions, loss)`` in
    file order (the loss weighted by each rank's rows). One process: :func:`run_inference` itself."""
    if dist.world_size == 1:
        preds, _, loss = run_inference(model, encoded, space, batch_size, pad_token_id, dist.device)
        return preds, loss
    from litebert.training.distributed import all_gather_object

    rows = list(range(dist.rank, len(encoded.input_ids), dist.world_size))
    part = Encoded([encoded.input_ids[i] for i in rows], [encoded.token_type_ids[i] for i in rows],
                   None if encoded.targets is None else [encoded.targets[i] for i in rows],
                   lengths=[encoded.lengths[i] for i in rows])
    preds, _, loss = (run_inference(model, part, space, batch_size, pad_token_id, dist.device) if rows
                      else (None, None, None))
    gathered = [g for g in all_gather_object((rows, preds, loss)) if g[0]]
    first = gathered[0][1]
    out = np.empty((len(encoded.input_ids), *first.shape[1:]), dtype=first.dtype)
    for idx, p, _ in gathered:
        out[idx] = p
    if any(g[2] is None for g in gathered):
        return out, None
    return out, sum(len(idx) * lo for idx, _, lo in gathered) / len(encoded.input_ids)


def _report_truncation(name: str, path: Path, encoded, max_seq_length: int) -> None:
    if encoded.truncated:
        log.warning("%s: %d of %d rows of %s are longer than max_seq_length=%d (longest %d tokens) and were "
                    "truncated", name, encoded.truncated, len(encoded.input_ids), path, max_seq_length,
                    encoded.longest)


def _check_seq_length(config, max_seq_length: int, model_dir) -> None:
    if max_seq_length > config.max_position_embeddings:
        raise LitebertError(f"max_seq_length {max_seq_length} exceeds the model's max_position_embeddings "
                            f"{config.max_position_embeddings} ({model_dir}/config.json)")


def untrained_positions_warning(config, max_seq_length: int, encoded: dict[str, Any], model_dir) -> str | None:
    """The warning for fine-tuning a pretrained model on sequences longer than it was pretrained on, or None.

    ``litebert pretrain`` writes ``pretraining_max_seq_length`` (L) into ``config.json``: the position vectors
    ``P[L:]`` never received a gradient and are still their random initialisation, so every token at a position
    ≥ L enters the encoder with noise that the pretrained layers never saw (BERT pretrains its last 10 % of steps at
    512 for this reason, Devlin et al. 2019 §A.2). ``encoded`` maps a split name to its :class:`Encoded` examples;
    the message counts the rows longer than L in each. Models without the key (transformers', converted TF
    checkpoints) give None.
    """
    trained = config.extra.get("pretraining_max_seq_length")
    if not trained or max_seq_length <= int(trained):
        return None
    trained = int(trained)
    counts = ", ".join(f"{sum(n > trained for n in enc.lengths)} of {len(enc.lengths)} {name} rows"
                       for name, enc in encoded.items())
    return (f"max_seq_length={max_seq_length} but {model_dir} was pretrained on sequences of at most {trained} "
            f"tokens: positions {trained}-{max_seq_length - 1} were never trained ({counts} reach them); use "
            f"--max-seq-length {trained}, or pretrain (or continue with --init-from) on {max_seq_length}-token data")


# --------------------------------------------------------------------------------------------------- finetune
def finetune(cfg: FinetuneConfig) -> FinetuneResult:
    """Fine-tune ``cfg.model`` on ``cfg.train_file``, keep the best dev checkpoint in ``OUTPUT/best``.

    Under ``torchrun`` (``WORLD_SIZE`` > 1) the model is trained with DDP, ``cfg.batch_size`` sequences per
    process and micro-batch; dev predictions are sharded over the ranks and gathered (:func:`sharded_inference`);
    rank 0 alone writes ``OUTPUT/`` and every rank returns its :class:`FinetuneResult`. Logs a warning when
    ``max_seq_length`` exceeds the model's ``pretraining_max_seq_length`` (:func:`untrained_positions_warning`).

    Raises:
        LitebertError: bad files (see :mod:`litebert.finetune.readers`), a dev label unseen in training, an
            unknown metric for the problem type, a model directory without weights or tokenizer, an output
            directory that already holds a run's checkpoints.
    """
    from litebert.optim import build_optimizer, build_scheduler
    from litebert.training import TrainingArgs, make_batch_factory, train
    from litebert.training import distributed as D
    from litebert.training.distributed import unwrap_model, wrap_model

    t0 = time.time()
    out = Path(cfg.output_dir)
    data = cfg.data
    task = data.task_spec
    problem_type = cfg.problem_type or (task.problem_type if task else "single_label")

    # ---- data: read, label space, subsample
    train_read = data.read(cfg.train_file, require_label=True)
    dev_read = data.read(cfg.dev_file, require_label=True)
    space = build_label_space(train_read, problem_type, task.labels if task and cfg.problem_type in
                              (None, task.problem_type) else None, data.label_separator)
    metrics = check_metrics(cfg.metrics or (task.metrics if task and problem_type == task.problem_type
                                            else default_metrics(problem_type, space.num_labels)), problem_type)
    train_read = _subsample(train_read, cfg.max_train_examples, cfg.data_seed)
    dev_read = _subsample(dev_read, cfg.max_eval_examples, cfg.data_seed)

    # ---- tokenizer + encoding (the label check of dev happens here: unseen labels fail with file:line)
    tokenizer = _load_tokenizer(cfg.model, cfg.tokenizer)
    train_enc = encode_examples(train_read.examples, tokenizer, cfg.max_seq_length, space, train_read.path)
    dev_enc = encode_examples(dev_read.examples, tokenizer, cfg.max_seq_length, space, dev_read.path, "training")
    test_read = test_enc = None
    if cfg.test_file:
        test_read = data.read(cfg.test_file, require_label=False)
        test_enc = encode_examples(test_read.examples, tokenizer, cfg.max_seq_length,
                                   space if test_read.has_labels else None, test_read.path)
    truncated = {"train": train_enc.truncated, "dev": dev_enc.truncated}
    _report_truncation("train", train_read.path, train_enc, cfg.max_seq_length)
    _report_truncation("dev", dev_read.path, dev_enc, cfg.max_seq_length)
    if test_enc is not None:
        truncated["test"] = test_enc.truncated
        _report_truncation("test", test_read.path, test_enc, cfg.max_seq_length)

    # ---- model
    # under torchrun: DDP over WORLD_SIZE processes, each a micro-batch of cfg.batch_size (global batch
    # batch_size x world_size), dev predictions sharded and gathered; rank 0 alone writes OUTPUT/
    dist = D.init_distributed(cfg.device)
    extra: dict[str, Any] = {"finetuning_task": data.task} if data.task else {}
    if data.text_column is not None or data.label_column is not None or data.header is not None:
        # the user's columns, so that evaluate/predict on a file of the same layout need no options
        extra["litebert_data_options"] = _jsonable({k: v for k, v in dataclasses.asdict(data).items()
                                                    if k != "task" and v is not None})
    if space.problem_type == "multi_label":
        extra["litebert_label_separator"] = space.separator
    model, load_info = build_classifier(cfg.model, space, init=cfg.init, seed=cfg.seed,
                                        classifier_dropout=cfg.classifier_dropout,
                                        hidden_dropout=cfg.hidden_dropout, extra=extra)
    _check_seq_length(model.config, cfg.max_seq_length, cfg.model)
    positions_warning = (untrained_positions_warning(model.config, cfg.max_seq_length,
                                                     {"train": train_enc, "dev": dev_enc}, cfg.model)
                         if cfg.init == "pretrained" else None)
    if positions_warning:
        log.warning("finetune: %s", positions_warning)
    if tokenizer.vocab_size > model.config.vocab_size:
        raise LitebertError(f"the tokenizer has {tokenizer.vocab_size} tokens but the model's vocab_size is "
                            f"{model.config.vocab_size}: tokenizer and model do not belong together")
    log.info("finetune: %s init; newly initialised: %s", cfg.init,
             ", ".join(load_info["missing"]) if cfg.init == "pretrained" else "all weights")
    model.to(dist.device)
    model = wrap_model(model, dist)
    precision = _resolve_finetune_precision(cfg, out, dist.device)
    log.info("finetune: %s", precision)

    # ---- schedule
    steps_per_epoch = math.ceil(len(train_enc.input_ids) / (cfg.batch_size * dist.world_size))
    max_steps = cfg.max_steps or max(1, math.ceil(steps_per_epoch * cfg.epochs))
    eval_steps = cfg.eval_steps or steps_per_epoch
    optimizer = build_optimizer(unwrap_model(model), cfg.optimizer, lr=cfg.learning_rate,
                                weight_decay=cfg.weight_decay)
    scheduler = build_scheduler(optimizer, warmup_steps=int(round(cfg.warmup_ratio * max_steps)),
                                max_steps=max_steps)
    batches = make_batch_factory(EncodedDataset(train_enc), cfg.batch_size,
                                 PadCollator(tokenizer.pad_token_id, space.problem_type), seed=cfg.seed,
                                 shuffle=True, drop_last=False, rank=dist.rank, world_size=dist.world_size)
    objective, count = make_objective(space.problem_type, dist.device)

    out.mkdir(parents=True, exist_ok=True)
    best_dir = out / "best"
    primary = metrics[0]
    dev_targets = _targets_array(dev_enc, space)

    last_eval: dict[str, Any] = {}  # predictions of the latest evaluation, kept with best/ (no second dev pass)

    def eval_fn(m) -> dict[str, float]:
        preds, loss = sharded_inference(unwrap_model(m), dev_enc, space, cfg.eval_batch_size,
                                        tokenizer.pad_token_id, dist)
        result = compute_metrics(metrics, preds, dev_targets, space.num_labels)
        result["eval_loss"] = float(loss)
        last_eval.update(preds=preds, metrics=dict(result))
        return result

    best_eval: dict[str, Any] = {}

    def on_best(raw_model, eval_metrics: dict[str, float], step: int) -> None:
        tmp = out / ".best.tmp"
        if tmp.exists():
            shutil.rmtree(tmp)
        raw_model.save_pretrained(tmp)
        tokenizer.save(tmp)
        _write_json(tmp / "best_eval.json", {**eval_metrics, "step": step})
        if best_dir.exists():
            shutil.rmtree(best_dir)
        tmp.rename(best_dir)
        best_eval.clear()
        best_eval.update(last_eval)
        log.info("finetune: new best %s=%.4f at step %d -> %s", primary, eval_metrics[primary], step, best_dir)

    run_settings = {
        "finetune_config": _jsonable(dataclasses.asdict(cfg)),
        "problem_type": space.problem_type, "labels": list(space.labels), "metrics": list(metrics),
        "num_train": len(train_enc.input_ids), "num_dev": len(dev_enc.input_ids), "max_steps": max_steps,
        "steps_per_epoch": steps_per_epoch, "eval_steps": eval_steps, "truncated": truncated,
        "untrained_positions_warning": positions_warning, "precision": precision.to_dict(),
        "columns": {"train": _jsonable(dataclasses.asdict(data.spec_for(cfg.train_file, labels=True)))},
    }
    if dist.is_main:
        _write_json(out / "finetune_config.json", run_settings)
    args = TrainingArgs(
        output_dir=out, max_steps=max_steps, max_grad_norm=cfg.max_grad_norm or None,
        logging_steps=min(cfg.logging_steps, max_steps), eval_steps=eval_steps, save_steps=0,
        save_total_limit=1, precision=precision.precision, metric_for_best=primary, greater_is_better=True,
        early_stopping_patience=cfg.early_stopping_patience, progress_bar=cfg.progress_bar, resume=cfg.resume,
        log_prefix=f"finetune {data.task or Path(cfg.train_file).name}")
    result = train(model, optimizer, scheduler, batches, objective, count, args, eval_fn=eval_fn,
                   on_best=on_best,
                   extra_state={"finetune": run_settings["finetune_config"], "precision": precision.precision},
                   dist=dist)
    final: FinetuneResult | None = None
    if dist.is_main:  # under torchrun the other ranks wait for rank 0's results
        if not cfg.keep_checkpoints and (out / "checkpoints").exists():
            shutil.rmtree(out / "checkpoints")

        # ---- final: evaluate best/ on dev (and test), write results and predictions
        if not best_dir.exists():  # no evaluation produced a best (cannot happen with eval_fn; keep the last model)
            on_best(unwrap_model(model), result.last_eval or {primary: float("nan")}, result.step)
        if "preds" in best_eval:
            preds, eval_results = best_eval["preds"], best_eval["metrics"]
        else:  # best/ came from elsewhere (no evaluation ran in this process): evaluate it now
            best_model = _load_finetuned(best_dir, dist.device)
            with precision.autocast(dist.device):
                preds, _, loss = run_inference(best_model, dev_enc, space, cfg.eval_batch_size,
                                               tokenizer.pad_token_id, dist.device)
            eval_results = compute_metrics(metrics, preds, dev_targets, space.num_labels)
            eval_results["eval_loss"] = float(loss)
        best_info = json.loads((best_dir / "best_eval.json").read_text())
        _write_json(out / "eval_results.json", {**eval_results, "num_examples": len(preds),
                                                "best_step": best_info.get("step"), "truncated": truncated["dev"]})
        write_predictions(out / "predictions.tsv", [ex.index for ex in dev_read.examples],
                          [space.decode(p) for p in preds], [ex.label for ex in dev_read.examples])
        test_results = None
        if test_enc is not None:
            best_model = _load_finetuned(best_dir, dist.device)
            with precision.autocast(dist.device):
                tpreds, _, tloss = run_inference(best_model, test_enc, space, cfg.eval_batch_size,
                                                 tokenizer.pad_token_id, dist.device)
            labels = [ex.label for ex in test_read.examples] if test_read.has_labels else None
            write_predictions(out / "test_predictions.tsv", [ex.index for ex in test_read.examples],
                              [space.decode(p) for p in tpreds], labels)
            if test_enc.targets is not None:
                test_results = compute_metrics(metrics, tpreds, _targets_array(test_enc, space), space.num_labels)
                test_results["eval_loss"] = float(tloss)
                _write_json(out / "test_results.json", {**test_results, "num_examples": len(tpreds)})
        seconds = time.time() - t0
        log.info("finetune: done in %.0fs; best %s=%.4f at step %s; dev %s", seconds, primary,
                 eval_results[primary], best_info.get("step"), json.dumps(eval_results))
        final = FinetuneResult(
            output_dir=out, best_dir=best_dir, metric=primary, best_metric=result.best_metric,
            best_step=best_info.get("step"), eval_results=eval_results, test_results=test_results, steps=result.step,
            stopped_early=result.stopped_early, num_train=len(train_enc.input_ids), num_dev=len(dev_enc.input_ids),
            truncated=truncated, labels=list(space.labels), seconds=seconds)
    if dist.distributed:
        final = D.broadcast_object(final)
        D.destroy_distributed()
    return final


def _resolve_finetune_precision(cfg: FinetuneConfig, out: Path, device: torch.device):
    """:func:`litebert.precision.resolve_precision` for a fine-tuning run; a resumed run passes the precision its
    checkpoint records (``OUTPUT/checkpoints/step-N`` for ``--resume auto``, or the given path)."""
    from litebert.training.state import checkpoint_precision, find_latest_checkpoint

    resume_from = None
    if cfg.resume == "auto":
        resume_from = find_latest_checkpoint(out)
    elif cfg.resume is not None:
        resume_from = Path(cfg.resume)
    return resolve_precision(cfg.precision, device, checkpoint_precision=(
        checkpoint_precision(resume_from) if resume_from is not None else None))


def _jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    return obj


def _load_finetuned(model_dir: str | Path, device: torch.device):
    from litebert.modeling import AlbertForSequenceClassification
    model = AlbertForSequenceClassification.from_pretrained(Path(model_dir))
    return model.to(device).eval()


# ------------------------------------------------------------------------------------------ evaluate / predict
def _prepare_eval(cfg: EvaluateConfig, need_labels: bool):
    from litebert.checkpoint import load_config

    directory = Path(cfg.model)
    config = load_config(directory)
    data = cfg.data
    saved_task = (config.extra or {}).get("finetuning_task")
    saved_columns = (config.extra or {}).get("litebert_data_options")
    if data is None:
        if not saved_task and not saved_columns:
            raise LitebertError(f"{directory}/config.json names no finetuning_task: give --task or --text-column")
        data = DataOptions(task=saved_task if saved_task in TASKS else None, **(saved_columns or {}))
    space = label_space_from_config(config)
    _check_seq_length(config, cfg.max_seq_length, directory)
    read = data.read(cfg.data_file, require_label=need_labels)
    if cfg.max_examples is not None:
        read = dataclasses.replace(read, examples=read.examples[: cfg.max_examples])
    task = data.task_spec
    metrics = check_metrics(cfg.metrics or (task.metrics if task and task.problem_type == space.problem_type
                                            else default_metrics(space.problem_type, space.num_labels)),
                            space.problem_type)
    tokenizer = _load_tokenizer(cfg.model, cfg.tokenizer)
    labelled = read.has_labels
    eval_space = _lenient_space(space) if labelled else space
    encoded = encode_examples(read.examples, tokenizer, cfg.max_seq_length, eval_space if labelled else None,
                              read.path, "model's")
    _report_truncation("data", read.path, encoded, cfg.max_seq_length)
    from litebert.training import distributed as D

    # under torchrun each rank predicts every W-th row (sharded_inference) and rank 0 alone writes
    dist = (D.init_distributed(cfg.device) if int(os.environ.get("WORLD_SIZE", "1")) > 1
            else D.DistInfo(device=_device(cfg.device)))
    model = _load_finetuned(directory, dist.device)
    precision = resolve_precision(cfg.precision, dist.device)
    log.info("%s: %s", "evaluate" if need_labels else "predict", precision)
    return read, space, metrics, tokenizer, encoded, model, dist, precision


def _lenient_space(space: LabelSpace) -> LabelSpace:
    """Models fine-tuned elsewhere often keep transformers' default names ``LABEL_0 ...``: then the file's labels
    ``0``, ``1``, ... are read as class ids."""
    if space.problem_type != "regression" and all(n == f"LABEL_{i}" for i, n in enumerate(space.labels)):
        return LabelSpace(space.problem_type, tuple(str(i) for i in range(len(space.labels))), space.separator)
    return space


def evaluate(cfg: EvaluateConfig) -> EvalResult:
    """Metrics of a fine-tuned model on a labelled file; writes ``OUTPUT/eval_results.json`` and
    ``OUTPUT/predictions.tsv`` when ``cfg.output_dir`` is set. Under ``torchrun`` the rows are shared out over the
    ranks (:func:`sharded_inference`), every rank returns the whole result, and rank 0 alone writes.

    Raises:
        LitebertError: the file has no label column, a label the model does not know (``file:line``), and the
            reader's errors.
    """
    read, space, metrics, tokenizer, encoded, model, dist, precision = _prepare_eval(cfg, need_labels=True)
    with precision.autocast(dist.device):
        preds, loss = sharded_inference(model, encoded, space, cfg.batch_size, tokenizer.pad_token_id, dist)
    result = compute_metrics(metrics, preds, _targets_array(encoded, space), space.num_labels)
    result["eval_loss"] = float(loss)
    predictions = [space.decode(p) for p in preds]
    labels = [ex.label for ex in read.examples]
    res = EvalResult(metrics=result, predictions=predictions, labels=labels, num_examples=len(preds),
                     truncated=encoded.truncated)
    if cfg.output_dir and dist.is_main:
        out = Path(cfg.output_dir)
        res.results_file = _write_json(out / "eval_results.json", {**result, "num_examples": len(preds),
                                                                   "truncated": encoded.truncated})
        res.predictions_file = write_predictions(out / "predictions.tsv", [ex.index for ex in read.examples],
                                                 predictions, labels)
    log.info("evaluate: %s on %d rows of %s", json.dumps(result), len(preds), read.path)
    _end_distributed(dist)
    return res


def predict(cfg: EvaluateConfig) -> EvalResult:
    """Predictions of a fine-tuned model for every row of a file (labels optional); writes
    ``OUTPUT/predictions.tsv`` (``index  prediction [label]``) when ``cfg.output_dir`` is set. Metrics are
    computed when the file has labels. Under ``torchrun``: as :func:`evaluate`."""
    read, space, metrics, tokenizer, encoded, model, dist, precision = _prepare_eval(cfg, need_labels=False)
    with precision.autocast(dist.device):
        preds, loss = sharded_inference(model, encoded, space, cfg.batch_size, tokenizer.pad_token_id, dist)
    labels = [ex.label for ex in read.examples] if read.has_labels else None
    result: dict[str, float] = {}
    if encoded.targets is not None:
        result = compute_metrics(metrics, preds, _targets_array(encoded, space), space.num_labels)
        result["eval_loss"] = float(loss)
    predictions = [space.decode(p) for p in preds]
    res = EvalResult(metrics=result, predictions=predictions, labels=labels, num_examples=len(preds),
                     truncated=encoded.truncated)
    if cfg.output_dir and dist.is_main:
        res.predictions_file = write_predictions(Path(cfg.output_dir) / "predictions.tsv",
                                                 [ex.index for ex in read.examples], predictions, labels)
    _end_distributed(dist)
    return res


def _end_distributed(dist) -> None:
    if dist.distributed:
        from litebert.training.distributed import destroy_distributed
        destroy_distributed()
