"""Every figure of the GPU issue (issue 25) in one call: prints each with its target and ratio, writes them to JSON.

Sections (``--sections``, default all, in this order; each one that fails prints its error and the run goes on):

- ``mfu`` (d): bf16 matmul peak (best 8192³ product); bare training step (forward, backward, fused AdamW, bf16
  autocast) of albert-base 64×512 eager and compiled and albert-large 32×512, FLOPs as bench_model.step_flops plus
  the attention products (12·B·S²·H per layer use), MFU against the measured peak; on real shard batches (with
  their padding), real tokens/s padded and unpadded (modeling.set_unpad) against the bare step on an unpadded
  batch (target ≥ 90 %); what ``torch.compile`` costs and gains on a 60-step and a 6,000-step run (from the
  measured compile time and step times).
- ``loop`` (a): ``litebert pretrain`` (LAMB, bf16, batch 64×512, 60 steps) against the bare step with LAMB on the
  same shard batches, real tokens counted the same way, eager, ``--cuda-graphs`` (on static batches) and compiled
  (target ≥ 95 %); per non-logging step,
  from two runs of different length that log only at their end: device syncs on CUDA (``torch.cuda.
  set_sync_debug_mode("warn")``'s warnings, target 0) and Python-level reads (``.item()``, ``float()``, ``int()``,
  ``bool()``, ``.tolist()``, ``.numpy()`` on tensors, by place; target 0 on a GPU).
- ``optim`` (b): LAMB step against torch's fused AdamW on albert-base's parameters (target ≤ 1.5×), eager,
  replayed from a CUDA graph (as ``--cuda-graphs`` runs it) and compiled (when the budget allows); the ATen
  operations and CUDA kernels of each eager step (``bench_optim.ops_per_step``).
- ``predict`` (e): an albert-base-sized classifier (random weights, the shard tokenizer) on SST-2 dev repeated to
  ~90k rows: ``litebert predict`` rows/s at its own batch size and at 32, transformers' text-classification
  pipeline at batch 32 (targets ≥ 10× the pipeline, ≥ 20,000 rows/s), the same rows through a 1-layer, width-16
  classifier (the host's part alone: what bounds the rows/s when the model costs nothing), and the whole
  ``python -m litebert predict`` process.
- ``torchrun`` (f): ``torchrun --nproc_per_node 2`` pretraining on one GPU: one clear error, nothing written.
- ``mainjob`` (c): ``scripts/quickstart.sh`` end to end (target ≤ 60 s; ``QS_*`` variables in the environment
  reach it). On a GPU with ``QS_CUDA_GRAPHS=1`` at the full 6,000 steps (stopped after ``--main-job-timeout``
  seconds), with each stage's seconds and each phase's ms a step; ``--main-job-eager`` (and on the CPU) a reduced
  run (QS_STEPS=600: 540 + 60 steps, every other stage as the full job) whose full-length time is extrapolated
  from its measured phase times; ``--full-main-job`` runs it at the real 6,000 steps.

Inputs are built from public data with no network (``--build-data DIR``, the inputs of both modes): for the GPU run
the quick start's tokenizer (SentencePiece, 8,000 ids, WikiText-2 train), 512-token SOP shards of WikiText-2 train,
the WikiText-2 files for the main job and SST-2 dev; for ``--smoke``, the same from WikiText-2 valid (2,000 ids,
128-token shards) in ``DIR/smoke/``; about 30 MB in all::

    PYTHONPATH=src python benchmarks/bench_gpu.py --build-data runs/gpu-data            # here, once
    PYTHONPATH=src python benchmarks/bench_gpu.py --data runs/gpu-data --out gpu.json    # on the GPU, < 6 min
    PYTHONPATH=src python benchmarks/bench_gpu.py --data runs/gpu-data --device cpu --smoke --out smoke.json

``--smoke`` runs every section at toy sizes (it builds ``DATA/smoke/`` from ``--source`` when that is missing);
a GPU run whose inputs are missing stops at once, naming them. A global ``--budget`` (seconds) skips what would not
fit and says so.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import importlib.util
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
DEFAULT_SOURCE = Path(os.environ.get("LITEBERT_DATA_DIR", REPO.parent / "shared" / "data"))
HOST_READS = ("item", "tolist", "numpy", "__float__", "__int__", "__bool__")


# ------------------------------------------------------------------------------------------------ sizes
def sizes(smoke: bool) -> dict:
    """The cases of a GPU run, or their toy counterparts for ``--smoke``."""
    if smoke:
        return dict(
            base=("albert-unittest", 4, 128), large=("albert-unittest", 2, 128), seq=128, steps=3, warmup=1,
            loop_steps=6, loop_log=2, reads_steps=(2, 4), predict_rows=1200, pipeline_rows=200, batch32_rows=600, mainjob_steps=10,
            peak_n=512, optim_preset="albert-unittest", shard="train-128", vocab=2000,
        )  # fmt: skip
    return dict(
        base=("albert-base", 64, 512), large=("albert-large", 32, 512), seq=512, steps=10, warmup=3,
        loop_steps=60, loop_log=20, reads_steps=(4, 8), predict_rows=90_000, pipeline_rows=5_000, batch32_rows=10_000,
        mainjob_steps=600, peak_n=8192, optim_preset="albert-base", shard="train-512", vocab=8000,
    )  # fmt: skip


# ------------------------------------------------------------------------------------------------ inputs
def mode_dir(data: Path, smoke: bool) -> Path:
    """Where a mode's inputs lie under ``--data``: the GPU run's in it, the smoke run's in its ``smoke/``."""
    return data / "smoke" if smoke else data


def missing_inputs(data: Path, smoke: bool) -> list[Path]:
    """The files a mode's sections read (tokenizer, shards, SST-2 dev, WikiText-2) that ``data`` lacks."""
    d = mode_dir(data, smoke)
    need = [d / "tokenizer" / "tokenizer_config.json", d / sizes(smoke)["shard"] / "manifest.json",
            d / "sst2" / "dev.tsv", d / "wikitext-2" / "wiki.train.tokens", d / "wikitext-2" / "wiki.valid.tokens"]  # fmt: skip
    return [p for p in need if not p.exists()]


