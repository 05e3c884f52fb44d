"""benchmarks/bench_gpu.py: its helpers against hand-counted cases, and its --smoke mode end to end on the CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import bench_gpu  # noqa: E402


def test_count_host_reads_counts_each_kind_and_restores():
    t = torch.tensor([1.5, 2.0])
    with bench_gpu.count_host_reads() as c:
        t[0].item()
        float(t[0])
        int(t[1])
        bool(t[0] > 0)
        t.tolist()
        t.numpy()
        t + 1  # not a read
    assert c["n"] == 6
    before = c["n"]
    t[0].item()
    assert c["n"] == before  # methods restored


def test_repeated_tsv(tmp_path):
    src = tmp_path / "dev.tsv"
    src.write_text("sentence\tlabel\na\t0\nb\t1\nc\t0\n", encoding="utf-8")
    assert bench_gpu.repeated_tsv(src, 7, tmp_path / "out.tsv") == 9
    lines = (tmp_path / "out.tsv").read_text(encoding="utf-8").splitlines()
    assert lines[0] == "sentence\tlabel" and lines[1:] == ["a\t0", "b\t1", "c\t0"] * 3


def test_build_data_builds_what_every_mode_reads(shared_data, tmp_path, monkeypatch, capsys):
    """`--build-data DIR` builds the inputs of the GPU run and of `--smoke` (it built only the GPU run's, and the
    documented smoke run on it failed: train-128 had no manifest.json); a run lacking its inputs stops at once,
    naming them. A ~100 kB source and 300-id tokenizers stand in for WikiText-2 and the 2,000/8,000 ids."""
    src = tmp_path / "src"
    (src / "wikitext-2").mkdir(parents=True)
    (src / "glue" / "SST-2").mkdir(parents=True)
    text = (shared_data / "wikitext-2" / "wiki.valid.tokens").read_text(encoding="utf-8")
    for name in ("wiki.train.tokens", "wiki.valid.tokens"):
        (src / "wikitext-2" / name).write_text(text[:100_000], encoding="utf-8")
    (src / "glue" / "SST-2" / "dev.tsv").write_text("sentence\tlabel\na good film .\t1\n", encoding="utf-8")
    real = bench_gpu.sizes
    monkeypatch.setattr(bench_gpu, "sizes", lambda smoke: {**real(smoke), "vocab": 300})
    data = tmp_path / "data"
    assert bench_gpu.missing_inputs(data, smoke=False) and bench_gpu.missing_inputs(data, smoke=True)
    with pytest.raises(SystemExit) as exc:  # the GPU run: nothing built, one error naming what is missing
        bench_gpu.main(["--data", str(data), "--source", str(src), "--device", "cpu"])
    assert exc.value.code == 2 and "train-512" in capsys.readouterr().err and not data.exists()
    assert bench_gpu.main(["--build-data", str(data), "--source", str(src)]) == 0
    for smoke in (False, True):
        assert bench_gpu.missing_inputs(data, smoke) == [], smoke
        d = bench_gpu.mode_dir(data, smoke)
        manifest = json.loads((d / real(smoke)["shard"] / "manifest.json").read_text())
        assert manifest["settings"]["max_seq_length"] == real(smoke)["seq"]
        assert bench_gpu.tokenizer_vocab(d) == 300
    # what the sections read: the shard batches of the smoke sizes
    smoke_dir = bench_gpu.mode_dir(data, True)
    (batch,) = bench_gpu.shard_batches(smoke_dir / real(True)["shard"], 4, 1, torch.device("cpu"))
    assert batch["input_ids"].shape[0] == 4 and batch["input_ids"].shape[1] <= 128


@pytest.mark.slow
def test_smoke_mode_runs_every_section(shared_data, tmp_path):
    """`--device cpu --smoke` builds its inputs and runs every section; no section fails."""
    out = tmp_path / "smoke.json"
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, str(REPO / "benchmarks" / "bench_gpu.py"), "--data", str(tmp_path / "data"),
           "--source", str(shared_data), "--device", "cpu", "--smoke", "--out", str(out)]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = json.loads(out.read_text())
    for name in bench_gpu.SECTIONS:
        assert "error" not in res[name], (name, res[name].get("traceback"))
    assert 0 < res["mfu"]["padding_fraction"] < 0.5
    # on the CPU a non-logging step reads two CPU tensors, no more: the collator counts the batch's most predicted
    # row (host work) and AlbertModel.additive_mask checks a CPU mask for padding (a branch a GPU never takes)
    assert res["loop"]["host_reads_where"] == {"dataset.py:_static": 1, "modeling.py:additive_mask": 1}
    assert res["loop"]["host_reads_per_step"] == 2 and "syncs_per_step" not in res["loop"]
    assert res["predict"]["batch_default"]["rows_per_s"] > 0 and res["predict"]["pipeline"]["rows"] > 0
    assert res["mainjob"]["wall_s"] > 0 and res["torchrun"]["returncode"] == 0
    assert out.with_suffix(".txt").read_text().count("\n") >= 10
