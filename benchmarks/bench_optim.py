"""Time one LAMB step on a preset's parameters: multi-tensor (torch._foreach_*) vs one tensor at a time, and
torch's AdamW (foreach) for scale. Usage: python benchmarks/bench_optim.py [--preset albert-base] [--steps 20]"""

from __future__ import annotations

import argparse
import time

import torch

from litebert import AlbertConfig, AlbertForPreTraining
from litebert.optim import Lamb, build_optimizer, build_param_groups


def time_steps(opt, params, steps: int) -> float:
    for p in params:
        p.grad = torch.randn_like(p) * 1e-3
    opt.step()  # allocate state
    t0 = time.perf_counter()
    for _ in range(steps):
        opt.step()
    return (time.perf_counter() - t0) / steps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--preset", default="albert-base")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    model = AlbertForPreTraining(AlbertConfig.from_preset(args.preset))
    params = [p for p in model.parameters()]
    n = sum(p.numel() for p in params)
    results = {}
    for name, make in (
        ("lamb foreach", lambda: Lamb(build_param_groups(model, 0.01), lr=1e-3, foreach=True)),
        ("lamb per-tensor", lambda: Lamb(build_param_groups(model, 0.01), lr=1e-3, foreach=False)),
        ("torch AdamW", lambda: build_optimizer(model, "adamw", lr=1e-3)),
    ):
        results[name] = time_steps(make(), params, args.steps)
    print(f"{args.preset}: {len(params)} tensors, {n:,} parameters, {torch.get_num_threads()} threads")
    for name, sec in results.items():
        print(f"  {name:16s} {sec * 1e3:8.2f} ms/step  ({n / sec / 1e6:7.1f} M params/s)")
    print(f"  foreach speed-up over per-tensor LAMB: {results['lamb per-tensor'] / results['lamb foreach']:.2f}x")


if __name__ == "__main__":
    main()
