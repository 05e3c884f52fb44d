"""ONNX export (litebert.export): outputs equal torch's for every head on padded batches, shared weights stored once,
int8 quantization runs, and bad input fails with one line and writes nothing. Tiny widths: each export ~1 s."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

from litebert.cli import main
from litebert.config import AlbertConfig
from litebert.errors import LitebertError
from litebert.modeling import MODEL_CLASSES, AlbertForPreTraining, AlbertForSequenceClassification

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

import litebert.export  # noqa: E402
from litebert.export import export_model, export_onnx  # noqa: E402
from litebert.inference import ONNX_OUTPUTS  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


def _config(groups: int, **kw) -> AlbertConfig:
    base = dict(
        vocab_size=120,
        embedding_size=16,
        hidden_size=32,
        num_hidden_layers=12,
        num_hidden_groups=groups,
        num_attention_heads=4,
        intermediate_size=37,
        max_position_embeddings=40,
        hidden_act="gelu_new",
    )
    base.update(kw)
    return AlbertConfig(**base)


def _padded_batch(shape, vocab, seed=1):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, shape, generator=g)
    mask = torch.ones(shape, dtype=torch.long)
    mask[1, ..., 4:] = 0  # padded rows of different lengths; row 0 unpadded
    mask[2, ..., 9:] = 0
    types = torch.zeros(shape, dtype=torch.long)
    types[..., 6:] = 1
    return ids, mask, types


@pytest.mark.parametrize("groups", [1, 2], ids=["all_shared", "two_groups"])
@pytest.mark.parametrize("head", sorted(ONNX_OUTPUTS))
def test_onnx_equals_torch_on_padded_batches(head, groups, tmp_path):
    cfg = _config(groups, num_labels=2 if head == "AlbertForQuestionAnswering" else 3)
    torch.manual_seed(0)
    model = MODEL_CLASSES[head](cfg).eval()
    path = export_onnx(model, tmp_path / "model.onnx")
    # a batch shape other than the traced (2, 5): the axes are dynamic
    shape = (3, 2, 12) if head == "AlbertForMultipleChoice" else (3, 12)
    ids, mask, types = _padded_batch(shape, cfg.vocab_size)
    with torch.no_grad():
        ref = model(input_ids=ids, attention_mask=mask, token_type_ids=types)
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert [o.name for o in sess.get_outputs()] == list(ONNX_OUTPUTS[head])
    got = sess.run(None, {"input_ids": ids.numpy(), "attention_mask": mask.numpy(), "token_type_ids": types.numpy()})
    for name, value in zip(ONNX_OUTPUTS[head], got, strict=True):
        np.testing.assert_allclose(value, ref[name].numpy(), atol=1e-4, rtol=0, err_msg=name)


def _save_model(directory, model):
    model.save_pretrained(directory)
    return directory


def test_shared_layer_stored_once_cli(tmp_path):
    # weights big enough that the graph's own bytes (~25 kB per layer application) are small beside them: a layer
    # written once per use would make the file ~9x model.safetensors
    cfg = _config(1, vocab_size=2000, embedding_size=64, hidden_size=256, num_attention_heads=4, intermediate_size=1024)
    torch.manual_seed(0)
    src = _save_model(tmp_path / "model", AlbertForPreTraining(cfg))
    assert main(["export", str(src), "--output", str(tmp_path / "onnx"), "--format", "onnx"]) == 0
    ratio = (tmp_path / "onnx/model.onnx").stat().st_size / (src / "model.safetensors").stat().st_size
    assert ratio <= 1.2, ratio
    saved = json.loads((tmp_path / "onnx/config.json").read_text())
    assert saved["architectures"] == ["AlbertForPreTraining"]
    assert saved["litebert_onnx"]["outputs"] == ["prediction_logits", "sop_logits"]


def test_int8_onnx_runs_and_agrees(tmp_path):
    cfg = _config(1, num_hidden_layers=4, num_labels=2, hidden_size=64, intermediate_size=128)
    torch.manual_seed(0)
    model = AlbertForSequenceClassification(cfg).eval()
    with torch.no_grad():  # a classifier with a clear margin, so that int8 rounding cannot flip most labels
        model.classifier.weight.mul_(30)
    src = _save_model(tmp_path / "model", model)
    result = export_model(src, tmp_path / "int8", format="onnx", quantize="int8")
    assert result.head == "AlbertForSequenceClassification"
    fp32 = export_model(src, tmp_path / "fp32", format="onnx")
    import onnx

    def weight_bytes(d):
        return sum(len(i.raw_data) for i in onnx.load(str(d / "model.onnx")).graph.initializer)

    # every application of the shared layer reads the same int8 weights: a third of fp32's weight bytes or less
    assert weight_bytes(result.output_dir) < 0.35 * weight_bytes(fp32.output_dir)
    ids, mask, types = _padded_batch((16, 12), cfg.vocab_size)
    feed = {"input_ids": ids.numpy(), "attention_mask": mask.numpy(), "token_type_ids": types.numpy()}
    q = ort.InferenceSession(str(tmp_path / "int8/model.onnx"), providers=["CPUExecutionProvider"]).run(None, feed)[0]
    with torch.no_grad():
        ref = model(input_ids=ids, attention_mask=mask, token_type_ids=types).logits.numpy()
    assert np.isfinite(q).all() and q.shape == (16, 2)
    assert (q.argmax(-1) == ref.argmax(-1)).mean() >= 0.8
    assert np.abs(q - ref).max() < 0.2 * np.abs(ref).max()  # int8 noise, not garbage


def _no_leftovers(parent, name):
    return not (parent / name).exists() and not [p for p in parent.iterdir() if p.name.startswith(f".{name}")]


def test_bad_input_one_line_and_nothing_written(tmp_path, capsys, monkeypatch):
    torch.manual_seed(0)
    src = _save_model(tmp_path / "model", AlbertForSequenceClassification(_config(1, num_hidden_layers=2)))
    (tmp_path / "notmodel").mkdir()
    (tmp_path / "notmodel/readme.txt").write_text("x")
    cases = [
        (["export", str(tmp_path / "notmodel"), "--format", "onnx"], "not a model directory"),
        (["export", str(src), "--format", "onnx", "--head", "AlbertForPoetry"], "unknown head 'AlbertForPoetry'"),
        (["export", str(src), "--quantize", "int8"], "--quantize int8 needs --format onnx"),
    ]
    for argv, message in cases:
        assert main([*argv, "--output", str(tmp_path / "out")]) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("error:") and message in err, err
        assert _no_leftovers(tmp_path, "out")
    # config.json naming an unknown architecture
    cfg = json.loads((src / "config.json").read_text())
    (src / "config.json").write_text(json.dumps({**cfg, "architectures": ["BertForPoetry"]}))
    with pytest.raises(LitebertError, match="unknown head 'BertForPoetry'"):
        export_model(src, tmp_path / "out", format="onnx")
    assert _no_leftovers(tmp_path, "out")
    (src / "config.json").write_text(json.dumps(cfg))
    # onnxruntime missing: say what to install
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    assert main(["export", str(src), "--format", "onnx", "--output", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "onnxruntime" in err and "pip install 'litebert[onnx]'" in err and err.count("\n") == 1
    assert _no_leftovers(tmp_path, "out")


def test_a_run_directory_is_refused_naming_its_model_directory(tmp_path, capsys):
    """Defect: `export RUN` (a pretrain run directory: config.json, checkpoints/, final/) said it found no weights,
    and a finetune run directory that it had no config.json. Now one line names what to pass: RUN/final, RUN/best."""
    torch.manual_seed(0)
    for command, model in (("pretrain", "final"), ("finetune", "best")):
        run = tmp_path / command
        (run / "checkpoints").mkdir(parents=True)
        (run / "run_settings.json").write_text(json.dumps({"command": command, f"{command}_config": {}}))
        _save_model(run / model, AlbertForPreTraining(_config(1, num_hidden_layers=2)))
        if command == "pretrain":
            _config(1, num_hidden_layers=2).save(run)
        assert main(["export", str(run), "--output", str(tmp_path / "out")]) == 2
        assert capsys.readouterr().err == (
            f"error: {run} is a `litebert {command}` run directory, not a model directory: pass {run / model}\n"
        )
        assert _no_leftovers(tmp_path, "out")
        assert main(["export", str(run / model), "--output", str(tmp_path / "out")]) == 0  # what it names works
        capsys.readouterr()  # (its warning: the model has no tokenizer files)
        shutil.rmtree(tmp_path / "out")


def test_head_override_and_hf_format_from_model_dir(tmp_path):
    torch.manual_seed(0)
    src = _save_model(tmp_path / "model", AlbertForPreTraining(_config(1, num_hidden_layers=2)))
    res = export_model(src, tmp_path / "mlm", format="onnx", head="masked-lm")
    assert res.head == "AlbertForMaskedLM"
    sess = ort.InferenceSession(str(tmp_path / "mlm/model.onnx"), providers=["CPUExecutionProvider"])
    assert [o.name for o in sess.get_outputs()] == ["logits"]
    hf = export_model(src, tmp_path / "hf")  # a model directory in, the same weights out
    from safetensors.torch import load_file

    a, b = load_file(str(src / "model.safetensors")), load_file(str(hf.output_dir / "model.safetensors"))
    assert sorted(a) == sorted(b) and all(torch.equal(a[k], b[k]) for k in a)


def _fine_tuned(directory, **extra):
    torch.manual_seed(0)
    model = AlbertForSequenceClassification(_config(1, num_hidden_layers=2))
    model.config.id2label, model.config.label2id = {0: "0", 1: "1"}, {"0": 0, "1": 1}
    model.config.extra = {**model.config.extra, **extra}
    return _save_model(directory, model)


def test_fine_tuned_model_exports_only_with_its_own_head_or_as_encoder(tmp_path, capsys):
    """A fine-tuned SST-2 classifier exported with --head question-answering would be a random QA head under
    sst2's metadata: refused, one line, nothing written. Its own head and the bare encoder (task keys dropped)
    export; so does a transformers classifier (architectures only) with its head."""
    src = _fine_tuned(tmp_path / "ft", finetuning_task="sst2", litebert_task_type="classification")
    for head, fmt in (("question-answering", "onnx"), ("masked-lm", "onnx"), ("token-classification", "hf")):
        argv = ["export", str(src), "--output", str(tmp_path / "out"), "--format", fmt, "--head", head]
        assert main(argv) == 2, head
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("error:"), err
        assert f"{src} is a fine-tuned model (AlbertForSequenceClassification, task sst2)" in err, err
        assert _no_leftovers(tmp_path, "out")
    own = export_model(src, tmp_path / "own", format="onnx", head="sequence-classification")
    saved = json.loads((own.output_dir / "config.json").read_text())
    assert saved["architectures"] == ["AlbertForSequenceClassification"] and saved["finetuning_task"] == "sst2"
    for fmt in ("onnx", "hf"):
        base = export_model(src, tmp_path / f"base-{fmt}", format=fmt, head="base")
        saved = json.loads((base.output_dir / "config.json").read_text())
        assert saved["architectures"] == ["AlbertModel"], fmt
        assert "finetuning_task" not in saved and "litebert_task_type" not in saved, fmt
    hf_style = _fine_tuned(tmp_path / "hf_ft")  # fine-tuned elsewhere: the head class alone says so
    with pytest.raises(LitebertError, match=r"is a fine-tuned model \(AlbertForSequenceClassification\)"):
        export_model(hf_style, tmp_path / "out", format="onnx", head="AlbertForQuestionAnswering")
    assert export_model(hf_style, tmp_path / "hf_own", format="onnx").head == "AlbertForSequenceClassification"


def test_pretraining_model_refuses_a_task_head(tmp_path, capsys):
    """A pretraining final/ (or a masked-LM / bare encoder directory) exported with a task head wrote a freshly
    initialised head, different at every export, that `predict` then ran as a classifier: refused, one line, nothing
    written; its own head, masked-lm and base still export."""
    torch.manual_seed(0)
    pre = _save_model(tmp_path / "pre", AlbertForPreTraining(_config(1, num_hidden_layers=2)))
    mlm = _save_model(tmp_path / "mlm", MODEL_CLASSES["AlbertForMaskedLM"](_config(1, num_hidden_layers=2)))
    base = _save_model(tmp_path / "base", MODEL_CLASSES["AlbertModel"](_config(1, num_hidden_layers=2)))
    heads = ("sequence-classification", "token-classification", "question-answering", "multiple-choice")
    for src, arch in ((pre, "AlbertForPreTraining"), (mlm, "AlbertForMaskedLM"), (base, "AlbertModel")):
        for head, fmt in zip(heads, ("onnx", "hf", "onnx", "hf"), strict=True):
            argv = ["export", str(src), "--output", str(tmp_path / "out"), "--format", fmt, "--head", head]
            assert main(argv) == 2, (src, head)
            err = capsys.readouterr().err
            assert err.count("\n") == 1 and err.startswith("error:"), err
            assert f"{src} holds an {arch}, not a fine-tuned model: exporting it with --head {head} would" in err, err
            assert _no_leftovers(tmp_path, "out")
    with pytest.raises(LitebertError, match=r"holds an AlbertForPreTraining, not a fine-tuned model"):
        export_model(pre, tmp_path / "out", head="AlbertForSequenceClassification")
    assert _no_leftovers(tmp_path, "out")
    for head in ("pretraining", "masked-lm", "base"):
        assert export_model(pre, tmp_path / f"ok-{head}", format="onnx", head=head).output_dir.is_dir()


def test_every_output_axis_is_named_as_the_inputs_name_it(tmp_path):
    """The multiple-choice export's logits (B, C) had its choice axis named `Reshapelogits_dim_1` (a symbol of the
    exporter's), not the inputs' `choice`: every dynamic output axis carries one of the input axes' names."""
    import onnx

    def dims(value):
        return [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim]

    for head in sorted(ONNX_OUTPUTS):
        torch.manual_seed(0)
        cfg = _config(1, num_labels=2 if head == "AlbertForQuestionAnswering" else 3)
        path = export_onnx(MODEL_CLASSES[head](cfg).eval(), tmp_path / f"{head}.onnx")
        graph = onnx.load(str(path)).graph
        named = {d for i in graph.input for d in dims(i) if isinstance(d, str)}
        assert named == (
            {"batch", "choice", "sequence"} if head == "AlbertForMultipleChoice" else {"batch", "sequence"}
        )
        for out in graph.output:
            assert all(isinstance(d, int) or d in named for d in dims(out)), (head, out.name, dims(out))
            if head == "AlbertForMultipleChoice":
                assert dims(out) == ["batch", "choice"]


