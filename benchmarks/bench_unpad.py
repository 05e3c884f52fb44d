"""Training step with and without unpadding (modeling.set_unpad) on real shard batches: padding fraction, step
times in alternating rounds (so that load from other processes affects both alike), and the ratio.

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
    batches = shard_batches(args.data, args.batch, args.steps, dev)
    real = sum(int(b["attention_mask"].sum()) for b in batches)
    total = sum(b["attention_mask"].numel() for b in batches)
    steps = {}
    for unpad in (False, True):
        torch.manual_seed(0)
        model = AlbertForPreTraining(cfg).train()
        set_unpad(model, unpad)
        steps[unpad] = train_step(model, torch.optim.AdamW(model.parameters(), lr=1e-5), batches, dev)
        steps[unpad]()  # warm-up
    times: dict[bool, list[float]] = {False: [], True: []}
    for r in range(args.rounds):
        for unpad in (False, True) if r % 2 == 0 else (True, False):
            t = time.perf_counter()
            for _ in range(args.steps):
                steps[unpad]()
            times[unpad].append((time.perf_counter() - t) / args.steps)
    padded, unpadded = statistics.median(times[False]), statistics.median(times[True])
    S = batches[0]["input_ids"].shape[1]
    print(f"{args.model} ({cfg.num_hidden_layers} layers, H {cfg.hidden_size}), {args.batch} x <= {S} tokens, "
          f"{args.threads} thread(s): padding {100 * (1 - real / total):.1f} % of tokens")  # fmt: skip
    print(
        f"  padded   {padded * 1e3:8.1f} ms/step (median of {args.rounds} rounds; best {min(times[False]) * 1e3:.1f})"
    )
    print(f"  unpadded {unpadded * 1e3:8.1f} ms/step (best {min(times[True]) * 1e3:.1f})")
    print(f"  unpadded step / padded step: {unpadded / padded:.3f} (speed-up {padded / unpadded:.2f}x)")


if __name__ == "__main__":
    main()