def build_data(data: Path, source: Path, smoke: bool) -> Path:
    """One mode's inputs under ``mode_dir(data, smoke)`` (each skipped where present): tokenizer, shards,
    WikiText-2 and SST-2 dev. Smoke: all from the WikiText-2 valid file, 128 tokens. Raises SystemExit naming the
    missing source file."""
    from litebert.data.prepare import PrepareConfig, prepare
    from litebert.tokenization import train_tokenizer

    sz = sizes(smoke)
    wt, sst = source / "wikitext-2", source / "glue" / "SST-2" / "dev.tsv"
    for f in (wt / "wiki.train.tokens", wt / "wiki.valid.tokens", sst):
        if not f.is_file():
            raise SystemExit(f"error: {f} is missing: give --source DIR holding wikitext-2/ and glue/SST-2/dev.tsv")
    dest = mode_dir(data, smoke)
    (dest / "wikitext-2").mkdir(parents=True, exist_ok=True)
    (dest / "sst2").mkdir(exist_ok=True)
    for name in ("wiki.train.tokens", "wiki.valid.tokens"):
        if not (dest / "wikitext-2" / name).exists():
            shutil.copy(wt / ("wiki.valid.tokens" if smoke else name), dest / "wikitext-2" / name)
    if not (dest / "sst2" / "dev.tsv").exists():
        shutil.copy(sst, dest / "sst2" / "dev.tsv")
    if not (dest / "tokenizer" / "tokenizer_config.json").exists():
        train_tokenizer([dest / "wikitext-2" / "wiki.train.tokens"], "sentencepiece", sz["vocab"], dest / "tokenizer")
    seq = sz["seq"]
    shard = dest / sz["shard"]
    if not (shard / "manifest.json").exists():
        prepare(
            PrepareConfig(
                corpus=[str(dest / "wikitext-2" / "wiki.train.tokens")], tokenizer=str(dest / "tokenizer"),
                output=str(shard), max_seq_length=seq, max_predictions_per_seq=seq * 20 // 128,
                masked_lm_prob=0.15, seed=12345,
            )
        )  # fmt: skip
    return dest


# ------------------------------------------------------------------------------------------------ timing
class Clock:
    """Wall time of a callable, synchronised on cuda (CUDA events) and plain on cpu."""

    def __init__(self, device: torch.device):
        self.device = device

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize()

    def steps(self, step, n: int, warmup: int) -> dict:
        """median/best seconds of ``step()`` over n calls after ``warmup`` calls; ``first_s`` the warm-up time."""
        t0 = time.perf_counter()
        for _ in range(warmup):
            step()
        self.sync()
        first = time.perf_counter() - t0
        ts = []
        for _ in range(n):
            t = time.perf_counter()
            step()
            self.sync()
            ts.append(time.perf_counter() - t)
        return {"median_s": statistics.median(ts), "best_s": min(ts), "first_s": first}


def peak_tflops(device: torch.device, n: int) -> float:
    """Best (n×n)@(n×n) product in bf16 on cuda (fp32 on cpu), TFLOP/s."""
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    a, b = torch.randn(n, n, device=device, dtype=dtype), torch.randn(n, n, device=device, dtype=dtype)
    clock = Clock(device)
    r = clock.steps(lambda: a @ b, 10, 3)
    return 2 * n**3 / r["best_s"] / 1e12


def autocast(device: torch.device):
    """bf16 autocast on cuda (the issue's setting); fp32 on cpu (no native bf16 assumed in the smoke run)."""
    if device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


# ------------------------------------------------------------------------------------------------ models, batches
def pretraining_model(preset: str, vocab: int, device: torch.device):
    from litebert import AlbertConfig, AlbertForPreTraining

    torch.manual_seed(0)
    return AlbertForPreTraining(AlbertConfig.from_preset(preset, vocab_size=vocab)).to(device).train()


def step_flops(model, B: int, S: int, P: int) -> float:
    """bench_model.step_flops (6 × applied parameters × tokens) + the attention score/context products."""
    from bench_model import applied_parameters
    from bench_model import step_flops as linear_flops

    cfg = model.config
    applied = applied_parameters(model)
    return linear_flops(applied, B, S, P) + 12.0 * B * S * S * cfg.hidden_size * cfg.num_hidden_layers


def shard_batches(
    shard: Path, B: int, n: int, device: torch.device, static: bool = False, grouped: bool = False
) -> list[dict]:
    """n batches of B sequences from a prepared shard, shuffled (seed 0), padded to the longest item as
    ``pretrain`` pads them (``static``: to max_seq_length, with masked_positions, as ``--static-shapes`` and
    ``--cuda-graphs`` do; ``grouped``: the order regrouped as ``--group-by-length`` does), on ``device``."""
    from litebert.data import PretrainingDataset
    from litebert.training.loop import group_by_length

    ds = PretrainingDataset(shard)
    g = torch.Generator().manual_seed(0)
    collate = ds.collator(static_shapes=True) if static else ds.collator()
    if grouped:
        order = group_by_length(torch.randperm(len(ds), generator=g).tolist(), ds.lengths, B, seed=0)
        chunks = [order[i : i + B] for i in range(0, len(order) - B + 1, B)]
        loader = torch.utils.data.DataLoader(ds, batch_sampler=chunks, collate_fn=collate)
    else:
        loader = torch.utils.data.DataLoader(ds, batch_size=B, shuffle=True, generator=g, collate_fn=collate)
    out = []
    for batch in loader:
        out.append({k: v.to(device) for k, v in batch.items()})
        if len(out) == n:
            break
    return out


def synthetic_batch(vocab: int, B: int, S: int, device: torch.device) -> dict:
    from bench_model import make_batch

    return {k: v.to(device) for k, v in make_batch(vocab, B, S).items()}


def train_step(model, opt, batches: list[dict], device: torch.device):
    """A closure: forward (loss = MLM + SOP), backward, optimizer step, on the next of ``batches`` each call."""
    it = [0]

    def step():
        batch = batches[it[0] % len(batches)]
        it[0] += 1
        with autocast(device):
            loss = model(**batch).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def fused_adamw(model, device: torch.device):
    return torch.optim.AdamW(model.parameters(), lr=1e-5, fused=device.type == "cuda")


