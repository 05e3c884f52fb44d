"""Sequence classification / regression (``--task-type classification``): GLUE/CLUE-style labelled rows.

One example = one text or text pair (:mod:`litebert.finetune.readers`), one target (:mod:`litebert.finetune.data`:
class id, float, or multi-hot), the head ``AlbertForSequenceClassification`` (pooled ``[CLS]`` → Linear), the
losses of transformers' head summed over the batch, the metrics of :mod:`litebert.finetune.metrics`, and
``predictions.tsv`` (``index  prediction  [label]``).
"""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from litebert.errors import LitebertError
from litebert.fileio import atomic_write_text
from litebert.finetune.data import (
    Encoded,
    EncodedDataset,
    LabelSpace,
    PadCollator,
    align_with_head,
    build_label_space,
    encode_examples,
    is_default_label_names,
    label_space_from_config,
)
from litebert.finetune.hub_data import SKIPPED_LABEL
from litebert.finetune.kinds import Features, TaskKind
from litebert.finetune.metrics import check_metrics, compute_metrics, default_metrics
from litebert.finetune.readers import ColumnSpec, read_rows
from litebert.finetune.tasks import HF_PROBLEM_TYPES
from litebert.settings import jsonable


class ClassificationKind(TaskKind):
    """Sequence classification, multi-label classification and regression (see the module docstring)."""

    name = "classification"
    architecture = "AlbertForSequenceClassification"
    head_prefixes = ("classifier.", "albert.pooler.")
    predictions_name = "predictions.tsv"

    def __init__(self, data, *, problem_type: str | None = None, metrics=None):
        super().__init__(data, problem_type=problem_type, metrics=metrics)
        self.user_problem_type = problem_type
        self.problem_type = problem_type or (self.task.problem_type if self.task else "single_label")
        self.space: LabelSpace | None = None
        self.label_space_for_files: LabelSpace | None = None  # evaluate: LABEL_i names read as ids
        self.split_name = "training"

    # ---- data
    def min_seq_length(self) -> tuple[int, str]:
        """5 positions for sentence pairs (a ``--text-pair-column``, or a task whose layouts have one), else 3."""
        task = self.task
        pairs = self.data.text_pair_column is not None or (
            task is not None and any(layout.columns.text_pair is not None for layout in task.layouts)
        )
        return (5, "[CLS] a [SEP] b [SEP]") if pairs else self.min_positions

    def read(self, path, *, require_labels: bool):
        return self.data.read(path, require_label=require_labels)

    def read_rows(self, rows, source, *, require_labels: bool):
        """Rows with ``text`` (``text_pair``) and ``label`` (absent when unlabelled); rows labelled ``-1`` are
        dropped and counted (:mod:`litebert.finetune.hub_data`)."""
        rows = iter(rows)
        first = next(rows, None)
        if first is None:
            raise LitebertError(f"{source}: no rows")
        spec = ColumnSpec(
            text="text",
            text_pair="text_pair" if "text_pair" in first[1] else None,
            label="label",
            label_optional=not require_labels,
            skip_labels=(SKIPPED_LABEL,),
        )
        return read_rows(source, spec, itertools.chain([first], rows), require_label=require_labels)

    def fit(self, train) -> None:
        """The label space of the training file. A JSON-lines label column holding lists is a multi-label field
        (docs/finetune.md): the problem type becomes ``multi_label`` unless one was asked for.

        Raises:
            LitebertError: list labels with ``--problem-type`` single_label/regression or a task preset of that
                type (``file:line``); :func:`build_label_space`'s errors.
        """
        task = self.task
        lists = train.list_labels
        if lists and self.problem_type != "multi_label":
            if self.user_problem_type or task:
                # word the remedy by what was given: the --problem-type, else the --task preset's problem type
                asked, remedy = (
                    (
                        f"--problem-type {self.user_problem_type}",
                        "use --problem-type multi_label or drop --problem-type",
                    )
                    if self.user_problem_type
                    else (
                        f"--task {task.name} is {self.problem_type}",
                        f"add --problem-type multi_label to read it as multi-label, or drop --task {task.name}",
                    )
                )
                raise LitebertError(
                    f"{train.path}:{lists[0].line}: the label field {train.label_column!r} is a JSON list "
                    f"(a multi-label field) but {asked}; {remedy}"
                )
            self.problem_type = "multi_label"
        self.space = build_label_space(
            train,
            self.problem_type,
            task.labels if task and self.user_problem_type in (None, task.problem_type) else None,
            self.data.label_separator,
        )
        self.label_space_for_files = self.space
        self._choose_metrics()

    def align_head(self, config) -> tuple[str, ...]:
        """Fine-tuning from a sequence classifier whose ``id2label`` names the training labels: the label space
        takes the model's ids, so each kept classifier row goes on scoring its own label (before, the rows were
        renamed in the training data's order: a head of ``{0: positive, 1: negative}`` came out predicting the
        opposite label); as many labels under other names: the classifier is newly initialised rather than
        reinterpreted (:func:`~litebert.finetune.data.align_with_head`). Regression has no names to align.

        Returns:
            ``("classifier.",)`` when the classifier must be newly initialised, else ``()``.
        """
        if self.space.problem_type == "regression":
            return ()
        order = align_with_head(self.space.labels, config, self.architecture)
        if order is None:
            return ("classifier.",)
        self.space = dataclasses.replace(self.space, labels=order)
        self.label_space_for_files = self.space
        return ()

    def from_config(self, config) -> None:
        self.space = label_space_from_config(config)
        self.problem_type = self.space.problem_type
        self.label_space_for_files = _lenient_space(self.space)
        self.split_name = "model's"
        self._choose_metrics()

    def _choose_metrics(self) -> None:
        task, space = self.task, self.space
        self.metrics = check_metrics(
            self.metrics
            or (
                task.metrics
                if task and task.problem_type == space.problem_type
                else default_metrics(space.problem_type, space.num_labels)
            ),
            space.problem_type,
        )

    def featurize(self, read, tokenizer, max_seq_length: int, split: str) -> Features:
        space = self.label_space_for_files if read.has_labels else None
        enc = encode_examples(read.examples, tokenizer, max_seq_length, space, read.path, self.split_name)
        return features_of(enc)

    def unscorable(self, read) -> str | None:
        space = self.label_space_for_files
        for ex in read.examples:
            try:
                space.encode(ex, read.path, self.split_name)
            except LitebertError as exc:
                return str(exc)
        return None

    def collator(self, pad_token_id: int):
        return PadCollator(pad_token_id, self.space.problem_type)

    def merge_features(self, parts: list[Features]) -> Features:
        """The features of consecutive chunks of one file as one (:func:`litebert.finetune.kinds.infer_in_chunks`)."""
        return features_of(Encoded.concat([p.extra["encoded"] for p in parts]))

    def batcher(self, feats: Features, pad_token_id: int):
        """Rows → padded batch gathered with numpy from the flat ids (:meth:`Encoded.batch`): the same tensors as
        the collator makes from the rows' items, without a Python loop over rows."""
        enc = feats.extra["encoded"]
        dtype = np.int64 if self.space.problem_type == "single_label" else np.float32  # as PadCollator's labels
        labels = None if enc.targets is None else np.asarray(enc.targets, dtype=dtype)
        return lambda rows: enc.batch(rows, pad_token_id, labels)

    # ---- model
    def config_overrides(self) -> dict[str, Any]:
        space = self.space
        return dict(
            num_labels=space.num_labels,
            id2label=space.id2label,
            label2id={v: k for k, v in space.id2label.items()},
            problem_type=HF_PROBLEM_TYPES[space.problem_type],
        )

    def config_extra(self) -> dict[str, Any]:
        extra = super().config_extra()
        data = self.data
        if data.text_column is not None or data.label_column is not None or data.header is not None:
            # the user's columns, so that evaluate/predict on a file of the same layout need no options
            extra["litebert_data_options"] = jsonable(
                {
                    k: v
                    for k, v in dataclasses.asdict(data).items()
                    if k
                    in ("text_column", "text_pair_column", "label_column", "header", "delimiter", "label_separator")
                    and v is not None
                }
            )
        if self.space.problem_type == "multi_label":
            extra["litebert_label_separator"] = self.space.separator
        return extra

    # ---- training
    def objective(self, device: torch.device):
        return make_objective(self.space.problem_type, device)

    # ---- inference
    def forward(self, model, batch):
        logits = _forward_logits(model, batch).float()
        loss_sum, units = 0.0, 0
        if "labels" in batch:
            loss_sum = float(_loss_sum(logits, batch["labels"], self.space.problem_type))
            units = batch["labels"].numel()
        return list(logits.cpu().numpy()), loss_sum, units

    def postprocess(self, outputs, feats, read) -> np.ndarray:
        return predictions_from_logits(outputs, self.space)

    def score(self, predictions, read, feats) -> dict[str, float]:
        return compute_metrics(
            self.metrics, predictions, targets_array(feats.extra["encoded"], self.space), self.space.num_labels
        )

    def decode(self, prediction) -> str:
        return self.space.decode(prediction)

    def write_predictions(self, path: Path, read, predictions) -> Path:
        labels = [ex.label for ex in read.examples] if read.has_labels else None
        return write_predictions(
            path, [ex.index for ex in read.examples], [self.space.decode(p) for p in predictions], labels
        )

    @property
    def labels(self) -> list[str]:
        return list(self.space.labels)

    def settings(self) -> dict[str, Any]:
        return {
            "problem_type": self.space.problem_type,
            "labels": list(self.space.labels),
            "metrics": list(self.metrics),
        }

    def columns(self, path) -> dict:
        return jsonable(dataclasses.asdict(self.data.spec_for(path, labels=True)))