def test_output_that_cannot_be_created_is_one_error_naming_it_and_nothing_is_left(tmp_path, capsys, monkeypatch):
    """`--output FILE/x` said `[Errno 17] File exists`; an unwritable parent named the hidden temporary directory;
    a bad --head left the parents of --output it had made. Now: one line naming --output, and nothing left."""
    torch.manual_seed(0)
    src = _save_model(tmp_path / "model", AlbertForPreTraining(_config(1, num_hidden_layers=2)))
    (tmp_path / "dev.tsv").write_text("a\tb\n")
    out = tmp_path / "dev.tsv" / "x"
    assert main(["export", str(src), "--output", str(out)]) == 2
    assert capsys.readouterr().err == (
        f"error: --output {out}: {tmp_path / 'dev.tsv'} is not a directory; choose another --output\n"
    )
    assert (tmp_path / "dev.tsv").read_text() == "a\tb\n"
    # bad input after the checks that come first: the parents of --output are not made
    deep = tmp_path / "eo" / "x" / "y" / "z"
    for argv, message in (
        (["--head", "nonsense"], "error: unknown head 'nonsense' (--head); expected one of base,"),
        (["--head", "sequence-classification"], f"error: {src} holds an AlbertForPreTraining, not a fine-tuned"),
    ):
        assert main(["export", str(src), "--output", str(deep), *argv]) == 2
        err = capsys.readouterr().err
        assert err.startswith(message) and err.count("\n") == 1, err
        assert not (tmp_path / "eo").exists()
    # a failure while writing (truncated weights): the parents it made are removed with the temporary directory
    broken = _save_model(tmp_path / "broken", AlbertForPreTraining(_config(1, num_hidden_layers=2)))
    (broken / "model.safetensors").write_bytes((broken / "model.safetensors").read_bytes()[:1000])
    (tmp_path / "eo").mkdir()
    (tmp_path / "eo" / "keep").write_text("theirs")  # a parent that existed before is kept
    assert main(["export", str(broken), "--output", str(deep), "--format", "onnx"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {broken / 'model.safetensors'}: truncated safetensors file") and err.count("\n") == 1
    assert sorted(p.name for p in (tmp_path / "eo").iterdir()) == ["keep"]

    # a parent the file system refuses (EPERM under /sys, EACCES, EROFS): named as --output, not the temp directory
    def refuse(prefix, dir):
        raise PermissionError(1, "Operation not permitted", os.path.join(dir, prefix + "abcd"))

    monkeypatch.setattr(litebert.export.tempfile, "mkdtemp", refuse)
    assert main(["export", str(src), "--output", str(deep)]) == 2
    assert capsys.readouterr().err == (
        f"error: --output {deep}: cannot create it (Operation not permitted); nothing was written\n"
    )
    assert sorted(p.name for p in (tmp_path / "eo").iterdir()) == ["keep"]


def test_model_without_tokenizer_exports_and_the_warning_names_the_output(tmp_path, caplog):
    torch.manual_seed(0)
    src = _save_model(tmp_path / "model", AlbertForPreTraining(_config(1, num_hidden_layers=2)))  # no tokenizer
    with caplog.at_level("WARNING", logger="litebert.export"):
        result = export_model(src, tmp_path / "onnx", format="onnx")
    assert sorted(p.name for p in result.output_dir.iterdir()) == ["config.json", "model.onnx"]
    (message,) = [r.getMessage() for r in caplog.records if r.name == "litebert.export"]
    assert message.startswith(f"export: {src} has no tokenizer files, so {tmp_path / 'onnx'} has none: copy")
    assert "--tokenizer DIR" in message and ".tmp-" not in message


_SIGTERM_HELPER = """
import json, os, sys, time
from pathlib import Path

import litebert.export

def blocked(*args, **kwargs):  # the export, stopped inside its temporary directory until a signal comes
    Path(sys.argv[3] + ".part").write_text(json.dumps(sorted(p.name for p in Path(sys.argv[4]).iterdir())))
    os.replace(sys.argv[3] + ".part", sys.argv[3])
    while True:
        time.sleep(60)

litebert.export._load_head = blocked
from litebert.cli import main

sys.exit(main(["export", sys.argv[1], "--output", sys.argv[2], "--format", "onnx"]))
"""


def test_sigterm_during_export_leaves_nothing_behind(tmp_path):
    """A `kill` (SIGTERM) during an export left `.NAME.tmp-XXXX` beside --output for good: the clean-up in
    `finally` never ran. Now SIGTERM exits with status 143 after the clean-up."""
    torch.manual_seed(0)
    src = _save_model(tmp_path / "model", AlbertForPreTraining(_config(1, num_hidden_layers=2)))
    out, ready = tmp_path / "new" / "sub" / "onnx", tmp_path / "ready"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-c", _SIGTERM_HELPER, str(src), str(out), str(ready), str(out.parent)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 300
        while not ready.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None, proc.communicate()
        (tmp,) = json.loads(ready.read_text())
        assert tmp.startswith(".onnx.tmp-")  # it was writing into a temporary directory beside --output
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert not (tmp_path / "new").exists()  # the temporary directory and the parents the export made are gone
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model", "ready"]


def test_sigterm_handler_is_restored_after_export(tmp_path, monkeypatch):
    torch.manual_seed(0)
    src = _save_model(tmp_path / "model", AlbertForPreTraining(_config(1, num_hidden_layers=2)))
    before = signal.getsignal(signal.SIGTERM)
    during = []
    real = litebert.export._load_head

    def spy(*args, **kwargs):
        during.append(signal.getsignal(signal.SIGTERM))
        return real(*args, **kwargs)

    monkeypatch.setattr(litebert.export, "_load_head", spy)
    export_model(src, tmp_path / "hf", head="base")
    assert len(during) == 1 and during[0] is not before and callable(during[0])
    assert signal.getsignal(signal.SIGTERM) is before
    with pytest.raises(SystemExit) as exc:  # the handler, called as the signal would call it
        during[0](signal.SIGTERM, None)
    assert exc.value.code == 143


def test_a_finetune_checkpoint_and_an_onnx_export_are_refused_naming_what_to_export(tmp_path, capsys):
    """`export RUN/checkpoints/step-N` of a finetune run said the run was not a pretrain run and that RUN/config.json
    was missing; `export ONNX_DIR` said only that no weights were found."""
    run = tmp_path / "ft"
    (run / "checkpoints" / "step-3").mkdir(parents=True)
    (run / "checkpoints" / "step-3" / "COMPLETE").write_text("")  # a finetune checkpoint is a training checkpoint
    (run / "run_settings.json").write_text(json.dumps({"command": "finetune", "finetune_config": {}}))
    _save_model(run / "best", AlbertForPreTraining(_config(1, num_hidden_layers=2)))
    assert main(["export", str(run / "checkpoints" / "step-3"), "--output", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == (
        f"error: {run / 'checkpoints' / 'step-3'} is a checkpoint of a `litebert finetune` run: export its model "
        f"directory ({run / 'best'}) instead\n"
    )
    assert _no_leftovers(tmp_path, "out")
    onnx = tmp_path / "onnx"
    onnx.mkdir()
    _config(1, num_hidden_layers=2).save(onnx)
    (onnx / "model.onnx").write_bytes(b"\x08\x07")
    assert main(["export", str(onnx), "--output", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == (
        f"error: {onnx}: no weights found (expected model.safetensors, model.safetensors.index.json or "
        "pytorch_model.bin): it is an ONNX export (model.onnx), which evaluate/predict read with --backend "
        "onnxruntime; give the model directory it was exported from\n"
    )
    assert _no_leftovers(tmp_path, "out")
