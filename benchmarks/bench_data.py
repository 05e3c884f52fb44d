"""Data pipeline benchmark: ``prepare`` throughput and masking throughput against transformers' collators.

1. ``prepare`` on WikiText-2 train with ``--workers 2``: MB of raw text per second (target ≥ 1.5 MB/s).
2. Masking + collation of the same instances: ours (``PretrainingDataset.__getitems__`` + ``PretrainingCollator``,
   dynamic n-gram whole-word masking) against ``transformers.DataCollatorForLanguageModeling`` with
   ``whole_word_mask=True`` (transformers 5's replacement of ``DataCollatorForWholeWordMask``) and without it
   (token masking), on the same token ids given as lists (target: ours ≥ 5× the whole-word collator).

Usage::

    python benchmarks/bench_data.py [--tokenizer DIR] [--items 4800] [--batch-sizes 32,128] [--workers 2]

Without ``--tokenizer`` a SentencePiece tokenizer (vocabulary 8000) is trained on the first 3 MB of WikiText-2
train first (not timed). transformers is needed only for the comparison.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from litebert.data import PrepareConfig, PretrainingDataset, prepare
from litebert.paths import data_dir
from litebert.tokenization import train_tokenizer


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokenizer", default=None)
    ap.add_argument("--corpus", default=str(data_dir() / "wikitext-2" / "wiki.train.tokens"))
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--items", type=int, default=4800, help="items masked per repetition (ours)")
    ap.add_argument("--batch-sizes", default="32,128")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(1)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    tmp = Path(tempfile.mkdtemp(prefix="bench-data-"))

    tok_dir = args.tokenizer
    if tok_dir is None:
        head = tmp / "head.txt"
        with open(args.corpus, "rb") as f:
            data = f.read(3_000_000)
        head.write_bytes(data[: data.rfind(b"\n") + 1])
        tok_dir = str(tmp / "tok")
        t = time.perf_counter()
        train_tokenizer([head], "sentencepiece", 8000, tok_dir)
        print(f"trained sentencepiece tokenizer (8000) in {time.perf_counter() - t:.1f} s (not timed below)")

    # ---- 1. prepare ----
    out = tmp / "data"
    res = prepare(
        PrepareConfig(corpus=[args.corpus], tokenizer=tok_dir, output=out, workers=args.workers, progress=False)
    )
    print(res.summary)
    print(f"prepare --workers {args.workers}: {res.mb_per_s:.2f} MB/s  (target >= 1.5 MB/s)")

    # ---- 2. masking ----
    ds = PretrainingDataset(out)
    hf_tok = None
    try:
        import transformers

        hf_tok = transformers.AutoTokenizer.from_pretrained(str(out / "tokenizer"))
    except ImportError:
        print("transformers not installed: no comparison")
    for bs in [int(x) for x in args.batch_sizes.split(",")]:
        bench_masking(ds, hf_tok, bs, max(1, args.items // bs), args.repeats)


def bench_masking(ds: PretrainingDataset, hf_tok, batch_size: int, n_batches: int, repeats: int) -> None:
    """Items/s of our dataset masking + collator and of transformers' collators on the same instances."""
    collate = ds.collator()
    rng = np.random.default_rng(0)
    n_items = min(len(ds), n_batches * batch_size)
    order = rng.permutation(len(ds))[:n_items]
    batches = [order[i : i + batch_size] for i in range(0, n_items, batch_size)]

    def run_ours() -> None:
        for b in batches:
            batch = collate(ds.__getitems__(b))
            assert batch["input_ids"].shape[0] == len(b)

    runners = {"litebert dynamic n-gram whole-word masking + collator": (run_ours, n_items)}
    if hf_tok is not None:
        import warnings

        import transformers

        special = {hf_tok.cls_token_id, hf_tok.sep_token_id, hf_tok.pad_token_id}
        n_hf = max(1, min(len(batches), 1280 // batch_size))
        feats = {}
        for i in order[: n_hf * batch_size]:  # the same token ids, as lists for transformers (not timed)
            raw = ds.raw(int(i))
            ids = raw["input_ids"].tolist()
            ws = raw["word_start"]
            # offsets that reproduce our word boundaries: a new word starts after a gap
            starts = np.cumsum(1 + ws.astype(np.int64))
            offsets = [(int(s), int(s) + 1) for s in starts]
            for k in range(1, len(ids)):
                if not ws[k]:
                    offsets[k] = (offsets[k - 1][1], offsets[k - 1][1] + 1)
            pad = ds.max_seq_length - len(ids)  # transformers pads offset_mapping only via the tokenizer: pre-pad
            feats[int(i)] = {
                "input_ids": ids + [hf_tok.pad_token_id] * pad,
                "attention_mask": [1] * len(ids) + [0] * pad,
                "special_tokens_mask": [int(x in special) for x in ids] + [1] * pad,
                "offset_mapping": offsets + [(0, 0)] * pad,
            }
        for name, wwm in (
            ("transformers DataCollatorForLanguageModeling(whole_word_mask=True)", True),
            ("transformers DataCollatorForLanguageModeling (token masking)", False),
        ):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                coll = transformers.DataCollatorForLanguageModeling(
                    hf_tok, mlm_probability=0.15, seed=0, whole_word_mask=wwm
                )

            def run_hf(coll=coll, wwm=wwm) -> None:
                for b in batches[:n_hf]:
                    items = [dict(feats[int(i)]) for i in b]
                    if not wwm:
                        for it in items:
                            it.pop("offset_mapping")
                    coll(items)

            runners[name] = (run_hf, n_hf * batch_size)
    # Interleaved repetitions, best of each, timed in CPU seconds of this process (all of these run on one
    # thread): the machine is shared, and wall time would measure the neighbours' load too.
    best = {name: 0.0 for name in runners}
    for _ in range(repeats):
        for name, (fn, n) in runners.items():
            t = time.process_time()
            fn()
            best[name] = max(best[name], n / max(time.process_time() - t, 1e-9))
    for name, rate in best.items():
        print(f"{name}: {rate:,.0f} items/s (batch {batch_size}, best of {repeats}, CPU time)")
    if hf_tok is None:
        return
    ours = best["litebert dynamic n-gram whole-word masking + collator"]
    ww = best["transformers DataCollatorForLanguageModeling(whole_word_mask=True)"]
    tk = best["transformers DataCollatorForLanguageModeling (token masking)"]
    print(
        f"batch {batch_size}: ours / transformers whole-word = {ours / ww:.1f}x (target >= 5x); "
        f"ours / transformers token masking = {ours / tk:.1f}x"
    )


if __name__ == "__main__":
    main()
