"""Training step with and without unpadding (modeling.set_unpad) on real shard batches, and on batches grouped by
length as ``pretrain --group-by-length`` makes them: padding fraction, step times in alternating rounds (so that
load from other processes affects all alike), real tokens/s and the ratios.

    PYTHONPATH=src python benchmarks/bench_unpad.py --data runs/gpu-data/train-512 \\
        --model scripts/quickstart_model.json --batch 16 --rounds 5 --steps 3

``--model``: a preset name or a config.json; ``--layers N`` overrides num_hidden_layers (e.g. albert-base with 1
layer, to keep a CPU run short). One step = forward (MLM + SOP loss), backward, AdamW step, fp32.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_gpu import shard_batches, train_step

from litebert import AlbertConfig, AlbertForPreTraining
from litebert.data import PretrainingDataset
from litebert.modeling import set_unpad

#: the step on random batches, on the same batches unpadded, and on batches grouped by length (--group-by-length)
VARIANTS = ("padded", "unpadded", "grouped")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, required=True, help="prepared shard directory (manifest.json)")
    ap.add_argument("--model", default="scripts/quickstart_model.json")
    ap.add_argument("--layers", type=int, default=None)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=3, help="steps per variant per round")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    vocab = PretrainingDataset(args.data).manifest["tokenizer"]["vocab_size"]
    over = {"vocab_size": vocab, **({"num_hidden_layers": args.layers} if args.layers else {})}
    cfg = AlbertConfig.load(args.model, **over)
    dev = torch.device("cpu")
    batches = {
        "padded": shard_batches(args.data, args.batch, args.steps, dev),
        "grouped": shard_batches(args.data, args.batch, args.steps, dev, grouped=True),
    }
    batches["unpadded"] = batches["padded"]
    steps = {}
    for name in VARIANTS:
        torch.manual_seed(0)
        model = AlbertForPreTraining(cfg).train()
        set_unpad(model, name == "unpadded")
        steps[name] = train_step(model, torch.optim.AdamW(model.parameters(), lr=1e-5), batches[name], dev)
        steps[name]()  # warm-up
    times: dict[str, list[float]] = {name: [] for name in VARIANTS}
    for r in range(args.rounds):
        for name in VARIANTS if r % 2 == 0 else VARIANTS[::-1]:
            t = time.perf_counter()
            for _ in range(args.steps):
                steps[name]()
            times[name].append((time.perf_counter() - t) / args.steps)
    S = max(b["input_ids"].shape[1] for b in batches["padded"])
    print(f"{args.model} ({cfg.num_hidden_layers} layers, H {cfg.hidden_size}), {args.batch} x <= {S} tokens, "
          f"{args.threads} thread(s), median of {args.rounds} rounds (best):")  # fmt: skip
    rate = {}
    for name in VARIANTS:
        real = sum(int(b["attention_mask"].sum()) for b in batches[name])
        total = sum(b["attention_mask"].numel() for b in batches[name])
        med = statistics.median(times[name])
        rate[name] = real / args.steps / med
        print(f"  {name:9s} {med * 1e3:8.1f} ms/step ({min(times[name]) * 1e3:.1f}), padding {100 * (1 - real / total):4.1f} %"
              f", {rate[name]:,.0f} real tokens/s")  # fmt: skip
    padded, unpadded = statistics.median(times["padded"]), statistics.median(times["unpadded"])
    print(f"  unpadded step / padded step: {unpadded / padded:.3f} (speed-up {padded / unpadded:.2f}x)")
    print(f"  real tokens/s, grouped / padded: {rate['grouped'] / rate['padded']:.2f}x")


if __name__ == "__main__":
    main()