def features_of(enc: Encoded) -> Features:
    """:class:`Features` over an :class:`Encoded` (one feature per example; items made when asked for)."""
    return Features(
        items=EncodedDataset(enc),
        lengths=enc.lengths.tolist(),
        example_index=list(range(len(enc))),
        truncated=enc.truncated,
        longest=enc.longest,
        extra={"encoded": enc},
    )


def _lenient_space(space: LabelSpace) -> LabelSpace:
    """Models fine-tuned elsewhere often keep transformers' default names ``LABEL_0 ...``: then the file's labels
    ``0``, ``1``, ... are read as class ids."""
    if space.problem_type != "regression" and is_default_label_names(space.labels):
        return LabelSpace(space.problem_type, tuple(str(i) for i in range(len(space.labels))), space.separator)
    return space


# --------------------------------------------------------------------------------------------- loss + inference
def _forward_logits(model, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    out = model(
        input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], token_type_ids=batch["token_type_ids"]
    )
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
    (units: examples; label entries for multi-label) and the ratio ``accuracy`` (classification). The numbers stay
    on the device (0-d tensors): the training loop reads them at logging steps only."""
    from litebert.training import LossOutput

    def objective(model, batch):
        batch = {k: v.to(device) for k, v in batch.items()}
        logits = _forward_logits(model, batch)
        loss = _loss_sum(logits, batch["labels"], problem_type)
        ratios = {}
        if problem_type == "single_label":
            correct = (logits.detach().argmax(-1) == batch["labels"]).sum()  # 0-d, stays on the device
            ratios["accuracy"] = (correct, len(logits))
        return LossOutput(sums={"loss": loss}, ratios=ratios)

    def count(batch):
        labels = batch["labels"]
        return {"loss": int(labels.numel())}

    return objective, count


def predictions_from_logits(outputs, space: LabelSpace) -> np.ndarray:
    """Logits ``float32 [N, C]`` (or a list of N ``[C]`` rows) → class ids ``int64 [N]`` / values ``float [N]`` /
    0-1 ``int64 [N, L]`` (multi-label: sigmoid > 0.5)."""
    raw = np.stack(outputs) if len(outputs) else np.zeros((0, space.num_labels), np.float32)  # (N, C)
    if space.problem_type == "regression":
        return raw[:, 0].astype(np.float64)
    if space.problem_type == "multi_label":
        return (raw > 0).astype(np.int64)
    return raw.argmax(-1).astype(np.int64)


@torch.no_grad()
def run_inference(
    model, encoded: Encoded, space: LabelSpace, batch_size: int, pad_token_id: int, device: torch.device
) -> tuple[np.ndarray, np.ndarray, float | None]:
    """Predict every row of ``encoded`` (one process).

    Returns:
        ``(predictions, raw, loss)``: class ids ``int64 [N]`` / values ``float [N]`` / 0-1 ``int64 [N, L]``;
        the raw outputs ``float32 [N, C]`` (logits); the mean loss per unit when labels are known, else ``None``.
    Rows are batched by length (less padding on CPU) and returned in file order.
    """
    from litebert.finetune.kinds import run_features

    kind = ClassificationKind.__new__(ClassificationKind)
    kind.space = space
    feats = features_of(encoded)
    outputs, loss_sum, units = run_features(kind, model, feats, range(len(feats)), batch_size, pad_token_id, device)
    raw = np.stack(outputs) if outputs else np.zeros((0, space.num_labels), np.float32)
    return predictions_from_logits(outputs, space), raw, (loss_sum / units if units else None)


def targets_array(encoded: Encoded, space: LabelSpace) -> np.ndarray:
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
    return atomic_write_text(path, "\n".join(lines) + "\n")