def tokenizer_vocab(data: Path) -> int:
    from litebert.tokenization import load_tokenizer

    return load_tokenizer(data / "tokenizer").vocab_size


# ------------------------------------------------------------------------------------------------ sections
def section_mfu(ctx: dict) -> dict:
    from litebert.modeling import set_unpad
    from litebert.training.distributed import compile_model

    dev, sz, res = ctx["device"], ctx["sizes"], {}
    clock = Clock(dev)
    peak = peak_tflops(dev, sz["peak_n"])
    res["peak_tflops"] = peak
    report(f"matmul peak ({'bf16' if dev.type == 'cuda' else 'fp32'} {sz['peak_n']}³): {peak:.1f} TFLOP/s")
    vocab = tokenizer_vocab(ctx["data"])
    for key, (preset, B, S), compiled in (
        ("base", sz["base"], False),
        ("base", sz["base"], True),
        ("large", sz["large"], False),
    ):
        name = f"{key}{'-compile' if compiled else ''}"
        model = pretraining_model(preset, vocab, dev)
        batch = synthetic_batch(vocab, B, S, dev)
        P = int((batch["labels"] != -100).sum())
        flops = step_flops(model, B, S, P)
        fwd = compile_model(model) if compiled else model
        r = clock.steps(train_step(fwd, fused_adamw(model, dev), [batch], dev), sz["steps"], sz["warmup"])
        r.update(preset=preset, B=B, S=S, tokens_per_s=B * S / r["median_s"], mfu=flops / r["median_s"] / 1e12 / peak)
        target = {"base": 0.45, "base-compile": 0.55, "large": 0.55}[name]
        report(
            f"bare step {preset} {B}x{S} {name}: {r['median_s'] * 1e3:.1f} ms, {r['tokens_per_s']:,.0f} tok/s, "
            f"MFU {100 * r['mfu']:.1f} % (target >= {100 * target:.0f} %)",
            ok=r["mfu"] >= target,
        )
        res[name] = r
        del model, fwd
        empty_cache(dev)
    base = res["base"]
    # compile: cost and gain on a 60- and a 6,000-step run, from the measured parts
    if "base-compile" in res:
        c, e = res["base-compile"], res["base"]
        compile_s = max(c["first_s"] - sz["warmup"] * c["median_s"], 0.0)
        for n in (60, 6000):
            eager_s, comp_s = n * e["median_s"], compile_s + n * c["median_s"]
            res[f"compile_{n}_steps"] = {"eager_s": eager_s, "compiled_s": comp_s, "speedup": eager_s / comp_s}
            report(f"--compile on a {n}-step run: eager {eager_s:.1f} s, compiled {comp_s:.1f} s "
                   f"(compile ~{compile_s:.0f} s): {eager_s / comp_s:.2f}x")  # fmt: skip
    # real shard batches: padding, with and without unpadding, against the unpadded synthetic bare step
    preset, B, S = sz["base"]
    batches = shard_batches(ctx["data"] / sz["shard"], B, max(sz["steps"], 4), dev)
    real = sum(int(b["attention_mask"].sum()) for b in batches)
    total = sum(b["attention_mask"].numel() for b in batches)
    res["padding_fraction"] = 1 - real / total
    report(f"shard batches {B}x{S}: padding {100 * res['padding_fraction']:.1f} % of tokens")
    # and batches grouped by length (--group-by-length): little padding left, no gathers
    grouped = shard_batches(ctx["data"] / sz["shard"], B, max(sz["steps"], 4), dev, grouped=True)
    real_grouped = sum(int(b["attention_mask"].sum()) for b in grouped)
    res["padding_fraction_grouped"] = 1 - real_grouped / sum(b["attention_mask"].numel() for b in grouped)
    report(f"the same, grouped by length: padding {100 * res['padding_fraction_grouped']:.1f} % of tokens")
    for compiled, unpads in ((False, (False, True, "grouped")), (True, (True,))):
        for unpad in unpads:
            tag = {False: "", True: "-unpad", "grouped": "-grouped"}[unpad]
            name = f"shards{tag}{'-compile' if compiled else ''}"
            these, these_real = (grouped, real_grouped) if unpad == "grouped" else (batches, real)
            model = pretraining_model(preset, vocab, dev)
            set_unpad(model, unpad is True)
            fwd = compile_model(model) if compiled else model
            # warm-up over every batch: each new length S (batches are padded to their longest) may recompile
            warm = len(these) if compiled else sz["warmup"]
            r = clock.steps(train_step(fwd, fused_adamw(model, dev), these, dev), len(these), warm)
            r["real_tokens_per_s"] = these_real / len(these) / r["median_s"]
            ref = res["base-compile" if compiled else "base"]["tokens_per_s"]
            r["vs_bare_step"] = r["real_tokens_per_s"] / ref
            report(f"{name}: {r['real_tokens_per_s']:,.0f} real tok/s = {100 * r['vs_bare_step']:.1f} % of the "
                   f"bare step's tok/s (target >= 90 %)", ok=r["vs_bare_step"] >= 0.9)  # fmt: skip
            res[name] = r
            del model, fwd
            empty_cache(dev)
        if not ctx["time_left"](120):
            res["skipped"] = "compiled shard variants: budget"
            break
    if "shards-unpad" in res:
        res["unpad_speedup_eager"] = res["shards"]["median_s"] / res["shards-unpad"]["median_s"]
        report(f"unpadding on shard batches (eager): {res['unpad_speedup_eager']:.2f}x the padded step")
    res["base_tokens_per_s"] = base["tokens_per_s"]
    return res


def _pretrain_cfg(ctx: dict, out: Path, steps: int, log: int, B: int, optimizer: str = "lamb", **kw):
    from litebert.training.pretrain import PretrainConfig

    preset = ctx["sizes"]["base"][0]
    return PretrainConfig(
        data=str(ctx["data"] / ctx["sizes"]["shard"]), output=str(out), model_config=preset, optimizer=optimizer,
        max_steps=steps, batch_size=B, logging_steps=log, save_steps=steps, learning_rate=1e-4, seed=0,
        precision="bf16" if ctx["device"].type == "cuda" else "fp32", device=ctx["device"].type, progress_bar=False,
        **kw,
    )  # fmt: skip


