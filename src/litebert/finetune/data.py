"""From examples to tensors: label mapping, tokenization with truncation, padding collator.

Sequence layout (BERT/ALBERT, as transformers' ``AlbertTokenizer`` builds it):
``[CLS] a [SEP]`` → ``token_type_ids`` all 0; ``[CLS] a [SEP] b [SEP]`` → 0 up to and including the first
``[SEP]``, 1 after. Pairs longer than ``max_seq_length`` are cut "longest first" (one token at a time from the
longer side, the second on a tie, as google-research/bert ``_truncate_seq_pair``; transformers' Rust tokenizers
give the spare token of an odd budget to the longer text, the second on a tie: docs/finetune.md); single texts
keep their first ``max_seq_length - 2`` tokens. Truncated rows are counted and reported, never dropped.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from litebert.errors import LitebertError
from litebert.finetune.readers import Example, ReadResult

log = logging.getLogger("litebert.finetune")


# ----------------------------------------------------------------------------------------------------- labels
@dataclass(frozen=True)
class LabelSpace:
    """How raw label strings become training targets.

    Attributes:
        problem_type: ``"single_label"``, ``"multi_label"`` or ``"regression"``.
        labels: label names in id order (``id2label``); ``()`` for regression.
        separator: multi-label only: the separator between the labels of one field.
    """

    problem_type: str
    labels: tuple[str, ...] = ()
    separator: str = ","

    @property
    def num_labels(self) -> int:
        return 1 if self.problem_type == "regression" else len(self.labels)

    @functools.cached_property  # read once per example by encode(): built once (the dataclass is frozen)
    def label2id(self) -> dict[str, int]:
        return {name: i for i, name in enumerate(self.labels)}

    @property
    def id2label(self) -> dict[int, str]:
        return dict(enumerate(self.labels)) if self.labels else {0: "LABEL_0"}

    def encode(self, ex: Example, path: Path, split_name: str = "training"):
        """The target of one example: ``int`` class id, ``float`` value, or a 0/1 ``list[float]`` (multi-label).

        Raises:
            LitebertError: a label the label space does not have (``file:line``, and the known labels), a
                regression value that is not a number, a JSON-list (multi-label) field for a single-label model.
        """
        if self.problem_type == "regression":
            try:
                value = float(ex.label)
            except ValueError:
                raise LitebertError(f"{path}:{ex.line}: regression label {ex.label!r} is not a number") from None
            if not math.isfinite(value):
                raise LitebertError(f"{path}:{ex.line}: regression label {ex.label!r} is not finite")
            return value
        if ex.labels is not None and self.problem_type != "multi_label":
            raise LitebertError(
                f"{path}:{ex.line}: the label is a JSON list (a multi-label field) but the {split_name} label space "
                f"is {self.problem_type}"
            )
        ids = self.label2id
        names = label_names(ex, self.problem_type, self.separator)
        for name in names:
            if name not in ids:
                raise LitebertError(
                    f"{path}:{ex.line}: label {name!r} does not occur in the {split_name} labels "
                    f"{list(self.labels)[:20]}{' ...' if len(self.labels) > 20 else ''}"
                )
        if self.problem_type == "multi_label":
            vec = [0.0] * len(self.labels)
            for name in names:
                vec[ids[name]] = 1.0
            return vec
        return ids[names[0]]

    def decode(self, value) -> str:
        """A prediction as written in ``predictions.tsv``: the label name, the float, or names joined by the
        separator (multi-label)."""
        if self.problem_type == "regression":
            return f"{float(value):.6g}"
        if self.problem_type == "multi_label":
            return self.separator.join(self.labels[i] for i, on in enumerate(value) if on)
        return self.labels[int(value)]


def _split_multi(label: str, sep: str) -> list[str]:
    return [p.strip() for p in label.split(sep) if p.strip()]


def label_names(ex: Example, problem_type: str, separator: str) -> list[str]:
    """The label names of one example: a JSON list's items (empty ones dropped), a multi-label field split on
    ``separator``, or the single label."""
    if ex.labels is not None:
        return [name for name in ex.labels if name]
    return _split_multi(ex.label, separator) if problem_type == "multi_label" else [ex.label]


def _label_sort_key(name: str):
    try:
        return (0, float(name), name)
    except ValueError:
        return (1, 0.0, name)


def build_label_space(
    train: ReadResult, problem_type: str, preset_labels: tuple[str, ...] | None = None, separator: str = ","
) -> LabelSpace:
    """The label space of a training file: the preset's labels when the task has them, else the distinct labels
    of ``train`` sorted numerically when they are all numbers, else alphabetically.

    Raises:
        LitebertError: a training label outside a preset's label set; fewer than two classes; a multi-label field
            empty in every row (no label at all).
    """
    if problem_type == "regression":
        return LabelSpace("regression")
    seen: dict[str, Example] = {}
    for ex in train.examples:
        for name in label_names(ex, problem_type, separator):
            seen.setdefault(name, ex)
    if not seen:
        raise LitebertError(
            f"{train.path}: no label found: the label field {train.label_column!r} is empty in all "
            f"{len(train.examples)} rows; a multi-label field needs at least one label in the training file"
        )
    if preset_labels is not None:
        space = LabelSpace(problem_type, tuple(preset_labels), separator)
        for name, ex in seen.items():
            if name not in space.label2id:
                raise LitebertError(
                    f"{train.path}:{ex.line}: label {name!r} is not one of this task's labels {list(preset_labels)}"
                )
        return space
    labels = tuple(sorted(seen, key=_label_sort_key))
    if len(labels) < 2 and problem_type == "single_label":
        raise LitebertError(
            f"{train.path}: only one distinct label {labels} in the training file; classification "
            f"needs at least two (use --problem-type regression for numbers)"
        )
    return LabelSpace(problem_type, labels, separator)


def is_default_label_names(names: Sequence[str]) -> bool:
    """Whether ``names`` are transformers' default label names ``LABEL_0, LABEL_1, ...`` in id order: a head saved
    without names (or a config that never had a head), whose ids carry no names to match."""
    return all(name == f"LABEL_{i}" for i, name in enumerate(names))


def model_label_order(labels: Sequence[str], model_labels: Sequence[str]) -> tuple[str, ...] | None:
    """The data's label names in the id order of a head the model already has (transformers' ``run_glue.py``: when
    the model's ``label2id`` names the data's labels, its ids are used, so a fine-tuned head keeps its meaning).

    Names are matched exactly, else case-insensitively (``str.casefold``, as ``run_glue.py`` lowercases the
    model's names: a head of ``NEGATIVE``/``POSITIVE`` serves data labelled ``negative``/``positive``) when neither
    side has two names that differ only in case; the result holds the data's spelling.

    Args:
        labels: the data's label names (``build_label_space`` order).
        model_labels: the model's ``id2label`` names in id order.

    Returns:
        ``labels`` reordered by the model's ids when the names are the same set; ``labels`` unchanged when the
        model's names are transformers' defaults ``LABEL_i`` (:func:`is_default_label_names`) or their number
        differs (the head has another shape and is newly initialised anyway); ``None`` when the names differ but
        their number is the same: the head's rows mean other labels and must be newly initialised.
    """
    labels, model_labels = tuple(labels), tuple(model_labels)
    if len(model_labels) != len(labels) or is_default_label_names(model_labels):
        return labels
    if set(model_labels) == set(labels):
        return model_labels
    folded = {name.casefold(): name for name in labels}
    model_folded = [name.casefold() for name in model_labels]
    if len(folded) == len(labels) and len(set(model_folded)) == len(model_labels) and set(model_folded) == set(folded):
        return tuple(folded[name] for name in model_folded)
    return None


def align_with_head(labels: Sequence[str], config, architecture: str) -> tuple[str, ...] | None:
    """The label order for fine-tuning from the model of ``config`` (its ``config.json``): the model's ids when it
    already has an ``architecture`` head (``architectures`` names it) whose ``id2label`` names ``labels``, else
    ``labels`` as they are (a pretraining ``final/``, a head of another kind, transformers' default names
    ``LABEL_i``, another number of labels: :func:`model_label_order`). Logs a kept order that differs from the
    data's, and a head to newly initialise.

    Returns:
        the label names in id order, or ``None``: the head has as many labels under other names, its weights must
        be newly initialised rather than reinterpreted.
    """
    labels = tuple(labels)
    if architecture not in (config.architectures or []):
        return labels
    model_labels = tuple(config.id2label[i] for i in range(config.num_labels))
    order = model_label_order(labels, model_labels)
    if order is None:
        log.warning(
            "finetune: the model's %s head predicts the labels %s (config.json id2label), not the training labels "
            "%s: its classifier is newly initialised",
            architecture,
            list(model_labels)[:20],
            list(labels)[:20],
        )
    elif order != labels:
        log.info("finetune: the model's %s head keeps its label ids: %s", architecture, dict(enumerate(order)))
    return order


def label_space_from_config(config) -> LabelSpace:
    """The label space saved in a fine-tuned model's ``config.json`` (``id2label``, ``problem_type``)."""
    hf = config.problem_type or "single_label_classification"
    problem_type = {
        "single_label_classification": "single_label",
        "multi_label_classification": "multi_label",
        "regression": "regression",
    }[hf]
    if problem_type == "regression":
        return LabelSpace("regression")
    labels = tuple(config.id2label[i] for i in range(config.num_labels))
    sep = (config.extra or {}).get("litebert_label_separator", ",")
    return LabelSpace(problem_type, labels, sep)


# ------------------------------------------------------------------------------------------------ tokenization
@dataclass
class Encoded:
    """Token ids of one file.

    Attributes:
        input_ids / token_type_ids: one ``list[int]`` per example, lengths ≤ ``max_seq_length``.
        targets: per example, as :meth:`LabelSpace.encode` returns, or ``None`` (unlabelled).
        truncated: number of examples that were cut to ``max_seq_length``.
        longest: the longest untruncated length seen (specials included).
    """

    input_ids: list[list[int]]
    token_type_ids: list[list[int]]
    targets: list | None
    truncated: int = 0
    longest: int = 0
    lengths: list[int] = field(default_factory=list)


def _truncate_pair(a: list, b: list, budget: int) -> None:
    while len(a) + len(b) > budget:
        (a if len(a) > len(b) else b).pop()


def _batch_ids(tokenizer, texts: list[str]) -> list[list[int]]:
    """Ids without special tokens; ``encode_batch`` (Rust, parallel) when the tokenizer has it."""
    if not texts:
        return []
    if hasattr(tokenizer, "encode_batch"):  # fresh lists (callers truncate them in place)
        return [ids if isinstance(ids, list) else list(ids) for ids in tokenizer.encode_batch(texts)]
    return [list(tokenizer.convert_tokens_to_ids(tokenizer.tokenize(t))) for t in texts]


def encode_examples(
    examples: list[Example],
    tokenizer,
    max_seq_length: int,
    space: LabelSpace | None = None,
    path: Path | None = None,
    split_name: str = "training",
) -> Encoded:
    """Tokenize ``examples`` into ``[CLS] a [SEP] (b [SEP])`` id lists of at most ``max_seq_length`` tokens.

    ``tokenizer`` needs ``encode_batch`` (or ``tokenize`` + ``convert_tokens_to_ids``), ``cls_token_id`` and
    ``sep_token_id`` (the :mod:`litebert.tokenization` contract). Targets are encoded when ``space`` is given and the examples carry
    labels.
    """
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    ids_out, types_out, targets = [], [], []
    truncated = longest = 0
    labelled = space is not None and all(ex.label is not None for ex in examples)
    firsts = _batch_ids(tokenizer, [ex.text for ex in examples])
    pair_idx = [i for i, ex in enumerate(examples) if ex.text_pair is not None]
    seconds = dict(zip(pair_idx, _batch_ids(tokenizer, [examples[i].text_pair for i in pair_idx])))
    for i, ex in enumerate(examples):
        a = firsts[i]
        if ex.text_pair is None:
            full = len(a) + 2
            a = a[: max_seq_length - 2]
            ids = [cls, *a, sep]
            types = [0] * len(ids)
        else:
            b = seconds[i]
            full = len(a) + len(b) + 3
            _truncate_pair(a, b, max_seq_length - 3)
            ids = [cls, *a, sep, *b, sep]
            types = [0] * (len(a) + 2) + [1] * (len(b) + 1)
        truncated += full > max_seq_length
        longest = max(longest, full)
        ids_out.append(ids)
        types_out.append(types)
        if labelled:
            targets.append(space.encode(ex, path, split_name))
    return Encoded(ids_out, types_out, targets if labelled else None, truncated, longest, [len(i) for i in ids_out])


# ------------------------------------------------------------------------------------------ dataset + collator
class EncodedDataset(torch.utils.data.Dataset):
    """Items are ``{"input_ids": list[int], "token_type_ids": list[int], "labels": target}`` (no labels when
    unlabelled); :class:`PadCollator` turns a list of items into tensors."""

    def __init__(self, encoded: Encoded):
        self.encoded = encoded

    def __len__(self) -> int:
        return len(self.encoded.input_ids)

    def __getitem__(self, i: int) -> dict:
        item = {"input_ids": self.encoded.input_ids[i], "token_type_ids": self.encoded.token_type_ids[i]}
        if self.encoded.targets is not None:
            item["labels"] = self.encoded.targets[i]
        return item


def pad_inputs(items: list[dict], pad_token_id: int) -> dict[str, torch.Tensor]:
    """Pad the encoder inputs of ``items`` (each with ``input_ids`` and optionally ``token_type_ids``, lists of
    ints) to the longest in the batch: ``input_ids`` (pad id), ``token_type_ids`` (0) and ``attention_mask``
    (1 = a real token), each ``int64 [B, S]``. The one padding routine of the single-sequence task collators."""
    lengths = np.fromiter((len(it["input_ids"]) for it in items), dtype=np.int64, count=len(items))
    batch, seq = len(items), int(lengths.max())
    input_ids = np.full((batch, seq), pad_token_id, dtype=np.int64)
    token_type_ids = np.zeros((batch, seq), dtype=np.int64)
    for row, it in enumerate(items):  # one copy per row, not per token
        input_ids[row, : lengths[row]] = it["input_ids"]
        if "token_type_ids" in it:
            token_type_ids[row, : lengths[row]] = it["token_type_ids"]
    attention_mask = (np.arange(seq)[None, :] < lengths[:, None]).astype(np.int64)  # (B, S)
    return {
        "input_ids": torch.from_numpy(input_ids),
        "token_type_ids": torch.from_numpy(token_type_ids),
        "attention_mask": torch.from_numpy(attention_mask),
    }


@dataclass
class PadCollator:
    """Pads a list of items to the longest in the batch.

    Returns ``input_ids``, ``token_type_ids``, ``attention_mask``: ``int64 [B, S]`` (pad id / 0 / 0 at padding);
    ``labels``: ``int64 [B]`` (single-label), ``float32 [B]`` (regression) or ``float32 [B, L]`` (multi-label).
    """

    pad_token_id: int
    problem_type: str = "single_label"

    def __call__(self, items: list[dict]) -> dict[str, torch.Tensor]:
        out = pad_inputs(items, self.pad_token_id)
        if "labels" in items[0]:
            labels = [it["labels"] for it in items]
            dtype = torch.long if self.problem_type == "single_label" else torch.float32
            out["labels"] = torch.tensor(labels, dtype=dtype)
        return out
