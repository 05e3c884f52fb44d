"""Fast inference (litebert.inference): length buckets keep file order and values, torch int8 / bf16 runners give
labels, an ONNX directory runs through `litebert predict` and `litebert evaluate` with torch's results."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from litebert import inference
from litebert.cli import main
from litebert.config import AlbertConfig
from litebert.errors import LitebertError
from litebert.finetune import DataOptions
from litebert.finetune.classification import ClassificationKind, features_of
from litebert.finetune.data import Encoded
from litebert.finetune.kinds import run_features
from litebert.inference import TorchRunner, length_batches, load_runner
from litebert.modeling import AlbertForSequenceClassification

pytestmark = pytest.mark.usefixtures("one_thread")


def _classifier(seed=0, margin=1.0, **kw) -> AlbertForSequenceClassification:
    base = dict(
        vocab_size=500,
        embedding_size=16,
        hidden_size=32,
        num_hidden_layers=3,
        num_hidden_groups=1,
        num_attention_heads=4,
        intermediate_size=48,
        max_position_embeddings=128,
        num_labels=3,
    )
    base.update(kw)
    torch.manual_seed(seed)
    model = AlbertForSequenceClassification(AlbertConfig(**base)).eval()
    with torch.no_grad():
        model.classifier.weight.mul_(margin)
    return model


def _encoded(n=23, seed=0, vocab=500) -> Encoded:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(3, 40, n).tolist()
    ids = [[2, *rng.integers(5, vocab, k - 2).tolist(), 3] for k in lengths]
    types = [[0] * (k // 2) + [1] * (k - k // 2) for k in lengths]
    return Encoded.from_lists(ids, types)


def _logits(model, enc, batch_size=4, bucket=True, prefetch=None) -> np.ndarray:
    """Classification logits (N, C) in row order, through the task kinds' inference loop."""
    kind = ClassificationKind(DataOptions(task="sst2"))
    config = model.model.config if isinstance(model, TorchRunner) else model.config
    kind.from_config(config)
    outputs, _, _ = run_features(
        kind,
        model,
        features_of(enc),
        range(len(enc.input_ids)),
        batch_size,
        0,
        torch.device("cpu"),
        bucket=bucket,
        prefetch=prefetch,
    )
    return np.stack(outputs)


def test_prefetched_batches_give_the_plain_loops_outputs_bit_for_bit():
    model, enc = _classifier(seed=3), _encoded(n=41, seed=3)
    plain = _logits(model, enc, batch_size=5, prefetch=False)
    np.testing.assert_array_equal(_logits(model, enc, batch_size=5, prefetch=True), plain)
    # and what the batches hold: each row alone, unpadded, gives its logits (the collation is the same)
    with torch.inference_mode():
        alone = model(input_ids=torch.tensor([enc.input_ids[7]]), token_type_ids=torch.tensor([enc.token_type_ids[7]]))
    np.testing.assert_allclose(plain[7], alone.logits[0].numpy(), atol=1e-5, rtol=0)


def test_prefetch_hands_the_producers_error_to_the_caller():
    def batches():
        yield {"x": torch.zeros(2)}
        raise ValueError("bad row 3")

    got = []
    with pytest.raises(ValueError, match="bad row 3"):
        for b in inference.prefetched(batches(), "cpu"):
            got.append(b)
    assert len(got) == 1


def test_device_batch_size(monkeypatch):
    cfg = AlbertConfig.from_preset("albert-base")
    assert inference.device_batch_size("cpu", cfg, 128) == inference.CPU_BATCH_SIZE == 64
    # albert-base at 128 tokens: 4 B × 128 × (3·768 + 3072 + 12·128) = 3,538,944 bytes a row
    for free, want in ((80e9, 4096), (8e9, 512), (1e9, 64), (2.6e9, 128)):  # 8e9/4/3538944 = 565 -> 512
        monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None, free=free: (int(free), int(2 * free)))
        assert inference.device_batch_size("cuda", cfg, 128) == want, free


def test_length_batches_hand_computed():
    assert [b.tolist() for b in length_batches([5, 2, 9, 2, 7], 2)] == [[1, 3], [0, 4], [2]]
    assert [b.tolist() for b in length_batches([5, 2, 9, 2, 7], 2, bucket=False)] == [[0, 1], [2, 3], [4]]