def _train_tokens_per_s(out: Path) -> float:
    """Mean tokens_per_second of ``out``/metrics.jsonl's train records after the first (warm-up, compile)."""
    recs = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if line.strip()]
    tps = [r["tokens_per_second"] for r in recs if r.get("tokens_per_second")]
    tps = tps[1:] or tps
    return statistics.mean(tps)


def section_loop(ctx: dict) -> dict:
    from litebert.modeling import set_unpad
    from litebert.optim import build_optimizer
    from litebert.training.distributed import compile_model
    from litebert.training.pretrain import pretrain

    dev, sz, res = ctx["device"], ctx["sizes"], {}
    preset, B, S = sz["base"]
    vocab = tokenizer_vocab(ctx["data"])
    batches = shard_batches(ctx["data"] / sz["shard"], B, sz["steps"], dev)
    real = sum(int(b["attention_mask"].sum()) for b in batches) / len(batches)
    clock = Clock(dev)
    # --cuda-graphs (one batch shape: padded to S) against the eager bare step on the same static batches
    tags = ("eager", "graphs", "compile") if dev.type == "cuda" else ("eager", "compile")
    for tag in tags:
        compiled, graphs = tag == "compile", tag == "graphs"
        cfg = _pretrain_cfg(ctx, ctx["work"] / f"loop-{tag}", sz["loop_steps"], sz["loop_log"], B, compile=compiled,
                            cuda_graphs=graphs)  # fmt: skip
        unpad = bool(getattr(cfg, "unpad_on", False))  # the bare step runs what pretrain runs
        model = pretraining_model(preset, vocab, dev)
        set_unpad(model, unpad)
        opt = build_optimizer(model, "lamb", lr=1e-4)
        fwd = compile_model(model) if compiled else model
        warm = len(batches) if compiled else sz["warmup"]  # every length S once: recompiles stay out of the timing
        same = shard_batches(ctx["data"] / sz["shard"], B, sz["steps"], dev, static=True) if graphs else batches
        bare = clock.steps(train_step(fwd, opt, same, dev), len(same), warm)
        bare_tps = real / bare["median_s"]
        del model, fwd, opt
        empty_cache(dev)
        try:
            pretrain(cfg)
        except Exception as exc:  # a failed capture must not lose the other variants
            res[tag] = {"error": f"{type(exc).__name__}: {exc}"}
            report(f"pretrain {preset} {B}x{S} LAMB {tag}: FAILED {type(exc).__name__}: {str(exc)[:400]}", ok=False)
            shutil.rmtree(cfg.output, ignore_errors=True)
            continue
        loop_tps = _train_tokens_per_s(Path(cfg.output))
        shutil.rmtree(cfg.output, ignore_errors=True)
        ratio = loop_tps / bare_tps
        res[tag] = {"bare_real_tokens_per_s": bare_tps, "pretrain_tokens_per_s": loop_tps, "ratio": ratio,
                    "unpad": unpad}  # fmt: skip
        how = " unpadded" if unpad else (" (static shapes; bare step eager)" if graphs else "")
        report(f"pretrain {preset} {B}x{S} LAMB {tag}{how}: {loop_tps:,.0f} tok/s = "
               f"{100 * ratio:.1f} % of the bare step ({bare_tps:,.0f}) on the same shard batches (target >= 95 %)",
               ok=ratio >= 0.95)  # fmt: skip
        if not ctx["time_left"](150):
            res["skipped"] = "compiled: budget"
            break
    # host reads and device syncs per non-logging step: two runs that log, evaluate and save only at their end
    reads, syncs = [], []
    n1, n2 = sz["reads_steps"]
    for n in (n1, n2):
        with tempfile.TemporaryDirectory(dir=ctx["work"]) as d, count_host_reads() as c, count_syncs(dev) as y:
            pretrain(_pretrain_cfg(ctx, Path(d) / "run", n, n, 2))
        reads.append(c)
        syncs.append(y["n"])
    per_step = (reads[1]["n"] - reads[0]["n"]) / (n2 - n1)
    where = {k: (reads[1]["where"][k] - reads[0]["where"][k]) / (n2 - n1) for k in reads[1]["where"]}
    res["host_reads_per_step"] = per_step
    res["host_reads_where"] = {k: v for k, v in sorted(where.items()) if v}
    res["host_reads_runs"] = {n1: reads[0]["n"], n2: reads[1]["n"]}
    report(f"Python-level tensor reads per non-logging step: {per_step:g} {res['host_reads_where']} (runs of "
           f"{n1}/{n2} steps: {reads[0]['n']}/{reads[1]['n']}; reads of CPU tensors, e.g. the collator's, cost no "
           "transfer)")  # fmt: skip
    if dev.type == "cuda":
        res["device_reads_per_step"] = (reads[1]["device"] - reads[0]["device"]) / (n2 - n1)
        report(f"Python-level reads of device tensors per non-logging step: {res['device_reads_per_step']:g} "
               "(target 0)", ok=res["device_reads_per_step"] == 0)  # fmt: skip
        res["syncs_per_step"] = (syncs[1] - syncs[0]) / (n2 - n1)
        res["syncs_runs"] = {n1: syncs[0], n2: syncs[1]}
        report(f"device syncs per non-logging step (torch.cuda.set_sync_debug_mode): {res['syncs_per_step']:g} "
               f"(runs of {n1}/{n2} steps: {syncs[0]}/{syncs[1]}; target 0)", ok=res["syncs_per_step"] == 0)  # fmt: skip
    return res


@contextlib.contextmanager
def count_syncs(device: torch.device):
    """Counts the CUDA device→host synchronisations in the block (``torch.cuda.set_sync_debug_mode("warn")``: one
    warning per synchronising call, what Python-level counting cannot see, e.g. ``nonzero`` or a foreach kernel
    reading a tensor scalar). ``{"n": None}`` off CUDA."""
    c = {"n": None}
    if device.type != "cuda":
        yield c
        return
    import warnings

    before = torch.cuda.get_sync_debug_mode()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # every occurrence, not once per place
        torch.cuda.set_sync_debug_mode("warn")
        try:
            yield c
        finally:
            torch.cuda.set_sync_debug_mode(before)
    c["n"] = sum("synchronizing CUDA operation" in str(w.message) for w in caught)


