"""Reading prepared data: :class:`PretrainingDataset`, :class:`PretrainingCollator` and the data/model check.

Item contract (docs/DESIGN.md "Data contract"): ``dataset[i]`` is a dict of 1-D ``torch.int64`` tensors
``input_ids``, ``token_type_ids``, ``attention_mask`` (all ones; length = the item's length ≤ max_seq_length),
``labels`` (original id where predicted, −100 elsewhere) and a 0-d ``sentence_order_label`` (0 in order,
1 swapped). With dynamic masking (the default) masks come from a generator keyed by ``(seed, epoch, index)``
(:func:`litebert.data.masking.mask_keys`), so the same epoch and index always give the same mask.

``dataset.__getitems__(indices)`` masks a whole batch at once (torch's DataLoader calls it when present); it
returns the same items as ``[dataset[i] for i in indices]``, only faster.
"""

from __future__ import annotations

import collections.abc
import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from litebert.data.instances import META_INDEX
from litebert.data.masking import IGNORE_INDEX, mask_batch, mask_keys
from litebert.data.shards import read_manifest
from litebert.errors import LitebertError
from litebert.tokenization import load_tokenizer


class PretrainingDataset(torch.utils.data.Dataset):
    """Instances of a prepared-data directory (``litebert prepare``), memory-mapped.

    Args:
        path: the directory holding ``manifest.json``.
        epoch: epoch whose masks to draw (dynamic masking); change with :meth:`set_epoch`.
        seed: masking seed; default the ``seed`` in the manifest.

    Raises:
        LitebertError: not a prepared-data directory, or a shard file is missing or damaged.
    """

    def __init__(self, path: str | os.PathLike, epoch: int = 0, seed: int | None = None) -> None:
        self.path = Path(path)
        self.manifest = read_manifest(self.path)
        s = self.manifest["settings"]
        self.static = s["masking"] == "static"
        self.seed = int(s["seed"] if seed is None else seed)
        self.epoch = int(epoch)
        self.masked_lm_prob = float(s["masked_lm_prob"])
        self.max_predictions_per_seq = int(s["max_predictions_per_seq"])
        self.max_ngram = int(s["max_ngram"])
        self.max_seq_length = int(s["max_seq_length"])
        t = self.manifest["tokenizer"]
        self.pad_token_id = int(t["pad_token_id"])
        self.mask_token_id = int(t["mask_token_id"])
        self.special_ids = np.array(
            sorted({t["cls_token_id"], t["sep_token_id"], t["pad_token_id"], t["mask_token_id"]}), np.int64
        )
        self.random_ids = self._load(self.manifest["random_ids"])
        self._special_table = np.zeros(int(t["vocab_size"]), dtype=bool)
        self._special_table[self.special_ids] = True
        self._ids, self._ws, self._offs, self._meta, self._labels = [], [], [], [], []
        for shard in self.manifest["shards"]:
            f = shard["files"]
            # plain ndarray views of the memory maps: np.memmap's indexing adds Python work to every gather
            self._ids.append(self._load(f["input_ids"], mmap=True).view(np.ndarray))
            self._ws.append(self._load(f["word_start"], mmap=True).view(np.ndarray))
            self._offs.append(self._load(f["offsets"]))
            self._meta.append(self._load(f["meta"]))
            if "labels" in f:
                self._labels.append(self._load(f["labels"], mmap=True).view(np.ndarray))
        counts = np.array([len(o) - 1 for o in self._offs], np.int64)
        self._starts = np.concatenate([[0], np.cumsum(counts)])
        self._len = int(self._starts[-1])
        self._meta_all = np.concatenate(self._meta) if self._meta else np.zeros((0, len(META_INDEX)), np.int64)
        self._lengths = np.concatenate([np.diff(o) for o in self._offs]) if self._offs else np.zeros(0, np.int64)

    def _load(self, entry: dict, mmap: bool = False) -> np.ndarray:
        """A file of the manifest (``{"path", "shape", ...}``) as an array, memory-mapped if ``mmap``; a missing,
        truncated or reshaped file is a LitebertError naming it (``verify_checksums`` checks the bytes too)."""
        p = self.path / entry["path"]
        if not p.is_file():
            raise LitebertError(f"{p}: missing (listed in {self.path / 'manifest.json'})")
        try:
            arr = np.load(p, mmap_mode="r" if mmap else None, allow_pickle=False)
        except (ValueError, OSError, EOFError) as exc:
            raise LitebertError(f"{p}: damaged data file ({exc}); run `litebert prepare` again") from None
        if "shape" in entry and list(arr.shape) != list(entry["shape"]):
            raise LitebertError(f"{p}: shape {list(arr.shape)} differs from manifest.json's {entry['shape']}")
        return arr

    def __len__(self) -> int:
        return self._len

    def set_epoch(self, epoch: int) -> None:
        """Draw the masks of ``epoch`` from now on (dynamic masking; no effect with static masks)."""
        self.epoch = int(epoch)

    @property
    def lengths(self) -> np.ndarray:
        """``int64 [N]``: length of every item (for length-grouped sampling)."""
        return self._lengths

    @property
    def meta(self) -> np.ndarray:
        """``int64 [N, F]``: positions and labels of every instance (columns ``instances.META_FIELDS``)."""
        return self._meta_all

    def _locate(self, index: int) -> tuple[int, int, int, int]:
        if index < 0:
            index += self._len
        if not 0 <= index < self._len:
            raise IndexError(f"index {index} out of range for {self._len} instances")
        s = int(np.searchsorted(self._starts, index, side="right")) - 1
        j = index - int(self._starts[s])
        return s, j, int(self._offs[s][j]), int(self._offs[s][j + 1])

    def raw(self, index: int) -> dict[str, np.ndarray]:
        """The stored arrays of one instance: ``input_ids`` (unmasked unless static), ``word_start``, ``meta``."""
        s, j, a, b = self._locate(index)
        out = {
            "input_ids": np.asarray(self._ids[s][a:b], np.int64),
            "word_start": np.asarray(self._ws[s][a:b]),
            "meta": self._meta[s][j],
        }
        if self.static:
            out["labels"] = np.asarray(self._labels[s][a:b], np.int64)
        return out

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return self.__getitems__([index])[0]

    def __getitems__(self, indices: Sequence[int]) -> MaskedBatch:
        """Items ``indices``, masked together in one vectorized call (same result as one by one).

        Returns a :class:`MaskedBatch`: a sequence of the item dicts that also holds the padded batch, which
        :class:`PretrainingCollator` uses directly (no per-item work).
        """
        idx = np.asarray([int(i) for i in indices], dtype=np.int64)
        idx = np.where(idx < 0, idx + self._len, idx)
        if len(idx) and (idx.min() < 0 or idx.max() >= self._len):
            raise IndexError(f"index out of range for {self._len} instances")
        B = len(idx)
        lengths = self._lengths[idx] if B else np.zeros(0, np.int64)
        S = int(lengths.max()) if B else 0
        pos = np.arange(S)
        valid = pos[None, :] < lengths[:, None]
        ids = np.full((B, S), self.pad_token_id, np.int64)
        ws = np.zeros((B, S), np.uint8)
        labels = np.full((B, S), IGNORE_INDEX, np.int64) if self.static else None
        for s, rows in self._by_shard(idx):  # one vectorized gather per shard touched
            starts = self._offs[s][idx[rows] - self._starts[s]]
            gather = np.minimum(starts[:, None] + pos[None, :], len(self._ids[s]) - 1)
            v = valid[rows]
            ids[rows] = np.where(v, self._ids[s][gather], self.pad_token_id)
            if self.static:
                labels[rows] = np.where(v, self._labels[s][gather], IGNORE_INDEX)
            else:
                ws[rows] = np.where(v, self._ws[s][gather], 0)
        if not self.static:
            keys = mask_keys(self.seed, self.epoch, idx)
            ids, labels = mask_batch(
                ids,
                ws,
                lengths,
                keys,
                mask_token_id=self.mask_token_id,
                special_ids=self._special_table,
                random_ids=self.random_ids,
                masked_lm_prob=self.masked_lm_prob,
                max_predictions_per_seq=self.max_predictions_per_seq,
                max_ngram=self.max_ngram,
            )
        meta = self._meta_all[idx] if B else np.zeros((0, len(META_INDEX)), np.int64)
        len_a = meta[:, META_INDEX["len_a"]]
        token_type = ((pos[None, :] >= (len_a + 2)[:, None]) & valid).astype(np.int64)
        return MaskedBatch(
            {
                "input_ids": ids,
                "token_type_ids": token_type,
                "attention_mask": valid.astype(np.int64),
                "labels": labels,
                "sentence_order_label": meta[:, META_INDEX["label"]].astype(np.int64),
            },
            lengths,
            self.pad_token_id,
        )

    def _by_shard(self, idx: np.ndarray) -> list[tuple[int, np.ndarray | slice]]:
        """(shard, rows of ``idx`` in it) for each shard that ``idx`` touches; one shard: all rows, no search."""
        if len(self._ids) == 1:
            return [(0, slice(None))]
        shard = np.searchsorted(self._starts, idx, side="right") - 1
        return [(int(s), np.nonzero(shard == s)[0]) for s in np.unique(shard)]

    def collator(
        self,
        pad_to_multiple_of: int | None = None,
        *,
        static_shapes: bool = False,
        masked_positions: bool = False,
        unpad_indices: bool = False,
    ) -> PretrainingCollator:
        """A :class:`PretrainingCollator` with this data's pad id. ``masked_positions``: batches carry
        ``masked_positions`` (as many slots as the batch's most predicted row); ``static_shapes``: every batch padded
        to the data's ``max_seq_length``, with ``masked_positions`` of its ``max_predictions_per_seq`` slots;
        ``unpad_indices``: batches carry ``unpad_indices`` (the real tokens' flat positions, for unpadding)."""
        if not static_shapes:
            return PretrainingCollator(
                self.pad_token_id,
                pad_to_multiple_of=pad_to_multiple_of,
                masked_positions=masked_positions,
                unpad_indices=unpad_indices,
            )
        settings = self.manifest["settings"]
        return PretrainingCollator(
            self.pad_token_id,
            pad_to_length=int(settings["max_seq_length"]),
            max_predictions=int(settings["max_predictions_per_seq"]),
            unpad_indices=unpad_indices,
        )


