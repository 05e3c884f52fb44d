"""`litebert info` (litebert.info.inspect_path) on TensorFlow checkpoints and model directories, intact or damaged.

Oracles: the TF fixtures' own arrays (element counts), the converted model's parameter count, and hand-made damage.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from litebert.cli import main as cli_main
from litebert.config import AlbertConfig
from litebert.errors import LitebertError
from litebert.info import inspect_path
from litebert.modeling import AlbertForPreTraining
from litebert.tf.convert import convert_tf_checkpoint, is_optimizer_variable, summarize_tf_checkpoint

A = "a_official_e8_h16"
C = "c_albert_zh_brightmart_e8_h16"


def fixture_arrays(tf_fixtures, fixture):
    return dict(np.load(tf_fixtures / fixture / "arrays.npz"))


def test_info_on_tf_checkpoint(tf_fixtures, capsys):
    info = inspect_path(tf_fixtures / A / "model.ckpt")
    assert info.kind == "tf_checkpoint" and info.layout == "official"
    assert info.parameter_count == sum(
        int(np.prod(a.shape)) for n, a in fixture_arrays(tf_fixtures, A).items() if not is_optimizer_variable(n)
    )
    assert info.details["global_step"] == 1000
    assert info.config["hidden_size"] == 16
    summary = summarize_tf_checkpoint(fixture_arrays(tf_fixtures, C))
    assert summary.layout == "albert_zh" and len(summary.optimizer_variables) == 7 and not summary.unknown_variables
    assert cli_main(["info", str(tf_fixtures / C)]) == 0
    text = capsys.readouterr().out
    assert re.search(r"^layout: +albert_zh$", text, re.M) and re.search(r"^global_step: +3000$", text, re.M)
    assert "31 model, 7 optimizer" in text


def test_info_on_model_dir_counts_parameters(tf_fixtures, tmp_path):
    result = convert_tf_checkpoint(
        tf_fixtures / A / "model.ckpt", tf_fixtures / A / "albert_config.json", tmp_path / "o"
    )
    info = inspect_path(tmp_path / "o")
    assert info.kind == "model_dir" and info.layout == "factorized"
    assert info.parameter_count == result.model.num_parameters()
    assert info.details["model_type"] == "albert"
    with pytest.raises(LitebertError, match="neither a model directory"):
        inspect_path(tmp_path)


def test_info_on_damaged_model_dir_is_a_clear_error(tmp_path, capsys):
    """`litebert info` on a truncated/garbage weights file or a non-object config: one error line, exit 2."""
    model = AlbertForPreTraining(AlbertConfig.from_preset("albert-debug"))
    model.save_pretrained(tmp_path / "d")
    st = tmp_path / "d" / "model.safetensors"
    st.write_bytes(st.read_bytes()[:-100])
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "config.json").write_text((tmp_path / "d" / "config.json").read_text())
    (tmp_path / "bin" / "pytorch_model.bin").write_bytes(b"garbage")
    (tmp_path / "list").mkdir()
    (tmp_path / "list" / "config.json").write_text("[]")
    for d, msg in (
        ("d", "truncated safetensors file: parameter 'sop_classifier.classifier.weight'"),
        ("bin", "pytorch_model.bin: cannot read PyTorch weights"),
        ("list", "config.json: expected a JSON object"),
    ):
        assert cli_main(["info", str(tmp_path / d)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and msg in err and err.count("\n") == 1, err
    # a sharded safetensors directory is counted from its index's shards
    sharded = tmp_path / "sharded"
    sharded.mkdir()
    (sharded / "config.json").write_text((tmp_path / "d" / "config.json").read_text())
    from safetensors.torch import save_file

    state = {k: v.contiguous() for k, v in model.albert.state_dict().items()}
    keys = sorted(state)
    save_file({k: state[k] for k in keys[:3]}, str(sharded / "a.safetensors"))
    save_file({k: state[k] for k in keys[3:]}, str(sharded / "b.safetensors"))
    (sharded / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {k: "a.safetensors" if i < 3 else "b.safetensors" for i, k in enumerate(keys)}})
    )
    info = inspect_path(sharded)
    assert info.parameter_count == model.albert.num_parameters()
    assert info.details["weights"] == "model.safetensors.index.json"


def test_info_on_onnx_dir(tmp_path, capsys, monkeypatch):
    """An ONNX export directory: the file, its opset, inputs/outputs (onnxruntime's own view is the oracle),
    whether it is int8, parameters from its initializers; without the onnx package, what config.json records."""
    import sys

    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    import torch

    from litebert.export import export_model
    from litebert.modeling import AlbertForSequenceClassification

    cfg = AlbertConfig.from_preset("albert-debug").replace(num_labels=3)
    torch.manual_seed(0)
    model = AlbertForSequenceClassification(cfg)
    model.save_pretrained(tmp_path / "m")
    export_model(tmp_path / "m", tmp_path / "fp32", format="onnx")
    export_model(tmp_path / "m", tmp_path / "int8", format="onnx", quantize="int8")
    for name, quantized in (("fp32", False), ("int8", True)):
        d = tmp_path / name
        info = inspect_path(d)
        assert info.kind == "onnx_dir" and info.details["weights"] == "none (ONNX only)"
        (f,) = info.onnx_files
        assert f["file"] == "model.onnx" and f["bytes"] == (d / "model.onnx").stat().st_size and f["opset"] == 17
        sess = ort.InferenceSession(str(d / "model.onnx"), providers=["CPUExecutionProvider"])
        assert [s.split(" ")[0] for s in f["inputs"]] == [i.name for i in sess.get_inputs()]
        assert f["outputs"] == ["logits float32 [batch, 3]"] and sess.get_outputs()[0].shape == ["batch", 3]
        assert bool(f["quantized"]) is quantized and (f["int8_initializers"] > 0) is quantized
        n = model.num_parameters()
        assert 0.9 * n <= info.parameter_count <= 1.1 * n, (info.parameter_count, n)
        assert info.config["architectures"] == ["AlbertForSequenceClassification"]
    assert cli_main(["info", str(tmp_path / "int8")]) == 0
    text = capsys.readouterr().out
    assert re.search(r"^kind: +onnx_dir$", text, re.M) and re.search(r"^onnx: +model\.onnx, [\d,]+ bytes$", text, re.M)
    assert re.search(r"^onnx quantized: +int8 \(.*MatMulInteger", text, re.M)
    assert re.search(r"^onnx opset: +17$", text, re.M) and "input_ids int64 [batch, sequence]" in text
    assert not re.search(r"^parameters: +0$", text, re.M)
    monkeypatch.setitem(sys.modules, "onnx", None)  # degrade: size and config.json's record of the export
    info = inspect_path(tmp_path / "int8")
    assert info.kind == "onnx_dir" and "not installed" in info.details["onnx"]
    assert info.details["onnx (config.json)"] == "opset 17, quantize int8, outputs logits"


def test_info_on_a_run_directory_describes_the_run_not_a_model(tmp_path, capsys):
    """A pretrain run holds config.json at its root but its weights in checkpoints/ and final/: `info` says it is a
    run, how far it got and where its model is (not "model_dir, parameters: 0, weights: none found")."""
    run = tmp_path / "pre"
    (run / "checkpoints").mkdir(parents=True)
    (run / "run_settings.json").write_text(
        json.dumps({"command": "pretrain", "pretrain_config": {"max_steps": 10}, "num_parameters": 1234567})
    )
    AlbertConfig.from_preset("albert-debug").save(run)
    for step, complete in ((4, True), (8, True), (12, False)):
        (run / "checkpoints" / f"step-{step}").mkdir()
        if complete:
            (run / "checkpoints" / f"step-{step}" / "COMPLETE").write_text("")
    info = inspect_path(run)
    assert info.kind == "run_dir"
    assert info.details == {
        "command": "litebert pretrain",
        "steps": "8 of 10 done (newest checkpoint checkpoints/step-8, 2 kept)",
        "parameters": "1,234,567",
        "state": "unfinished (continue it with --resume auto)",
        "model": "none (final/ not written yet)",
    }
    AlbertForPreTraining(AlbertConfig.from_preset("albert-debug")).save_pretrained(run / "final")
    assert cli_main(["info", str(run)]) == 0
    text = capsys.readouterr().out
    assert re.search(r"^kind: +run directory$", text, re.M) and re.search(r"^state: +finished \(final\)$", text, re.M)
    assert re.search(rf"^model: +{re.escape(str(run / 'final'))} \(describe it: litebert info ", text, re.M)
    assert "model_dir" not in text and "weights" not in text and "parameters: 0" not in text
    assert inspect_path(run / "final").kind == "model_dir"

    ft = tmp_path / "ft"
    ft.mkdir()
    (ft / "run_settings.json").write_text(json.dumps({"command": "finetune", "max_steps": 120}))
    info = inspect_path(ft)
    assert info.details["steps"] == "no checkpoint kept (max_steps 120)"
    assert info.details["state"] == "unfinished, no checkpoint to continue from"
    assert info.details["model"] == "none (best/ not written yet)"
    (ft / "eval_results.json").write_text("{}")
    assert inspect_path(ft).details["state"] == "finished (eval_results.json)"


def test_info_on_prepared_data_describes_the_shards_and_a_run_has_no_config_row(tiny, tmp_path, capsys):
    """`info DATA` (prepare's output) said it was neither a model directory nor a TF checkpoint; `info RUN` of a
    finetune run printed `config: none found` under the model row. The oracle: the manifest's own values."""
    from litebert.data import read_manifest

    data = tiny.prepared("info", (str(tiny.wikitext_subset(60)),), str(tiny.tokenizer("wordpiece")))
    man = read_manifest(data)
    c = man["counts"]
    info = inspect_path(data)
    assert info.kind == "data_dir"
    assert info.details["instances"] == f"{c['instances']:,} ({c['tokens']:,} tokens) in {len(man['shards'])} shard(s)"
    assert info.details["corpus"].startswith(
        f"{c['documents']:,} documents, {c['sentences']:,} sentences, {c['corpus_tokens']:,} tokens"
    )
    assert info.details["settings"].startswith("max_seq_length 128, inter_sentence_task sop, masking dynamic")
    assert info.tokenizer["kind"] == "wordpiece" and info.tokenizer["vocab_size"] == 3000
    assert cli_main(["info", str(data)]) == 0
    text = capsys.readouterr().out
    assert re.search(r"^kind: +pretraining data \(litebert prepare\)$", text, re.M)
    assert "config:" not in text
    ft = tmp_path / "ft"
    ft.mkdir()
    (ft / "run_settings.json").write_text(json.dumps({"command": "finetune", "max_steps": 1}))
    assert cli_main(["info", str(ft)]) == 0
    assert "config:" not in capsys.readouterr().out
