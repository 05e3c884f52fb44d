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

import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from litebert.data.instances import META_INDEX
from litebert.data.masking import IGNORE_INDEX, mask_batch, mask_keys
from litebert.data.shards import read_manifest
from litebert.errors import LitebertError


class PretrainingDataset(torch.utils.data.Dataset):
    """Instances of a prepared-data directory (``litebert prepare``), memory-mapped.

    Args:
        path: the directory holding ``manifest.json``.
        epoch: epoch whose masks to draw (dynamic masking); change with :meth:`set_epoch`.
        seed: masking seed; default the ``seed`` in the manifest.

    Raises:
        LitebertError: not a prepared-data directory, or a shard file is missing.
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
        self.special_ids = np.array(sorted({t["cls_token_id"], t["sep_token_id"], t["pad_token_id"],
                                            t["mask_token_id"]}), np.int64)
        self.random_ids = np.load(self._file(self.manifest["random_ids"]["path"]))
        self._ids, self._ws, self._offs, self._meta, self._labels = [], [], [], [], []
        for shard in self.manifest["shards"]:
            f = shard["files"]
            self._ids.append(np.load(self._file(f["input_ids"]["path"]), mmap_mode="r"))
            self._ws.append(np.load(self._file(f["word_start"]["path"]), mmap_mode="r"))
            self._offs.append(np.load(self._file(f["offsets"]["path"])))
            self._meta.append(np.load(self._file(f["meta"]["path"])))
            if "labels" in f:
                self._labels.append(np.load(self._file(f["labels"]["path"]), mmap_mode="r"))
        counts = np.array([len(o) - 1 for o in self._offs], np.int64)
        self._starts = np.concatenate([[0], np.cumsum(counts)])
        self._len = int(self._starts[-1])
        self._meta_all = np.concatenate(self._meta) if self._meta else np.zeros((0, len(META_INDEX)), np.int64)
        self._lengths = np.concatenate([np.diff(o) for o in self._offs]) if self._offs else np.zeros(0, np.int64)

    def _file(self, name: str) -> Path:
        p = self.path / name
        if not p.is_file():
            raise LitebertError(f"{p}: missing (listed in {self.path / 'manifest.json'})")
        return p

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
        out = {"input_ids": np.asarray(self._ids[s][a:b], np.int64), "word_start": np.asarray(self._ws[s][a:b]),
               "meta": self._meta[s][j]}
        if self.static:
            out["labels"] = np.asarray(self._labels[s][a:b], np.int64)
        return out

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return self.__getitems__([index])[0]

    def __getitems__(self, indices: Sequence[int]) -> list[dict[str, torch.Tensor]]:
        """Items ``indices``, masked together in one vectorized call (same result as one by one)."""
        idx = [int(i) for i in indices]
        locs = [self._locate(i) for i in idx]
        B = len(idx)
        lengths = np.array([b - a for _, _, a, b in locs], np.int64)
        S = int(lengths.max()) if B else 0
        ids = np.full((B, S), self.pad_token_id, np.int64)
        ws = np.zeros((B, S), np.uint8)
        labels = None
        if self.static:
            labels = np.full((B, S), IGNORE_INDEX, np.int64)
        for r, (s, _, a, b) in enumerate(locs):  # one copy per item, not per token
            ids[r, :b - a] = self._ids[s][a:b]
            if self.static:
                labels[r, :b - a] = self._labels[s][a:b]
            else:
                ws[r, :b - a] = self._ws[s][a:b]
        if not self.static:
            keys = mask_keys(self.seed, self.epoch, np.asarray([i % self._len for i in idx]))
            ids, labels = mask_batch(ids, ws, lengths, keys, mask_token_id=self.mask_token_id,
                                     special_ids=self.special_ids, random_ids=self.random_ids,
                                     masked_lm_prob=self.masked_lm_prob,
                                     max_predictions_per_seq=self.max_predictions_per_seq, max_ngram=self.max_ngram)
        ids_t = torch.from_numpy(ids)
        labels_t = torch.from_numpy(labels)
        items = []
        for r, (s, j, _, _) in enumerate(locs):
            n = int(lengths[r])
            len_a = int(self._meta[s][j, META_INDEX["len_a"]])
            tt = torch.zeros(n, dtype=torch.int64)
            tt[len_a + 2:] = 1
            items.append({
                "input_ids": ids_t[r, :n].clone(),
                "token_type_ids": tt,
                "attention_mask": torch.ones(n, dtype=torch.int64),
                "labels": labels_t[r, :n].clone(),
                "sentence_order_label": torch.tensor(int(self._meta[s][j, META_INDEX["label"]]), dtype=torch.int64),
            })
        return items

    def collator(self, pad_to_multiple_of: int | None = None) -> "PretrainingCollator":
        """A :class:`PretrainingCollator` with this data's pad id."""
        return PretrainingCollator(self.pad_token_id, pad_to_multiple_of=pad_to_multiple_of)


