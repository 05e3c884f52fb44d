"""Training-step benchmark: litebert vs transformers ALBERT, fp32 and bf16 autocast, against this processor's peaks.

Prints, in one run:

1. the processor: model name, torch's CPU capability (``torch.backends.cpu.get_cpu_capability()``), the bf16-related
   flags of ``/proc/cpuinfo`` (avx512_bf16, amx_bf16/amx_tile, avx512_vnni) and what ``--precision auto`` resolves to
   here (:func:`litebert.precision.resolve_precision`);
2. the fp32 and bf16 matmul peaks measured here (GFLOP/s: the fastest (n×n)@(n×n) product of ``--peak-repeats`` at
   the start and one more after every round of steps, so that peak and steps are both best-seen under the same load);
3. for each case (default: albert-unittest 32×128, the quick-start model ``scripts/quickstart_model.json`` at its
   training batch 64×64, albert-base 8×128): training steps per second of litebert and transformers, each in fp32 and
   in bf16 autocast, each as a fraction of the matching peak, and the speed-up litebert-auto / transformers-fp32.

One step = forward with MLM labels (~15 % of positions) and SOP labels, backward, AdamW step. Both libraries start
from identical weights (litebert's directory loaded by transformers), get identical batches, and the four variants
are timed round-robin (the order rotating every round) in one process, so that load from other processes affects all
alike; medians and bests are printed (the best is the more robust figure on a shared machine).

FLOPs of a step = 6 × applied parameters × the tokens they are applied to (forward 2, backward 4 per parameter and
token), where *applied* counts a shared layer once per use (ALBERT's one layer group counts L times) and counts each
part for the tokens it sees: the encoder (``embedding_hidden_mapping_in`` and the layer groups) for all B·S tokens,
the MLM head (dense, LayerNorm, the tied decoder E×V and its bias) for the P predicted tokens, the pooler and the SOP
classifier once per sequence. Embedding lookups and the attention score products (the S² terms) are not counted,
so the fractions are slight underestimates of the work done.

Usage::

    python benchmarks/bench_model.py                                    # the three cases, 1 thread
    python benchmarks/bench_model.py --cases albert-base:8:128 --steps 6 --threads 2

Targets (issue 13, on a CPU with native bf16): albert-base step with ``auto`` ≥ 3× transformers' fp32 step;
litebert fp32 ≥ 85 % of the fp32 matmul peak.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
QUICKSTART_MODEL = REPO / "scripts" / "quickstart_model.json"
VARIANTS = (("litebert", "fp32"), ("litebert", "bf16"), ("transformers", "fp32"), ("transformers", "bf16"))
CPUINFO_FLAGS = ("avx512f", "avx512_bf16", "amx_bf16", "amx_tile", "avx512_vnni", "avx_vnni")
# wall: elapsed time; cpu: this process's CPU time (time.process_time), i.e. the time its threads actually ran. On a
# shared machine the CPU-time figures show what the kernels achieve when they run; the wall ones include waiting.
CLOCKS = ("wall", "cpu")


def _now() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _since(t: tuple[float, float]) -> dict[str, float]:
    return {"wall": time.perf_counter() - t[0], "cpu": time.process_time() - t[1]}


def processor_report() -> list[str]:
    """Lines describing the processor: model, torch's capability, bf16-related /proc/cpuinfo flags, auto's choice."""
    from litebert.precision import resolve_precision

    name, flags = "unknown", set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name") and name == "unknown":
                name = line.split(":", 1)[1].strip()
            elif line.startswith("flags") and not flags:
                flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    shown = " ".join(f"{f}={'yes' if f in flags else 'no'}" for f in CPUINFO_FLAGS) if flags else "(no /proc/cpuinfo)"
    choice = resolve_precision("auto", "cpu")
    return [
        f"processor: {name}; {os.cpu_count()} logical CPUs visible",
        f"torch cpu capability: {torch.backends.cpu.get_cpu_capability()}; /proc/cpuinfo: {shown}",
        f"--precision auto here: {choice.precision} ({choice.reason})",
    ]


class MatmulPeak:
    """The fastest (n×n) @ (n×n) matmul seen, per dtype, in GFLOP/s. :meth:`sample` is called between the timed
    steps too, so that the peak and the steps are both "best seen under the same load" on a shared machine."""

    def __init__(self, n: int = 2048) -> None:
        self.n = n
        self.mats = {
            name: (torch.randn(n, n).to(dt), torch.randn(n, n).to(dt), torch.empty(n, n, dtype=dt))
            for name, dt in (("fp32", torch.float32), ("bf16", torch.bfloat16))
        }
        self.best = {(name, clock): float("inf") for name in self.mats for clock in CLOCKS}
        self.samples = 0

    def sample(self, repeats: int = 1) -> None:
        for _ in range(repeats):
            for name, (a, b, c) in self.mats.items():
                t = _now()
                torch.mm(a, b, out=c)
                for clock, dt in _since(t).items():
                    self.best[(name, clock)] = min(self.best[(name, clock)], dt)
            self.samples += 1

    def gflops(self, name: str, clock: str = "wall") -> float:
        return 2 * self.n**3 / self.best[(name, clock)] / 1e9


def applied_parameters(model) -> dict[str, int]:
    """Parameters applied per token (encoder), per predicted token (MLM head, decoder included once though tied) and
    per sequence (pooler + SOP), a shared layer group counted once per use (L / G times)."""
    cfg = model.config
    uses = cfg.num_hidden_layers // cfg.num_hidden_groups
    enc = model.albert.encoder
    per_token = sum(p.numel() for p in enc.albert_layer_groups.parameters()) * uses
    if getattr(enc, "embedding_hidden_mapping_in", None) is not None:
        per_token += sum(p.numel() for p in enc.embedding_hidden_mapping_in.parameters())
    head = model.predictions
    per_predicted = (
        sum(p.numel() for n, p in head.named_parameters() if not n.startswith("decoder")) + head.decoder.weight.numel()
    )
    pooler = model.albert.pooler
    per_sequence = (sum(p.numel() for p in pooler.parameters()) if pooler is not None else 0) + sum(
        p.numel() for p in model.sop_classifier.parameters()
    )
    return {"token": per_token, "predicted": per_predicted, "sequence": per_sequence}


def step_flops(applied: dict[str, int], B: int, S: int, P: int) -> float:
    """6 × applied parameters × the tokens each is applied to (see the module docstring)."""
    return 6.0 * (applied["token"] * B * S + applied["predicted"] * P + applied["sequence"] * B)


def make_batch(vocab: int, B: int, S: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, vocab, (B, S), generator=g)
    ids[:, 0] = 2
    tt = torch.zeros(B, S, dtype=torch.long)
    tt[:, S // 2 :] = 1
    picked = torch.rand(B, S, generator=g) < 0.15
    picked[:, 0] = False
    labels = torch.where(picked, ids, torch.full_like(ids, -100))
    ids = torch.where(picked, torch.full_like(ids, 4), ids)  # [MASK]
    return {
        "input_ids": ids,
        "attention_mask": torch.ones(B, S, dtype=torch.long),
        "token_type_ids": tt,
        "labels": labels,
        "sentence_order_label": torch.randint(0, 2, (B,), generator=g),
    }


def load_config(name: str):
    from litebert import AlbertConfig

    if name == "quickstart":
        return AlbertConfig.from_json_file(QUICKSTART_MODEL)
    return AlbertConfig.load(name)


def bench_case(name: str, B: int, S: int, steps: int, warmup: int, peak: MatmulPeak) -> dict:
    import transformers

    from litebert import AlbertForPreTraining

    torch.manual_seed(0)
    config = load_config(name)
    ours = AlbertForPreTraining(config).train()
    with tempfile.TemporaryDirectory() as d:
        ours.save_pretrained(d)
        theirs = transformers.AlbertForPreTraining.from_pretrained(d).train()
    models = {"litebert": ours, "transformers": theirs}
    opts = {k: torch.optim.AdamW(m.parameters(), lr=1e-5) for k, m in models.items()}
    batch = make_batch(config.vocab_size, B, S)

    def step(lib: str, precision: str) -> dict[str, float]:
        model, opt = models[lib], opts[lib]
        ctx = torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16")
        t = _now()
        with ctx:
            loss = model(**batch).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return _since(t)

    times: dict[tuple[str, str, str], list[float]] = {(*v, c): [] for v in VARIANTS for c in CLOCKS}
    for i in range(warmup + steps):
        order = VARIANTS[i % 4 :] + VARIANTS[: i % 4]  # rotate who goes first
        for v in order:
            dt = step(*v)
            if i >= warmup:
                for clock in CLOCKS:
                    times[(*v, clock)].append(dt[clock])
        peak.sample()
    P = int((batch["labels"] != -100).sum())
    applied = applied_parameters(ours)
    return {
        "name": name,
        "B": B,
        "S": S,
        "P": P,
        "applied": applied,
        "flops": step_flops(applied, B, S, P),
        "median": {v: statistics.median(t) for v, t in times.items()},
        "best": {v: min(t) for v, t in times.items()},
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--cases",
        nargs="+",
        default=["albert-unittest:32:128", "quickstart:64:64", "albert-base:8:128"],
        help="NAME:batch:seq_len; NAME is a preset, a config.json, or 'quickstart' (scripts/quickstart_model.json)",
    )
    parser.add_argument("--steps", type=int, default=4, help="timed steps per variant and case")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="intra-op threads (1 suits a shared machine; the peaks use the same number)",
    )
    parser.add_argument("--peak-size", type=int, default=2048)
    parser.add_argument("--peak-repeats", type=int, default=10)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    logging.getLogger("transformers").setLevel(logging.ERROR)
    import transformers

    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    t0 = time.perf_counter()
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, threads {torch.get_num_threads()}")
    for line in processor_report():
        print(line)
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} (other processes skew timings)")
    meter = MatmulPeak(args.peak_size)
    meter.sample(args.peak_repeats)
    print(f"matmul peak at start ({args.peak_size}^3, best of {args.peak_repeats}): {_peaks(meter)}")
    print(
        "FLOPs/step = 6 x applied parameters x tokens (a shared layer counted once per use; encoder x B*S tokens, "
        "MLM head x P predicted, pooler+SOP x B); bf16 = torch.autocast(cpu, bfloat16), weights fp32"
    )
    print(
        "each figure twice: by wall time and by this process's CPU time (the time its thread actually ran; on a "
        "shared machine the CPU-time figures show the kernels, the wall ones include waiting for a core)"
    )
    from litebert.precision import resolve_precision

    auto = resolve_precision("auto", "cpu").precision
    for case in args.cases:
        name, B, S = case.rsplit(":", 2)
        r = bench_case(name, int(B), int(S), args.steps, args.warmup, meter)
        a = r["applied"]
        print(
            f"\n{r['name']} B={r['B']} S={r['S']} P={r['P']}: applied parameters {a['token']:,}/token, "
            f"{a['predicted']:,}/predicted token, {a['sequence']:,}/sequence; {r['flops'] / 1e9:.1f} GFLOP/step "
            f"({args.steps} timed steps per variant, round-robin)"
        )
        for lib, prec in VARIANTS:
            parts = []
            for clock in CLOCKS:
                med, best = r["median"][(lib, prec, clock)], r["best"][(lib, prec, clock)]
                frac = r["flops"] / best / 1e9 / meter.gflops(prec, clock)
                parts.append(
                    f"{clock}: {1 / med:6.2f} steps/s median, best {best * 1e3:7.0f} ms = "
                    f"{100 * frac:5.1f} % of {prec} peak"
                )
            print(f"  {lib:>12} {prec}: " + " | ".join(parts))
        for clock in CLOCKS:
            med = {v: r["median"][(*v, clock)] for v in VARIANTS}
            best = {v: r["best"][(*v, clock)] for v in VARIANTS}
            tf32, lb_auto = ("transformers", "fp32"), ("litebert", auto)
            print(
                f"  {clock:>4}: litebert-auto ({auto}) / transformers-fp32 = {med[tf32] / med[lb_auto]:.2f}x median "
                f"({best[tf32] / best[lb_auto]:.2f}x best); litebert fp32 / transformers fp32 = "
                f"{med[tf32] / med[('litebert', 'fp32')]:.2f}x; litebert bf16 / fp32 = "
                f"{med[('litebert', 'fp32')] / med[('litebert', 'bf16')]:.2f}x"
            )
    print(
        f"\nmatmul peak, best of {meter.samples} samples taken at the start and between the steps (each case's "
        f"fractions use the peaks as they stood after that case): {_peaks(meter)}"
    )
    print(
        f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {time.perf_counter() - t0:.0f} s in all"
    )


def _peaks(meter: MatmulPeak) -> str:
    return "; ".join(
        f"{clock}: fp32 {meter.gflops('fp32', clock):.1f} GFLOP/s, bf16 {meter.gflops('bf16', clock):.1f} "
        f"GFLOP/s ({meter.gflops('bf16', clock) / meter.gflops('fp32', clock):.2f}x)"
        for clock in CLOCKS
    )


if __name__ == "__main__":
    main()
