"""Inference benchmark: transformers' ``pipeline("text-classification")`` against litebert's backends, side by side.

For each model (a fine-tuned quick-start-size SST-2 classifier, an optional MRPC one, and an albert-base-sized
classifier with random weights: its accuracy is meaningless, only its speed counts) and each dev set (GLUE SST-2 and
MRPC), every backend predicts the same rows at batch 32 and batch 1 on the CPU with ``--threads`` threads:

    transformers   pipeline("text-classification", attn_implementation="sdpa"), rows in file order
    torch-fp32     litebert predict: length buckets, inference_mode, SDPA, fused QKV
    torch-bf16     the same with bf16 weights (only when the CPU has AVX512-BF16 or AMX)
    torch-int8     torch.ao dynamic int8 Linear layers
    ort-fp32       onnxruntime on `litebert export --format onnx`
    ort-int8       onnxruntime on `litebert export --format onnx --quantize int8`

Timed: texts in → labels out (tokenization included for both sides), after a warm-up on the first rows. All backends
live in one process and are timed in turn, round after round, so that load from other processes falls on all of them
alike; the best of ``--rounds`` passes is reported. Reported: sentences/s, the ratio to transformers at the same batch
size, dev accuracy, the share of labels equal to torch-fp32's, and memory: each backend is loaded again in its own
subprocess, and "peak MB" is that process's peak RSS (``VmHWM`` of /proc/self/status) minus its RSS (``VmRSS``)
just before the model was loaded (Python, torch and the data already in), i.e. model, runtime and activations for
``--memory-rows`` rows at each batch size.

Usage::

    python benchmarks/bench_infer.py --sst2-model runs/bench/qs_sst2/best [--mrpc-model DIR] [--base] \\
        [--max-rows 400] [--threads 2]

Targets (issue 14): torch-fp32 at batch 32 ≥ 3× transformers on SST-2 dev; the fastest backend ≥ 5×; int8 and bf16
accuracy within 1 point of fp32 and ≥ 98 % of labels agreeing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BACKENDS = ("transformers", "torch-fp32", "torch-bf16", "torch-int8", "ort-fp32", "ort-int8")
TASK_FILES = {"sst2": "glue/SST-2/dev.tsv", "mrpc": "glue/MRPC/dev.tsv"}


def _status_mb(field: str) -> float:
    """``VmRSS`` (resident now) or ``VmHWM`` (peak resident) of this process from /proc/self/status, in MiB. (Not
    ``getrusage``'s ru_maxrss: on Linux it keeps the forking parent's peak across exec.)"""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


def _read(task: str, data_dir: Path, max_rows: int | None):
    """The task's dev file as a ``ReadResult`` (first ``max_rows`` rows)."""
    import dataclasses

    from litebert.finetune import DataOptions

    read = DataOptions(task=task).read(data_dir / TASK_FILES[task], require_label=True)
    return dataclasses.replace(read, examples=read.examples[:max_rows]) if max_rows else read


# ------------------------------------------------------------------------------------------------ backends
def load_backend(backend: str, spec: dict):
    """``predict(task, read, batch_size) -> list[int]`` for one backend; texts in, class ids out."""
    import dataclasses

    import torch

    from litebert.checkpoint import load_config
    from litebert.finetune import DataOptions
    from litebert.finetune.kinds import make_kind, run_features
    from litebert.tokenization import load_tokenizer

    L = spec["max_seq_length"]
    if backend == "transformers":
        from transformers import AutoModelForSequenceClassification, AutoTokenizer, pipeline

        tok = AutoTokenizer.from_pretrained(spec["model"])
        # transformers 5's AlbertTokenizer leaves token_type_ids out of its outputs, so sentence pairs would reach
        # the model with segment 0 throughout; give it the inputs litebert gives (same ids, checked on MRPC dev)
        tok.model_input_names = ["input_ids", "token_type_ids", "attention_mask"]
        model = AutoModelForSequenceClassification.from_pretrained(spec["model"], attn_implementation="sdpa").eval()
        pipe = pipeline("text-classification", model=model, tokenizer=tok, device="cpu")
        label2id = model.config.label2id

        def predict(task, read, bs):
            inputs = [
                ex.text if ex.text_pair is None else {"text": ex.text, "text_pair": ex.text_pair}
                for ex in read.examples
            ]
            with torch.inference_mode():
                out = pipe(inputs, batch_size=bs, truncation=True, max_length=L)
            return [int(label2id[o["label"]]) for o in out]

        return predict

    from litebert.inference import load_runner

    kind, variant = backend.split("-")
    runner = load_runner(
        spec["model"] if kind == "torch" else spec["onnx"][variant],
        "AlbertForSequenceClassification",
        backend="torch" if kind == "torch" else "onnxruntime",
        precision="bf16" if variant == "bf16" else "fp32",
        quantize="int8" if (kind, variant) == ("torch", "int8") else None,
        threads=spec["threads"],
    )
    tokenizer = load_tokenizer(spec["model"])
    config = load_config(spec["model"])
    kinds = {}
    for task in spec["tasks"]:  # the `litebert predict` path: the task's kind reads, featurizes and decodes
        kinds[task] = make_kind(DataOptions(task=task))
        kinds[task].from_config(config)

    def predict(task, read, bs):
        kind = kinds[task]
        unlabelled = dataclasses.replace(read, has_labels=False)  # timing covers prediction, not label encoding
        feats = kind.featurize(unlabelled, tokenizer, L, "data")
        outputs, _, _ = run_features(
            kind, runner, feats, range(len(feats)), bs, tokenizer.pad_token_id, torch.device("cpu")
        )
        return [int(p) for p in kind.postprocess(outputs, feats, unlabelled)]

    return predict


