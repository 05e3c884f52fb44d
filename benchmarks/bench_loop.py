"""The training loop against a bare step, and the host's own work per step.

Default: steps/s of `litebert.training.train` (logging every `--logging-steps`, one checkpoint at the end) and of a
plain forward/backward/clip/LAMB/schedule loop over the same DataLoader, in alternating rounds; prints loop / bare.
Issue 25: on a GPU the loop should reach >= 95 % of the bare step; on a CPU, where a host read costs next to
nothing, the two differ by the loop's bookkeeping.

`--host`: the host's work per step with no model compute, in ms, what bounds a step replayed from a CUDA graph
(`--cuda-graphs`, whose GPU work for a small model is well under 1 ms):
  data_static   one micro-batch from the batch factory as `--static-shapes` makes it (DataLoader, gather, n-gram
                masking, collation to (B, max_seq_length), masked_positions padded to max_predictions_per_seq)
  data_dynamic  the same as the eager path makes it (padded to the batch's longest item)
  graphed_step  a whole step of `train` with `cuda_graphs=True` and a replay that runs nothing (the step is computed
                once, at the capture): the data, the copies into the static buffers, the learning rates, the loop's
                bookkeeping and metrics (median over the logging windows after the capture)
  loop          graphed_step - data_static: the loop's own part
Each figure is the median of `--rounds` alternating rounds.

`--against SRC`: the same figures with the litebert of another source tree (e.g. `git worktree add /tmp/old HEAD~3`
then `--against /tmp/old/src`), in alternating processes of this script; prints before (SRC), after (this tree)
and after / before.

Usage: python benchmarks/bench_loop.py --data DIR (a `litebert prepare` directory) [--model-config albert-debug]
       [--batch-size 8] [--steps 200] [--rounds 3] [--device cpu|cuda] [--threads 1] [--host] [--against SRC]
e.g. the quick start's phase a: --host --model-config scripts/quickstart_model.json --batch-size 64 --steps 400
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch

from litebert.data import PretrainingDataset
from litebert.optim import build_optimizer, build_param_groups, build_scheduler
from litebert.training import TrainingArgs, make_batch_factory, train
from litebert.training import cuda_graph as G
from litebert.training.loop import _to_device
from litebert.training.metrics import read_metrics
from litebert.training.pretrain import (
    model_config_for_data,
    pretraining_count,
    pretraining_model,
    pretraining_objective,
)


def loop_figures(args, dataset, config, device) -> dict[str, float]:
    """steps/s of the bare step and of the loop, best of ``args.rounds`` alternating rounds."""
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

    rates: dict[str, list[float]] = {"bare_steps_per_s": [], "loop_steps_per_s": []}
    for _ in range(args.rounds):
        rates["bare_steps_per_s"].append(bare())
        rates["loop_steps_per_s"].append(loop())
    return {name: max(values) for name, values in rates.items()}


class _NoReplay:
    """A CUDA graph's backend that replays nothing: the captured step runs once (its outputs stand for every
    replay's), so a graphed step costs only the host's work around the replay."""

    def __init__(self, device) -> None:
        self.fn = self.out = None

    def eager(self, fn):
        return fn()

    def capture(self, fn) -> None:
        self.fn = fn

    def replay(self):
        if self.out is None:
            self.out = self.fn()
        return self.out


def host_figures(args, dataset, config) -> dict[str, float]:
    """ms per step of the host's work (module docstring), medians of ``args.rounds`` alternating rounds."""
    per_epoch = len(dataset) // args.batch_size
    if per_epoch < 2:
        raise SystemExit(f"--data has {len(dataset)} sequences: fewer than 2 batches of {args.batch_size}")

    def data_ms(static: bool) -> float:
        collate = dataset.collator(static_shapes=static, masked_positions=True)
        batches = iter(make_batch_factory(dataset, args.batch_size, collate, seed=1)(0, 0))
        next(batches)  # the first batch starts the DataLoader's iterator
        n = min(args.steps, per_epoch - 1)
        t0 = time.perf_counter()
        for _ in range(n):
            next(batches)
        return (time.perf_counter() - t0) / n * 1e3

    def graphed_ms() -> float:
        torch.manual_seed(0)
        model = pretraining_model(config)
        # torch's fused AdamW, as a GPU gets it: a tensor learning rate, the non-finite skip on the device
        opt = torch.optim.AdamW(build_param_groups(model, 0.01), lr=2e-3, fused=True)
        collate = dataset.collator(static_shapes=True, masked_positions=True)
        batches = make_batch_factory(dataset, args.batch_size, collate, seed=1)
        real = G.CudaBackend
        G.CudaBackend = _NoReplay
        try:
            with tempfile.TemporaryDirectory() as out, contextlib.redirect_stdout(io.StringIO()):
                targs = TrainingArgs(
                    out, max_steps=args.steps, logging_steps=args.logging_steps, progress_bar=False, cuda_graphs=True
                )
                train(model, opt, build_scheduler(opt, 10, args.steps), batches, pretraining_objective,
                      pretraining_count, targs)  # fmt: skip
                records = [r for r in read_metrics(out) if r["split"] == "train"]
        finally:
            G.CudaBackend = real
        rates = [r["steps_per_second"] for r in records[1:]]  # the first window holds the eager steps, the capture
        if not rates:
            raise SystemExit("--host needs --steps of at least 2 x --logging-steps")
        return 1e3 / statistics.median(rates)

    runs: dict[str, list[float]] = {"data_static_ms": [], "data_dynamic_ms": [], "graphed_step_ms": []}
    for _ in range(args.rounds):
        runs["data_static_ms"].append(data_ms(True))
        runs["data_dynamic_ms"].append(data_ms(False))
        runs["graphed_step_ms"].append(graphed_ms())
    figures = {name: statistics.median(values) for name, values in runs.items()}
    figures["loop_ms"] = figures["graphed_step_ms"] - figures["data_static_ms"]
    return figures


