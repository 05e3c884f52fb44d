"""Shared helpers of the training tests: a tiny synthetic pretraining data set (no data pipeline needed); batch it
with the real collator, ``litebert.data.PretrainingCollator(pad_token_id=0)``."""

from __future__ import annotations

import torch


class SyntheticPretrainingData(torch.utils.data.Dataset):
    """Items like PretrainingDataset's: random ids, ~15% predicted positions, SOP labels; seeded by (seed, epoch, i)."""

    def __init__(self, n: int = 64, seq_len: int = 16, vocab: int = 1000, seed: int = 0) -> None:
        self.n, self.seq_len, self.vocab, self.seed, self.epoch = n, seq_len, vocab, seed, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch * 10_007 + i)
        length = int(torch.randint(6, self.seq_len + 1, (1,), generator=g))
        ids = torch.randint(5, self.vocab, (length,), generator=g)
        ids[0], ids[-1] = 2, 3
        labels = torch.full((length,), -100)
        pos = torch.randperm(length - 2, generator=g)[: max(1, round(0.15 * length))] + 1
        labels[pos] = ids[pos]
        ids[pos] = 4
        half = length // 2
        tt = torch.zeros(length, dtype=torch.long)
        tt[half:] = 1
        return {
            "input_ids": ids,
            "token_type_ids": tt,
            "attention_mask": torch.ones(length, dtype=torch.long),
            "labels": labels,
            "sentence_order_label": torch.randint(0, 2, (), generator=g),
        }
