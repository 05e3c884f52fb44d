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