def against(args) -> None:
    """This script with ``--json`` in alternating processes: the litebert of ``args.against``, then this tree's."""
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
    argv = [a for a in sys.argv[1:]]
    i = argv.index("--against")
    del argv[i : i + 2]
    argv += ["--json", "--rounds", "1"]
    runs: dict[str, list[dict]] = {"before": [], "after": []}
    for _ in range(args.rounds):
        for which, src in (("before", args.against), ("after", here)):
            env = dict(os.environ, PYTHONPATH=os.path.abspath(src))
            done = subprocess.run([sys.executable, __file__, *argv], env=env, capture_output=True, text=True)
            if done.returncode:
                raise SystemExit(f"{which} ({src}) failed:\n{done.stderr[-3000:]}")
            runs[which].append(json.loads(done.stdout.strip().splitlines()[-1]))
    print(f"{args.rounds} alternating rounds, medians; before = {args.against}, after = this tree")
    for name in runs["after"][0]:
        b = statistics.median(r[name] for r in runs["before"])
        a = statistics.median(r[name] for r in runs["after"])
        print(f"  {name:18s} before {b:9.3f}  after {a:9.3f}  after / before {a / b if b else float('nan'):.3f}")


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
    ap.add_argument("--host", action="store_true", help="the host's work per step, no model compute (ms)")
    ap.add_argument("--against", metavar="SRC", help="compare with the litebert of another source tree")
    ap.add_argument("--json", action="store_true", help="print the figures as one JSON line")
    args = ap.parse_args()
    if args.against:
        against(args)
        return
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    dataset = PretrainingDataset(args.data)
    config = model_config_for_data(args.model_config, dataset.manifest, log=lambda *a: None)
    if args.host:
        figures = host_figures(args, dataset, config)
    else:
        figures = loop_figures(args, dataset, config, device)
    if args.json:
        print(json.dumps(figures))
        return
    where = f"{args.model_config}, batch {args.batch_size}, {args.steps} steps, {args.threads} thread(s)"
    if args.host:
        print(
            f"{where}, host only (median of {args.rounds} alternating rounds): data --static-shapes "
            f"{figures['data_static_ms']:.3f} ms, data eager {figures['data_dynamic_ms']:.3f} ms, a --cuda-graphs step "
            f"{figures['graphed_step_ms']:.3f} ms (loop {figures['loop_ms']:.3f} ms) per step"
        )
    else:
        b, lo = figures["bare_steps_per_s"], figures["loop_steps_per_s"]
        print(
            f"{where}, {device}: bare {b:.1f} steps/s, loop {lo:.1f} steps/s (best of {args.rounds} alternating "
            f"rounds; the loop's figure includes its start and final checkpoint); loop / bare {lo / b:.3f}"
        )


if __name__ == "__main__":
    main()
