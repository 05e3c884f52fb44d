"""What can a pair classifier learn about *topic* from each sentence-task training set? (issue 15, docs/ablations.md)

A model-free probe of the data behind the inter-sentence study: describe every pair [CLS] A [SEP] B [SEP] by how
much A and B share content words (features below), fit a logistic regression of the sentence label on those features
using one training set (sop, sop-official or nsp shards from `litebert prepare`), and score it on the held-out SOP and
NSP shards. Topic overlap is the cue that solves NSP (a B from another document shares fewer words with A) and
carries no information about order, so it measures how much an NSP-solving cue each training set *rewards*.

    python scripts/sentence_task_probe.py --train sop=DIR sop-official=DIR nsp=DIR --eval sop=DIR nsp=DIR

Features of a pair (content words: token ids outside the 200 most frequent of the training set): Jaccard overlap of
the content-word sets of A and B, the overlap divided by the smaller set (and with --lengths the log lengths of A
and B, which also carry order: a swapped pair's A is the chunk's tail).
"""

from __future__ import annotations

import argparse
import math

import numpy as np
import torch

from litebert.ablate.run import wilson_interval
from litebert.data import META_FIELDS, PretrainingDataset

LEN_A = META_FIELDS.index("len_a")
LABEL = META_FIELDS.index("label")


def pairs(path: str, limit: int | None = None):
    ds = PretrainingDataset(path)
    n = len(ds) if limit is None else min(limit, len(ds))
    out = []
    for i in range(n):
        r = ds.raw(i)
        ids, la = r["input_ids"], int(r["meta"][LEN_A])
        out.append((ids[1 : la + 1], ids[la + 2 : -1], int(r["meta"][LABEL])))
    return out


def features(data, stop: set[int], with_lengths: bool) -> tuple[torch.Tensor, torch.Tensor]:
    rows, labels = [], []
    for a, b, y in data:
        sa, sb = set(a.tolist()) - stop, set(b.tolist()) - stop
        inter = len(sa & sb)
        union = max(len(sa | sb), 1)
        row = [inter / union, inter / max(min(len(sa), len(sb)), 1)]
        if with_lengths:
            row += [math.log1p(len(a)), math.log1p(len(b))]
        rows.append(row)
        labels.append(y)
    return torch.tensor(rows, dtype=torch.float64), torch.tensor(labels, dtype=torch.float64)


def fit(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    mu, sd = x.mean(0), x.std(0).clamp_min(1e-9)
    z = (x - mu) / sd
    w = torch.zeros(x.shape[1] + 1, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([w], max_iter=200, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = torch.nn.functional.binary_cross_entropy_with_logits(z @ w[:-1] + w[-1], y)
        loss.backward()
        return loss

    opt.step(closure)
    return w.detach(), mu, sd


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--train", nargs="+", required=True, metavar="NAME=DIR")
    ap.add_argument("--eval", nargs="+", required=True, metavar="TASK=DIR")
    ap.add_argument("--lengths", action="store_true", help="add the log lengths of A and B as features")
    ap.add_argument("--limit", type=int, default=None, help="pairs read per set (default all)")
    args = ap.parse_args()
    train = dict(s.split("=", 1) for s in args.train)
    evals = {k: pairs(v, args.limit) for k, v in (s.split("=", 1) for s in args.eval)}
    first = pairs(next(iter(train.values())), args.limit)
    counts = np.bincount(np.concatenate([np.concatenate([a, b]) for a, b, _ in first]))
    stop = set(np.argsort(counts)[::-1][:200].tolist())
    header = (
        "| trained on | "
        + " | ".join(f"{t} accuracy [95 %] (label 0 / label 1)" for t in evals)
        + " | weight of Jaccard |"
    )
    print(header)
    print("|" + "---|" * (len(evals) + 2))
    for name, path in train.items():
        x, y = features(pairs(path, args.limit), stop, args.lengths)
        w, mu, sd = fit(x, y)
        cells = []
        for data in evals.values():
            xe, ye = features(data, stop, args.lengths)
            pred = ((((xe - mu) / sd) @ w[:-1] + w[-1]) > 0).double()
            ok = pred == ye
            lo, hi = wilson_interval(float(ok.sum()), len(ok))
            acc0, acc1 = float(ok[ye == 0].double().mean()), float(ok[ye == 1].double().mean())
            cells.append(
                f"{100 * float(ok.double().mean()):.1f} [{100 * lo:.1f}, {100 * hi:.1f}] "
                f"({100 * acc0:.0f} / {100 * acc1:.0f})"
            )
        print(f"| {name} | " + " | ".join(cells) + f" | {float(w[0]):+.3f} |")


if __name__ == "__main__":
    main()
