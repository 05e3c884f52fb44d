"""The whole optimizer step as one CUDA graph (``--cuda-graphs``, litebert.training.cuda_graph).

On the CPU a backend with a graph's replay semantics stands in for ``torch.cuda.CUDAGraph`` (the captured function
runs again on the same static buffers, its outputs rewritten in place): the warm-up, the static buffers, the
learning rates read from tensors and the loop's copies of the outputs are checked against the eager loop. The
capture itself is checked on a GPU (``test_cuda_graphs_train_as_the_eager_step_on_a_gpu``)."""

from __future__ import annotations

import json
from typing import ClassVar

import pytest
import torch
from _training_helpers import SyntheticPretrainingData

from litebert import AlbertConfig, AlbertForPreTraining
from litebert.data import PretrainingCollator
from litebert.errors import LitebertError
from litebert.optim import build_optimizer, build_scheduler
from litebert.training import LossOutput, TrainingArgs, make_batch_factory, train
from litebert.training import cuda_graph as G
from litebert.training.metrics import read_metrics
from litebert.training.pretrain import pretraining_count, pretraining_objective

pytestmark = pytest.mark.usefixtures("one_thread")

OUTPUTS = ("finite", "step_loss", "grad_norm", "reduced", "units", "tokens", "packed")


class RerunBackend:
    """What a CUDA graph does, on the CPU: :meth:`capture` keeps the function (a capture runs nothing), each
    :meth:`replay` runs it again and writes its results into the first replay's tensors (a graph's outputs are the
    same tensors every replay, rewritten)."""

    made: ClassVar[list[RerunBackend]] = []

    def __init__(self, device) -> None:
        self.eager_calls = self.captures = self.replays = 0
        self.fn = self.out = None
        RerunBackend.made.append(self)

    def eager(self, fn):
        self.eager_calls += 1
        return fn()

    def capture(self, fn) -> None:
        self.captures += 1
        self.fn = fn

    def replay(self):
        self.replays += 1
        new = self.fn()
        if self.out is None:
            self.out = new
        else:
            for name in OUTPUTS:
                getattr(self.out, name).copy_(getattr(new, name))
        return self.out


def _nan_at(steps: set[int], accum: int):
    """The pretraining objective, with a NaN loss in the micro-batches of the optimizer steps ``steps`` (1-based)."""
    calls = [0]

    def objective(model, batch):
        calls[0] += 1
        out = pretraining_objective(model, batch)
        if (calls[0] - 1) // accum + 1 in steps:
            out.sums["mlm_loss"] = out.sums["mlm_loss"] * float("nan")
        return LossOutput(out.sums, out.ratios)

    return objective


def _run(out, graphs: bool, optimizer="lamb", steps=12, accum=2, seq_len=16, nan_steps=frozenset({6})):
    torch.manual_seed(0)
    model = AlbertForPreTraining(AlbertConfig.from_preset("albert-debug"))
    opt = build_optimizer(model, optimizer, lr=1e-2, weight_decay=0.01)
    sched = build_scheduler(opt, 3, steps)
    # static shapes, as --cuda-graphs makes them: every item padded to seq_len, masked positions to a fixed count
    collate = PretrainingCollator(pad_token_id=0, pad_to_length=seq_len, max_predictions=4)
    batches = make_batch_factory(SyntheticPretrainingData(n=64, seq_len=seq_len), 4, collate, seed=1)
    args = TrainingArgs(
        output_dir=out,
        max_steps=steps,
        gradient_accumulation_steps=accum,
        logging_steps=4,
        progress_bar=False,
        cuda_graphs=graphs,
    )
    result = train(model, opt, sched, batches, _nan_at(set(nan_steps), accum), pretraining_count, args)
    return model, result


@pytest.fixture
def rerun(monkeypatch):
    RerunBackend.made.clear()
    monkeypatch.setattr(G, "CudaBackend", RerunBackend)
    return RerunBackend.made