@contextlib.contextmanager
def count_host_reads():
    """Counts calls of Tensor.item/tolist/numpy/__float__/__int__/__bool__ (Python-level reads of a tensor's values:
    on a GPU each is a device→host read) in the block: ``n`` in all, ``where`` by "file:function" of the caller,
    ``device`` those of tensors not on the CPU."""
    c = {"n": 0, "device": 0, "where": collections.Counter()}
    saved = {name: getattr(torch.Tensor, name) for name in HOST_READS}

    def wrap(fn):
        def counted(self, *a, **k):
            c["n"] += 1
            c["device"] += self.device.type != "cpu"
            caller = sys._getframe(1).f_code
            c["where"][f"{Path(caller.co_filename).name}:{caller.co_name}"] += 1
            return fn(self, *a, **k)

        return counted

    for name, fn in saved.items():
        setattr(torch.Tensor, name, wrap(fn))
    try:
        yield c
    finally:
        for name, fn in saved.items():
            setattr(torch.Tensor, name, fn)


def section_optim(ctx: dict) -> dict:
    import bench_optim

    from litebert.optim import build_optimizer

    dev, sz = ctx["device"], ctx["sizes"]
    if hasattr(bench_optim, "compare_lamb_adamw"):  # the optimizer benchmark's own comparison
        res = dict(bench_optim.compare_lamb_adamw(sz["optim_preset"], device=dev, steps=50 if ctx["smoke"] else 100,
                                                  compiled=dev.type == "cuda" and ctx["time_left"](120)))  # fmt: skip
    else:
        model = pretraining_model(sz["optim_preset"], 30000, dev)
        params = list(model.parameters())
        clock = Clock(dev)
        res = {}
        for name, opt in (("lamb", build_optimizer(model, "lamb", lr=1e-4)), ("adamw_fused", fused_adamw(model, dev))):
            for p in params:
                p.grad = torch.randn_like(p) * 1e-3
            res[f"{name}_ms"] = clock.steps(opt.step, 20, 3)["median_s"] * 1e3
        res["ratio"] = res["lamb_ms"] / res["adamw_fused_ms"]
    report(f"LAMB step / fused AdamW step on {sz['optim_preset']}: {res['ratio']:.2f}x (target <= 1.5x)",
           ok=res["ratio"] <= 1.5)  # fmt: skip
    if "lamb_ops" in res:  # bench_optim.ops_per_step: ATen operations a step, and the CUDA kernels they make
        report(f"ops a step (CUDA kernels): LAMB {res['lamb_ops']} ({res['lamb_kernels']}), with found_inf set as the "
               f"loop steps {res['lamb_loop_ops']} ({res['lamb_loop_kernels']}); AdamW ({res['adamw']}) "
               f"{res['adamw_ops']} ({res['adamw_kernels']})")  # fmt: skip
    if "graphed_ratio" in res:
        report(f"LAMB step replayed from a CUDA graph (--cuda-graphs) / fused AdamW step (eager): "
               f"{res['graphed_ratio']:.2f}x ({res['lamb_graphed_ms']:.3f} against {res['adamw_ms']:.3f} ms); both "
               f"replayed: {res['graphed_both_ratio']:.2f}x (AdamW {res['adamw_graphed_ms']:.3f} ms)",
               ok=res["graphed_ratio"] <= 1.5)  # fmt: skip
    elif "graphed_error" in res:
        report(f"LAMB/AdamW steps in a CUDA graph: capture failed: {res['graphed_error'][:300]}", ok=False)
    if "compiled_ratio" in res:
        report(f"LAMB step compiled (torch.compile(opt.step)) / fused AdamW step: {res['compiled_ratio']:.2f}x "
               f"({res['lamb_compiled_ms']:.3f} ms; compiling {res['compile_s']:.1f} s)", ok=res["compiled_ratio"] <= 1.5)  # fmt: skip
    elif "compiled_error" in res:
        report(f"LAMB step compiled: failed: {res['compiled_error'][:300]}", ok=False)
    return res


#: a classifier whose forward costs next to nothing: `predict` with it times the host's part alone
MICRO = dict(embedding_size=16, hidden_size=16, num_attention_heads=1, intermediate_size=16, num_hidden_layers=1)


def make_classifier(preset: str, tokenizer_dir: Path, out: Path, **overrides) -> Path:
    """An ALBERT classifier of ``preset``'s size (a preset name or a config.json; ``overrides`` change its fields)
    with random weights and the given tokenizer, as `finetune` writes one (finetuning_task sst2, the length it was
    "fine-tuned" with: 128)."""
    from litebert.config import AlbertConfig
    from litebert.modeling import AlbertForSequenceClassification
    from litebert.tokenization import load_tokenizer

    torch.manual_seed(0)
    tok = load_tokenizer(tokenizer_dir)
    cfg = AlbertConfig.load(
        preset, vocab_size=tok.vocab_size, id2label={0: "0", 1: "1"}, label2id={"0": 0, "1": 1},
        problem_type="single_label_classification", **overrides,
    )  # fmt: skip
    cfg.extra = {**cfg.extra, "finetuning_task": "sst2", "litebert_max_seq_length": 128}
    AlbertForSequenceClassification(cfg).save_pretrained(out)
    tok.save(out)
    return out


def repeated_tsv(src: Path, rows: int, dest: Path) -> int:
    """SST-2-layout TSV with ``src``'s rows repeated to at least ``rows``; returns the row count."""
    header, *body = src.read_text(encoding="utf-8").splitlines()
    reps = math.ceil(rows / len(body))
    dest.write_text("\n".join([header, *(body * reps)]) + "\n", encoding="utf-8")
    return len(body) * reps