def test_bucketing_keeps_file_order_and_values():
    model, enc = _classifier(), _encoded()
    raw_b, raw_f = _logits(model, enc, bucket=True), _logits(model, enc, bucket=False)
    # oracle: every row alone, unpadded
    with torch.no_grad():
        alone = np.stack(
            [
                model(input_ids=torch.tensor([i]), token_type_ids=torch.tensor([t])).logits[0].numpy()
                for i, t in zip(enc.input_ids, enc.token_type_ids, strict=True)
            ]
        )
    np.testing.assert_allclose(raw_b, alone, atol=1e-5, rtol=0)
    np.testing.assert_allclose(raw_f, alone, atol=1e-5, rtol=0)
    assert raw_b.argmax(-1).tolist() == raw_f.argmax(-1).tolist() == alone.argmax(-1).tolist()


def test_inference_restores_training_mode():
    model = _classifier().train()
    _logits(model, _encoded(5))
    assert model.training


@pytest.mark.parametrize("kind", ["int8", "bf16"])
def test_torch_int8_and_bf16_give_labels(kind):
    enc = _encoded(40, seed=3)
    ref_raw = _logits(_classifier(margin=30), enc, 8)
    runner = TorchRunner(
        _classifier(margin=30),
        quantize="int8" if kind == "int8" else None,
        precision="bf16" if kind == "bf16" else "fp32",
    )
    raw = _logits(runner, enc, 8)
    preds, ref_preds = raw.argmax(-1), ref_raw.argmax(-1)
    assert np.isfinite(raw).all() and raw.dtype == np.float32 and set(preds.tolist()) <= {0, 1, 2}
    assert (preds == ref_preds).mean() >= 0.9
    assert np.abs(raw - ref_raw).max() < 0.1 * np.abs(ref_raw).max()  # rounding noise, not garbage
    if kind == "int8":
        assert any(type(m).__module__.startswith("torch.ao.nn.quantized") for m in runner.model.modules())


@pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="this torch build has no oneDNN")
def test_fp32_runner_packs_linear_on_onednn_with_equal_outputs(monkeypatch):
    """predict's fp32 runner (fuse=True) moves every Linear onto oneDNN's prepacked GEMM, with a GELU fused into the
    FFN's GEMM, and runs the classifier's last layer for [CLS] only; the logits equal the plain model's to float
    rounding (GELU, exact GELU, ReLU), a shared layer's Linear is packed once, and the tied MLM decoder still
    works. (Calls below ``OneDnnLinear.min_macs`` take nn.Linear's path: set to 0 so that every call here runs
    oneDNN's kernel; the default's fallback is checked at the end.)"""
    from litebert import inference
    from litebert.inference import OneDnnLinear, pack_linear_onednn
    from litebert.modeling import AlbertForMaskedLM, AlbertLayer

    monkeypatch.setattr(OneDnnLinear, "min_macs", 0)
    monkeypatch.setattr(inference, "onednn_gemm_preferred", lambda: True)  # whatever this CPU is (next test)

    enc = _encoded(30, seed=5)
    ref = _logits(_classifier(seed=2), enc, 8)
    runner = TorchRunner(_classifier(seed=2), fuse=True)
    assert runner.forward_kwargs == {"pooled_only": True} and runner.kernel == "onednn"
    packed = [m for m in runner.model.modules() if isinstance(m, OneDnnLinear)]
    assert packed and not any(type(m) is torch.nn.Linear for m in runner.model.modules())
    np.testing.assert_allclose(_logits(runner, enc, 8), ref, atol=1e-5, rtol=0)
    # the FFN's GELU (gelu_new: the tanh approximation) runs as the GEMM's post-op; the layer's own is the identity
    (layer,) = {id(m): m for m in runner.model.modules() if isinstance(m, AlbertLayer)}.values()
    assert layer.ffn.gelu == "tanh" and layer.activation(torch.tensor(-1.0)) == -1.0
    for act, gelu in (("gelu", "none"), ("relu", None)):  # exact GELU fused as erf; ReLU left to the layer
        want = _logits(_classifier(seed=3, hidden_act=act), enc, 8)
        runner = TorchRunner(_classifier(seed=3, hidden_act=act), fuse=True)
        layer = next(m for m in runner.model.modules() if isinstance(m, AlbertLayer))
        assert layer.ffn.gelu == gelu
        np.testing.assert_allclose(_logits(runner, enc, 8), want, atol=1e-5, rtol=0)

    torch.manual_seed(0)
    mlm = AlbertForMaskedLM(
        AlbertConfig(
            vocab_size=300,
            embedding_size=16,
            hidden_size=32,
            num_hidden_layers=4,
            num_attention_heads=4,
            intermediate_size=48,
        )
    ).eval()
    ids = torch.randint(5, 300, (3, 11))
    with torch.inference_mode():
        want = mlm(input_ids=ids).logits
        distinct = len({id(m) for m in mlm.modules() if type(m) is torch.nn.Linear})
        n = pack_linear_onednn(mlm)  # 4 applications of one shared layer: each of its Linears packed once
        got = mlm(input_ids=ids).logits
    assert n == distinct == len({id(m) for m in mlm.modules() if isinstance(m, OneDnnLinear)})
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)

    # the default threshold: a (1, 32) x (32, 48) call is nn.Linear's addmm; one of 2^22 multiply-adds is oneDNN's
    monkeypatch.undo()
    ffn = next(m for m in mlm.modules() if isinstance(m, AlbertLayer)).ffn
    for rows, op in ((1, "aten::addmm"), (OneDnnLinear.min_macs // (32 * 48) + 1, "mkldnn::_linear_pointwise")):
        x = torch.randn(rows, 32)
        with torch.inference_mode(), torch.profiler.profile() as prof:
            y = ffn(x)
        assert op in {e.key for e in prof.key_averages()}
        want = torch.nn.functional.gelu(torch.nn.functional.linear(x, ffn.weight, ffn.bias), approximate="tanh")
        torch.testing.assert_close(y, want, atol=1e-5, rtol=0)


@pytest.mark.parametrize("avx512", [True, False])
def test_fp32_runner_takes_onednn_on_avx512_cpus_only(monkeypatch, avx512):
    """On an AVX2-only AMD EPYC oneDNN's packed GEMM made predict 1.12-1.19x slower than nn.Linear's MKL (on an
    AVX-512 one, 1.5x faster: docs/deploy.md), so the fp32 runner packs only where the CPU has AVX-512; either way
    the logits are the plain model's to float rounding, and ``kernel`` says which ran."""
    from litebert import inference
    from litebert.inference import OneDnnLinear

    caps = {**inference.cpu_capabilities(), "avx512": avx512}
    monkeypatch.setattr(inference, "cpu_capabilities", lambda: caps)
    assert inference.onednn_gemm_preferred() is avx512
    monkeypatch.setattr(OneDnnLinear, "min_macs", 0)
    enc = _encoded(30, seed=5)
    ref = _logits(_classifier(seed=2), enc, 8)
    runner = TorchRunner(_classifier(seed=2), fuse=True)
    packed = any(isinstance(m, OneDnnLinear) for m in runner.model.modules())
    onednn = avx512 and torch.backends.mkldnn.is_available()
    assert packed is onednn and runner.kernel == ("onednn" if onednn else "blas")
    np.testing.assert_allclose(_logits(runner, enc, 8), ref, atol=1e-5, rtol=0)
    assert TorchRunner(_classifier(seed=2), quantize="int8").kernel == "int8"


@pytest.fixture(scope="module")
def sst2_classifier(shared_data, tmp_path_factory):
    """A (random-weight) SST-2 classifier directory with a WordPiece tokenizer trained on a train.tsv slice."""
    from litebert.tokenization import train_tokenizer

    root = tmp_path_factory.mktemp("sst2")
    rows = (shared_data / "glue/SST-2/train.tsv").read_text(encoding="utf-8").splitlines()[1:600]
    (root / "corpus.txt").write_text("\n".join(r.split("\t")[0] for r in rows) + "\n", encoding="utf-8")
    model_dir = root / "model"
    tok = train_tokenizer([str(root / "corpus.txt")], "wordpiece", 600, model_dir)
    model = _classifier(margin=20, vocab_size=tok.vocab_size, num_labels=2)
    model.config.id2label, model.config.label2id = {0: "0", 1: "1"}, {"0": 0, "1": 1}
    model.config.problem_type = "single_label_classification"
    model.config.extra = {**model.config.extra, "finetuning_task": "sst2"}
    model.save_pretrained(model_dir)
    dev = root / "dev.tsv"
    dev.write_text(
        "\n".join((shared_data / "glue/SST-2/dev.tsv").read_text(encoding="utf-8").splitlines()[:81]) + "\n",
        encoding="utf-8",
    )
    return model_dir, dev


def _predictions(path):
    return [line.split("\t") for line in path.read_text().splitlines()]


def test_onnx_dir_through_predict_and_evaluate(sst2_classifier, tmp_path, capsys):
    model_dir, dev = sst2_classifier
    onnx_dir = tmp_path / "onnx"
    assert main(["export", str(model_dir), "--output", str(onnx_dir), "--format", "onnx"]) == 0
    assert (onnx_dir / "tokenizer.json").is_file() and (onnx_dir / "config.json").is_file()
    for name, model in (("torch", model_dir), ("ort", onnx_dir)):
        assert (
            main(
                [
                    "predict",
                    "--model",
                    str(model),
                    "--data",
                    str(dev),
                    "--output",
                    str(tmp_path / name),
                    "--batch-size",
                    "16",
                    "--threads",
                    "1",
                ]
            )
            == 0
        )
        assert (
            main(
                [
                    "evaluate",
                    "--model",
                    str(model),
                    "--data",
                    str(dev),
                    "--output",
                    str(tmp_path / f"ev_{name}"),
                    "--batch-size",
                    "7",
                    "--precision",  # compared with the fp32 ONNX file to 1e-4
                    "fp32",
                ]
            )
            == 0
        )
    assert _predictions(tmp_path / "ort/predictions.tsv") == _predictions(tmp_path / "torch/predictions.tsv")
    assert len(_predictions(tmp_path / "ort/predictions.tsv")) == 81  # header + 80 rows, in file order
    ev_t, ev_o = (json.loads((tmp_path / f"ev_{n}/eval_results.json").read_text()) for n in ("torch", "ort"))
    assert ev_t["accuracy"] == ev_o["accuracy"] and ev_t["eval_loss"] == pytest.approx(ev_o["eval_loss"], abs=1e-4)
    # torch int8 on the fly through the CLI
    assert (
        main(
            [
                "predict",
                "--model",
                str(model_dir),
                "--data",
                str(dev),
                "--output",
                str(tmp_path / "q"),
                "--quantize",
                "int8",
            ]
        )
        == 0
    )
    q = [r[1] for r in _predictions(tmp_path / "q/predictions.tsv")[1:]]
    assert set(q) <= {"0", "1"} and len(q) == 80
    capsys.readouterr()
    # an ONNX directory has no torch weights; a torch directory has no model.onnx
    assert main(["predict", "--model", str(onnx_dir), "--data", str(dev), "--backend", "torch"]) == 2
    assert "--backend onnxruntime" in capsys.readouterr().err
    with pytest.raises(LitebertError, match=r"model\.onnx not found"):
        load_runner(model_dir, "AlbertForSequenceClassification", backend="onnxruntime")
    with pytest.raises(LitebertError, match="quantize at export"):
        load_runner(onnx_dir, "AlbertForSequenceClassification", quantize="int8")


def test_dynamic_int8_linear_takes_float32_activations_only():
    """Why `--quantize int8` takes no `--precision bf16`: torch's dynamic int8 Linear refuses bf16 input, and under
    bf16 autocast the attention's output (bf16) reaches the next int8 Linear. If a torch release accepts it, this
    test says so and the refusal in litebert.finetune.run._eval_runtime can go."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        q = torch.ao.quantization.quantize_dynamic(torch.nn.Sequential(torch.nn.Linear(8, 4)), {torch.nn.Linear})
    x = torch.randn(2, 8)
    assert q(x).dtype == torch.float32
    with pytest.raises(RuntimeError, match="expected scalar type Float but found BFloat16"):
        q(x.to(torch.bfloat16))
    with pytest.raises(LitebertError, match="--quantize int8 and --precision bf16: torch's dynamic int8 Linear"):
        TorchRunner(_classifier(), precision="bf16", quantize="int8")


def test_precision_conflicts_refused_before_reading_and_the_backend_recorded(sst2_classifier, tmp_path, capsys):
    """`predict --quantize int8 --precision bf16` was refused only after the data was read (and docs/deploy.md
    promised bf16 weights); an explicit `--precision bf16/fp16` on the onnxruntime backend was logged and recorded as
    bf16 while the fp32 file ran, and run_settings.json said "backend": null. Conflicts are now one error line before
    the data is read (a missing --data file would be reported otherwise); what ran is recorded."""
    model_dir, dev = sst2_classifier
    onnx_dir = tmp_path / "onnx"
    assert main(["export", str(model_dir), "--output", str(onnx_dir), "--format", "onnx"]) == 0
    missing = str(tmp_path / "no-such.tsv")
    capsys.readouterr()
    cases = [
        (model_dir, ["--quantize", "int8", "--precision", "bf16"], "--quantize int8 and --precision bf16: torch's"),
        (model_dir, ["--quantize", "int8", "--precision", "fp16"], "--quantize int8 and --precision fp16: torch's"),
        (onnx_dir, ["--precision", "bf16"], "--precision bf16 with the onnxruntime backend: it runs"),
        (onnx_dir, ["--precision", "fp16"], "--precision fp16 with the onnxruntime backend: it runs"),
        (onnx_dir, ["--quantize", "int8"], "--quantize int8 with the onnxruntime backend: quantize at export"),
        (onnx_dir, ["--backend", "onnxruntime", "--precision", "bf16"], "--precision bf16 with the onnxruntime"),
        # the directory lacks what the backend runs: found after the whole file was read and tokenized, before
        (onnx_dir, ["--backend", "torch"], "holds model.onnx but no torch weights: use --backend onnxruntime"),
        (model_dir, ["--backend", "onnxruntime"], "model.onnx not found: export one with `litebert export"),
    ]
    for command in ("predict", "evaluate"):
        for model, extra, message in cases:
            assert main([command, "--model", str(model), "--data", missing, *extra]) == 2, (command, extra)
            err = capsys.readouterr().err  # (the log lines before it, if any, come from the model's config)
            assert err.count("error:") == 1 and err.strip().splitlines()[-1].startswith("error:"), err
            assert message in err and "no-such.tsv" not in err, err
    runs = {
        "ort": (onnx_dir, [], "onnxruntime", "fp32"),
        "ort-fp32": (onnx_dir, ["--precision", "fp32"], "onnxruntime", "fp32"),
        "int8": (model_dir, ["--quantize", "int8"], "torch", "fp32"),
        "torch-fp32": (model_dir, ["--precision", "fp32"], "torch", "fp32"),
    }
    for name, (model, extra, backend, precision) in runs.items():
        argv = ["predict", "--model", str(model), "--data", str(dev), "--output", str(tmp_path / name), *extra]
        assert main(argv) == 0, name
        settings = json.loads((tmp_path / name / "run_settings.json").read_text())
        assert settings["backend"] == backend and settings["precision"]["precision"] == precision, name
        want_kernel = {"int8": "int8", "torch-fp32": "onednn" if inference.onednn_gemm_preferred() else "blas"}
        assert settings.get("linear_kernel") == want_kernel.get(name), name  # torch runners only
    assert _predictions(tmp_path / "ort/predictions.tsv") == _predictions(tmp_path / "torch-fp32/predictions.tsv")


def test_predictions_keep_the_label_column_however_the_columns_are_named(sst2_classifier, tmp_path):
    """`predict --text-column/--label-column` (or a model fine-tuned with its own columns, which records them) wrote
    `index prediction` for a labelled file, the --task preset path `index prediction label`: one format, the file's
    labels as read by the reader itself."""
    from litebert.finetune.readers import ColumnSpec, read_examples

    model_dir, dev = sst2_classifier
    gold = [ex.label for ex in read_examples(dev, ColumnSpec(text="sentence", label="label")).examples]
    preset = tmp_path / "preset"
    assert main(["predict", "--model", str(model_dir), "--data", str(dev), "--output", str(preset)]) == 0
    named = tmp_path / "named"
    columns = ["--text-column", "sentence", "--label-column", "label"]
    assert main(["predict", "--model", str(model_dir), "--data", str(dev), "--output", str(named), *columns]) == 0
    rows = _predictions(named / "predictions.tsv")
    assert rows[0] == ["index", "prediction", "label"] and [r[2] for r in rows[1:]] == gold
    assert rows == _predictions(preset / "predictions.tsv")
    # a model that records the user's columns (litebert_data_options): its own columns, labels written
    custom = tmp_path / "custom"
    shutil.copytree(model_dir, custom)
    cfg = json.loads((custom / "config.json").read_text())
    cfg.pop("finetuning_task")
    cfg["litebert_data_options"] = {"text_column": "sentence", "label_column": "label"}
    (custom / "config.json").write_text(json.dumps(cfg))
    assert main(["predict", "--model", str(custom), "--data", str(dev), "--output", str(tmp_path / "c")]) == 0
    assert _predictions(tmp_path / "c/predictions.tsv") == rows
    # a file without the label column still predicts (no label column written), by name and by index
    unlabelled = tmp_path / "test.tsv"
    unlabelled.write_text("".join(line.split("\t")[0] + "\n" for line in dev.read_text().splitlines()))
    assert main(["predict", "--model", str(custom), "--data", str(unlabelled), "--output", str(tmp_path / "u")]) == 0
    assert _predictions(tmp_path / "u/predictions.tsv")[0] == ["index", "prediction"]
    by_index = ["--text-column", "0", "--label-column", "1", "--no-header"]
    headerless = tmp_path / "headerless.tsv"
    headerless.write_text("".join(line + "\n" for line in unlabelled.read_text().splitlines()[1:]))
    argv = ["predict", "--model", str(model_dir), "--data", str(headerless), "--output", str(tmp_path / "i")]
    assert main([*argv, *by_index]) == 0
    assert _predictions(tmp_path / "i/predictions.tsv")[0] == ["index", "prediction"]


def test_predict_on_labels_the_model_does_not_know_predicts_every_row_unscored(
    sst2_classifier, tmp_path, caplog, monkeypatch
):
    """New data whose label column holds other names ('positive') or blanks: predict refused the whole file
    (`file:line: label ... does not occur`). It now predicts every row as on the unlabelled file, writes the file's
    labels beside the predictions, warns naming the first such label, and scores nothing; evaluate still refuses."""
    model_dir, dev = sst2_classifier
    lines = dev.read_text().splitlines()
    names = {"0": "negative", "1": ""}  # every label renamed or blanked but the second row's
    relabelled = tmp_path / "relabelled.tsv"
    relabelled.write_text(
        "\n".join(
            [lines[0]]
            + [
                t + "\t" + names.get(y, y) if i != 1 else t + "\t1"
                for i, (t, y) in enumerate(line.split("\t") for line in lines[1:])
            ]
        )
        + "\n"
    )
    unlabelled = tmp_path / "unlabelled.tsv"
    unlabelled.write_text("".join(line.split("\t")[0] + "\n" for line in lines))
    base = ["predict", "--model", str(model_dir), "--data"]
    fp32 = ["--precision", "fp32", "--batch-size", "8", "--threads", "1"]  # the same rows whatever the batches
    with caplog.at_level("WARNING", logger="litebert"):
        assert main([*base, str(relabelled), "--output", str(tmp_path / "r"), *fp32]) == 0
    first = names.get(lines[1].split("\t")[1])  # the first data row's new label: blank, or a name not known
    why = "the label is empty" if first == "" else f"label {first!r} does not occur"
    assert f"relabelled.tsv:2: {why}" in caplog.text and "predicted, not scored" in caplog.text
    assert main([*base, str(unlabelled), "--output", str(tmp_path / "u"), *fp32]) == 0
    got = _predictions(tmp_path / "r/predictions.tsv")
    want = _predictions(tmp_path / "u/predictions.tsv")
    assert got[0] == ["index", "prediction", "label"] and [r[:2] for r in got[1:]] == want[1:]
    assert [r[2] for r in got[1:]] == [line.split("\t")[1] for line in relabelled.read_text().splitlines()[1:]]
    assert main(["evaluate", "--model", str(model_dir), "--data", str(relabelled)]) == 2
    # the GPU's chunked path (forced here, chunks of 16 rows) keeps the file's labels too
    import litebert.finetune.kinds as kinds_module
    import litebert.finetune.run as run_module

    monkeypatch.setattr(run_module, "_in_chunks", lambda kind, dist, read: True)
    real = kinds_module.infer_in_chunks
    monkeypatch.setattr(kinds_module, "infer_in_chunks", lambda *a, **k: real(*a, **k, chunk_rows=16))
    assert main([*base, str(relabelled), "--output", str(tmp_path / "c"), *fp32]) == 0
    assert _predictions(tmp_path / "c/predictions.tsv") == got


def test_evaluate_and_predict_show_a_progress_bar_of_rows_on_a_terminal_unless_no_progress(
    sst2_classifier, tmp_path, monkeypatch
):
    """A bar over the rows, as finetune and pretrain have (and their --no-progress, which evaluate/predict refused
    as an unknown option): on a terminal it counts every row once, through the chunked (GPU) path too."""
    import litebert.finetune.kinds as kinds_module
    import litebert.finetune.run as run_module

    bars = []

    class Recorder:
        def __init__(self, total, disable, **kw):
            self.total, self.disable, self.n = total, disable, 0
            bars.append(self)

        def update(self, n):
            self.n += n

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(run_module, "tqdm", Recorder)
    monkeypatch.setattr(run_module.sys.stderr, "isatty", lambda: True, raising=False)
    model_dir, dev = sst2_classifier
    base = ["--model", str(model_dir), "--data", str(dev), "--batch-size", "8"]
    assert main(["predict", *base, "--output", str(tmp_path / "p")]) == 0
    assert main(["evaluate", *base, "--no-progress"]) == 0
    monkeypatch.setattr(run_module, "_in_chunks", lambda kind, dist, read: True)
    real = kinds_module.infer_in_chunks
    monkeypatch.setattr(kinds_module, "infer_in_chunks", lambda *a, **k: real(*a, **k, chunk_rows=16))
    assert main(["predict", *base]) == 0
    assert [(b.total, b.n, b.disable) for b in bars] == [(80, 80, False), (80, 80, True), (80, 80, False)]


def test_layout_options_alone_are_laid_over_the_saved_task(sst2_classifier, tmp_path, capsys):
    """`evaluate/predict --delimiter ';'` (or --no-header ...) without --task or a column was silently dropped: a
    semicolon file failed with "text column ... is not in the header", and `--delimiter bogus` ran and exited 0.
    Layout options alone now go over the task saved with the model: the same rows give the same predictions and
    metrics as the TSV, and a bad value is refused as finetune refuses it."""
    model_dir, dev = sst2_classifier
    rows = [line.split("\t") for line in dev.read_text(encoding="utf-8").splitlines()]
    semi = tmp_path / "dev.csv"
    semi.write_text("\n".join(";".join(r) for r in rows if ";" not in r[0]) + "\n", encoding="utf-8")
    keep = [r for r in rows[1:] if ";" not in r[0]]
    assert 60 < len(keep) < len(rows) - 1  # some rows hold a ';' and are left out of the CSV
    tsv = tmp_path / "dev_kept.tsv"
    tsv.write_text("\n".join("\t".join(r) for r in [rows[0], *keep]) + "\n", encoding="utf-8")
    for name, data, extra in (("tsv", tsv, []), ("semi", semi, ["--delimiter", ";"])):
        argv = ["--model", str(model_dir), "--data", str(data), *extra]
        assert main(["predict", *argv, "--output", str(tmp_path / name)]) == 0, name
        capsys.readouterr()
        assert main(["evaluate", *argv]) == 0, name
        metrics = json.loads(capsys.readouterr().out)
        assert metrics["num_examples"] == len(keep), name
        if name == "tsv":
            want = metrics
    assert metrics == want
    assert _predictions(tmp_path / "semi/predictions.tsv") == _predictions(tmp_path / "tsv/predictions.tsv")
    for extra, message in (
        (["--delimiter", "bogus"], "--delimiter must be one character"),
        # a label column alone is laid over the saved task too (the file's ';' then shows in the header)
        (["--label-column", "label"], "text column 'sentence' is not in the header ['sentence;label']"),
    ):
        assert main(["predict", "--model", str(model_dir), "--data", str(semi), *extra]) == 2, extra
        err = capsys.readouterr().err
        assert err.count("error:") == 1 and message in err, err


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux /proc, a directory no file can be made in")
def test_unwritable_output_refused_before_the_data_is_read(sst2_classifier, capsys):
    """`evaluate/predict --output` in a place that cannot be written (/proc, /sys, a read-only mount) ran the model
    over the whole file, then failed with a bare `[Errno 2]`: the output is now probed first, one error line that
    names --output, before the data is read (a missing --data file would be reported otherwise)."""
    model_dir, _ = sst2_classifier
    for command in ("evaluate", "predict"):
        argv = [command, "--model", str(model_dir), "--data", "/no/such.tsv", "--output", "/proc/litebert-out/x"]
        assert main(argv) == 2, command
        err = capsys.readouterr().err
        assert err.count("error:") == 1 and "--output /proc/litebert-out/x: cannot write in /proc" in err, err
        assert "such.tsv" not in err


def test_default_batch_on_cpu_writes_what_batch_64_wrote(sst2_classifier, tmp_path):
    """No --batch-size on the CPU: the same files as today's default (64), and 64 recorded as the batch used."""
    model_dir, dev = sst2_classifier
    for name, extra in (("auto", []), ("b64", ["--batch-size", "64"])):
        args = ["evaluate", "--model", str(model_dir), "--data", str(dev), "--output", str(tmp_path / name)]
        assert main([*args, "--threads", "1", *extra]) == 0
    for f in ("predictions.tsv", "eval_results.json"):
        assert (tmp_path / "auto" / f).read_bytes() == (tmp_path / "b64" / f).read_bytes(), f
    a, b = (json.loads((tmp_path / d / "run_settings.json").read_text()) for d in ("auto", "b64"))
    for s in (a, b):
        del s["argv"], s["started"], s["evaluate_config"]["output_dir"]
    assert a == b and a["evaluate_config"]["batch_size"] == 64


def test_chunked_featurize_and_run_gives_the_whole_files_predictions(sst2_classifier):
    """evaluate/predict on a GPU featurize long files in chunks while the device runs (kinds.infer_in_chunks):
    the same features, the same predictions and (to rounding) logits and loss as the whole file at once."""
    from litebert.finetune.kinds import infer_in_chunks, make_kind
    from litebert.finetune.run import _load_tokenizer
    from litebert.tokenization import load_tokenizer

    model_dir, dev = sst2_classifier
    model = AlbertForSequenceClassification.from_pretrained(model_dir).eval()
    kind = make_kind(DataOptions(task="sst2"))
    kind.from_config(model.config)
    read = kind.read(dev, require_labels=True)
    tok = _load_tokenizer(model_dir, None, model.config.vocab_size)
    assert isinstance(tok, type(load_tokenizer(model_dir)))
    whole = kind.featurize(read, tok, 32, "data")
    ref, ref_loss, units = run_features(kind, model, whole, range(len(whole)), 8, tok.pad_token_id, torch.device("cpu"))
    feats, outs, loss = infer_in_chunks(kind, model, read, tok, 32, 8, tok.pad_token_id, torch.device("cpu"), 7)
    assert [it["input_ids"] for it in feats.items] == [it["input_ids"] for it in whole.items]
    assert (feats.truncated, feats.longest, feats.lengths) == (whole.truncated, whole.longest, whole.lengths)
    np.testing.assert_allclose(np.stack(outs), np.stack(ref), atol=1e-5, rtol=0)
    np.testing.assert_array_equal(kind.postprocess(outs, feats, read), kind.postprocess(ref, whole, read))
    assert loss == pytest.approx(ref_loss / units, abs=1e-6)
    assert kind.score(kind.postprocess(outs, feats, read), read, feats) == kind.score(
        kind.postprocess(ref, whole, read), read, whole
    )


def test_chunks_only_for_one_gpu_process_and_long_files():
    from types import SimpleNamespace

    from litebert.finetune.kinds import CHUNK_ROWS, make_kind
    from litebert.finetune.run import _in_chunks

    kind = make_kind(DataOptions(task="sst2"))
    long, short = SimpleNamespace(examples=[0] * (CHUNK_ROWS + 1)), SimpleNamespace(examples=[0] * CHUNK_ROWS)
    gpu = SimpleNamespace(world_size=1, device=torch.device("cuda"))
    assert _in_chunks(kind, gpu, long) and not _in_chunks(kind, gpu, short)
    assert not _in_chunks(kind, SimpleNamespace(world_size=1, device=torch.device("cpu")), long)
    assert not _in_chunks(kind, SimpleNamespace(world_size=2, device=torch.device("cuda")), long)


def test_evaluate_through_the_chunked_path_writes_the_same_files(sst2_classifier, tmp_path, monkeypatch):
    """The GPU path of evaluate (chunks featurized while the device runs), forced on the CPU with chunks of 16."""
    import litebert.finetune.kinds as kinds_module
    import litebert.finetune.run as run_module

    model_dir, dev = sst2_classifier
    # fp32: under bf16 autocast (auto on a CPU with AMX) other batches round the loss 1e-5 apart and may flip a row
    args = ["evaluate", "--model", str(model_dir), "--data", str(dev), "--threads", "1", "--batch-size", "8"]
    args += ["--precision", "fp32"]
    assert main([*args, "--output", str(tmp_path / "whole")]) == 0
    monkeypatch.setattr(run_module, "_in_chunks", lambda kind, dist, read: True)
    real, calls = kinds_module.infer_in_chunks, []

    def chunked(*a, **k):
        calls.append(1)
        return real(*a, **k, chunk_rows=16)  # 80 rows: 5 chunks

    monkeypatch.setattr(kinds_module, "infer_in_chunks", chunked)
    assert main([*args, "--output", str(tmp_path / "chunks")]) == 0
    assert calls == [1]
    whole, chunks = tmp_path / "whole", tmp_path / "chunks"
    assert (whole / "predictions.tsv").read_text() == (chunks / "predictions.tsv").read_text()
    a, b = (json.loads((d / "eval_results.json").read_text()) for d in (whole, chunks))
    assert a["accuracy"] == b["accuracy"] and a["truncated"] == b["truncated"] and a["num_examples"] == 80
    # chunks bucket rows by length within each chunk: other batches, other padding, so fp32 sums round differently
    assert b["eval_loss"] == pytest.approx(a["eval_loss"], rel=1e-5)
