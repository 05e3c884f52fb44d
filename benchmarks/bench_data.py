"""Data pipeline benchmark: ``prepare`` throughput (and where its time goes) and masking throughput against
transformers' collators.

1. ``prepare`` over a generated corpus of ``--size-mb`` MB (default ~1 GB; CI does not run this script): WikiText-2
   train repeated, each copy with a few letters swapped (b/p, d/t, g/k, f/v, s/z, m/n, l/r: 128 variants), so that
   distinct words keep growing as in a real corpus. MB of raw text per second with 1 and 2 workers (``--workers
   1,2``), run alternately ``--repeats`` times (best of each), and the scaling. The machine's load average is
   printed before and after: compare only runs made under the same load.
2. ``--profile``: cProfile of a 1-worker ``prepare`` over ``--profile-mb`` MB (default 20) of the same corpus, with
   the time split into reading, sentence splitting, tokenizer, instance building, masking and writing.
3. Masking + collation of WikiText-2 instances: ours (``PretrainingDataset.__getitems__`` + ``PretrainingCollator``,
   dynamic n-gram whole-word masking) against ``transformers.DataCollatorForLanguageModeling`` with
   ``whole_word_mask=True`` (transformers 5's replacement of ``DataCollatorForWholeWordMask``) and without it
   (token masking), on the same token ids given as lists (target: ours >= 5x the whole-word collator).

Usage::

    python benchmarks/bench_data.py [--size-mb 1000] [--workers 1,2] [--repeats 1] [--profile] [--profile-mb 20]
        [--tokenizer DIR] [--items 4800] [--batch-sizes 32,128] [--no-masking]

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
    ap.add_argument("--size-mb", type=float, default=1000, help="generated corpus for the throughput runs (0: none)")
    ap.add_argument("--workers", default="1,2", help="worker counts to time, alternately")
    ap.add_argument("--repeats", type=int, default=1, help="alternating rounds of the throughput runs (best kept)")
    ap.add_argument("--profile", action="store_true", help="cProfile a 1-worker prepare, time split by stage")
    ap.add_argument("--profile-mb", type=float, default=20)
    ap.add_argument("--no-masking", action="store_true", help="skip the masking comparison")
    ap.add_argument("--items", type=int, default=4800, help="items masked per repetition (ours)")
    ap.add_argument("--batch-sizes", default="32,128")
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

    # ---- 1. prepare throughput ----
    if args.size_mb > 0:
        corpus = generate_corpus(args.corpus, tmp / "corpus.txt", args.size_mb)
        bench_prepare(corpus, tok_dir, tmp, [int(w) for w in args.workers.split(",")], args.repeats)
    # ---- 2. where the time goes ----
    if args.profile:
        profile_prepare(generate_corpus(args.corpus, tmp / "profile.txt", args.profile_mb), tok_dir, tmp)
    # ---- 3. masking ----
    if args.no_masking:
        return
    out = tmp / "data"
    res = prepare(PrepareConfig(corpus=[args.corpus], tokenizer=tok_dir, output=out, workers=2, progress=False))
    print(res.summary)
    print(f"prepare --workers 2 on {Path(args.corpus).name}: {res.mb_per_s:.2f} MB/s  (target >= 1.5 MB/s)")
    ds = PretrainingDataset(out)
    hf_tok = None
    try:
        import transformers

        hf_tok = transformers.AutoTokenizer.from_pretrained(str(out / "tokenizer"))
    except ImportError:
        print("transformers not installed: no comparison")
    for bs in [int(x) for x in args.batch_sizes.split(",")]:
        bench_masking(ds, hf_tok, bs, max(1, args.items // bs), args.repeats)


_SWAPS = ("bp", "dt", "gk", "fv", "sz", "mn", "lr")


def generate_corpus(source: str, path: Path, size_mb: float) -> Path:
    """``source`` repeated up to ``size_mb`` MB; copy c swaps the letter pairs of the bits of c (both cases)."""
    text = Path(source).read_text(encoding="utf-8")
    target = int(size_mb * 1e6)
    with open(path, "w", encoding="utf-8") as f:
        written, c = 0, 0
        while written < target:
            pairs = [p for k, p in enumerate(_SWAPS) if (c % 128) >> k & 1]
            table = {}
            for a, b in pairs:
                for x, y in ((a, b), (a.upper(), b.upper())):
                    table[ord(x)], table[ord(y)] = y, x
            chunk = text.translate(table)[: target - written]
            f.write(chunk)
            written += len(chunk)
            c += 1
    print(f"generated {path.stat().st_size / 1e6:.0f} MB corpus ({c} copies of {Path(source).name})")
    return path


def _load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def bench_prepare(corpus: Path, tok_dir: str, tmp: Path, workers: list[int], repeats: int) -> None:
    """MB/s of ``prepare`` for each worker count, alternating so that the machine's load changes hit each alike."""
    best: dict[int, float] = {}
    for r in range(repeats):
        for w in workers:
            print(f"round {r + 1}, --workers {w}: {_load()}", flush=True)
            res = prepare(
                PrepareConfig(
                    corpus=[str(corpus)],
                    tokenizer=tok_dir,
                    output=tmp / "tp",
                    workers=w,
                    progress=False,
                    overwrite=True,
                )
            )
            print(f"  {res.summary}", flush=True)
            best[w] = max(best.get(w, 0.0), res.mb_per_s)
    print(_load())
    for w, rate in best.items():
        print(f"prepare --workers {w}: {rate:.2f} MB/s (best of {repeats})")
    if 1 in best:
        print("scaling: " + ", ".join(f"{w} workers {best[w] / best[1]:.2f}x" for w in best if w != 1))


# cProfile's functions of each stage (cumulative time; a stage's callees are not counted twice: see the subtraction)
_STAGES = {
    "sentence splitting": ("expand_document",),
    "tokenizer": ("encode_batch_flat",),
    "instance building": ("create_instances_from_document",),
    "masking (static)": ("_static_mask",),
    "writing shards + progress": ("_write", "save_progress"),
}


def profile_prepare(corpus: Path, tok_dir: str, tmp: Path) -> None:
    """Where a 1-worker ``prepare`` spends its time: cumulative seconds of each stage's entry function; the main
    loop's rest (reading and delimiting documents, the worker-side bookkeeping) is what is left."""
    import cProfile
    import pstats

    cfg = PrepareConfig(
        corpus=[str(corpus)], tokenizer=tok_dir, output=tmp / "prof", workers=1, progress=False, overwrite=True
    )
    prof = cProfile.Profile()
    t = time.perf_counter()
    prof.runcall(prepare, cfg)
    wall = time.perf_counter() - t
    stats = pstats.Stats(prof)
    cum = {}
    for (_, _, name), (_, _, _, ct, _) in stats.stats.items():
        cum[name] = cum.get(name, 0.0) + ct
    total = cum.get("prepare", wall)
    print(f"profile: prepare --workers 1 over {corpus.stat().st_size / 1e6:.0f} MB: {total:.1f} s under cProfile")
    stage_sum = 0.0
    for stage, names in _STAGES.items():
        sec = sum(cum.get(n, 0.0) for n in names)
        stage_sum += sec
        print(f"  {stage:28s} {sec:6.1f} s  {100 * sec / total:5.1f} %")
    rest = total - stage_sum
    print(f"  {'reading + the rest':28s} {rest:6.1f} s  {100 * rest / total:5.1f} %")
    stats.sort_stats("tottime").print_stats(12)


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