def section_predict(ctx: dict) -> dict:
    from litebert.finetune.run import EvaluateConfig, predict

    dev, sz, res = ctx["device"], ctx["sizes"], {}
    work = Path(tempfile.mkdtemp(dir=ctx["work"]))
    preset = sz["base"][0]
    model_dir = make_classifier(preset, ctx["data"] / "tokenizer", work / "model")
    n = repeated_tsv(ctx["data"] / "sst2" / "dev.tsv", sz["predict_rows"], work / "rows.tsv")
    n32 = repeated_tsv(ctx["data"] / "sst2" / "dev.tsv", sz["batch32_rows"], work / "rows32.tsv")
    lines = (work / "rows.tsv").read_text(encoding="utf-8").splitlines()
    small = 8  # a file of 8 rows: model load and setup, the fixed cost subtracted from the big runs
    (work / "dev.tsv").write_text("\n".join(lines[: small + 1]) + "\n", encoding="utf-8")
    res["rows"] = n

    def run(data: Path, batch: int | None, tag: str, model: Path = model_dir) -> float:
        kw = {} if batch is None else {"batch_size": batch}
        cfg = EvaluateConfig(model=str(model), data_file=str(data), output_dir=str(work / tag), device=dev.type,
                             **kw)  # fmt: skip
        t = time.perf_counter()
        predict(cfg)
        return time.perf_counter() - t

    def rate(rows: int, file: str, batch: int | None, tag: str, model: Path = model_dir) -> dict:
        fixed = run(work / "dev.tsv", batch, f"{tag}-small", model)
        whole = run(work / file, batch, tag, model)
        # model load and setup cancel out; where the difference drowns in noise, the whole call's rate
        rps = (rows - small) / (whole - fixed) if whole - fixed > 0.1 * whole else rows / whole
        return {"rows": rows, "call_s": whole, "fixed_s": fixed, "rows_per_s": rps, "rows_per_s_call": rows / whole}

    run(work / "dev.tsv", None, "warm")  # kernels, allocator, tokenizer load
    for batch, rows, file in ((None, n, "rows.tsv"), (32, n32, "rows32.tsv")):
        tag = f"batch_{batch or 'default'}"
        res[tag] = r = rate(rows, file, batch, tag)
        report(f"litebert predict {preset}-sized, {rows:,} rows, batch {batch or 'default'}: {r['rows_per_s']:,.0f} "
               f"rows/s once loaded ({r['call_s']:.1f} s for the call, {r['fixed_s']:.1f} s of it load and setup)")  # fmt: skip
        if not ctx["time_left"](90):
            break
    if ctx["time_left"](80):  # the host's part alone: reading, tokenizing, batching, copies, writing
        micro = make_classifier(preset, ctx["data"] / "tokenizer", work / "micro", **MICRO)
        run(work / "dev.tsv", None, "micro-warm", micro)
        res["host_bound"] = r = rate(n, "rows.tsv", None, "micro", micro)
        report(f"    the same rows through a 1-layer, width-16 classifier (the host's part alone): "
               f"{r['rows_per_s']:,.0f} rows/s")  # fmt: skip
    if ctx["time_left"](100):  # where a call's time goes (item 5 is short of 20,000 rows/s): its top functions
        import cProfile
        import pstats

        prof = cProfile.Profile()
        prof.runcall(run, work / "rows.tsv", None, "profiled")
        stats = pstats.Stats(prof)
        top = sorted(stats.stats.items(), key=lambda kv: -kv[1][2])[:12]  # by own (total) time
        res["profile_top_tottime"] = [(f"{Path(f).name}:{ln}:{fn}", round(tt, 3), round(ct, 3)) for (f, ln, fn),
                                      (_, _, tt, ct, _) in top]  # fmt: skip
        report(f"    under cProfile, own time of the top functions (name, own s, cumulative s): "
               f"{res['profile_top_tottime']}")  # fmt: skip
    # transformers' pipeline at batch 32 on the first pipeline_rows rows
    texts = [line.split("\t")[0] for line in (work / "rows.tsv").read_text().splitlines()[1 : sz["pipeline_rows"] + 1]]
    res["pipeline"] = pipeline_rows_per_s(model_dir, texts, dev)
    report(f"transformers pipeline batch 32: {res['pipeline']['rows_per_s']:,.0f} rows/s ({len(texts):,} rows)")
    best = res["batch_default"]["rows_per_s"]
    res["vs_pipeline"] = res.get("batch_32", res["batch_default"])["rows_per_s"] / res["pipeline"]["rows_per_s"]
    res["chosen_vs_pipeline"] = best / res["pipeline"]["rows_per_s"]
    report(f"litebert / pipeline at batch 32: {res['vs_pipeline']:.1f}x; litebert's batch / pipeline: "
           f"{res['chosen_vs_pipeline']:.1f}x (target >= 10x)", ok=res["chosen_vs_pipeline"] >= 10)  # fmt: skip
    report(f"litebert's batch: {best:,.0f} rows/s (target >= 20,000)", ok=best >= 20_000)
    # the whole process, twice: a machine whose packages carry no bytecode (the GPU image) compiles it in the first
    # run; the second reuses it (PYTHONPYCACHEPREFIX, written even where PYTHONDONTWRITEBYTECODE is set), as an
    # installed package's bytecode would be
    env = {**child_env(), "PYTHONPYCACHEPREFIX": str(work / "pycache")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    for key in ("whole_process_first_s", "whole_process_s"):
        if not ctx["time_left"](60):
            break
        cmd = [sys.executable, "-m", "litebert", "predict", "--model", str(model_dir), "--data",
               str(work / "rows.tsv"), "--output", str(work / key), "--device", dev.type]  # fmt: skip
        t = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        res[key] = time.perf_counter() - t
        if proc.returncode:
            raise RuntimeError(f"litebert predict exited {proc.returncode}: {proc.stderr[-500:]}")
        report(f"whole process `python -m litebert predict` on {n:,} rows: {res[key]:.1f} s"
               + (" (first run: bytecode compiled where the packages carry none)" if "first" in key else ""))  # fmt: skip
    shutil.rmtree(work, ignore_errors=True)
    return res


def pipeline_rows_per_s(model_dir: Path, texts: list[str], dev: torch.device) -> dict:
    import transformers

    transformers.logging.set_verbosity_error()
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    try:
        pipe = transformers.pipeline("text-classification", model=str(model_dir), device=dev, dtype=dtype)
    except TypeError:  # older transformers: torch_dtype
        pipe = transformers.pipeline("text-classification", model=str(model_dir), device=dev, torch_dtype=dtype)
    pipe(texts[:64], batch_size=32)
    Clock(dev).sync()
    t = time.perf_counter()
    pipe(texts, batch_size=32, truncation=True, max_length=128)
    Clock(dev).sync()
    s = time.perf_counter() - t
    return {"rows": len(texts), "seconds": s, "rows_per_s": len(texts) / s}


def child_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def section_torchrun(ctx: dict) -> dict:
    dev = ctx["device"]
    with tempfile.TemporaryDirectory(dir=ctx["work"]) as d:
        out = Path(d) / "run"
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", "-m",
               "litebert", "pretrain", "--data", str(ctx["data"] / ctx["sizes"]["shard"]), "--output", str(out),
               "--model-config", "albert-unittest", "--max-steps", "2", "--batch-size", "2", "--device", dev.type,
               "--no-progress-bar"]  # fmt: skip
        t = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, env=child_env(), timeout=240)
        written = sorted(str(p.relative_to(out)) for p in out.rglob("*")) if out.exists() else []
    text = proc.stdout + proc.stderr
    errors = [line for line in text.splitlines() if line.startswith("error:") or " error: " in line]
    # torchrun itself ends a failed launch with its own ChildFailedError traceback: only the others count
    blocks = text.split("Traceback (most recent call last):")[1:]
    ours = [b for b in blocks if "ChildFailedError" not in b[:4000]]
    res = {
        "returncode": proc.returncode, "seconds": time.perf_counter() - t, "error_lines": errors,
        "traceback": bool(ours), "launcher_traceback": len(blocks) > len(ours), "written": written[:20],
        "tail": text[-1500:],
    }  # fmt: skip
    if dev.type == "cuda" and torch.cuda.device_count() < 2:
        ok = proc.returncode != 0 and len(set(errors)) == 1 and not res["traceback"] and not written
        report(f"torchrun 2 processes on {torch.cuda.device_count()} GPU: rc {proc.returncode}, "
               f"{len(set(errors))} distinct error line(s), traceback {res['traceback']}, {len(written)} files "
               f"written (target: one clear error, nothing written)", ok=ok)  # fmt: skip
        for line in sorted(set(errors)):
            report(f"    {line}")
    else:
        report(f"torchrun 2 processes on {dev.type}: rc {proc.returncode} (the one-GPU check needs a GPU)")
    return res


