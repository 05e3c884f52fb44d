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
import itertools
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
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
            LitebertError: a label the label space does not have (``file:line``, and the known labels), an empty
                label (single-label, regression), a regression value that is not a number, a JSON-list
                (multi-label) field for a single-label model.
        """
        if self.problem_type != "multi_label" and ex.labels is None and not ex.label:  # multi-label: none is fine
            raise LitebertError(_empty_label(path, ex, None, split_name))
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


def _empty_label(path: Path, ex: Example, column, split_name: str) -> str:
    """The error for a row whose label field is empty (a blank CSV/TSV field, a JSON ``null``)."""
    field = f"the label field {column!r}" if column is not None else "the label"
    return (
        f"{path}:{ex.line}: {field} is empty; every row of a {split_name} file needs a label "
        "(litebert predict reads rows without one)"
    )


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
        LitebertError: an empty single-label field (``file:line``); a training label outside a preset's label set;
            fewer than two classes; a multi-label field empty in every row (no label at all).
    """
    if problem_type == "regression":
        return LabelSpace("regression")
    seen: dict[str, Example] = {}
    for ex in train.examples:
        if problem_type == "single_label" and not ex.label:
            raise LitebertError(_empty_label(train.path, ex, train.label_column, "training"))
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
    """Token ids of one file, stored flat: one array for all rows, so that a batch is gathered with numpy rather
    than row by row in Python (the host cost of `predict` on a GPU).

    Row ``i`` is ``[CLS] a [SEP]`` or ``[CLS] a [SEP] b [SEP]``: ``flat_ids[offsets[i]:offsets[i + 1]]``, of length
    ≤ ``max_seq_length``; its ``token_type_ids`` are 0 before ``type_starts[i]`` and 1 from there on.

    Attributes:
        flat_ids: ``int32 [T]``, every row's ids concatenated.
        offsets: ``int64 [N + 1]``, where each row starts in ``flat_ids`` (and the end of the last).
        type_starts: ``int64 [N]``, the first position of segment b in each row (the row's length when it has none).
        targets: per example, as :meth:`LabelSpace.encode` returns, or ``None`` (unlabelled).
        truncated: number of examples that were cut to ``max_seq_length``.
        longest: the longest untruncated length seen (specials included).
    """

    flat_ids: np.ndarray
    offsets: np.ndarray
    type_starts: np.ndarray
    targets: list | None
    truncated: int = 0
    longest: int = 0

    @classmethod
    def from_lists(
        cls, input_ids: Sequence[Sequence[int]], token_type_ids: Sequence[Sequence[int]], targets: list | None = None,
        truncated: int = 0, longest: int = 0,
    ) -> Encoded:  # fmt: skip
        """From one id list and one type list per row.

        Raises:
            ValueError: a row whose ``token_type_ids`` are not 0s followed by 1s, or differ in length from its ids.
        """
        lengths = np.fromiter(map(len, input_ids), np.int64, len(input_ids))
        starts = []
        for i, (ids, types) in enumerate(zip(input_ids, token_type_ids, strict=True)):
            first = len(types) - sum(types)
            if len(types) != len(ids) or list(types) != [0] * first + [1] * (len(types) - first):
                raise ValueError(f"row {i}: token_type_ids must be 0s then 1s, as long as input_ids")
            starts.append(first)
        flat = np.fromiter(itertools.chain.from_iterable(input_ids), np.int32, int(lengths.sum()))
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        return cls(flat, offsets, np.asarray(starts, np.int64).reshape(-1), targets, truncated, longest)

    @classmethod
    def concat(cls, parts: Sequence[Encoded]) -> Encoded:
        """Consecutive parts (chunks of one file) as one; targets only when every part has them."""
        ends = np.cumsum([len(p.flat_ids) for p in parts])
        offsets = [np.zeros(1, np.int64)] + [p.offsets[1:] + (e - len(p.flat_ids)) for p, e in zip(parts, ends)]
        labelled = all(p.targets is not None for p in parts)
        return cls(
            np.concatenate([np.zeros(0, np.int32)] + [p.flat_ids for p in parts]),
            np.concatenate(offsets),
            np.concatenate([np.zeros(0, np.int64)] + [p.type_starts for p in parts]),
            [t for p in parts for t in p.targets] if labelled else None,
            sum(p.truncated for p in parts),
            max((p.longest for p in parts), default=0),
        )

    def __len__(self) -> int:
        return len(self.type_starts)

    @property
    def lengths(self) -> np.ndarray:
        """``int64 [N]``: tokens per row."""
        return np.diff(self.offsets)

    @property
    def input_ids(self) -> list[list[int]]:
        """One ``list[int]`` per row."""
        ids, offsets = self.flat_ids.tolist(), self.offsets.tolist()
        return [ids[a:b] for a, b in itertools.pairwise(offsets)]

    @property
    def token_type_ids(self) -> list[list[int]]:
        """One ``list[int]`` of 0s and 1s per row."""
        return [[0] * s + [1] * (n - s) for s, n in zip(self.type_starts.tolist(), self.lengths.tolist())]

    def item(self, i: int) -> dict:
        """Row ``i`` as :class:`PadCollator` takes it: ``input_ids``, ``token_type_ids`` (lists), ``labels``."""
        a, b, s = int(self.offsets[i]), int(self.offsets[i + 1]), int(self.type_starts[i])
        item = {"input_ids": self.flat_ids[a:b].tolist(), "token_type_ids": [0] * s + [1] * (b - a - s)}
        if self.targets is not None:
            item["labels"] = self.targets[i]
        return item

    def batch(self, rows: np.ndarray, pad_token_id: int, labels: np.ndarray | None = None) -> dict[str, torch.Tensor]:
        """Rows ``rows`` (``int [B]``) padded to the longest of them, as :class:`PadCollator` pads their items:
        ``input_ids`` (pad id), ``token_type_ids`` (0), ``attention_mask`` (1 = a real token), ``int64 [B, S]``,
        and ``labels`` (``labels[rows]``) when given. Gathered with numpy, no loop over rows."""
        rows = np.asarray(rows, dtype=np.int64)
        start, lengths = self.offsets[rows], self.offsets[rows + 1] - self.offsets[rows]
        seq = int(lengths.max()) if len(rows) else 0
        pos = np.arange(seq)[None, :]
        real = pos < lengths[:, None]  # (B, S)
        gathered = self.flat_ids[np.where(real, start[:, None] + pos, 0)] if len(self.flat_ids) else 0
        out = {
            "input_ids": torch.from_numpy(np.where(real, gathered, pad_token_id).astype(np.int64)),
            "token_type_ids": torch.from_numpy((real & (pos >= self.type_starts[rows][:, None])).astype(np.int64)),
            "attention_mask": torch.from_numpy(real.astype(np.int64)),
        }
        if labels is not None:
            out["labels"] = torch.from_numpy(labels[rows])
        return out