def memory_worker(spec: dict) -> dict:
    """In a fresh process: RSS before loading ``spec["backend"]``, then the peak over loading it and predicting
    ``spec["rows"]`` rows at each batch size."""
    import torch

    torch.set_num_threads(spec["threads"])
    data = {task: _read(task, Path(spec["data_dir"]), spec["rows"]) for task in spec["tasks"]}
    base = _status_mb("VmRSS")
    predict = load_backend(spec["backend"], spec)
    for task, read in data.items():
        for bs in spec["batch_sizes"]:
            predict(task, read, bs)
    peak = _status_mb("VmHWM")
    return {"base_mb": base, "peak_mb": peak, "delta_mb": peak - base}


# ------------------------------------------------------------------------------------------------ parent
def cpu_line() -> str:
    from litebert.inference import cpu_capabilities, native_bf16

    caps = cpu_capabilities()
    model = ""
    with contextlib.suppress(OSError, StopIteration):
        model = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
    flags = ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in caps.items())
    return f"CPU: {model} ({os.cpu_count()} logical cores); {flags}; native bf16: {native_bf16()}"


def make_base_model(tokenizer_dir: Path, out: Path, task: str = "sst2") -> Path:
    """An albert-base-sized (E128 H768 12 layers, 1 group) classifier with random weights and the given tokenizer."""
    import torch

    from litebert.config import AlbertConfig
    from litebert.modeling import AlbertForSequenceClassification
    from litebert.tokenization import load_tokenizer

    torch.manual_seed(0)
    cfg = AlbertConfig.from_preset(
        "albert-base", id2label={0: "0", 1: "1"}, label2id={"0": 0, "1": 1}, problem_type="single_label_classification"
    )
    cfg.extra = {**cfg.extra, "finetuning_task": task}
    AlbertForSequenceClassification(cfg).save_pretrained(out)
    load_tokenizer(tokenizer_dir).save(out)
    return out


def run_model(name: str, model_dir: Path, tasks: list[str], args, work: Path, max_rows: int | None) -> list[dict]:
    """Time every backend on every (task, batch size), interleaved round by round in this process so that load
    from other processes falls on all of them alike (best of ``args.rounds``); memory in one subprocess each."""
    import dataclasses
    import statistics

    import torch

    from litebert.export import export_model
    from litebert.inference import native_bf16

    torch.set_num_threads(args.threads)
    onnx = {}
    for variant, q in (("fp32", None), ("int8", "int8")):
        d = work / f"{name}-onnx-{variant}"
        if not d.exists():
            export_model(model_dir, d, format="onnx", quantize=q)
        onnx[variant] = str(d)
    spec = {
        "model": str(model_dir),
        "onnx": onnx,
        "tasks": tasks,
        "batch_sizes": args.batch_sizes,
        "threads": args.threads,
        "data_dir": str(args.data_dir),
        "max_seq_length": args.max_seq_length,
    }
    backends = [b for b in args.backends if b != "torch-bf16" or native_bf16()]
    predictors = {b: load_backend(b, spec) for b in backends}
    data = {task: _read(task, args.data_dir, max_rows) for task in tasks}
    rows = {b: {"model": name, "backend": b, "results": {}} for b in backends}
    for task, read in data.items():
        warm = dataclasses.replace(read, examples=read.examples[:8])
        for bs in args.batch_sizes:
            times: dict[str, list[float]] = {b: [] for b in backends}
            for b in backends:  # warm-up
                predictors[b](task, warm, bs)
            for _ in range(args.rounds):
                for b in backends:
                    t = time.perf_counter()
                    preds = predictors[b](task, read, bs)
                    times[b].append(time.perf_counter() - t)
                    rows[b]["results"][f"{task}:{bs}"] = {"preds": preds}
            for b in backends:
                rows[b]["results"][f"{task}:{bs}"].update(seconds=min(times[b]), median=statistics.median(times[b]))
            print(f"  {task} batch {bs}: " + ", ".join(f"{b} {min(times[b]):.2f}s" for b in backends), flush=True)
    for b in backends:
        mspec = {**spec, "backend": b, "rows": args.memory_rows}
        proc = subprocess.run(
            [sys.executable, __file__, "--memory-worker", json.dumps(mspec)],
            capture_output=True,
            text=True,
            env={**os.environ, "OMP_NUM_THREADS": str(args.threads), "TOKENIZERS_PARALLELISM": "false"},
        )
        if proc.returncode != 0:
            print(f"  memory {b}: FAILED\n{proc.stderr[-2000:]}", flush=True)
            rows[b]["peak_mb"] = float("nan")
            continue
        rows[b]["peak_mb"] = json.loads(proc.stdout.strip().splitlines()[-1])["delta_mb"]
    return list(rows.values())


