"""Shared helpers of the training tests: a tiny synthetic pretraining data set (no data pipeline needed); batch it
with the real collator, ``litebert.data.PretrainingCollator(pad_token_id=0)``."""

from __future__ import annotations

from pathlib import Path

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


#: the one host read a training step may make on CPU: ``AlbertModel.additive_mask`` skips the mask of a batch
#: without padding when the mask is a CPU tensor (no transfer there); with the mask on a GPU that branch is never taken
ALLOWED_CPU_READ = "modeling.py:additive_mask:"


def count_reads_of_quiet_steps(monkeypatch, reads: HostReads, logging_steps: int, steps: int) -> None:
    """Make ``reads`` count from the start of every training step of ``litebert.training.loop`` that does not log
    (``step % logging_steps != 0`` and not the last, ``steps``) to the start of the next step, leaving out data
    loading (``next_batch``, ``prefetch``: host work on CPU tensors) and the read-back of logging steps (``settle``).
    Read :meth:`unexpected` of the result after the run."""
    from litebert.training import loop as L

    def paused(method):
        def wrapper(self, *a, **k):
            was, reads.counting = reads.counting, False
            try:
                return method(self, *a, **k)
            finally:
                reads.counting = was

        return wrapper

    def step_starts(method):
        def wrapper(self, *a, **k):
            step = self.st.step + 1
            reads.counting = step % logging_steps != 0 and step != steps
            return method(self, *a, **k)

        return wrapper

    monkeypatch.setattr(L._Trainer, "normalisers", step_starts(L._Trainer.normalisers))
    for name in ("next_batch", "prefetch", "settle"):
        monkeypatch.setattr(L._Trainer, name, paused(getattr(L._Trainer, name)))


def fused_adamw():
    """A context in which ``torch.optim.AdamW`` is torch's fused AdamW, which :func:`litebert.optim.build_optimizer`
    gives a GPU (the foreach AdamW it gives a CPU reads its step counts on the host: CPU tensors there)."""
    from unittest import mock

    adamw = torch.optim.AdamW
    return mock.patch.object(torch.optim, "AdamW", lambda *a, fused=None, **k: adamw(*a, fused=True, **k))


def unexpected_reads(reads: HostReads) -> list[tuple[str, str]]:
    """``reads.calls`` but the one read allowed on CPU (:data:`ALLOWED_CPU_READ`)."""
    return [(name, where) for name, where in reads.calls if not where.startswith(ALLOWED_CPU_READ)]


def finetune_model_dir(data_dir: Path, path: Path) -> Path:
    """Random albert-debug weights (seed 0) and a WordPiece vocabulary that is the same on every machine (a trained
    tokenizer is not): the 2,000 most frequent lower-cased words of SST-2's first 2,000 training rows, after the
    special tokens, single characters and their ``##`` continuations."""
    import json
    import re
    import string
    from collections import Counter

    from litebert import AlbertConfig, AlbertForPreTraining

    text = (data_dir / "glue/SST-2/train.tsv").read_text(encoding="utf-8").lower().splitlines()[1:2001]
    counts = Counter(w for row in text for w in re.findall(r"[a-z]+", row.split("\t")[0]))
    chars = string.ascii_lowercase + string.digits + string.punctuation
    words = [w for w, _ in sorted(counts.items(), key=lambda x: (-x[1], x[0])) if len(w) > 1][:2000]
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *chars, *(f"##{c}" for c in chars), *words]
    path.mkdir(parents=True)
    (path / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    (path / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True}), encoding="utf-8")
    torch.manual_seed(0)
    AlbertForPreTraining(AlbertConfig.from_preset("albert-debug", vocab_size=len(vocab))).save_pretrained(path)
    return path
