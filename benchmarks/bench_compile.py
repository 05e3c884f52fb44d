"""`--compile` vs eager: pretraining steps per second of the quick-start model, side by side in one process.

One step = what ``litebert pretrain`` does per step: forward with MLM labels (~15 % of positions, a different number
each batch) and SOP labels through the pretraining objective, backward, LAMB step. The eager and the compiled model
start from the same weights and get the same batches; after a warm-up (compilation, and the first recompile that
makes the sequence dimension dynamic) they are timed in alternating rounds so that load from other processes affects
both alike. Prints steps/s (median of the rounds) and the ratio compile / eager.

Usage::

    python benchmarks/bench_compile.py                      # scripts/quickstart_model.json, batch 64 x 64 tokens
    python benchmarks/bench_compile.py --batch-size 64 --seq-len 64 --rounds 5 --steps 5 --threads 2
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
from pathlib import Path

import torch

from litebert import AlbertConfig
from litebert.optim import build_optimizer
from litebert.training import distributed as D
from litebert.training.pretrain import pretraining_model, pretraining_objective

REPO = Path(__file__).resolve().parents[1]


def make_batch(g: torch.Generator, batch: int, seq: int, vocab: int) -> dict[str, torch.Tensor]:
    """Random ids, every position real, ~15 % predicted (the count varies per batch), half the pairs swapped."""
    ids = torch.randint(5, vocab, (batch, seq), generator=g)
    predicted = torch.rand(batch, seq, generator=g) < 0.15
    labels = torch.where(predicted, ids, -100)
    ids = torch.where(predicted, torch.full_like(ids, 4), ids)
    token_type = (torch.arange(seq) >= seq // 2).long().expand(batch, seq)
    return {
        "input_ids": ids,
        "attention_mask": torch.ones_like(ids),
        "token_type_ids": token_type,
        "labels": labels,
        "sentence_order_label": torch.randint(0, 2, (batch,), generator=g),
    }


def step(model, optimizer, batch) -> None:
    out = pretraining_objective(model, batch)
    n = max(int((batch["labels"] != -100).sum()), 1)
    (out.sums["mlm_loss"] / n + out.sums["sop_loss"] / batch["input_ids"].shape[0]).backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default=str(REPO / "scripts" / "quickstart_model.json"))
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=5, help="steps per round and model")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    config = AlbertConfig.load(a.config)
    torch.manual_seed(0)
    eager = pretraining_model(config)
    compiled_raw = copy.deepcopy(eager)
    models = {"eager": eager, "compile": D.compile_model(compiled_raw)}
    optims = {
        "eager": build_optimizer(eager, "lamb", lr=1e-4),
        "compile": build_optimizer(compiled_raw, "lamb", lr=1e-4),
    }
    g = torch.Generator().manual_seed(1)
    batches = [make_batch(g, a.batch_size, a.seq_len, config.vocab_size) for _ in range(a.steps)]
    t = time.perf_counter()
    for _ in range(a.warmup):
        for name, model in models.items():
            for b in batches[:2]:
                step(model, optims[name], b)
    print(f"warm-up (incl. compilation) {time.perf_counter() - t:.0f} s")
    rates: dict[str, list[float]] = {name: [] for name in models}
    for _ in range(a.rounds):
        for name, model in models.items():
            t = time.perf_counter()
            for b in batches:
                step(model, optims[name], b)
            rates[name].append(a.steps / (time.perf_counter() - t))
    med = {name: statistics.median(r) for name, r in rates.items()}
    print(
        f"{config.num_hidden_layers} layers H{config.hidden_size}, batch {a.batch_size} x {a.seq_len}, "
        f"{a.threads} threads, torch {torch.__version__}"
    )
    for name, r in rates.items():
        print(f"{name:8s} {med[name]:.2f} steps/s (rounds: {', '.join(f'{x:.2f}' for x in r)})")
    print(f"compile / eager = {med['compile'] / med['eager']:.3f}")


if __name__ == "__main__":
    main()
