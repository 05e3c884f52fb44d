#!/usr/bin/env python
"""Where does ``[CLS]`` attend? Per layer and head, over the first N sentences of a GLUE-style TSV file: the
entropy of the ``[CLS]`` query's attention as a fraction of its maximum (1.0 = uniform over the real tokens, so
``[CLS]`` is the mean of the tokens), the weight ``[CLS]`` puts on itself, and the largest single weight.

    python scripts/cls_attention.py runs/qs4/pretrain/final [MORE_DIRS...] [--random] [--data FILE] [-n 64]

``--random`` adds the first directory's architecture from random initialisation (seed 0), the baseline of
``compare_pretraining.py``. Used in docs/finetune.md to explain why the pretrained arm starts behind the
random one on SST-2.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import torch


def cls_attention(model, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> list[dict[str, list[float]]]:
    """Per layer: ``entropy`` (fraction of log(real tokens)), ``self`` and ``max`` weights of the ``[CLS]`` query,
    each a list over heads, averaged over the batch. ``input_ids``/``attention_mask``: (B, S) int64."""
    with torch.no_grad():
        out = model(input_ids=input_ids, attention_mask=attention_mask, output_attentions=True)
    n_tokens = attention_mask.sum(-1).float()  # (B,)
    layers = []
    for probs in out.attentions:  # (B, heads, S, S)
        p = probs[:, :, 0, :]  # the [CLS] query: (B, heads, S)
        entropy = -(p.clamp_min(1e-12).log() * p).sum(-1) / n_tokens.log()[:, None]
        layers.append(
            {
                "entropy": entropy.mean(0).tolist(),
                "self": p[:, :, 0].mean(0).tolist(),
                "max": p.max(-1).values.mean(0).tolist(),
            }
        )
    return layers


def main(argv: list[str] | None = None) -> int:
    from transformers import AutoTokenizer

    from litebert.checkpoint import load_config
    from litebert.modeling import AlbertModel
    from litebert.paths import data_dir

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("models", nargs="+", help="model directories (config.json, weights, tokenizer)")
    p.add_argument("--random", action="store_true", help="also the first model's architecture, random init")
    p.add_argument("--data", default=None, help="TSV with a 'sentence' column (default: SST-2 dev)")
    p.add_argument("-n", type=int, default=64, help="sentences (default 64)")
    p.add_argument("--max-seq-length", type=int, default=64)
    args = p.parse_args(argv)

    path = Path(args.data) if args.data else data_dir() / "glue/SST-2/dev.tsv"
    with open(path, encoding="utf-8-sig", newline="") as f:
        sentences = [r["sentence"] for r in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)][: args.n]
    tokenizer = AutoTokenizer.from_pretrained(args.models[0])
    enc = tokenizer(sentences, padding=True, truncation=True, max_length=args.max_seq_length, return_tensors="pt")
    runs = [(d, AlbertModel.from_pretrained(d)) for d in args.models]
    if args.random:
        torch.manual_seed(0)
        runs.append(("random init", AlbertModel(load_config(args.models[0]))))
    for name, model in runs:
        print(f"== {name} ({len(sentences)} sentences of {path.name}); per head:")
        for i, layer in enumerate(cls_attention(model.eval(), enc["input_ids"], enc["attention_mask"]), 1):
            print(
                f"  layer {i}: entropy/max {fmt(layer['entropy'])} | on itself {fmt(layer['self'])} | "
                f"largest {fmt(layer['max'])}"
            )
    return 0


def fmt(xs) -> str:
    return " ".join(f"{x:.2f}" for x in xs)


if __name__ == "__main__":
    raise SystemExit(main())