class MaskedBatch(collections.abc.Sequence):
    """What :meth:`PretrainingDataset.__getitems__` returns: item ``r`` is the dict of 1-D tensors of the data
    contract (built on access); ``arrays`` holds the batch padded to its longest item (int64 numpy ``[B, S]`` and
    ``sentence_order_label [B]``) for :class:`PretrainingCollator`'s fast path."""

    def __init__(self, arrays: dict[str, np.ndarray], lengths: np.ndarray, pad_token_id: int) -> None:
        self.arrays, self.lengths, self.pad_token_id = arrays, lengths, pad_token_id

    def __len__(self) -> int:
        return len(self.lengths)

    def __getitem__(self, r):
        if isinstance(r, slice):
            return [self[i] for i in range(*r.indices(len(self)))]
        n = int(self.lengths[r])
        item = {k: torch.from_numpy(np.array(v[r, :n])) for k, v in self.arrays.items() if v.ndim == 2}
        item["sentence_order_label"] = torch.tensor(int(self.arrays["sentence_order_label"][r]), dtype=torch.int64)
        return item


class PretrainingCollator:
    """Pads a list of items to the longest one (dynamic padding), or to a fixed shape.

    Returns a dict of ``int64`` tensors: ``input_ids [B, S]`` (pad id), ``token_type_ids [B, S]`` (0),
    ``attention_mask [B, S]`` (0 on padding), ``labels [B, S]`` (−100 on padding), ``sentence_order_label [B]``.
    ``S`` is the longest item, rounded up to ``pad_to_multiple_of`` when given, or ``pad_to_length``.

    ``masked_positions=True`` adds ``masked_positions [B, P]``: each row's predicted positions (``labels !=
    -100``) in increasing order, then 0 (the ``[CLS]`` position, never predicted: its label is −100) up to P, as
    google-research BERT's ``masked_lm_positions``; P is the most predicted positions of a row in this batch,
    counted here on the host, so the model gathers them with no data-dependent size (``nonzero``, a device sync).
    Static shapes (for CUDA graphs, ``torch.compile(mode="reduce-overhead")``): ``pad_to_length`` fixes S and
    ``max_predictions`` fixes P (and implies ``masked_positions``). Raises LitebertError for an item longer than
    ``pad_to_length`` or with more than ``max_predictions`` predicted positions.

    ``unpad_indices=True`` adds ``unpad_indices [T]``: the flat positions of the T real tokens in the (B·S)
    batch (``attention_mask.reshape(-1).nonzero()``, row-major), for the model's unpadding
    (:meth:`litebert.modeling.AlbertModel.unpadding`): found here on the host, the device needs no ``nonzero``
    (a sync per micro-batch).
    """

    def __init__(
        self,
        pad_token_id: int,
        pad_to_multiple_of: int | None = None,
        *,
        pad_to_length: int | None = None,
        max_predictions: int | None = None,
        masked_positions: bool = False,
        unpad_indices: bool = False,
    ) -> None:
        self.pad_token_id = int(pad_token_id)
        self.unpad_indices = unpad_indices
        self.pad_to_multiple_of = pad_to_multiple_of
        self.pad_to_length = pad_to_length
        self.max_predictions = max_predictions
        self.masked_positions = masked_positions or max_predictions is not None

    @classmethod
    def from_manifest(cls, manifest: dict, pad_to_multiple_of: int | None = None) -> PretrainingCollator:
        return cls(manifest["tokenizer"]["pad_token_id"], pad_to_multiple_of)

    def __call__(self, items: Sequence[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
        if isinstance(items, MaskedBatch) and items.pad_token_id == self.pad_token_id:
            arrays = items.arrays  # already padded to the longest item: no per-item work
        else:
            arrays = self._pad(items)
        return {k: torch.from_numpy(v) for k, v in self._finish(arrays).items()}

    def _finish(self, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """``arrays`` (``[B, S]`` padded to the longest item, ``sentence_order_label [B]``) padded to
        ``pad_to_multiple_of`` or ``pad_to_length``, with ``masked_positions`` / ``unpad_indices`` (see the class
        docstring). numpy throughout: a handful of calls per batch, each cheaper than a torch operator's dispatch."""
        B, S = arrays["input_ids"].shape
        width = S
        if self.pad_to_multiple_of and width % self.pad_to_multiple_of:
            width += self.pad_to_multiple_of - width % self.pad_to_multiple_of
        if self.pad_to_length is not None:
            if self.pad_to_length < width:
                raise LitebertError(f"a batch item has {width} tokens, more than the fixed length {self.pad_to_length}")
            width = self.pad_to_length
        if width > S:
            fill = {"input_ids": self.pad_token_id, "token_type_ids": 0, "attention_mask": 0, "labels": IGNORE_INDEX}
            arrays = dict(arrays)
            for k, value in fill.items():
                wide = np.full((B, width), value, dtype=arrays[k].dtype)
                wide[:, :S] = arrays[k]
                arrays[k] = wide
        out = dict(arrays)
        if self.masked_positions:
            # each row's predicted positions in increasing order, then 0 ([CLS], never predicted)
            at = np.flatnonzero(arrays["labels"] != IGNORE_INDEX)  # row-major: rows in order, positions increasing
            row, col = np.divmod(at, width)
            count = np.bincount(row, minlength=B)  # (B,) predicted positions per row
            most = int(count.max()) if B else 0
            P = max(most, 1) if self.max_predictions is None else self.max_predictions
            if most > P:
                raise LitebertError(
                    f"a batch item has {most} predicted positions, more than max_predictions_per_seq "
                    f"{self.max_predictions}"
                )
            positions = np.zeros((B, P), dtype=np.int64)
            positions[row, np.arange(len(at)) - (np.cumsum(count) - count)[row]] = col  # slot = rank within the row
            out["masked_positions"] = positions
        if self.unpad_indices:
            out["unpad_indices"] = np.flatnonzero(arrays["attention_mask"]).astype(np.int64)  # (T,)
        return out

    def _pad(self, items: Sequence[dict[str, torch.Tensor]]) -> dict[str, np.ndarray]:
        """Item dicts (1-D tensors) as ``[B, S]`` arrays padded to the longest item, and ``sentence_order_label``."""
        B = len(items)
        S = max((int(it["input_ids"].shape[0]) for it in items), default=0)
        batch = {
            "input_ids": np.full((B, S), self.pad_token_id, dtype=np.int64),
            "token_type_ids": np.zeros((B, S), dtype=np.int64),
            "attention_mask": np.zeros((B, S), dtype=np.int64),
            "labels": np.full((B, S), IGNORE_INDEX, dtype=np.int64),
        }
        for r, it in enumerate(items):
            n = int(it["input_ids"].shape[0])
            for k in ("input_ids", "token_type_ids", "attention_mask", "labels"):
                batch[k][r, :n] = it[k]
        labels = [torch.as_tensor(it["sentence_order_label"]) for it in items]
        batch["sentence_order_label"] = torch.stack(labels).numpy()
        return batch


def _get(config: Any, name: str):
    if isinstance(config, dict):
        return config.get(name)
    return getattr(config, name, None)


def tokenizer_vocabulary(directory: str | os.PathLike) -> dict | None:
    """``{"vocab_size", "vocab_sha256"}`` of the tokenizer files in ``directory`` (a model directory such as
    ``final/``), or None when it holds none that :func:`litebert.tokenization.load_tokenizer` can read."""
    try:
        tok = load_tokenizer(directory)
    except LitebertError:
        return None
    return {"vocab_size": tok.vocab_size, "vocab_sha256": tok.vocab_fingerprint()}


def check_same_vocabulary(manifest: dict, other: dict | None, data_name: str, other_name: str) -> None:
    """Refuse data whose tokenizer is not ``other``'s: another manifest's ``tokenizer`` section, or
    :func:`tokenizer_vocabulary` of a model directory. Compares the fingerprints of the ordered vocabularies
    (``vocab_sha256``, which ``prepare`` stores). Data prepared before fingerprints existed, or a model directory
    without tokenizer files, can only be compared by ``vocab_size``: then a warning says so.

    Raises:
        LitebertError: naming both sides, when the vocabulary sizes or fingerprints differ.
    """
    mine = manifest.get("tokenizer") or {}
    other = (other.get("tokenizer") or other) if other is not None else {}
    if (
        mine.get("vocab_size") is not None
        and other.get("vocab_size") is not None
        and int(mine["vocab_size"]) != int(other["vocab_size"])
    ):
        raise LitebertError(
            f"{data_name} was prepared with another tokenizer than {other_name}: vocab_size "
            f"{mine['vocab_size']} vs {other['vocab_size']}"
        )
    a, b = mine.get("vocab_sha256"), other.get("vocab_sha256")
    if a is None or b is None:
        missing = data_name if a is None else other_name
        warnings.warn(
            f"cannot check that {data_name} and {other_name} use the same tokens, only the same "
            f"vocab_size: {missing} has no vocabulary fingerprint (data prepared by an older litebert: "
            "run `litebert prepare` again; or a model directory without tokenizer files)",
            stacklevel=2,
        )
        return
    if a != b:
        raise LitebertError(
            f"{data_name} was prepared with another tokenizer than {other_name}: same vocab_size "
            f"{mine.get('vocab_size')} but different tokens (vocabulary sha256 {a[:12]}… vs "
            f"{b[:12]}…); prepare both with the same tokenizer directory"
        )


def check_data_matches_model(
    manifest: dict | str | os.PathLike, config: Any, max_seq_length: int | None = None
) -> None:
    """Check that prepared data fits a model config (an ``AlbertConfig`` or a dict with the same fields).

    Checks: the data's tokenizer ``vocab_size`` equals ``config.vocab_size``; ``max_seq_length`` of the data is at
    most ``config.max_position_embeddings``, and at most ``max_seq_length`` (the training setting) when given.

    Raises:
        LitebertError: naming the field, both values and what to do.
    """
    if not isinstance(manifest, dict):
        manifest = read_manifest(manifest)
    problems = []
    data_vocab = int(manifest["tokenizer"]["vocab_size"])
    model_vocab = _get(config, "vocab_size")
    if model_vocab is not None and int(model_vocab) != data_vocab:
        problems.append(
            f"vocab_size: the data's tokenizer has {data_vocab} ids but the model has vocab_size="
            f"{model_vocab} (set the model's vocab_size to {data_vocab} or prepare the data with the "
            "model's tokenizer)"
        )
    max_pos = _get(config, "max_position_embeddings")
    seq = int(manifest["settings"]["max_seq_length"])
    if max_pos is not None and seq > int(max_pos):
        problems.append(
            f"max_seq_length: the data has items up to {seq} tokens but the model has max_position_embeddings={max_pos}"
        )
    if max_seq_length is not None and seq > int(max_seq_length):
        problems.append(
            f"max_seq_length: the data was prepared with max_seq_length={seq} but training uses "
            f"{max_seq_length} (prepare the data again with --max-seq-length {max_seq_length})"
        )
    if problems:
        raise LitebertError("data does not match the model: " + "; ".join(problems))
