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


#: what turns a tensor into a host number: each is a device→host transfer (and a wait) on a GPU
HOST_READS = ("item", "tolist", "numpy", "__float__", "__int__", "__bool__", "__index__")


class HostReads:
    """Counts the calls of :data:`HOST_READS` (and ``Tensor.cpu``) on any tensor while ``counting`` is true, by
    patching ``torch.Tensor`` for the duration of a ``with`` block; ``calls`` lists (name, "file:function:line") of
    each."""

    def __init__(self) -> None:
        self.counting = False
        self.calls: list[tuple[str, str]] = []
        self._saved: dict = {}

    def __enter__(self) -> HostReads:
        import traceback

        def wrap(name, original):
            def counted(tensor, *args, **kwargs):
                if self.counting:
                    frame = traceback.extract_stack(limit=2)[0]  # the caller of the read
                    self.calls.append((name, f"{frame.filename.rsplit('/', 1)[-1]}:{frame.name}:{frame.lineno}"))
                return original(tensor, *args, **kwargs)

            return counted

        for name in (*HOST_READS, "cpu"):
            self._saved[name] = getattr(torch.Tensor, name)
            setattr(torch.Tensor, name, wrap(name, self._saved[name]))
        return self

    def __exit__(self, *exc) -> None:
        for name, original in self._saved.items():
            setattr(torch.Tensor, name, original)
        self.counting = False