def table(rows: list[dict], labels: dict[str, list[int]], args) -> str:
    lines = [
        "| model | data | batch | backend | sentences/s | × transformers | accuracy | agree w/ fp32 | peak MB |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    by = {(r["model"], r["backend"]): r for r in rows}
    for model in dict.fromkeys(r["model"] for r in rows):
        for key in dict.fromkeys(k for r in rows if r["model"] == model for k in r["results"]):
            task, bs = key.split(":")
            ref = by.get((model, "transformers"))
            fp32 = by.get((model, "torch-fp32"))
            for backend in args.backends:
                r = by.get((model, backend))
                if r is None or key not in r["results"]:
                    continue
                res = r["results"][key]
                n = len(res["preds"])
                speed = n / res["seconds"]
                ratio = speed / (len(ref["results"][key]["preds"]) / ref["results"][key]["seconds"]) if ref else None
                acc = sum(p == g for p, g in zip(res["preds"], labels[task][:n], strict=True)) / n
                agree = (
                    sum(p == q for p, q in zip(res["preds"], fp32["results"][key]["preds"], strict=True)) / n
                    if fp32
                    else None
                )
                lines.append(
                    f"| {model} | {task} | {bs} | {backend} | {speed:.1f} | "
                    + (f"{ratio:.2f}" if ratio else "-")
                    + f" | {100 * acc:.2f} | "
                    + (f"{100 * agree:.1f} %" if agree is not None else "-")
                    + f" | {r['peak_mb']:.0f} |"
                )
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--memory-worker", help=argparse.SUPPRESS)
    p.add_argument("--rounds", type=int, default=3, help="timed passes per backend (best is reported)")
    p.add_argument("--memory-rows", type=int, default=128, help="rows predicted by each memory subprocess")
    p.add_argument("--sst2-model", type=Path, help="fine-tuned SST-2 classifier directory")
    p.add_argument("--mrpc-model", type=Path, help="fine-tuned MRPC classifier (default: MRPC dev is skipped)")
    p.add_argument("--base", action="store_true", help="also an albert-base-sized random-weight classifier")
    p.add_argument("--base-tasks", nargs="+", default=["sst2", "mrpc"], choices=sorted(TASK_FILES))
    p.add_argument("--base-max-rows", type=int, help="rows for the albert-base-sized model (default: --max-rows)")
    p.add_argument("--data-dir", type=Path, default=Path(__file__).resolve().parents[1].parent / "shared/data")
    p.add_argument("--max-rows", type=int, help="only the first N rows of each dev set")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch-sizes", type=int, nargs="+", default=[32, 1])
    p.add_argument("--max-seq-length", type=int, default=128)
    p.add_argument("--backends", nargs="+", default=list(BACKENDS), choices=BACKENDS)
    p.add_argument("--work", type=Path, help="directory for the ONNX exports (default: a temp dir)")
    p.add_argument("--json", type=Path, help="also write the raw results here")
    args = p.parse_args()
    if args.memory_worker:
        print(json.dumps(memory_worker(json.loads(args.memory_worker))))
        return
    print(cpu_line())
    print(
        f"threads {args.threads}; batch sizes {args.batch_sizes}; max rows {args.max_rows or 'all'}; "
        f"load average {os.getloadavg()[0]:.1f} at start",
        flush=True,
    )
    labels = {}
    for task in TASK_FILES:
        labels[task] = [int(ex.label) for ex in _read(task, args.data_dir, None).examples]
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        rows = []
        models = []
        if args.sst2_model:
            models.append(("quickstart-sst2", args.sst2_model, ["sst2"]))
        if args.mrpc_model:
            models.append(("quickstart-mrpc", args.mrpc_model, ["mrpc"]))
        if args.base:
            tok = args.sst2_model or args.mrpc_model
            base = work / "albert-base-random"
            if not base.exists():
                make_base_model(tok, base)
            models.append(("albert-base (random)", base, args.base_tasks))
        for name, directory, tasks in models:
            max_rows = args.base_max_rows or args.max_rows if name.startswith("albert-base") else args.max_rows
            print(f"{name}: {directory} on {', '.join(tasks)}, {max_rows or 'all'} rows", flush=True)
            rows += run_model(name.split()[0], directory, tasks, args, work, max_rows)
            print(table(rows, labels, args), flush=True)
        print(f"load average {os.getloadavg()[0]:.1f} at end")
        print(table(rows, labels, args))
        if args.json:
            args.json.write_text(json.dumps(rows))


if __name__ == "__main__":
    main()
