"""Task kinds: what differs between sequence classification, token classification (NER), multiple choice and
extractive QA, behind one interface that :func:`litebert.finetune.run.finetune` / ``evaluate`` / ``predict`` drive.

A kind is a :class:`TaskKind` subclass in its own module (``classification.py``, ``token.py``, ``choice.py``,
``qa.py``), registered in :data:`KIND_MODULES`. The run layer does, for every kind::

    kind = make_kind(data_options, problem_type=..., metrics=...)     # --task NAME / --task-type T
    read = kind.read(path, require_labels=True)                        # file -> ReadResult(examples, ...)
    kind.fit(train_read)            # finetune: label space etc. from train   | kind.from_config(config): evaluate
    new_head = kind.align_head(config)  # finetune: label ids of a head --model already has; weights to re-init
    feats = kind.featurize(read, tokenizer, max_seq_length, split)     # -> Features (dataset items, lengths, ...)
    model = Cls(config.replace(**kind.config_overrides()))              # Cls = modeling.<kind.architecture>
    objective, count = kind.objective(device)                          # the training loop's objective
    outputs, loss = infer(kind, model, feats, batch_size, pad_id, dist)  # kind.forward per batch, file order
    preds = kind.postprocess(outputs, feats, read)                     # one prediction per example
    metrics = kind.score(preds, read, feats)                           # {name: float}; first = kind.metrics[0]
    kind.write_predictions(path, read, preds)                          # OUTPUT/<kind.predictions_name>

Inference over several ranks (:func:`infer`) shares the *features* out (rank ``r`` runs features ``r, r+W, …``),
gathers the per-feature outputs on every rank, and post-processing then runs on the whole split everywhere, so a
kind whose examples span several features (NER windows, QA windows) needs nothing distributed of its own.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch

from litebert.errors import LitebertError

TASK_TYPES = ("classification", "qa", "token", "choice")
"""``--task-type`` values."""

KIND_MODULES = {
    "classification": "litebert.finetune.classification:ClassificationKind",
    "token": "litebert.finetune.token:TokenKind",
    "choice": "litebert.finetune.choice:ChoiceKind",
    "qa": "litebert.finetune.qa:QAKind",
}
"""Task type → ``module:class`` of its :class:`TaskKind` (imported on first use)."""


@dataclass
class Features:
    """A split after tokenization: what the collator and the model see.

    Attributes:
        items: one dict per feature (model input of one row: ``input_ids`` …, ``labels`` when labelled); the
            kind's :meth:`TaskKind.collator` turns a list of them into a batch.
        lengths: tokens per feature (inference batches features of similar length; the position warning).
        example_index: per feature, the index of the example in ``ReadResult.examples`` it came from (several
            features per example when an example is split into windows).
        truncated: examples cut to ``max_seq_length`` (reported, never dropped).
        longest: the longest untruncated length seen, special tokens included.
        extra: kind-specific bookkeeping (e.g. NER: which word each window position labels).
    """

    items: Sequence[dict]
    lengths: list[int]
    example_index: list[int]
    truncated: int = 0
    longest: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.items)


class TaskKind:
    """The interface of a task kind (see the module docstring for the order of calls).

    Class attributes:
        name: the ``--task-type`` value.
        architecture: the ``litebert.modeling`` head class; written to ``config.json`` ``architectures`` so the
            saved ``best/`` loads in the matching ``transformers.AutoModelFor…``.
        head_prefixes: parameter-name prefixes that belong to the head (newly initialised when fine-tuning starts
            from a pretraining ``final/``); any other missing weight is an error.
        predictions_name: file name of the dev predictions in ``OUTPUT/`` (test: ``test_`` + name).

    Instance attributes set by the constructor / :meth:`fit` / :meth:`from_config`:
        data: the data options (``DataOptions``); task: the task preset (``TaskSpec``) or ``None``;
        metrics: metric names, the first selects ``best/``.
    """

    name: ClassVar[str]
    architecture: ClassVar[str]
    head_prefixes: ClassVar[tuple[str, ...]] = ("classifier.",)
    predictions_name: ClassVar[str] = "predictions.tsv"
    #: the fewest positions of one feature, a token of each text, and its layout: see :meth:`min_seq_length`
    min_positions: ClassVar[tuple[int, str]] = (3, "[CLS] text [SEP]")

    def __init__(self, data, *, problem_type: str | None = None, metrics: Sequence[str] | None = None):
        self.data = data
        self.task = data.task_spec
        self.metrics: tuple[str, ...] = tuple(metrics) if metrics else ()

    # ---- data
    def min_seq_length(self) -> tuple[int, str]:
        """The smallest ``max_seq_length`` whose features hold a token of each text, and the layout that says why:
        ``(3, "[CLS] text [SEP]")`` by default (:attr:`min_positions`); a kind of two texts needs 5. Known from the
        options (task, columns) before any file is read; the run layer refuses a smaller ``--max-seq-length``."""
        return self.min_positions

    def read(self, path: str | Path, *, require_labels: bool):
        """Read one file into a ``ReadResult`` (``examples`` of the kind's example type, in file order).

        Raises:
            LitebertError: the file/line/field that does not fit the layout.
        """
        raise NotImplementedError

    def read_rows(self, rows, source: Path, *, require_labels: bool):
        """Read ``(number, dict)`` rows (a Hub split's, :mod:`litebert.finetune.hub_data`) as the kind's JSON-lines
        reader reads the lines of a file; ``source`` names them in messages and in ``ReadResult.path``.

        Raises:
            LitebertError: as :meth:`read`, naming ``source:number``.
        """
        raise NotImplementedError

    def fit(self, train) -> None:
        """Derive what the model's head needs from the training ``ReadResult`` (label names …) and check the
        metric names. Called by ``finetune`` before any dev/test file is featurized."""

    def align_head(self, config) -> tuple[str, ...]:
        """Called by ``finetune`` after :meth:`fit` with the ``config.json`` of ``--model`` (pretrained init only):
        make the label ids agree with a head the model already has, so that its kept weights keep their meaning.

        Returns:
            parameter-name prefixes of head weights that must be newly initialised rather than loaded (their rows
            stand for labels the data does not have); default ``()``: nothing to align.
        """
        return ()

    def from_config(self, config) -> None:
        """The same as :meth:`fit`, from the ``config.json`` of a fine-tuned model (``evaluate``/``predict``)."""

    def featurize(self, read, tokenizer, max_seq_length: int, split: str) -> Features:
        """Tokenize the examples of ``read`` (``split``: ``"train"``, ``"dev"``, ``"test"``, ``"data"``)."""
        raise NotImplementedError

    def unscorable(self, read) -> str | None:
        """Why ``read``'s labels cannot be scored against the model's (``predict``: the first label its label space
        lacks, as ``file:line: ...``), or ``None``; default ``None`` (kinds that score any label, or none)."""
        return None

    def collator(self, pad_token_id: int) -> Callable[[list[dict]], dict[str, torch.Tensor]]:
        """Items → a padded batch of tensors (``labels`` included when the items have them)."""
        raise NotImplementedError

    def batcher(self, feats: Features, pad_token_id: int) -> Callable[[np.ndarray], dict[str, torch.Tensor]]:
        """Feature indices (``int64 [B]``) → their padded batch, for inference: by default the collator on the
        features' items; a kind whose features are stored flat gathers the batch directly (classification)."""
        collate = self.collator(pad_token_id)
        return lambda rows: collate([feats.items[i] for i in rows.tolist()])

    # ---- model
    def config_overrides(self) -> dict[str, Any]:
        """``AlbertConfig`` fields for the head (``num_labels``, ``id2label``, ``label2id``, ``problem_type`` …);
        ``architectures`` is added by the run layer."""
        return {}

    def config_extra(self) -> dict[str, Any]:
        """Keys stored in ``config.json`` beside the HF ones so that ``evaluate``/``predict`` need no options."""
        extra: dict[str, Any] = {"litebert_task_type": self.name}
        if self.data.task:
            extra["finetuning_task"] = self.data.task
        return extra

    def update_config(self, config) -> None:
        """Record in ``config.extra`` what was chosen on dev, before ``best/`` is saved (default: nothing; QA:
        the SQuAD v2 null-score threshold, which ``predict`` then applies)."""

    # ---- training
    def objective(self, device: torch.device):
        """``(objective, count)`` for :func:`litebert.training.train`: losses SUMMED over their units."""
        raise NotImplementedError

    # ---- inference
    def forward(self, model, batch: dict[str, torch.Tensor]) -> tuple[list[np.ndarray], float, int]:
        """One batch (on the model's device) → (per-row outputs as numpy arrays, summed loss, loss units);
        the loss sum and units are 0 when the batch has no labels."""
        raise NotImplementedError

    def postprocess(self, outputs: list[np.ndarray], feats: Features, read) -> list:
        """Per-feature outputs (feature order) → one prediction per example of ``read``."""
        raise NotImplementedError

    def score(self, predictions: list, read, feats: Features) -> dict[str, float]:
        """Metrics of ``predictions`` against the labels of ``read`` (the first key = ``self.metrics[0]``)."""
        raise NotImplementedError

    def write_predictions(self, path: Path, read, predictions: list) -> Path:
        """Write ``predictions`` (labels too when ``read`` has them) to ``path``; returns ``path``."""
        raise NotImplementedError

    def decode(self, prediction) -> Any:
        """A prediction as :class:`~litebert.finetune.run.EvalResult` returns it (default: unchanged)."""
        return prediction

    @property
    def labels(self) -> list[str]:
        """The label names in id order (``[]`` when the kind has none, e.g. multiple choice)."""
        return []

    def settings(self) -> dict[str, Any]:
        """What ``finetune_config.json`` records about the task (label space, metrics, columns)."""
        return {"task_type": self.name, "metrics": list(self.metrics)}


def task_type_of(data) -> str:
    """The task type of data options: ``--task-type`` if given, else the task preset's, else classification.

    Raises:
        LitebertError: ``--task-type`` contradicts the preset's kind.
    """
    spec = data.task_spec
    given = getattr(data, "task_type", None)
    if given is not None and spec is not None and spec.kind != given:
        raise LitebertError(f"--task {spec.name} is a {spec.kind} task, not --task-type {given}")
    return given or (spec.kind if spec is not None else "classification")


def kind_class(task_type: str) -> type[TaskKind]:
    """The :class:`TaskKind` subclass of a task type.

    Raises:
        LitebertError: an unknown task type, or one whose module is not installed in this version.
    """
    if task_type not in KIND_MODULES:
        raise LitebertError(f"unknown task type {task_type!r}; known: {', '.join(TASK_TYPES)}")
    module, name = KIND_MODULES[task_type].split(":")
    try:
        return getattr(importlib.import_module(module), name)
    except ModuleNotFoundError as exc:
        if exc.name != module:
            raise
        raise LitebertError(f"task type {task_type!r} is not available in this version of litebert") from None


def make_kind(data, *, problem_type: str | None = None, metrics: Sequence[str] | None = None) -> TaskKind:
    """The kind object for data options (see :func:`task_type_of`)."""
    return kind_class(task_type_of(data))(data, problem_type=problem_type, metrics=metrics)


# ------------------------------------------------------------------------------------------------- inference
def run_features(
    kind: TaskKind,
    model,
    feats: Features,
    rows: Sequence[int],
    batch_size: int,
    pad_token_id: int,
    device: torch.device,
    bucket: bool = True,
    prefetch: bool | None = None,
    progress: Callable[[int], object] | None = None,
) -> tuple[list[np.ndarray], float, int]:
    """Run ``model`` (a torch model or a :mod:`litebert.inference` runner) over the features ``rows`` under
    ``torch.inference_mode``, in batches of similar length (:func:`litebert.inference.length_batches`; file order
    without ``bucket``). ``prefetch`` (default: on a GPU): the batches are collated, pinned and copied in a
    thread while the device runs the previous one (:func:`litebert.inference.prefetched`); the same batches in the
    same order, so the same outputs. ``progress`` (e.g. a tqdm bar's ``update``) is called with each batch's row count.

    Returns:
        ``(outputs, loss_sum, units)``: ``outputs[j]`` is :meth:`TaskKind.forward`'s output for feature
        ``rows[j]``; the loss summed over the batches and its units (0, 0 without labels).
    """
    from litebert.inference import length_batches, prefetched

    was_training = model.training
    model.eval()
    make_batch = kind.batcher(feats, pad_token_id)
    rows = np.asarray(rows, dtype=np.int64).reshape(-1)
    outputs: list[np.ndarray | None] = [None] * len(rows)
    loss_sum, units = 0.0, 0
    order = length_batches(np.asarray(feats.lengths, dtype=np.int64)[rows], batch_size, bucket)
    made = (make_batch(rows[idx]) for idx in order)
    if prefetch if prefetch is not None else torch.device(device).type == "cuda":
        batches = prefetched(made, device)
    else:
        batches = ({k: v.to(device) for k, v in b.items()} for b in made)
    with torch.inference_mode():
        for idx, batch in zip(order, batches):
            out, lsum, n = kind.forward(model, batch)
            loss_sum += lsum
            units += n
            for j, o in zip(idx.tolist(), out):
                outputs[j] = o
            if progress is not None:
                progress(len(idx))
    model.train(was_training)
    return outputs, loss_sum, units


#: examples per chunk when evaluate/predict featurize a file while the device runs (:func:`infer_in_chunks`)
CHUNK_ROWS = 16384


def infer_in_chunks(
    kind: TaskKind,
    model,
    read,
    tokenizer,
    max_seq_length: int,
    batch_size: int,
    pad_token_id: int,
    device: torch.device,
    chunk_rows: int = CHUNK_ROWS,
    progress: Callable[[int], object] | None = None,
) -> tuple[Features, list[np.ndarray], float | None]:
    """Featurize ``read``'s examples in chunks of ``chunk_rows`` in a thread while the device runs the previous
    chunk (:func:`run_features` on each, length buckets within a chunk), for kinds with ``merge_features``
    (one feature per example). Returns the merged :class:`Features`, the outputs in file order and the mean loss
    per unit (``None`` without labels), as :func:`infer` on the whole file's features does (the buckets, hence
    the float rounding, differ across chunk borders)."""
    import dataclasses

    from litebert.inference import prefetched

    ex = read.examples
    chunks = (
        kind.featurize(dataclasses.replace(read, examples=ex[i : i + chunk_rows]), tokenizer, max_seq_length, "data")
        for i in range(0, len(ex), chunk_rows)
    )
    parts: list[Features] = []
    outputs: list[np.ndarray] = []
    loss_sum, units = 0.0, 0
    for feats in prefetched(chunks, None, depth=1):
        out, lsum, n = run_features(
            kind, model, feats, range(len(feats)), batch_size, pad_token_id, device, progress=progress
        )
        parts.append(feats)
        outputs.extend(out)
        loss_sum += lsum
        units += n
    return kind.merge_features(parts), outputs, (loss_sum / units if units else None)


def infer(
    kind: TaskKind,
    model,
    feats: Features,
    batch_size: int,
    pad_token_id: int,
    dist,
    progress: Callable[[int], object] | None = None,
) -> tuple[list[np.ndarray], float | None]:
    """Per-feature outputs of the whole split (feature order) and the mean loss per unit (``None`` without
    labels). Under ``torchrun`` rank ``r`` runs features ``r, r + W, …``; outputs and loss sums are all-gathered,
    so every rank returns the same result. ``progress``: as :func:`run_features` (this rank's rows)."""
    if dist.world_size == 1:
        outputs, loss_sum, units = run_features(
            kind, model, feats, range(len(feats)), batch_size, pad_token_id, dist.device, progress=progress
        )
        return outputs, (loss_sum / units if units else None)
    from litebert.training.distributed import all_gather_object

    rows = list(range(dist.rank, len(feats), dist.world_size))
    part = (
        run_features(kind, model, feats, rows, batch_size, pad_token_id, dist.device, progress=progress)
        if rows
        else ([], 0.0, 0)
    )
    outputs: list[np.ndarray | None] = [None] * len(feats)
    loss_sum, units = 0.0, 0
    for idx, (outs, lsum, n) in all_gather_object((rows, part)):
        for i, o in zip(idx, outs):
            outputs[i] = o
        loss_sum += lsum
        units += n
    return outputs, (loss_sum / units if units else None)
