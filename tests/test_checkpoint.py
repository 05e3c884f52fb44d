"""Model directories: transformers reads ours and we read its, key variants, atomic writes, clear errors."""

from __future__ import annotations

import json
import logging

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from litebert import AlbertConfig, AlbertForPreTraining, AlbertForSequenceClassification, AlbertModel, LitebertError
from litebert.checkpoint import load_state_dict_file, load_weights

transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()
transformers.logging.disable_progress_bar()


def small(**kw) -> AlbertConfig:
    return AlbertConfig.from_preset("albert-debug", vocab_size=50, **kw)


def test_saved_directory_layout(tmp_path):
    model = AlbertForPreTraining(small())
    model.save_pretrained(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json", "model.safetensors"]
    cfg = json.loads((tmp_path / "config.json").read_text())
    assert cfg["model_type"] == "albert" and cfg["architectures"] == ["AlbertForPreTraining"]
    with safe_open(tmp_path / "model.safetensors", "pt") as f:
        keys = set(f.keys())
        assert f.metadata() == {"format": "pt"}
    # the tied decoder is written once, as transformers does (under the embedding and predictions.bias)
    assert "predictions.decoder.weight" not in keys and "predictions.decoder.bias" not in keys
    assert keys == set(model.state_dict()) - {"predictions.decoder.weight", "predictions.decoder.bias"}


@pytest.mark.parametrize("cls_name", ["AlbertForPreTraining", "AlbertModel", "AlbertForSequenceClassification"])
def test_transformers_loads_ours_without_key_problems(cls_name, tmp_path):
    import litebert

    model = getattr(litebert, cls_name)(small())
    model.save_pretrained(tmp_path)
    hf, info = getattr(transformers, cls_name).from_pretrained(tmp_path, output_loading_info=True)
    assert info["missing_keys"] == set() or not info["missing_keys"], info
    assert not info["unexpected_keys"] and not info["mismatched_keys"], info
    torch.testing.assert_close(
        hf.state_dict()[
            "albert.embeddings.word_embeddings.weight"
            if cls_name != "AlbertModel"
            else "embeddings.word_embeddings.weight"
        ],
        model.state_dict()[
            "albert.embeddings.word_embeddings.weight"
            if cls_name != "AlbertModel"
            else "embeddings.word_embeddings.weight"
        ],
    )


def test_reads_transformers_directories_bin_and_safetensors(tmp_path):
    torch.manual_seed(0)
    hf = transformers.AlbertForPreTraining(transformers.AlbertConfig(**small().to_dict()))
    hf.save_pretrained(tmp_path / "st")
    hf.save_pretrained(
        tmp_path / "bin", safe_serialization=False
    ) if "safe_serialization" in hf.save_pretrained.__code__.co_varnames else None
    if not (tmp_path / "bin" / "pytorch_model.bin").exists():  # transformers 5 writes safetensors only
        (tmp_path / "bin").mkdir(exist_ok=True)
        torch.save(hf.state_dict(), tmp_path / "bin" / "pytorch_model.bin")
        (tmp_path / "bin" / "config.json").write_text((tmp_path / "st" / "config.json").read_text())
    for sub in ("st", "bin"):
        ours = AlbertForPreTraining.from_pretrained(tmp_path / sub)
        assert ours.loading_info["missing"] == [] and ours.loading_info["unexpected"] == []
        for name, tensor in hf.state_dict().items():
            torch.testing.assert_close(ours.state_dict()[name], tensor, msg=name)


def test_legacy_key_variants(tmp_path):
    """Old transformers files: decoder.weight and decoder.bias written out, predictions.bias absent."""
    model = AlbertForPreTraining(small())
    with torch.no_grad():
        model.predictions.bias.normal_()
    state = {k: v.clone() for k, v in model.state_dict().items() if k != "predictions.bias"}
    ref_bias = model.predictions.bias.detach().clone()
    save_file(state, str(tmp_path / "model.safetensors"))
    small().save(tmp_path)
    back = AlbertForPreTraining.from_pretrained(tmp_path)
    torch.testing.assert_close(back.predictions.bias, ref_bias)
    assert back.loading_info["missing"] == [] and back.loading_info["unexpected"] == []
    assert back.predictions.decoder.bias is back.predictions.bias


def test_head_directory_into_base_model_and_back(tmp_path, caplog):
    pre = AlbertForPreTraining(small())
    pre.save_pretrained(tmp_path)
    with caplog.at_level(logging.INFO, logger="litebert"):
        base = AlbertModel.from_pretrained(tmp_path)
    assert base.loading_info["missing"] == []
    assert "sop_classifier.classifier.weight" in base.loading_info["unexpected"]
    torch.testing.assert_close(base.pooler.weight, pre.albert.pooler.weight)


def test_ignore_mismatched_sizes(tmp_path):
    AlbertForSequenceClassification(small(num_labels=3)).save_pretrained(tmp_path)
    with pytest.raises(LitebertError, match=r"classifier\.weight.*\[3, 64\].*\[5, 64\]"):
        AlbertForSequenceClassification.from_pretrained(tmp_path, num_labels=5)
    model = AlbertForSequenceClassification.from_pretrained(tmp_path, num_labels=5, ignore_mismatched_sizes=True)
    assert model.classifier.out_features == 5
    assert set(model.loading_info["mismatched"]) == {"classifier.weight", "classifier.bias"}


# ---------------------------------------------------------------------------------------------- errors
def test_missing_config_json(tmp_path):
    AlbertModel(small()).save_pretrained(tmp_path)
    (tmp_path / "config.json").unlink()
    with pytest.raises(LitebertError, match=r"config\.json: missing config\.json"):
        AlbertModel.from_pretrained(tmp_path)
    with pytest.raises(LitebertError, match="model directory not found"):
        AlbertModel.from_pretrained(tmp_path / "nowhere")


def _run_dir(path, command, model_dirs=()):
    """A `litebert <command>` run directory as the commands leave it: run_settings.json, the run's config.json, a
    checkpoint, and each of ``model_dirs`` (``final``, ``best``) as a model directory."""
    (path / "checkpoints" / "step-2").mkdir(parents=True)
    (path / "run_settings.json").write_text(json.dumps({"command": command, f"{command}_config": {}}))
    small().save(path)
    for name in model_dirs:
        AlbertForPreTraining(small()).save_pretrained(path / name)
    return path


def test_a_run_directory_is_refused_naming_the_model_directory_to_pass(tmp_path):
    """Defect: a pretrain or finetune run directory given where a model directory goes (finetune/evaluate/predict
    --model, export) failed on a missing tokenizer or config.json. Now every reader of a model directory says what it
    is and which directory inside it to pass, whichever of final/ and best/ exists."""
    from litebert.checkpoint import load_config

    pre = _run_dir(tmp_path / "pre", "pretrain", ["final"])
    ft = _run_dir(tmp_path / "ft", "finetune", ["best"])
    both = _run_dir(tmp_path / "both", "finetune", ["best", "final"])
    cases = {
        pre: f"{pre} is a `litebert pretrain` run directory, not a model directory: pass {pre / 'final'}",
        ft: f"{ft} is a `litebert finetune` run directory, not a model directory: pass {ft / 'best'}",
        both: f"{both} is a `litebert finetune` run directory, not a model directory: pass {both / 'best'} or "
        f"{both / 'final'}",
    }
    for run, message in cases.items():
        for read in (load_config, load_state_dict_file, AlbertForPreTraining.from_pretrained):
            with pytest.raises(LitebertError) as exc:
                read(run)
            assert str(exc.value) == message
    # a run that has not written its model yet: what to pass once it has
    unfinished = _run_dir(tmp_path / "unfinished", "pretrain")
    with pytest.raises(LitebertError) as exc:
        load_config(unfinished)
    assert str(exc.value) == (
        f"{unfinished} is a `litebert pretrain` run directory, not a model directory: pass {unfinished / 'final'} "
        f"once the run has written it, or export a checkpoint as a model (litebert export "
        f"{unfinished}/checkpoints/step-N --output DIR)"
    )
    # the model directories themselves load; so does a directory of another command's run settings
    assert load_config(pre / "final").hidden_size == small().hidden_size
    evaluate_out = _run_dir(tmp_path / "ev", "evaluate")
    assert load_config(evaluate_out).hidden_size == small().hidden_size


def test_config_not_json(tmp_path):
    AlbertModel(small()).save_pretrained(tmp_path)
    (tmp_path / "config.json").write_text("hidden_size = 64\n")
    with pytest.raises(LitebertError, match=r"config\.json: not valid JSON"):
        AlbertModel.from_pretrained(tmp_path)


def test_truncated_safetensors_names_file_and_parameter(tmp_path):
    AlbertForPreTraining(small()).save_pretrained(tmp_path)
    path = tmp_path / "model.safetensors"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 1000])
    with pytest.raises(LitebertError, match=r"model\.safetensors: truncated safetensors file: parameter '[\w.]+'"):
        AlbertForPreTraining.from_pretrained(tmp_path)
    path.write_bytes(data[:5])
    with pytest.raises(LitebertError, match=r"model\.safetensors: truncated"):
        AlbertForPreTraining.from_pretrained(tmp_path)
    path.write_bytes(data[:100])
    with pytest.raises(LitebertError, match=r"model\.safetensors: truncated"):
        AlbertForPreTraining.from_pretrained(tmp_path)