def _truncate_pair(a: list, b: list, budget: int) -> None:
    while len(a) + len(b) > budget:
        (a if len(a) > len(b) else b).pop()


def pair_keep(len_a: np.ndarray, len_b: np.ndarray, budget: int) -> tuple[np.ndarray, np.ndarray]:
    """The lengths :func:`_truncate_pair` leaves, for many pairs at once (``int64 [N]`` each): tokens are taken
    one at a time from the longer side, from the second on a tie, until ``len_a + len_b ≤ budget``. In closed
    form: the longer side alone is cut while the other one fits; past that both end at ``budget / 2``, the first
    keeping the spare token of an odd budget."""
    over = len_a + len_b > budget
    keep_a = np.where(over, np.minimum(len_a, np.maximum((budget + 1) // 2, budget - len_b)), len_a)
    return keep_a, np.where(over, budget - keep_a, len_b)


def _batch_ids(tokenizer, texts: list[str]) -> list[list[int]]:
    """Ids without special tokens; ``encode_batch`` (Rust, parallel) when the tokenizer has it."""
    if not texts:
        return []
    if hasattr(tokenizer, "encode_batch"):  # fresh lists (callers truncate them in place)
        return [ids if isinstance(ids, list) else list(ids) for ids in tokenizer.encode_batch(texts)]
    return [list(tokenizer.convert_tokens_to_ids(tokenizer.tokenize(t))) for t in texts]


def _flat_ids(tokenizer, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Ids without special tokens of many texts: ``int32 [T]`` concatenated, ``int64 [N]`` lengths
    (``encode_batch_flat`` when the tokenizer has it, else :func:`_batch_ids`)."""
    if texts and hasattr(tokenizer, "encode_batch_flat"):
        flat, lengths = tokenizer.encode_batch_flat(texts)
        return np.asarray(flat, np.int32), np.asarray(lengths, np.int64)
    rows = _batch_ids(tokenizer, texts)
    lengths = np.fromiter(map(len, rows), np.int64, len(rows))
    return np.fromiter(itertools.chain.from_iterable(rows), np.int32, int(lengths.sum())), lengths


def _ragged_arange(counts: np.ndarray) -> np.ndarray:
    """``[0, …, counts[0] − 1, 0, …, counts[1] − 1, …]`` (``int64 [sum(counts)]``)."""
    return np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)


def encode_examples(
    examples: list[Example],
    tokenizer,
    max_seq_length: int,
    space: LabelSpace | None = None,
    path: Path | None = None,
    split_name: str = "training",
) -> Encoded:
    """Tokenize ``examples`` into ``[CLS] a [SEP] (b [SEP])`` rows of at most ``max_seq_length`` tokens (the
    module docstring's truncation), laid out with numpy (:class:`Encoded`).

    ``tokenizer`` needs ``encode_batch_flat`` or ``encode_batch`` (or ``tokenize`` + ``convert_tokens_to_ids``),
    ``cls_token_id`` and ``sep_token_id`` (the :mod:`litebert.tokenization` contract). Targets are encoded when
    ``space`` is given and the examples carry labels.

    Raises:
        LitebertError: ``max_seq_length`` too small for a token of each text (< 5 with pairs: ``[CLS] a [SEP] b
            [SEP]``; < 3 without); :meth:`LabelSpace.encode`'s errors (a label the space does not have,
            ``file:line``).
    """
    pair = next((ex for ex in examples if ex.text_pair is not None), None)
    need = 5 if pair is not None else 3
    if max_seq_length < need:
        layout = "[CLS] a [SEP] b [SEP]" if pair is not None else "[CLS] text [SEP]"
        where = f" ({path}:{pair.line} is a sentence pair)" if pair is not None and path is not None else ""
        raise LitebertError(
            f"max_seq_length {max_seq_length} is too small: {layout} needs at least {need} positions, one token of "
            f"each text{where}"
        )
    n, cls, sep = len(examples), tokenizer.cls_token_id, tokenizer.sep_token_id
    flat_a, len_a = _flat_ids(tokenizer, [ex.text for ex in examples])
    pairs = np.fromiter((i for i, ex in enumerate(examples) if ex.text_pair is not None), np.int64)
    flat_b, len_b_pairs = _flat_ids(tokenizer, [examples[i].text_pair for i in pairs.tolist()])
    is_pair, len_b = np.zeros(n, bool), np.zeros(n, np.int64)
    is_pair[pairs], len_b[pairs] = True, len_b_pairs
    keep_a = np.minimum(len_a, max_seq_length - 2)
    keep_b = np.zeros(n, np.int64)
    keep_a[pairs], keep_b[pairs] = pair_keep(len_a[pairs], len_b_pairs, max_seq_length - 3)
    full = len_a + 2 + np.where(is_pair, len_b + 1, 0)  # untruncated row lengths
    row_len = keep_a + 2 + np.where(is_pair, keep_b + 1, 0)
    offsets = np.concatenate([[0], np.cumsum(row_len)]).astype(np.int64)
    start = offsets[:-1]
    out = np.empty(int(offsets[-1]), np.int32)
    out[start] = cls
    out[start + 1 + keep_a] = sep
    out[start[pairs] + 2 + keep_a[pairs] + keep_b[pairs]] = sep
    for flat, lengths, keep, first in (
        (flat_a, len_a, keep_a, start + 1),
        (flat_b, len_b_pairs, keep_b[pairs], start[pairs] + 2 + keep_a[pairs]),
    ):
        step = _ragged_arange(keep)
        out[np.repeat(first, keep) + step] = flat[np.repeat(np.cumsum(lengths) - lengths, keep) + step]
    labelled = space is not None and all(ex.label is not None for ex in examples)
    targets = [space.encode(ex, path, split_name) for ex in examples] if labelled else None
    return Encoded(
        out, offsets, np.where(is_pair, keep_a + 2, row_len), targets,
        int((full > max_seq_length).sum()), int(full.max()) if n else 0,
    )  # fmt: skip


# ------------------------------------------------------------------------------------------ dataset + collator
class EncodedDataset(torch.utils.data.Dataset):
    """Items are ``{"input_ids": list[int], "token_type_ids": list[int], "labels": target}`` (no labels when
    unlabelled), made when asked for (:meth:`Encoded.item`); :class:`PadCollator` turns a list of items into
    tensors."""

    def __init__(self, encoded: Encoded):
        self.encoded = encoded

    def __len__(self) -> int:
        return len(self.encoded)

    def __getitem__(self, i: int) -> dict:
        if not -len(self) <= i < len(self):
            raise IndexError(f"row {i} of {len(self)}")
        return self.encoded.item(i % len(self))


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