@pytest.mark.parametrize("optimizer", ["lamb", "adamw"])
def test_a_replayed_step_trains_as_the_eager_step(tmp_path, rerun, optimizer):
    # 12 steps of 2 micro-batches: 3 eager, 1 capture, replays after it (step 6 non-finite: skipped on the device)
    from _training_helpers import fused_adamw

    with fused_adamw():  # torch's fused AdamW, as a GPU gets it (a tensor lr, found_inf on the device)
        eager_model, eager = _run(tmp_path / "eager", graphs=False, optimizer=optimizer)
        graph_model, graphed = _run(tmp_path / "graph", graphs=True, optimizer=optimizer)
    (backend,) = rerun
    assert (backend.eager_calls, backend.captures, backend.replays) == (G.WARMUP_STEPS, 1, 12 - G.WARMUP_STEPS)
    assert eager.skipped_steps == graphed.skipped_steps == 1 and graphed.step == 12
    a, b = (read_metrics(tmp_path / d) for d in ("eager", "graph"))
    train_a, train_b = ([r for r in recs if r["split"] == "train"] for recs in (a, b))
    assert [r["step"] for r in train_b] == [4, 8, 12]
    for ra, rb in zip(train_a, train_b, strict=True):
        for key in ("loss", "mlm_loss", "sop_loss", "mlm_accuracy", "sop_accuracy", "grad_norm", "skipped_steps"):
            assert rb[key] == pytest.approx(ra[key], rel=1e-5, abs=1e-6), (rb["step"], key)
    diff = max((x - y).abs().max().item() for x, y in zip(eager_model.parameters(), graph_model.parameters()))
    moved = max((x - y).abs().max().item() for x, y in zip(eager_model.parameters(), _initial().parameters()))
    assert diff < 1e-5 and moved > 1e-2
    assert "step 4: the optimizer step is captured as one CUDA graph" in (tmp_path / "graph" / "train.log").read_text()


def _initial():
    torch.manual_seed(0)
    return AlbertForPreTraining(AlbertConfig.from_preset("albert-debug"))


def test_a_batch_of_another_shape_after_the_capture_is_one_clear_error(tmp_path, rerun, monkeypatch):
    # padded to the longest item (no --static-shapes): the batch shapes differ, and the first replay after the
    # capture refuses the batch instead of running the captured step on a part of it
    torch.manual_seed(0)
    model = AlbertForPreTraining(AlbertConfig.from_preset("albert-debug"))
    opt = build_optimizer(model, "lamb", lr=1e-2)
    batches = make_batch_factory(SyntheticPretrainingData(n=64), 4, PretrainingCollator(pad_token_id=0), seed=1)
    args = TrainingArgs(output_dir=tmp_path, max_steps=12, logging_steps=4, progress_bar=False, cuda_graphs=True)
    with pytest.raises(LitebertError, match=r"CUDA graphs need one batch shape \(--static-shapes\): micro-batch 0 "):
        train(model, opt, build_scheduler(opt, 1, 12), batches, pretraining_objective, pretraining_count, args)


def test_what_cannot_be_captured_is_refused_before_the_first_step(tmp_path, rerun):
    from litebert.training import distributed as D

    def refusal(**kw):
        torch.manual_seed(0)
        model = kw.pop("model") if "model" in kw else AlbertForPreTraining(AlbertConfig.from_preset("albert-debug"))
        opt = kw.pop("opt") if "opt" in kw else build_optimizer(model, "lamb", lr=1e-2)
        dist = kw.pop("dist", None)
        batches = make_batch_factory(SyntheticPretrainingData(n=16), 4, PretrainingCollator(pad_token_id=0), seed=1)
        args = TrainingArgs(output_dir=tmp_path / "x", max_steps=2, progress_bar=False, cuda_graphs=True, **kw)
        with pytest.raises(LitebertError) as err:
            train(model, opt, build_scheduler(opt, 1, 2), batches, pretraining_objective, pretraining_count, args,
                  dist=dist)  # fmt: skip
        assert not (tmp_path / "x").exists()  # nothing written
        return str(err.value)

    assert "not fp16 (loss scaling)" in refusal(precision="fp16")
    two = D.DistInfo(rank=0, world_size=2, device=torch.device("cpu"))
    assert "run one process; this run has 2" in refusal(dist=two)
    model = AlbertForPreTraining(AlbertConfig.from_preset("albert-debug"))
    foreach_adamw = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)
    assert "not AdamW without fused=True" in refusal(model=model, opt=foreach_adamw)
    compiled = torch.compile(AlbertForPreTraining(AlbertConfig.from_preset("albert-debug")))
    assert "not with --compile" in refusal(model=compiled, opt=build_optimizer(compiled, "lamb"))


def test_the_real_backend_needs_a_cuda_device():
    with pytest.raises(LitebertError, match="need a CUDA device; this run is on cpu"):
        G.CudaBackend(torch.device("cpu"))


# ------------------------------------------------------------------------------------------ `litebert pretrain`
@pytest.fixture(scope="module")
def tiny_data(tiny):
    return tiny.pretraining_data()