def test_damaged_headers_and_bin_are_one_line_errors(tmp_path):
    model = AlbertForPreTraining(small())
    model.save_pretrained(tmp_path)
    path = tmp_path / "model.safetensors"
    data = path.read_bytes()
    n = int.from_bytes(data[:8], "little")  # the intact file: an 8-byte length, then a JSON header naming every tensor
    header = json.loads(data[8 : 8 + n])
    tied = {"predictions.decoder.weight", "predictions.decoder.bias"}  # aliases, not written (as transformers 5)
    assert set(header) - {"__metadata__"} == set(model.state_dict()) - tied
    for header in (b"[1, 2]", b'{"x": {"dtype": "F32", "shape": [2], "data_offsets": "ab"}}'):
        path.write_bytes(len(header).to_bytes(8, "little") + header)
        with pytest.raises(LitebertError, match=r"model\.safetensors: not a safetensors file"):
            AlbertForPreTraining.from_pretrained(tmp_path)
    path.unlink()
    (tmp_path / "pytorch_model.bin").write_bytes(b"\x80\x02 not a pickle at all\n\n")
    with pytest.raises(LitebertError, match=r"pytorch_model\.bin: cannot read PyTorch weights") as err:
        AlbertForPreTraining.from_pretrained(tmp_path)
    assert "\n" not in str(err.value)