def section_mainjob(ctx: dict) -> dict:
    """The README's main job, ``scripts/quickstart.sh``, end to end. On a GPU with ``QS_CUDA_GRAPHS=1`` (both
    pretraining phases with ``--cuda-graphs``) at its full 6,000 steps, stopped after ``--main-job-timeout``
    seconds; eager (``--main-job-eager``, or on the CPU) a reduced run whose full length is extrapolated. Each
    stage's time comes from the script's ``==`` lines; each pretraining phase's milliseconds a step from its
    train.log (first to last logged step, start-up, capture and evaluations excluded)."""
    sz, dev = ctx["sizes"], ctx["device"]
    graphs = dev.type == "cuda" and not ctx["main_job_eager"]
    steps = 6000 if (ctx["full_main_job"] or graphs) else sz["mainjob_steps"]
    out = Path(tempfile.mkdtemp(dir=ctx["work"])) / "qs"
    env = {**child_env(), "QS_STEPS": str(steps), "LITEBERT_DATA_DIR": str(ctx["data"]), "PYTHON": sys.executable}
    if graphs:
        env["QS_CUDA_GRAPHS"] = "1"
    if ctx["smoke"]:  # toy run: the shard tokenizer stands in for stage 1, one thread, fewer evaluation batches
        out.mkdir(parents=True)
        shutil.copytree(ctx["data"] / "tokenizer", out / "tokenizer")
        env.update(QS_THREADS="1", QS_WORKERS="1", QS_VOCAB=str(sz["vocab"]))
    marks: list[tuple[float, str]] = []
    t0 = time.perf_counter()
    proc = subprocess.Popen(["bash", str(REPO / "scripts" / "quickstart.sh"), str(out)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True)  # fmt: skip
    timeout = ctx["main_job_timeout"]
    tail: list[str] = []
    import threading

    timer = threading.Timer(timeout, lambda: os.killpg(proc.pid, 9))
    timer.start()
    try:
        for line in proc.stdout:
            tail = [*tail, line][-30:]
            if line.startswith("=="):
                marks.append((time.perf_counter() - t0, line.strip()))
        rc = proc.wait()
    finally:
        timer.cancel()
    total = time.perf_counter() - t0
    res = {"steps": steps, "cuda_graphs": graphs, "wall_s": total, "marks": marks,
           "pycache_prefix": (out / ".pycache").is_dir(), "ms_per_step": _phase_step_ms(out),
           "torch_has_bytecode": os.path.exists(importlib.util.cache_from_source(torch.__file__)),
           "PYTHONDONTWRITEBYTECODE": os.environ.get("PYTHONDONTWRITEBYTECODE")}  # fmt: skip
    if rc:
        what = f"stopped after {timeout:.0f} s" if total >= timeout else f"exited {rc}"
        res["error"] = f"quickstart.sh {what}"
        report(f"main job (QS_STEPS={steps}{', QS_CUDA_GRAPHS=1' if graphs else ''}) {what}; stages reached: "
               f"{[(round(t), m[:40]) for t, m in marks]}; step ms {res['ms_per_step']}; last lines: "
               f"{''.join(tail)[-800:]}", ok=False)  # fmt: skip
        return res
    stages = [(m[:60], round(b - a, 1)) for (a, m), (b, _) in zip(marks, [*marks[1:], (total, "")])]
    res["stages_s"] = stages
    starts = [t for t, m in marks if m.startswith("== 3/5")] + [t for t, m in marks if m.startswith("== 4/5")]
    if len(starts) == 3 and steps != 6000:
        long_steps = steps // 10
        a, b = starts[1] - starts[0], starts[2] - starts[1]
        rest = total - a - b
        est = rest + a * 5400 / (steps - long_steps) + b * 600 / long_steps
        res.update(phase_a_s=a, phase_b_s=b, other_s=rest, estimated_full_s=est)
        report(f"main job reduced (QS_STEPS={steps}): {total:.1f} s; phase a {a:.1f} s, b {b:.1f} s, the rest "
               f"{rest:.1f} s -> full 6,000 steps estimated {est:.0f} s (target <= 60 s; per-run startup "
               "scaled too, so an over-estimate)", ok=est <= 60)  # fmt: skip
    else:
        report(f"main job (QS_STEPS={steps}{', QS_CUDA_GRAPHS=1' if graphs else ''}): {total:.1f} s end to end "
               f"(target <= 60 s)", ok=total <= 60)  # fmt: skip
    report(f"    stages (s): {stages}; pretraining ms/step {res['ms_per_step']}; bytecode in OUTPUT/.pycache: "
           f"{res['pycache_prefix']} (torch's own bytecode: {res['torch_has_bytecode']}, PYTHONDONTWRITEBYTECODE="
           f"{res['PYTHONDONTWRITEBYTECODE']})")  # fmt: skip
    return res


def _phase_step_ms(out: Path) -> dict:
    """Milliseconds a step of each pretraining phase of a quick-start run in ``out``: the median over its logged
    windows after the first (warm-up, the capture) of 1000 / metrics.jsonl's ``steps_per_second``."""
    res = {}
    for phase in ("pretrain-seq64", "pretrain"):
        f = out / phase / "metrics.jsonl"
        if f.exists():
            recs = [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
            rates = [r["steps_per_second"] for r in recs if r.get("split") == "train" and r.get("steps_per_second")]
            if rates[1:]:
                res[phase] = round(1e3 / statistics.median(rates[1:]), 2)
    return res


SECTIONS = {  # the cheap ones first; a second call with --sections runs what the budget skipped
    "optim": section_optim,
    "torchrun": section_torchrun,
    "mfu": section_mfu,
    "loop": section_loop,
    "predict": section_predict,
    "mainjob": section_mainjob,
}
#: seconds a section needs at least (GPU run): a section starts only if it fits, and its optional parts (compiled
#: variants, the whole-process run) only if the sections after it still fit; smoke runs do everything
MIN_SECONDS = {"optim": 10, "torchrun": 20, "mfu": 60, "loop": 40, "predict": 45, "mainjob": 90}


# ------------------------------------------------------------------------------------------------ report
LINES: list[str] = []


def report(line: str, ok: bool | None = None) -> None:
    mark = "" if ok is None else ("  [meets target]" if ok else "  [SHORT of target]")
    LINES.append(line + mark)
    print(line + mark, flush=True)


def empty_cache(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.empty_cache()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, help="inputs built by --build-data (tokenizer, shards, wikitext-2, sst2)")
    ap.add_argument("--build-data", type=Path, metavar="DIR",
                    help="build the inputs of both modes into DIR (with --smoke: the smoke run's only) and exit")  # fmt: skip
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="public data (wikitext-2/, glue/SST-2/)")
    ap.add_argument("--out", type=Path, default=Path("gpu.json"), help="JSON file of every figure")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--smoke", action="store_true", help="every section at toy sizes (minutes on a CPU)")
    ap.add_argument("--sections", default=",".join(SECTIONS), help=f"comma-separated subset of {list(SECTIONS)}")
    ap.add_argument("--full-main-job", action="store_true", help="the main job at its full 6,000 steps")
    ap.add_argument("--main-job-eager", action="store_true", help="the main job without QS_CUDA_GRAPHS on a GPU")
    ap.add_argument("--main-job-timeout", type=float, default=200.0, help="seconds before the main job is stopped")
    ap.add_argument("--budget", type=float, default=330.0, help="seconds; sections that would not fit are skipped")
    args = ap.parse_args(argv)
    if args.build_data:
        for smoke in (True,) if args.smoke else (False, True):
            build_data(args.build_data, args.source, smoke)
            print(f"inputs of the {'smoke' if smoke else 'GPU'} run in {mode_dir(args.build_data, smoke)}")
        return 0
    if args.data is None:
        ap.error("--data DIR is required (build it with --build-data DIR)")
    if args.smoke and missing_inputs(args.data, smoke=True):
        build_data(args.data, args.source, smoke=True)
    if missing := missing_inputs(args.data, args.smoke):
        ap.error(f"--data {args.data} lacks {', '.join(map(str, missing))}: build it with --build-data DIR")
    t_start = time.perf_counter()
    dev = torch.device(args.device)
    work = Path(tempfile.mkdtemp(prefix="bench_gpu-"))
    ctx = {
        "device": dev, "sizes": sizes(args.smoke), "data": mode_dir(args.data, args.smoke).resolve(), "work": work, "smoke": args.smoke,
        "full_main_job": args.full_main_job, "main_job_eager": args.main_job_eager,
        "main_job_timeout": args.main_job_timeout,
    }  # fmt: skip
    import transformers

    results: dict = {
        "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
        "torch": torch.__version__, "transformers": transformers.__version__, "smoke": args.smoke,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }  # fmt: skip
    report(f"{results['device']}, torch {torch.__version__}, transformers {transformers.__version__}"
           f"{' (smoke sizes)' if args.smoke else ''}")  # fmt: skip
    names = args.sections.split(",")
    if unknown := [n for n in names if n not in SECTIONS]:
        ap.error(f"--sections {','.join(unknown)}: expected names from {','.join(SECTIONS)}")
    for i, name in enumerate(names):
        reserve = sum(MIN_SECONDS[n] for n in names[i + 1 :])  # what the later sections need
        ctx["time_left"] = lambda need, r=reserve: args.smoke or time.perf_counter() - t_start + need + r <= args.budget
        if not (args.smoke or time.perf_counter() - t_start + MIN_SECONDS[name] <= args.budget):
            results[name] = {"skipped": f"budget of {args.budget:.0f} s"}
            report(f"-- {name}: skipped (budget)")
            continue
        report(f"-- {name}")
        t = time.perf_counter()
        try:
            results[name] = SECTIONS[name](ctx)
        except Exception as exc:  # one item failing must not lose the others
            results[name] = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()[-3000:]}
            report(f"{name} FAILED: {type(exc).__name__}: {str(exc)[:500]}")
            empty_cache(dev)
        results.setdefault(name, {})["section_s"] = time.perf_counter() - t
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({**results, "table": LINES}, indent=1, default=str))
    results["total_s"] = time.perf_counter() - t_start
    report(f"total {results['total_s']:.0f} s")
    args.out.write_text(json.dumps({**results, "table": LINES}, indent=1, default=str))
    args.out.with_suffix(".txt").write_text("\n".join(LINES) + "\n")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
