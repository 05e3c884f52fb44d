"""The training loop against a bare step on the same batches: steps/s of `litebert.training.train` (logging every
`--logging-steps`, one checkpoint at the end) and of a plain forward/backward/clip/LAMB/schedule loop over the same
DataLoader, in alternating rounds; prints loop / bare. Issue 25: on a GPU the loop should reach >= 95 % of the bare
step; on a CPU, where a host read costs next to nothing, the two differ by the loop's bookkeeping.

Usage: python benchmarks/bench_loop.py --data DIR (a `litebert prepare` directory) [--model-config albert-debug]
       [--batch-size 8] [--steps 200] [--rounds 3] [--device cpu|cuda] [--threads 1]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import tempfile
import time

import torch

from litebert.data import PretrainingDataset
from litebert.optim import build_optimizer, build_scheduler
from litebert.training import TrainingArgs, make_batch_factory, train
from litebert.training.loop import _to_device
from litebert.training.pretrain import (
    model_config_for_data,
    pretraining_count,
    pretraining_model,
    pretraining_objective,
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True)
    ap.add_argument("--model-config", default="albert-debug")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--logging-steps", type=int, default=50)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    dataset = PretrainingDataset(args.data)
    config = model_config_for_data(args.model_config, dataset.manifest, log=lambda *a: None)
    batches = make_batch_factory(
        dataset, args.batch_size, dataset.collator(masked_positions=True), seed=1, pin_memory=device.type == "cuda"
    )

    def setup():
        torch.manual_seed(0)
        model = pretraining_model(config).to(device)
        opt = build_optimizer(model, "lamb", lr=1e-3)
        return model, opt, build_scheduler(opt, 10, args.steps)

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    def bare() -> float:
        model, opt, sched = setup()
        model.train()
        sync()
        t0, done = time.perf_counter(), 0
        while done < args.steps:
            for batch in batches(0, 0):
                batch = _to_device(batch, device)
                out = pretraining_objective(model, batch)
                units = pretraining_count(batch)
                loss = out.sums["mlm_loss"] / units["mlm_loss"].clamp(min=1) + out.sums["sop_loss"] / units["sop_loss"]
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                opt.zero_grad(set_to_none=True)
                sched.step()
                done += 1
                if done == args.steps:
                    break
        sync()
        return args.steps / (time.perf_counter() - t0)

    def loop() -> float:
        model, opt, sched = setup()
        with tempfile.TemporaryDirectory() as out, contextlib.redirect_stdout(io.StringIO()):
            targs = TrainingArgs(out, max_steps=args.steps, logging_steps=args.logging_steps, progress_bar=False)
            sync()
            t0 = time.perf_counter()
            train(model, opt, sched, batches, pretraining_objective, pretraining_count, targs)
            sync()
            return args.steps / (time.perf_counter() - t0)

    rates: dict[str, list[float]] = {"bare": [], "loop": []}
    for _ in range(args.rounds):
        rates["bare"].append(bare())
        rates["loop"].append(loop())
    b, lo = max(rates["bare"]), max(rates["loop"])
    print(
        f"{args.model_config}, batch {args.batch_size}, {args.steps} steps, {device}, {args.threads} thread(s): "
        f"bare {b:.1f} steps/s, loop {lo:.1f} steps/s (best of {args.rounds} alternating rounds; the loop's figure "
        f"includes its start and final checkpoint); loop / bare {lo / b:.3f}"
    )


if __name__ == "__main__":
    main()