def test_saving_onto_a_file_is_a_clear_error(tmp_path):
    target = tmp_path / "taken"
    target.write_text("not a directory")
    with pytest.raises(LitebertError, match="taken: exists and is not a directory"):
        AlbertModel(small()).save_pretrained(target)
    assert target.read_text() == "not a directory"


def test_no_weights_file(tmp_path):
    small().save(tmp_path)
    with pytest.raises(LitebertError, match="no weights found"):
        AlbertModel.from_pretrained(tmp_path)


def test_shape_mismatch_names_file_and_parameter(tmp_path):
    AlbertForPreTraining(small()).save_pretrained(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    cfg["intermediate_size"] = 100
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(
        LitebertError,
        match=r"model\.safetensors: parameter "
        r"'albert\.encoder\.albert_layer_groups\.0\.albert_layers\.0\.ffn\.\w+' "
        r"has shape \[128.*\[100",
    ):
        AlbertForPreTraining.from_pretrained(tmp_path)


def test_hf_export_refused_for_litebert_only_models(tmp_path):
    for kw in (dict(sharing="attention"), dict(embedding_layout="albert_zh"), dict(layer_norm_position="pre")):
        model = AlbertForPreTraining(small(**kw))
        with pytest.raises(LitebertError, match="cannot save AlbertForPreTraining in transformers' format"):
            model.save_pretrained(tmp_path / "hf", hf=True)
        assert not (tmp_path / "hf" / "model.safetensors").exists()
        model.save_pretrained(tmp_path / "own")
        assert json.loads((tmp_path / "own" / "config.json").read_text())["model_type"] == "litebert_albert"
    AlbertForPreTraining(small()).save_pretrained(tmp_path / "ok", hf=True)


def test_shared_tensors_saved_once_and_atomic(tmp_path):
    model = AlbertForPreTraining(small(num_hidden_layers=4, sharing="ffn"))
    model.save_pretrained(tmp_path)
    assert not [p for p in tmp_path.iterdir() if "tmp" in p.name]
    state, source = load_state_dict_file(tmp_path)
    assert source.name == "model.safetensors"
    assert sum(v.numel() for v in state.values()) == model.num_parameters()
    ffn_keys = [k for k in state if k.endswith(".ffn.weight")]
    assert ffn_keys == ["albert.encoder.albert_layer_groups.0.albert_layers.0.ffn.weight"]


def test_overwrite_keeps_other_files(tmp_path):
    (tmp_path / "spiece.model").write_bytes(b"x")
    model = AlbertModel(small())
    model.save_pretrained(tmp_path)
    model.save_pretrained(tmp_path)
    assert (tmp_path / "spiece.model").exists()


def test_load_weights_from_state_dict_without_prefix():
    model = AlbertForPreTraining(small())
    other = AlbertModel(small())
    report = load_weights(model, other.state_dict(), "memory")
    torch.testing.assert_close(model.albert.pooler.weight, other.pooler.weight)
    assert "predictions.dense.weight" in report["missing"]


def test_a_training_checkpoint_given_as_a_model_names_what_to_do(tmp_path):
    """`pretrain --init-from RUN/checkpoints/step-N` said no weights were found, `finetune --model` of it that
    config.json was missing; `litebert info` already knew it was a training checkpoint."""
    from litebert.checkpoint import load_config, load_state_dict_file

    for command in ("pretrain", "finetune"):
        ckpt = tmp_path / command / "checkpoints" / "step-20"
        ckpt.mkdir(parents=True)
        (ckpt / "model.pt").write_bytes(b"")
        (ckpt / "trainer_state.json").write_text("{}")
        (tmp_path / command / "run_settings.json").write_text(json.dumps({"command": command}))
        want = (
            f"{ckpt} is a `litebert pretrain` training checkpoint (model.pt, optimizer state), not a model directory; "
            f"write one with `litebert export {ckpt} --output DIR`, or resume training from it with `litebert "
            f"pretrain ... --resume {ckpt}`"
            if command == "pretrain"
            else f"{ckpt} is a `litebert finetune` training checkpoint (model.pt, optimizer state), not a model "
            f"directory: the run's model is {tmp_path / command / 'best'}"
        )
        for read in (load_config, load_state_dict_file):
            with pytest.raises(LitebertError) as err:
                read(ckpt)
            assert str(err.value) == want