def _pretrain_args(data, out, *extra):
    return ["pretrain", "--data", str(data), "--model-config", "albert-debug", "--output", str(out),
            "--learning-rate", "5e-3", "--warmup-steps", "2", "--no-progress-bar", "--max-steps", "10",
            "--logging-steps", "5", *map(str, extra)]  # fmt: skip


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU stand-in (a GPU runs the real capture below)")
@pytest.mark.parametrize("optimizer", ["lamb", "adamw"])
def test_pretrain_cuda_graphs_train_as_static_shapes_do(tiny_data, tmp_path, rerun, monkeypatch, optimizer):
    # the real objective on real shards (masked_positions, SOP), with a replay's semantics on the CPU: the same
    # records as the eager run with one batch shape; run_settings.json says static shapes and CUDA graphs
    from _training_helpers import fused_adamw

    from litebert.cli import main

    monkeypatch.setattr(G, "check_run", lambda world_size, device: None)  # the CPU stands in for the GPU
    common = ("--optimizer", optimizer, "--device", "cpu", "--precision", "fp32")
    with fused_adamw():
        assert main(_pretrain_args(tiny_data, tmp_path / "eager", "--static-shapes", *common)) == 0
        assert main(_pretrain_args(tiny_data, tmp_path / "graphs", "--cuda-graphs", *common[:2], *common[4:])) == 0
    a, b = ([r for r in read_metrics(tmp_path / d) if r["split"] != "test"] for d in ("eager", "graphs"))
    assert [(r["step"], r["split"]) for r in b] == [(5, "train"), (10, "train")]
    for ra, rb in zip(a, b, strict=True):
        for key in ("loss", "mlm_loss", "sop_loss", "mlm_accuracy", "sop_accuracy", "grad_norm"):
            assert rb[key] == pytest.approx(ra[key], rel=1e-5, abs=1e-6), (rb["step"], key)
    (backend,) = rerun
    assert backend.replays == 10 - G.WARMUP_STEPS
    recorded = json.loads((tmp_path / "graphs" / "run_settings.json").read_text())["pretrain_config"]
    assert recorded["cuda_graphs"] is True and recorded["static_shapes"] is True and recorded["compile"] is False


def test_pretrain_cuda_graphs_refusals_write_nothing(tiny_data, tmp_path, capsys):
    from litebert.cli import main

    cases = [
        (("--device", "cpu"), "--cuda-graphs True: needs a CUDA device, not --device cpu"),
        (("--compile",), "--cuda-graphs True: captures the eager step: not with --compile/--compile-mode"),
        (("--precision", "fp16"), "--cuda-graphs True: takes --precision bf16 or fp32, not fp16"),
        (("--unpad", "on"), "--unpad 'on': on gives every batch its own shape"),
    ]
    if not torch.cuda.is_available():
        cases.append(((), "--cuda-graphs runs one process on a CUDA device; this run has device cpu"))
    for extra, message in cases:
        assert main(_pretrain_args(tiny_data, tmp_path / "run", "--cuda-graphs", *extra)) == 2, extra
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, (extra, err)
        assert not (tmp_path / "run").exists()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="captures a CUDA graph (needs a GPU)")
@pytest.mark.parametrize("optimizer", ["lamb", "adamw"])
def test_cuda_graphs_train_as_the_eager_step_on_a_gpu(tiny_data, tmp_path, monkeypatch, optimizer):
    # the real capture: the records of `--cuda-graphs` are those of the eager `--static-shapes` run (fp32, no
    # dropout in albert-debug), and a replayed step that does not log never waits for the device
    from litebert.cli import main

    real_call, checked = G.GraphedStep.__call__, []

    def call(self, micro):
        step = self.trainer.st.step + 1
        quiet = self.static is not None and step % 5 != 0  # replays (after the capture at step 4), not logging
        torch.cuda.set_sync_debug_mode("error" if quiet else "default")
        if quiet:
            checked.append(step)
        return real_call(self, micro)

    common = ("--optimizer", optimizer, "--device", "cuda", "--precision", "fp32")
    assert main(_pretrain_args(tiny_data, tmp_path / "eager", "--static-shapes", *common)) == 0
    monkeypatch.setattr(G.GraphedStep, "__call__", call)
    try:
        assert main(_pretrain_args(tiny_data, tmp_path / "graphs", "--cuda-graphs", *common)) == 0
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert checked == [6, 7, 8, 9]
    a, b = ([r for r in read_metrics(tmp_path / d) if r["split"] == "train"] for d in ("eager", "graphs"))
    assert [r["step"] for r in b] == [5, 10]
    for ra, rb in zip(a, b, strict=True):
        for key in ("loss", "mlm_loss", "sop_loss", "mlm_accuracy", "sop_accuracy", "grad_norm"):
            assert rb[key] == pytest.approx(ra[key], rel=1e-4, abs=1e-5), (rb["step"], key)
    assert "captured as one CUDA graph" in (tmp_path / "graphs" / "train.log").read_text()