class PretrainingCollator:
    """Pads a list of items to the longest one (dynamic padding).

    Returns a dict of ``int64`` tensors: ``input_ids [B, S]`` (pad id), ``token_type_ids [B, S]`` (0),
    ``attention_mask [B, S]`` (0 on padding), ``labels [B, S]`` (−100 on padding), ``sentence_order_label [B]``.
    ``S`` is the longest item, rounded up to ``pad_to_multiple_of`` when given.
    """

    def __init__(self, pad_token_id: int, pad_to_multiple_of: int | None = None) -> None:
        self.pad_token_id = int(pad_token_id)
        self.pad_to_multiple_of = pad_to_multiple_of

    @classmethod
    def from_manifest(cls, manifest: dict, pad_to_multiple_of: int | None = None) -> "PretrainingCollator":
        return cls(manifest["tokenizer"]["pad_token_id"], pad_to_multiple_of)

    def __call__(self, items: Sequence[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
        B = len(items)
        S = max(int(it["input_ids"].shape[0]) for it in items)
        if self.pad_to_multiple_of:
            m = self.pad_to_multiple_of
            S = (S + m - 1) // m * m
        batch = {
            "input_ids": torch.full((B, S), self.pad_token_id, dtype=torch.int64),
            "token_type_ids": torch.zeros((B, S), dtype=torch.int64),
            "attention_mask": torch.zeros((B, S), dtype=torch.int64),
            "labels": torch.full((B, S), IGNORE_INDEX, dtype=torch.int64),
        }
        for r, it in enumerate(items):
            n = int(it["input_ids"].shape[0])
            for k in ("input_ids", "token_type_ids", "attention_mask", "labels"):
                batch[k][r, :n] = it[k]
        batch["sentence_order_label"] = torch.stack([torch.as_tensor(it["sentence_order_label"]) for it in items])
        return batch


def _get(config: Any, name: str):
    if isinstance(config, dict):
        return config.get(name)
    return getattr(config, name, None)


def check_data_matches_model(manifest: dict | str | os.PathLike, config: Any, max_seq_length: int | None = None) -> None:
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
        problems.append(f"vocab_size: the data's tokenizer has {data_vocab} ids but the model has vocab_size="
                        f"{model_vocab} (set the model's vocab_size to {data_vocab} or prepare the data with the "
                        "model's tokenizer)")
    max_pos = _get(config, "max_position_embeddings")
    seq = int(manifest["settings"]["max_seq_length"])
    if max_pos is not None and seq > int(max_pos):
        problems.append(f"max_seq_length: the data has items up to {seq} tokens but the model has "
                        f"max_position_embeddings={max_pos}")
    if max_seq_length is not None and seq > int(max_seq_length):
        problems.append(f"max_seq_length: the data was prepared with max_seq_length={seq} but training uses "
                        f"{max_seq_length} (prepare the data again with --max-seq-length {max_seq_length})")
    if problems:
        raise LitebertError("data does not match the model: " + "; ".join(problems))
