"""`litebert pretrain` end to end on a small slice of WikiText-2 with the albert-debug preset: files written,
`final/` loads in transformers, bad input, SIGKILL + `--resume auto` gives bit-identical weights, and
2 processes × 4 (torchrun, gloo) = 1 × 8 = 1 × 4 × 2 accumulation."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import random
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from litebert.cli import main
from litebert.training.metrics import read_metrics

REPO = Path(__file__).resolve().parents[1]
# one thread everywhere: identical kernels in every process (bit-identical resume) and less CPU contention
SUB_ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def tiny_data(tiny):
    """A SentencePiece tokenizer (1000 ids) and prepared shards (max_seq_length 64) from 300 kB of WikiText-2."""
    return tiny.pretraining_data()


def _args(data, out, *extra):
    return [
        "pretrain",
        "--data",
        str(data),
        "--model-config",
        "albert-debug",
        "--output",
        str(out),
        "--learning-rate",
        "5e-3",
        "--warmup-steps",
        "2",
        "--no-progress-bar",
        *map(str, extra),
    ]


def _weights(run_dir):
    return load_file(str(Path(run_dir) / "final" / "model.safetensors"))


def _sub(args, **kw):
    return subprocess.run(
        [sys.executable, "-m", "litebert", *args], env=SUB_ENV, cwd=REPO, capture_output=True, text=True, **kw
    )


def test_pretrain_end_to_end_and_transformers_loads_final(tiny_data, tmp_path, capsys):
    out = tmp_path / "run"
    assert (
        main(
            _args(
                tiny_data,
                out,
                "--eval-data",
                tiny_data,
                "--max-steps",
                6,
                "--batch-size",
                8,
                "--logging-steps",
                2,
                "--eval-steps",
                3,
                "--max-eval-batches",
                2,
                "--save-steps",
                2,
                "--save-total-limit",
                2,
            )
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "pretrain train step 6/6" in printed and "pretrain eval step 6/6" in printed
    for name in (
        "config.json",
        "run_settings.json",
        "metrics.jsonl",
        "train.log",
        "final/config.json",
        "final/model.safetensors",
        "final/spiece.model",
        "final/tokenizer_config.json",
    ):
        assert (out / name).is_file(), name
    assert any((out / "tb").iterdir())
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["step-4", "step-6"]
    settings = json.loads((out / "run_settings.json").read_text())
    assert settings["pretrain_config"]["max_steps"] == 6 and settings["model_config"]["vocab_size"] == 1000
    # the longest trained position is recorded for `litebert finetune`'s check (the data has 64-token items)
    assert json.loads((out / "final" / "config.json").read_text())["pretraining_max_seq_length"] == 64
    records = read_metrics(out)
    train_rec = [r for r in records if r["split"] == "train"]
    eval_rec = [r for r in records if r["split"] == "eval"]
    assert [r["step"] for r in train_rec] == [2, 4, 6] and [r["step"] for r in eval_rec] == [3, 6]
    assert set(train_rec[0]) == {
        "step",
        "split",
        "loss",
        "mlm_loss",
        "sop_loss",
        "mlm_accuracy",
        "sop_accuracy",
        "learning_rate",
        "grad_norm",
        "tokens_per_second",
        "steps_per_second",
        "skipped_steps",
    }
    assert {"mlm_accuracy", "mlm_perplexity", "sop_accuracy"} <= set(eval_rec[-1])
    assert main(["plot", str(out)]) == 0 and (out / "curves.png").is_file()

    # `litebert export`: the last checkpoint as a model directory equals final/, tokenizer included
    assert main(["export", str(out / "checkpoints" / "step-6"), "--output", str(tmp_path / "exported")]) == 0
    exported, final = load_file(str(tmp_path / "exported" / "model.safetensors")), _weights(out)
    assert sorted(exported) == sorted(final) and all(torch.equal(exported[k], final[k]) for k in final)
    assert (tmp_path / "exported" / "spiece.model").is_file()
    if importlib.util.find_spec("onnxruntime") and importlib.util.find_spec("onnx"):  # the checkpoint as ONNX
        assert (
            main(
                ["export", str(out / "checkpoints" / "step-6"), "--output", str(tmp_path / "onnx"), "--format", "onnx"]
            )
            == 0
        )
        assert (tmp_path / "onnx" / "model.onnx").is_file() and (tmp_path / "onnx" / "spiece.model").is_file()
    capsys.readouterr()
    assert main(["export", str(out / "checkpoints" / "step-6"), "--output", str(tmp_path / "exported")]) == 2
    assert "exists" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["export", str(tmp_path / "empty"), "--output", str(tmp_path / "x")]) == 2
    assert "not a model directory" in capsys.readouterr().err and not (tmp_path / "x").exists()
    assert main(["info", str(out / "checkpoints" / "step-6")]) == 2  # points the user to `litebert export`
    assert "litebert export" in capsys.readouterr().err

    transformers = pytest.importorskip("transformers")
    _, info = transformers.AutoModelForMaskedLM.from_pretrained(out / "final", output_loading_info=True)
    assert not info["missing_keys"] and not info["mismatched_keys"]
    tok = transformers.AutoTokenizer.from_pretrained(out / "final")
    fill = transformers.pipeline("fill-mask", model=str(out / "final"))
    preds = fill(f"the game was released {tok.mask_token} 2010 .")
    assert len(preds) == 5 and all("sequence" in p for p in preds)


def test_bad_input_is_a_clear_error(tiny_data, tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(_args(tiny_data, tmp_path / "x", "--no-such-option"))
    assert exc.value.code == 2 and "unrecognized arguments: --no-such-option" in capsys.readouterr().err
    assert main(_args(tmp_path, tmp_path / "x")) == 2
    assert "is not a litebert data directory" in capsys.readouterr().err
    assert main(_args(tiny_data, tmp_path / "x", "--model-config", "albert-huge")) == 2
    err = capsys.readouterr().err
    assert "albert-huge" in err and "albert-base" in err  # names the bad preset and lists the known ones
    assert main(_args(tiny_data, tmp_path / "x", "--warmup-steps", 20, "--max-steps", 10)) == 2
    assert "--warmup-steps" in capsys.readouterr().err
    # a corrupted checkpoint: one error line, and nothing saved is touched
    out = tmp_path / "run"
    assert main(_args(tiny_data, out, "--max-steps", 2, "--batch-size", 4, "--save-steps", 1)) == 0
    victim = out / "checkpoints" / "step-2" / "optimizer.pt"
    victim.write_bytes(victim.read_bytes()[:100])
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file() and p.suffix != ".log"}
    proc = _sub(_args(tiny_data, out, "--max-steps", 4, "--batch-size", 4, "--resume", "auto"))
    assert proc.returncode == 2, proc.stderr
    assert "optimizer.pt is corrupted" in proc.stderr and "Traceback" not in proc.stderr
    after = {p: p.read_bytes() for p in out.rglob("*") if p.is_file() and p.suffix != ".log"}
    assert after == before  # not even run_settings.json / config.json were rewritten
    # a fresh run into a finished run (with checkpoints) is refused: trained further only with --resume auto
    assert main(_args(tiny_data, out, "--max-steps", 2, "--batch-size", 4)) == 2
    err = capsys.readouterr().err
    assert (
        f"holds a finished `litebert pretrain` run (its model is in {out / 'final'}): pass --resume auto with a " in err
    )


def _kill_resume(tiny_data, out, common, *, delay=None, env=None):
    """Start a run, SIGKILL it (after `delay` s, or it kills itself via env), then `--resume auto` to the end."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "litebert", *_args(tiny_data, out, *common)],
        env={**SUB_ENV, **(env or {})},
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    if delay is not None:
        try:
            proc.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=300)
    killed = proc.returncode == -signal.SIGKILL
    resumed = _sub(_args(tiny_data, out, *common, "--resume", "auto"), timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    return killed, resumed


def test_sigkill_then_resume_auto_is_bit_identical(tiny_data, tmp_path):
    common = ["--max-steps", 16, "--batch-size", 8, "--save-steps", 3, "--logging-steps", 4]
    ref = _sub(_args(tiny_data, tmp_path / "ref", *common), timeout=300)
    assert ref.returncode == 0, ref.stderr[-3000:]
    reference = _weights(tmp_path / "ref")

    # 1) killed while writing the step-6 checkpoint (test hook inside save_checkpoint): step-3 is the last good one
    killed, resumed = _kill_resume(tiny_data, tmp_path / "a", common, env={"LITEBERT_TEST_KILL_DURING_SAVE": "6"})
    assert killed
    assert "resumed from" in resumed.stdout and "step-3 at step 3" in resumed.stdout, resumed.stdout[-2000:]
    got = _weights(tmp_path / "a")
    assert all(torch.equal(reference[k], got[k]) for k in reference)

    # 2) killed at a moment drawn from a fixed seed (before the first checkpoint, between two, while writing one, or at
    # the end, depending on the machine's speed); LITEBERT_TEST_KILL_SEED draws another moment, and the failure
    # message names the seed and the delay so that a failing draw can be rerun.
    seed = int(os.environ.get("LITEBERT_TEST_KILL_SEED", "12"))
    delay = random.Random(seed).uniform(2.0, 12.0)
    _, resumed = _kill_resume(tiny_data, tmp_path / "b", common, delay=delay)
    got = _weights(tmp_path / "b")
    assert all(torch.equal(reference[k], got[k]) for k in reference), f"kill after {delay:.1f} s (seed {seed})"
    steps = [r["step"] for r in read_metrics(tmp_path / "b") if r["split"] == "train"]
    assert steps == [4, 8, 12, 16]


def test_init_from_starts_from_a_model_directory(tiny_data, tmp_path, capsys):
    """--init-from loads every weight of a model directory (lr 1e-12 keeps them); other shapes are a clear error."""
    first = tmp_path / "first"
    assert main(_args(tiny_data, first, "--max-steps", 3, "--batch-size", 4)) == 0
    second = tmp_path / "second"
    assert (
        main(
            [
                "pretrain",
                "--data",
                str(tiny_data),
                "--model-config",
                str(first / "final" / "config.json"),
                "--init-from",
                str(first / "final"),
                "--output",
                str(second),
                "--learning-rate",
                "1e-12",
                "--max-steps",
                "1",
                "--batch-size",
                "4",
                "--no-progress-bar",
            ]
        )
        == 0
    )
    assert "weights from" in capsys.readouterr().out
    before, after = _weights(first), _weights(second)
    assert sorted(before) == sorted(after)
    assert all(torch.allclose(before[k], after[k], rtol=0, atol=1e-9) for k in before)
    # without --init-from the same seed and a zero-ish lr give the random init, not the first run's trained weights
    fresh = tmp_path / "fresh"
    assert main(_args(tiny_data, fresh, "--learning-rate", "1e-12", "--max-steps", 2, "--batch-size", 4)) == 0
    assert not torch.allclose(
        _weights(fresh)["albert.embeddings.word_embeddings.weight"],
        before["albert.embeddings.word_embeddings.weight"],
        rtol=0,
        atol=1e-6,
    )
    bigger = json.loads((first / "final" / "config.json").read_text())
    bigger["intermediate_size"] *= 2
    (tmp_path / "bigger.json").write_text(json.dumps(bigger))
    capsys.readouterr()
    assert (
        main(
            [
                "pretrain",
                "--data",
                str(tiny_data),
                "--model-config",
                str(tmp_path / "bigger.json"),
                "--init-from",
                str(first / "final"),
                "--output",
                str(tmp_path / "bad"),
                "--max-steps",
                "1",
                "--batch-size",
                "4",
                "--no-progress-bar",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "model.safetensors" in err and "ffn" in err, err


def test_config_run_settings_repeats_the_run_bit_for_bit(tiny_data, tmp_path):
    """`pretrain --config RUN/run_settings.json --output NEW` repeats RUN: the same final weights, bit for bit."""
    run, new = tmp_path / "run", tmp_path / "new"
    assert main(_args(tiny_data, run, "--max-steps", 3, "--batch-size", 4, "--seed", 7, "--device", "cpu")) == 0
    assert main(["pretrain", "--config", str(run / "run_settings.json"), "--output", str(new)]) == 0
    first, again = _weights(run), _weights(new)
    assert sorted(first) == sorted(again) and all(torch.equal(first[k], again[k]) for k in first)
    settings = [json.loads((d / "run_settings.json").read_text())["pretrain_config"] for d in (run, new)]
    assert settings[1] == {**settings[0], "output": str(new)}
    assert settings[0]["seed"] == 7 and settings[0]["learning_rate"] == 5e-3


def test_eval_data_longer_than_the_position_table_is_refused_before_the_first_step(tiny_data, tmp_path, capsys):
    """Defect 1: --eval-data prepared at 256 tokens for albert-debug (128 positions) trained every step and then
    died at the final evaluation with a traceback (no final/, no checkpoint). Now: one error line, no step run."""
    from litebert.data import PrepareConfig, prepare

    corpus = tmp_path / "eval.txt"  # a slice of tiny_data's corpus, prepared with its tokenizer at 256 tokens
    corpus.write_text((tiny_data.parent / "corpus.txt").read_text(encoding="utf-8")[:40_000], encoding="utf-8")
    long_eval = tmp_path / "eval256"
    prepare(
        PrepareConfig(
            corpus=[str(corpus)],
            tokenizer=str(tiny_data.parent / "tok"),
            output=str(long_eval),
            max_seq_length=256,
            seed=1,
            progress=False,
        )
    )
    out = tmp_path / "run"
    assert main(_args(tiny_data, out, "--eval-data", long_eval, "--max-steps", 2, "--batch-size", 4)) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith(f"error: --eval-data {long_eval}: data does not match the model")
        and "max_position_embeddings=128" in err
    ), err
    assert not (out / "metrics.jsonl").exists() and not (out / "checkpoints").exists()


def test_incomplete_checkpoint_is_ignored_with_a_warning(tiny_data, tmp_path):
    out = tmp_path / "run"
    assert main(_args(tiny_data, out, "--max-steps", 2, "--batch-size", 4, "--save-steps", 1)) == 0
    shutil.copytree(out / "checkpoints" / "step-2", out / "checkpoints" / "step-9")
    (out / "checkpoints" / "step-9" / "COMPLETE").unlink()
    proc = _sub(_args(tiny_data, out, "--max-steps", 3, "--batch-size", 4, "--resume", "auto"))
    assert proc.returncode == 0, proc.stderr
    assert "ignoring incomplete checkpoint" in proc.stderr and "step-9" in proc.stderr
    assert "resumed from" in proc.stdout and "step-2" in proc.stdout


def test_torchrun_two_processes_equal_one_process_and_accumulation(tiny_data, tmp_path):
    """On prepared shards (the path a user runs), with every dropout 0 (albert-debug): the same weights and the same
    logged MLM and SOP losses. Defect: a user saw the SOP term differ from step 1; it was the SOP head's dropout
    (classifier_dropout_prob 0.1 by default), drawn per process: with dropout the runs agree in distribution only,
    as the log line of a multi-process run now says (test_dropout_note)."""
    # fp32: the three runs sum the same gradients in different orders, which only fp32 keeps within 1e-5
    common = ["--max-steps", 20, "--save-steps", 0, "--logging-steps", 5, "--device", "cpu", "--precision", "fp32"]
    one = _sub(_args(tiny_data, tmp_path / "1x8", "--batch-size", 8, *common), timeout=600)
    assert one.returncode == 0, one.stderr[-3000:]
    acc = _sub(
        _args(tiny_data, tmp_path / "1x4x2", "--batch-size", 4, "--gradient-accumulation-steps", 2, *common),
        timeout=600,
    )
    assert acc.returncode == 0, acc.stderr[-3000:]
    two = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node=2",
            "-m",
            "litebert",
            *_args(tiny_data, tmp_path / "2x4", "--batch-size", 4, *common),
        ],
        env=SUB_ENV,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert two.returncode == 0, two.stderr[-3000:]
    assert "2 process(es) x batch 4" in two.stdout and "dropout is on" not in two.stdout
    w1, wa, w2 = _weights(tmp_path / "1x8"), _weights(tmp_path / "1x4x2"), _weights(tmp_path / "2x4")
    for k in w1:
        assert (w1[k] - wa[k]).abs().max() < 1e-5, k
        assert (w1[k] - w2[k]).abs().max() < 1e-5, k
    # rank 0 alone logged, the same losses as one process
    records = {run: read_metrics(tmp_path / run) for run in ("1x8", "1x4x2", "2x4")}
    assert [r["step"] for r in records["2x4"]] == [5, 10, 15, 20]
    for run in ("1x4x2", "2x4"):
        for a, b in zip(records["1x8"], records[run], strict=True):
            for key in ("mlm_loss", "sop_loss", "mlm_accuracy", "sop_accuracy"):
                assert b[key] == pytest.approx(a[key], rel=1e-6, abs=1e-7), (run, a["step"], key)


def test_dropout_note():
    """A multi-process run with dropout on says it matches one process in distribution only, naming the dropout;
    the SOP head's classifier_dropout_prob (0.1 unless set) counts, the one of an MLM-only model does not."""
    from litebert import AlbertConfig
    from litebert.training.pretrain import dropout_note

    debug = AlbertConfig.from_preset("albert-debug")  # every dropout 0
    user = debug.replace(classifier_dropout_prob=0.1)  # the report: hidden and attention dropout set to 0
    assert dropout_note(debug, 2) is None and dropout_note(user, 1) is None
    note = dropout_note(user, 2)
    assert "classifier_dropout_prob 0.1" in note and "hidden_dropout_prob" not in note
    assert dropout_note(user, 2, sop=False) is None
    hidden = debug.replace(hidden_dropout_prob=0.1, classifier_dropout_prob=None)  # None: the hidden dropout
    assert "hidden_dropout_prob 0.1, classifier_dropout_prob 0.1" in dropout_note(hidden, 4)


def test_fsdp_with_one_process_fails_before_writing_anything(tiny_data, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(_args(tiny_data, out, "--max-steps", 2, "--batch-size", 4, "--fsdp", "--device", "cpu")) == 2
    assert not out.exists()  # it used to write config.json and run_settings.json first
    assert "--fsdp needs 2 or more processes" in capsys.readouterr().err


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_nodes_on_localhost_train_to_the_weights_of_one_process(tiny_data, tmp_path):
    """Multi-node rehearsed on one machine: two `torchrun --nnodes 2 --nproc-per-node 1` node processes meeting at a
    c10d rendezvous on 127.0.0.1 (the output directory is on a file system both see, as real nodes need).
    Run: python -m pytest -q -m slow tests/test_training_pretrain.py -k two_nodes"""
    common = ["--max-steps", 6, "--logging-steps", 3, "--device", "cpu"]
    one = _sub(_args(tiny_data, tmp_path / "one", "--batch-size", 8, *common), timeout=600)
    assert one.returncode == 0, one.stderr[-3000:]
    port = _free_port()
    nodes = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "torch.distributed.run",
                "--nnodes",
                "2",
                "--nproc-per-node",
                "1",
                "--rdzv-backend",
                "c10d",
                "--rdzv-endpoint",
                f"127.0.0.1:{port}",
                "--rdzv-id",
                "rehearsal",
                "-m",
                "litebert",
                *_args(tiny_data, tmp_path / "two", "--batch-size", 4, *common),
            ],
            env=SUB_ENV,
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outs = [n.communicate(timeout=600) for n in nodes]
    for node, (_, stderr) in zip(nodes, outs):
        assert node.returncode == 0, stderr[-3000:]
    assert any("2 process(es) x batch 4" in stdout for stdout, _ in outs)
    w1, w2 = _weights(tmp_path / "one"), _weights(tmp_path / "two")
    assert max((w1[k] - w2[k]).abs().max().item() for k in w1) < 1e-4


def test_resume_refuses_changed_settings_but_extends_max_steps(tiny_data, tmp_path, capsys, monkeypatch):
    """Defect: `--resume auto` took another batch size or learning rate without a word (the docs said the global
    batch was checked). Now each change is refused, named old → new, before anything is written; other logging is
    fine, so is the data given by a relative path, and a larger --max-steps extends the run; a smaller one than the
    checkpoint's step is refused (a finished run's final/ is not rewritten)."""
    out = tmp_path / "run"
    common = ["--batch-size", 4, "--save-steps", 2, "--precision", "fp32"]
    assert main(_args(tiny_data, out, "--max-steps", 4, *common)) == 0
    capsys.readouterr()
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    changed = ["--max-steps", 4, "--batch-size", 8, "--learning-rate", "1e-2", "--save-steps", 2, "--resume", "auto"]
    assert main(_args(tiny_data, out, *changed)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--resume: {out / 'checkpoints' / 'step-4'} was trained with other settings" in err
    assert "--batch-size 4 → 8" in err and "--learning-rate 0.005 → 0.01" in err and "--output" in err
    assert main(_args(tiny_data, out, "--max-steps", 3, *common, "--resume", "auto")) == 2
    assert "--max-steps 3 is below the checkpoint's step 4" in capsys.readouterr().err
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before  # nothing written
    monkeypatch.chdir(tmp_path)
    relative = os.path.relpath(tiny_data, tmp_path)
    assert main(_args(relative, out, "--max-steps", 6, *common, "--logging-steps", 1, "--resume", "auto")) == 0
    assert "resumed from" in capsys.readouterr().out
    assert [r["step"] for r in read_metrics(out) if r["split"] == "train"][-2:] == [5, 6]


def test_resume_path_into_a_new_output_is_a_run_that_config_repeats(tiny_data, tmp_path, capsys):
    """Defect: `--resume RUN/checkpoints/step-N` into a new --output wrote only run_settings.resume-step-N.json: the
    documented repeat (`--config NEW/run_settings.json`) failed with "no such file" and `litebert info` called NEW a
    model directory of 0 parameters. Now NEW's first settings file is run_settings.json, NEW ends with RUN's
    weights, the repeat gives them again bit for bit, and a later resume in NEW adds its own file."""
    run, new, again = tmp_path / "run", tmp_path / "new", tmp_path / "again"
    common = ["--batch-size", 4, "--seed", 3, "--precision", "fp32", "--device", "cpu"]
    assert main(_args(tiny_data, run, "--max-steps", 6, "--save-steps", 3, *common)) == 0
    resume = ["--resume", run / "checkpoints" / "step-3"]
    assert main(_args(tiny_data, new, "--max-steps", 6, *common, *resume)) == 0
    assert sorted(p.name for p in new.glob("run_settings*.json")) == ["run_settings.json"]
    capsys.readouterr()
    assert main(["info", str(new)]) == 0
    assert "kind:       run directory" in capsys.readouterr().out
    assert main(["pretrain", "--config", str(new / "run_settings.json"), "--output", str(again)]) == 0
    reference = _weights(run)
    for got in (_weights(new), _weights(again)):
        assert sorted(got) == sorted(reference) and all(torch.equal(reference[k], got[k]) for k in reference)
    first = (new / "run_settings.json").read_bytes()
    assert main(_args(tiny_data, new, "--max-steps", 7, *common, "--resume", "auto")) == 0
    assert sorted(p.name for p in new.glob("run_settings*.json")) == [
        "run_settings.json",
        "run_settings.resume-step-6.json",
    ]
    assert (new / "run_settings.json").read_bytes() == first


def _finetune_checkpoint(tiny_data, run_dir):
    """A complete checkpoint (step 8) of an AlbertForSequenceClassification of the size pretraining builds on
    ``tiny_data``, in a `litebert finetune` run directory: what `finetune --save-steps` leaves."""
    from litebert.data import read_manifest
    from litebert.modeling import AlbertForSequenceClassification
    from litebert.training.pretrain import model_config_for_data
    from litebert.training.state import save_checkpoint

    config = model_config_for_data("albert-debug", read_manifest(tiny_data), log=lambda *a: None)
    run_dir.mkdir()
    (run_dir / "run_settings.json").write_text(json.dumps({"command": "finetune", "finetune_config": {}}))
    return save_checkpoint(
        run_dir,
        8,
        rank=0,
        world_size=1,
        model_state=AlbertForSequenceClassification(config).state_dict(),
        optimizer_state={},
        scheduler_state={},
        trainer_state={"extra": {"finetune": {"task": "sst2"}, "precision": "fp32", "global_batch_size": 4}},
    )


def test_resume_from_a_finetune_checkpoint_is_refused_before_anything_is_written(
    tiny_data, tmp_path, capsys, monkeypatch
):
    """Defect: `pretrain --resume` from a finetune run's checkpoint wrote config.json and
    run_settings.resume-step-N.json, then failed with a message cut after "Error(s) in loading state_dict for
    AlbertForPreTraining:", leaving a directory that a fresh start and `--resume auto` both refused. Now one line
    says what the checkpoint is, before anything is written (and before the other settings are compared); the
    training loop's own refusal (the last line of defence) is complete on one line too."""
    ckpt = _finetune_checkpoint(tiny_data, tmp_path / "ft")
    out = tmp_path / "out"
    assert main(_args(tiny_data, out, "--max-steps", 3, "--batch-size", 4, "--resume", ckpt)) == 2
    err = capsys.readouterr().err
    assert err == (
        f"error: --resume {ckpt}: a `litebert finetune` checkpoint (AlbertForSequenceClassification), not a "
        "`litebert pretrain` one (AlbertForPreTraining): resume from a checkpoint of a `litebert pretrain` run, or "
        "start without --resume (nothing was written)\n"
    )
    assert not out.exists()
    monkeypatch.setattr("litebert.training.run.check_checkpoint_fits", lambda *a: None)
    assert main(_args(tiny_data, out, "--max-steps", 9, "--batch-size", 4, "--resume", ckpt)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: checkpoint {ckpt} does not fit this model/optimizer: ")
    assert (
        "optimizer: missing predictions.bias, predictions.LayerNorm.weight, predictions.LayerNorm.bias (+6 more)" in err
    )
    assert err.endswith("; unexpected classifier.weight, classifier.bias\n")


def test_closing_line_shows_the_loss_trend_only_over_two_logged_windows(tiny_data, tmp_path, capsys):
    """A run shorter than --logging-steps has one train record: the closing line said "mlm_loss X -> X", as if
    training did nothing; it now gives that window's mean, and over two or more windows first -> last with steps."""
    from litebert.training.metrics import read_metrics

    short = tmp_path / "short"
    assert main(_args(tiny_data, short, "--max-steps", 3, "--batch-size", 4, "--logging-steps", 50)) == 0
    rec = [r for r in read_metrics(short) if r["split"] == "train"]
    cap = capsys.readouterr()
    log = cap.out + cap.err
    assert len(rec) == 1 and f"train mlm_loss {rec[0]['mlm_loss']:.3f} (mean of steps 1-3)" in log and "->" not in log
    two = tmp_path / "two"
    assert main(_args(tiny_data, two, "--max-steps", 4, "--batch-size", 4, "--logging-steps", 2)) == 0
    a, b = [r for r in read_metrics(two) if r["split"] == "train"]
    cap = capsys.readouterr()
    assert f"train mlm_loss {a['mlm_loss']:.3f} (step 2) -> {b['mlm_loss']:.3f} (step 4)" in cap.out + cap.err


def test_export_finds_the_tokenizer_of_a_relative_data_path_from_any_directory(
    tiny_data, tmp_path, capsys, monkeypatch
):
    """A run given `--data data` (relative) records it so, with its working directory (`cwd`). Exporting one of its
    checkpoints from another directory looked for ./data/tokenizer there, warned about a temporary directory and
    wrote no tokenizer; the path is now resolved against the run's recorded directory first. Without any tokenizer
    the weights are still exported, and the warning names --output and how to add one."""
    monkeypatch.chdir(tiny_data.parent)
    run = tmp_path / "run"
    assert main(_args(tiny_data.name, run, "--max-steps", 2, "--batch-size", 4, "--save-steps", 2)) == 0
    settings = json.loads((run / "run_settings.json").read_text())
    assert settings["pretrain_config"]["data"] == "data" and settings["cwd"] == str(tiny_data.parent)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    capsys.readouterr()
    step = run / "checkpoints" / "step-2"
    formats = [("hf", [])]
    if importlib.util.find_spec("onnxruntime") and importlib.util.find_spec("onnx"):
        formats.append(("onnx", ["--format", "onnx", "--head", "masked-lm"]))
    for name, extra in formats:
        assert main(["export", str(step), "--output", str(tmp_path / name), *extra]) == 0, name
        assert "warning" not in capsys.readouterr().err, name
        for f in (tiny_data / "tokenizer").iterdir():
            assert (tmp_path / name / f.name).read_bytes() == f.read_bytes(), (name, f.name)
    # the data moved away: the weights are exported, without a tokenizer, and the warning says where and what to do
    settings["pretrain_config"]["data"] = "moved"
    (run / "run_settings.json").write_text(json.dumps(settings))
    for name, extra in formats:
        out = tmp_path / f"{name}-notok"
        assert main(["export", str(step), "--output", str(out), *extra]) == 0, name
        weights = "model.safetensors" if name == "hf" else "model.onnx"
        assert sorted(p.name for p in out.iterdir()) == sorted(["config.json", weights]), name
        err = (
            capsys.readouterr().err
        )  # (plus litebert's info lines when an earlier command in this process set them up)
        assert err.count("warning:") == 1, (name, err)
        assert (
            f"warning: {out} has no tokenizer files (the run's training data has no tokenizer at "
            f"{tiny_data.parent / 'moved' / 'tokenizer'} nor {elsewhere / 'moved' / 'tokenizer'}): copy the "
            "tokenizer files of the run's data (DATA/tokenizer/*) into it, or pass --tokenizer DIR to "
            "finetune/evaluate/predict"
        ) in err.splitlines(), (name, err)


def test_static_shapes_batch_layout(tiny_data):
    # every batch (B, max_seq_length); masked_positions (B, max_predictions_per_seq) list each row's predicted
    # positions in order, then 0 ([CLS], label -100)
    from litebert.data import PretrainingDataset

    ds = PretrainingDataset(tiny_data)
    settings = ds.manifest["settings"]
    S, P = settings["max_seq_length"], settings["max_predictions_per_seq"]
    dynamic, static = ds.collator(), ds.collator(static_shapes=True)
    with_positions = ds.collator(masked_positions=True)  # what pretrain uses without --static-shapes
    for start in (0, 40):
        items = ds.__getitems__(list(range(start, start + 6)))
        d, s, w = dynamic(items), static(items), with_positions(items)
        most = int((d["labels"] != -100).sum(1).max())
        assert w["masked_positions"].shape == (6, most) and torch.equal(
            w["masked_positions"], s["masked_positions"][:, :most]
        )
        assert "masked_positions" not in d
        assert s["input_ids"].shape == (6, S) and s["masked_positions"].shape == (6, P)
        width = d["input_ids"].shape[1]
        for key in ("input_ids", "token_type_ids", "attention_mask", "labels"):
            assert torch.equal(s[key][:, :width], d[key])
        assert (s["attention_mask"][:, width:] == 0).all() and (s["labels"][:, width:] == -100).all()
        for row in range(6):
            predicted = (d["labels"][row] != -100).nonzero().squeeze(1).tolist()
            pos = s["masked_positions"][row].tolist()
            assert pos == predicted + [0] * (P - len(predicted))
            assert s["labels"][row, 0] == -100


def test_static_shapes_train_like_dynamic_padding_and_are_recorded(tiny_data, tmp_path):
    # the same run with one batch shape: the same losses (padding is masked out, pad slots are ignored)
    for name, extra in (("dyn", ()), ("static", ("--static-shapes",))):
        assert main(_args(tiny_data, tmp_path / name, "--max-steps", "6", "--logging-steps", "1", *extra)) == 0
    dyn = [r for r in read_metrics(tmp_path / "dyn") if r["split"] == "train"]
    static = [r for r in read_metrics(tmp_path / "static") if r["split"] == "train"]
    for a, b in zip(dyn, static, strict=True):
        for key in ("loss", "mlm_loss", "sop_loss", "mlm_accuracy", "sop_accuracy"):
            assert abs(a[key] - b[key]) < 1e-5, (key, a, b)
    recorded = json.loads((tmp_path / "static" / "run_settings.json").read_text())["pretrain_config"]
    assert recorded["static_shapes"] is True and recorded["compile_mode"] is None


def test_compile_mode_is_recorded_as_compiling_and_logged(tiny_data, tmp_path, capsys, monkeypatch):
    """`--compile-mode default` compiles: run_settings.json says compile: true (it said false), a log line says the
    model is being compiled, and `--config RUN/run_settings.json` repeats it. Dynamo's eager backend stands in for
    inductor (the same tracing, no code generation: seconds instead of a minute)."""
    from litebert.training import distributed as D

    compiled = []
    real = D.compile_model

    def eager_backend(model, **kw):
        compiled.append(kw)
        return real(model, backend="eager", **kw)

    monkeypatch.setattr(D, "compile_model", eager_backend)
    run = tmp_path / "run"
    assert main(_args(tiny_data, run, "--max-steps", "2", "--compile-mode", "default")) == 0
    assert compiled == [{"mode": "default"}]
    recorded = json.loads((run / "run_settings.json").read_text())["pretrain_config"]
    assert (recorded["compile"], recorded["compile_mode"]) == (True, "default")
    out = capsys.readouterr().out
    assert "pretrain: compiling the model (torch.compile mode=default): the first steps are slow" in out
    again = tmp_path / "again"
    assert main(["pretrain", "--config", str(run / "run_settings.json"), "--output", str(again)]) == 0
    repeated = json.loads((again / "run_settings.json").read_text())["pretrain_config"]
    assert repeated == {**recorded, "output": str(again)}
    assert len(compiled) == 2


@pytest.mark.slow
def test_compile_mode_reduce_overhead_with_static_shapes_matches_eager(tiny_data, tmp_path):
    # torch.compile(mode="reduce-overhead") (CUDA graphs on a GPU; inductor on the CPU) on one batch shape
    common = ("--max-steps", "4", "--logging-steps", "1", "--static-shapes")
    assert main(_args(tiny_data, tmp_path / "eager", *common)) == 0
    assert main(_args(tiny_data, tmp_path / "ro", *common, "--compile-mode", "reduce-overhead")) == 0
    eager = [r["loss"] for r in read_metrics(tmp_path / "eager") if r["split"] == "train"]
    compiled = [r["loss"] for r in read_metrics(tmp_path / "ro") if r["split"] == "train"]
    assert len(eager) == 4 and max(abs(a - b) for a, b in zip(eager, compiled)) < 1e-3
    recorded = json.loads((tmp_path / "ro" / "run_settings.json").read_text())["pretrain_config"]
    assert recorded["compile_mode"] == "reduce-overhead"


def test_unpad_indices_come_from_the_collator_and_train_like_nonzero(tiny_data, tmp_path, monkeypatch):
    # --unpad on: the collator adds the real tokens' flat positions (host), the model takes them instead of its
    # nonzero (a device sync per micro-batch on a GPU), and the run's losses are bit for bit those of the nonzero path
    from litebert.data import PretrainingDataset
    from litebert.modeling import AlbertModel

    ds = PretrainingDataset(tiny_data)
    items = ds.__getitems__(list(range(6)))
    b = ds.collator(masked_positions=True, unpad_indices=True)(items)
    assert torch.equal(b["unpad_indices"], b["attention_mask"].reshape(-1).nonzero().squeeze(1))
    assert b["unpad_indices"].dtype == torch.int64 and "unpad_indices" not in ds.collator()(items)

    given, unpadding = [], AlbertModel.unpadding

    def spy(self, attention_mask, unpad_indices=None):
        given.append(unpad_indices is not None)
        return unpadding(self, attention_mask, unpad_indices if drop is False else None)

    monkeypatch.setattr(AlbertModel, "unpadding", spy)
    losses = {}
    for drop in (False, True):
        out = tmp_path / f"drop{drop}"
        assert main(_args(tiny_data, out, "--max-steps", "4", "--logging-steps", "1", "--unpad", "on")) == 0
        losses[drop] = [r["loss"] for r in read_metrics(out) if r["split"] == "train"]
    assert given and all(given)  # every training forward got them
    assert len(losses[False]) == 4 and losses[False] == losses[True]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="device syncs exist on CUDA only (needs a GPU)")
@pytest.mark.parametrize(
    ("unpad", "extra"),
    [("on", ()), ("off", ()), ("off", ("--static-shapes",)), ("on", ("--precision", "fp16"))],
    ids=["unpad", "padded", "static", "unpad-fp16"],
)
def test_a_cuda_step_that_does_not_log_never_syncs(tiny_data, tmp_path, monkeypatch, unpad, extra):
    # issue 25: from the start of a step that does not log to the start of the next, no device→host sync at all
    # (torch.cuda.set_sync_debug_mode("error") raises at the first one): LAMB, the loop, the model's forward and
    # backward, the next batch's copy. Checked: steps 2, 3, 5, 6, 7; the logging steps (4, 8) read their numbers
    from litebert.training import loop as L

    logging_steps, steps = 4, 8
    normalisers, settle = L._Trainer.normalisers, L._Trainer.settle

    def step_starts(self, *a, **k):
        step = self.st.step + 1
        checked = step > 1 and step % logging_steps  # step 1 warms up (lazy CUDA and library initialisation)
        torch.cuda.set_sync_debug_mode("error" if checked else "default")
        return normalisers(self, *a, **k)

    def settled(self, *a, **k):  # the logging step's one read
        mode = torch.cuda.get_sync_debug_mode()
        torch.cuda.set_sync_debug_mode("default")
        try:
            return settle(self, *a, **k)
        finally:
            torch.cuda.set_sync_debug_mode(mode)

    monkeypatch.setattr(L._Trainer, "normalisers", step_starts)
    monkeypatch.setattr(L._Trainer, "settle", settled)
    args = _args(tiny_data, tmp_path, "--max-steps", steps, "--logging-steps", logging_steps, "--save-steps", steps)
    try:
        code = main([*args, "--device", "cuda", "--batch-size", "4", "--unpad", unpad, *extra])
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert code == 0
    assert [r["step"] for r in read_metrics(tmp_path) if r["split"] == "train"] == [4, 8]


def test_group_by_length_trains_is_recorded_and_refuses_static_shapes(tiny_data, tmp_path, capsys):
    args = ("--max-steps", "4", "--logging-steps", "2", "--group-by-length")
    assert main(_args(tiny_data, tmp_path / "g", *args)) == 0
    recorded = json.loads((tmp_path / "g" / "run_settings.json").read_text())["pretrain_config"]
    assert recorded["group_by_length"] is True
    train = [r for r in read_metrics(tmp_path / "g") if r["split"] == "train"]
    assert [r["step"] for r in train] == [2, 4] and all(math.isfinite(r["loss"]) for r in train)
    capsys.readouterr()
    assert main(_args(tiny_data, tmp_path / "s", *args, "--static-shapes")) != 0
    err = capsys.readouterr().err
    assert "--group-by-length True: groups batches to pad them less: not with --static-shapes" in err
    assert not (tmp_path / "s").exists()


def _signal_resume(tiny_data, out, common, sig):
    """Start a run, send it ``sig`` once its first train record is written, then `--resume auto` to the end."""
    import time

    proc = subprocess.Popen(
        [sys.executable, "-m", "litebert", *_args(tiny_data, out, *common)],
        env=SUB_ENV,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if (out / "metrics.jsonl").is_file() and '"train"' in (out / "metrics.jsonl").read_text():
            break
        time.sleep(0.05)
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=300)
    resumed = _sub(_args(tiny_data, out, *common, "--resume", "auto"), timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    return proc.returncode, stdout, stderr


def test_sigterm_and_sigint_save_a_checkpoint_and_resume_auto_is_bit_identical(tiny_data, tmp_path):
    """Defect: SIGTERM (a preemptible machine) killed pretrain with nothing saved (exit 143), Ctrl-C printed only
    "interrupted" (exit 130): with the default --save-steps 0 the whole run was lost. Now the run stops at the step
    boundary, saves that step's checkpoint, names it and the resume command, exits 128 + signal, and `--resume
    auto` ends bit-identical to an uninterrupted run, with the same train records."""
    common = ["--max-steps", 40, "--batch-size", 8, "--logging-steps", 4]
    ref = _sub(_args(tiny_data, tmp_path / "ref", *common), timeout=300)
    assert ref.returncode == 0, ref.stderr[-3000:]
    reference = _weights(tmp_path / "ref")
    ref_steps = [r["step"] for r in read_metrics(tmp_path / "ref") if r["split"] == "train"]
    for sig in (signal.SIGTERM, signal.SIGINT):
        out = tmp_path / sig.name
        code, stdout, stderr = _signal_resume(tiny_data, out, common, sig)
        assert code == 128 + sig, (code, stderr[-2000:])
        line = next(x for x in stdout.splitlines() if x.startswith(f"{sig.name} at step "))
        step = int(line.split()[3].rstrip(":"))
        assert 4 <= step < 40, line
        assert line == (
            f"{sig.name} at step {step}: stopped, checkpoint {out / 'checkpoints' / f'step-{step}'}; continue with "
            f"the same command and --resume auto (`litebert pretrain ... --output {out} --resume auto`)"
        )
        assert "Traceback" not in stderr
        got = _weights(out)
        assert all(torch.equal(reference[k], got[k]) for k in reference), f"{sig.name} at step {step}"
        assert [r["step"] for r in read_metrics(out) if r["split"] == "train"] == ref_steps


def test_a_run_stopped_by_max_minutes_is_said_to_be_continued_with_the_same_max_steps(tiny_data, tmp_path, capsys):
    """Defect: a run stopped by --max-minutes (step 1 of 50) was called "finished", to be trained further with a
    larger --max-steps (another LR schedule). Now the refusal of a rerun and `litebert info` say where and why it
    stopped and that --resume auto (the same --max-steps) continues it."""
    out = tmp_path / "run"
    assert main(_args(tiny_data, out, "--max-steps", 50, "--batch-size", 4, "--max-minutes", "1e-6")) == 0
    capsys.readouterr()
    assert main(_args(tiny_data, out, "--max-steps", 50, "--batch-size", 4)) == 2
    err = capsys.readouterr().err
    assert err == (
        f"error: --output {out} holds a `litebert pretrain` run stopped at step 1 of 50 by --max-minutes (its model "
        f"is in {out / 'final'}): continue it with --resume auto (the same --max-steps), or choose a new --output, "
        f"or remove {out} to run it again (nothing was written)\n"
    )
    assert main(["info", str(out)]) == 0
    text = capsys.readouterr().out
    assert "state:      stopped at step 1 of 50 by --max-minutes (final): continue it with --resume auto" in text
