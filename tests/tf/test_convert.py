"""TensorFlow ALBERT checkpoint import (litebert.tf.convert, `litebert convert-tf` / `info`).

Oracles: ../shared/fixtures/tf (real TF checkpoints; expected outputs from real TensorFlow running the original
google-research/albert and brightmart/albert_zh code, and from transformers), and transformers itself loading the
converted directory.
"""

from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pytest
import torch

from litebert.cli import main as cli_main
from litebert.config import AlbertConfig
from litebert.errors import LitebertError
from litebert.modeling import AlbertForPreTraining, AlbertModel
from litebert.tf.bundle import write_bundle
from litebert.tf.convert import (
    ALBERT_ZH_RULES,
    OFFICIAL_RULES,
    convert_tf_checkpoint,
    detect_layout,
    hf_to_tf_name,
    is_optimizer_variable,
    load_tf_weights,
    tf_config_to_hf,
    tf_to_hf_name,
)

A = "a_official_e8_h16"
C = "c_albert_zh_brightmart_e8_h16"
ATOL = 1e-5
OUTPUT_KEYS = ("last_hidden_state", "pooler_output", "prediction_logits", "sop_logits")


def expected(tf_fixtures, fixture, name="expected_outputs.json"):
    return json.loads((tf_fixtures / fixture / name).read_text())


def inputs(exp):
    return {k: torch.tensor(v) for k, v in exp["inputs"].items()}


def outputs_of(model, exp):
    """The four fixture outputs of a (litebert or transformers) AlbertForPreTraining, positions 0..8."""
    model.eval()
    with torch.no_grad():
        base = model.albert(**inputs(exp))
        full = model(**inputs(exp))
    return {
        "last_hidden_state": base.last_hidden_state[:, :9],
        "pooler_output": base.pooler_output,
        "prediction_logits": full.prediction_logits[:, :9],
        "sop_logits": full.sop_logits,
    }


def assert_matches(got, exp, atol=ATOL):
    for key in OUTPUT_KEYS:
        want = torch.tensor(exp[key], dtype=torch.float32)
        assert got[key].shape == want.shape, key
        diff = (got[key].float() - want).abs().max().item()
        assert diff <= atol, f"{key}: max abs diff {diff:.3g} > {atol}"


def fixture_arrays(tf_fixtures, fixture):
    return dict(np.load(tf_fixtures / fixture / "arrays.npz"))


def tf_arrays_from_model(model, layout):
    """Invert the name map: a litebert model's weights as the TF variables a checkpoint of ``layout`` holds."""
    prefix = "" if hasattr(model, "albert") else "albert."
    out = {}
    for name, p in model.named_parameters():  # tied parameters once (the word table, predictions.bias)
        tf_name = hf_to_tf_name(prefix + name, layout)
        assert tf_name is not None, name
        hf_name, transpose = tf_to_hf_name(tf_name, layout)
        assert hf_name == prefix + name
        value = p.detach().numpy().copy()
        out[tf_name] = value.T.copy() if transpose else value
    return out


# ---------------------------------------------------------------------------------------------------- name maps
def test_every_fixture_variable_is_a_weight_or_a_slot(tf_fixtures):
    for fixture, layout, n_model in ((A, "official", 32), (C, "albert_zh", 31)):
        names = list(np.load(tf_fixtures / fixture / "arrays.npz").files)
        assert detect_layout(names) == layout
        weights = [n for n in names if tf_to_hf_name(n, layout) is not None]
        slots = [n for n in names if is_optimizer_variable(n)]
        assert len(weights) == n_model
        assert sorted(weights + slots) == sorted(names)
        assert not set(weights) & set(slots)
        hf_names = [tf_to_hf_name(n, layout)[0] for n in weights]
        assert len(set(hf_names)) == len(hf_names)  # one TF variable per parameter


@pytest.mark.parametrize("rules,layout", [(OFFICIAL_RULES, "official"), (ALBERT_ZH_RULES, "albert_zh")])
def test_slot_names_never_map_to_weights(rules, layout):
    for rule in rules:
        name = rule.tf.format(g=1, k=2)
        assert tf_to_hf_name(name, layout) is not None
        assert tf_to_hf_name("module/" + name, layout) == tf_to_hf_name(name, layout)  # TF-Hub prefix
        for slot in (
            "adam_m",
            "adam_v",
            "lamb_m",
            "lamb_v",
            "Adam",
            "Adam_1",
            "AdamWeightDecayOptimizer",
            "AdamWeightDecayOptimizer_1",
        ):
            assert tf_to_hf_name(f"{name}/{slot}", layout) is None
            assert is_optimizer_variable(f"{name}/{slot}")
            assert is_optimizer_variable(f"module/{name}/{slot}")
        assert not is_optimizer_variable(name)
        assert hf_to_tf_name(rule.hf.format(g=1, k=2), layout) == name  # invertible (for error messages)
    for name in ("global_step", "module/global_step", "beta1_power", "good_steps"):
        assert is_optimizer_variable(name)


def test_albert_zh_layer_norms_match_whole_names():
    q = "bert/encoder/layer_shared/"
    base = "albert.encoder.albert_layer_groups.0.albert_layers.0."
    assert tf_to_hf_name(q + "output/LayerNorm/gamma", "albert_zh") == (base + "full_layer_layer_norm.weight", False)
    assert tf_to_hf_name(q + "attention/output/LayerNorm/gamma", "albert_zh") == (
        base + "attention.LayerNorm.weight",
        False,
    )
    assert tf_to_hf_name(q + "output/dense/kernel", "albert_zh") == (base + "ffn_output.weight", True)
    assert tf_to_hf_name(q + "attention/output/dense/kernel", "albert_zh") == (base + "attention.dense.weight", True)
    assert tf_to_hf_name("bert/embeddings/word_embeddings_2", "albert_zh") == (
        "albert.embeddings.word_embeddings_2.weight",
        True,
    )
    assert tf_to_hf_name("cls/seq_relationship/output_weights", "official") == (
        "sop_classifier.classifier.weight",
        False,
    )  # [2, H]: no transpose


def test_detect_layout_fails_clearly():
    with pytest.raises(LitebertError, match="cannot tell the checkpoint layout"):
        detect_layout(["foo/bar", "global_step"])


# ---------------------------------------------------------------------------------------------------- config
def test_config_mapping_official(tf_fixtures):
    raw = json.loads((tf_fixtures / A / "albert_config.json").read_text())
    kwargs, ignored = tf_config_to_hf(raw, "official")
    assert kwargs["hidden_act"] == "gelu_new"  # TF "gelu" is the tanh approximation
    assert kwargs["layer_norm_eps"] == 1e-12
    assert (kwargs["embedding_size"], kwargs["hidden_size"], kwargs["num_hidden_groups"]) == (8, 16, 1)
    assert ignored == []  # net_structure_type & co. are known and at their defaults
    cfg = AlbertConfig(**kwargs)
    assert cfg.embedding_layout == "factorized" and cfg.layer_norm_position == "post" and cfg.hf_compatible


def test_config_mapping_albert_zh(tf_fixtures):
    for fname, position in (("albert_config.json", "post"), ("albert_config_preln.json", "pre")):
        raw = json.loads((tf_fixtures / C / fname).read_text())
        kwargs, ignored = tf_config_to_hf(raw, "albert_zh")
        assert kwargs["embedding_layout"] == "albert_zh"
        assert kwargs["layer_norm_position"] == position
        assert kwargs["num_hidden_groups"] == kwargs["inner_group_num"] == 1
        assert kwargs["hidden_act"] == "gelu_new"
        assert ignored == []  # directionality and pooler_* are known no-ops


def test_config_mapping_errors(tf_fixtures):
    raw = json.loads((tf_fixtures / A / "albert_config.json").read_text())
    with pytest.raises(LitebertError, match="net_structure_type=1"):
        tf_config_to_hf({**raw, "net_structure_type": 1}, "official", "cfg.json")
    with pytest.raises(LitebertError, match=r"cfg\.json: hidden_act 'mish'"):
        tf_config_to_hf({**raw, "hidden_act": "mish"}, "official", "cfg.json")
    with pytest.raises(LitebertError, match="'preln' but the checkpoint has the official layout"):
        tf_config_to_hf({**raw, "ln_type": "preln"}, "official")
    with pytest.raises(LitebertError, match="required key 'hidden_size'"):
        tf_config_to_hf({k: v for k, v in raw.items() if k != "hidden_size"}, "official")
    with pytest.raises(LitebertError, match="ln_type 'mid'"):
        tf_config_to_hf({**raw, "ln_type": "mid"}, "albert_zh")
    _, ignored = tf_config_to_hf({**raw, "some_new_key": 3}, "official")
    assert ignored == ["some_new_key"]


# ---------------------------------------------------------------------------------------------------- parity
def test_official_fixture_matches_in_litebert(tf_fixtures):
    result = convert_tf_checkpoint(
        tf_fixtures / A / "model.ckpt", tf_fixtures / A / "albert_config.json", backend="native"
    )
    assert result.layout == "official" and result.global_step == 1000
    assert isinstance(result.model, AlbertForPreTraining) and not result.model.training
    assert len(result.report.loaded) == 32 and len(result.report.skipped_optimizer) == 11
    assert not result.report.identity_projection
    assert_matches(outputs_of(result.model, expected(tf_fixtures, A)), expected(tf_fixtures, A))


@pytest.mark.parametrize(
    "config_name,expected_name",
    [("albert_config.json", "expected_outputs.json"), ("albert_config_preln.json", "expected_outputs_preln.json")],
)
def test_albert_zh_fixture_matches_in_litebert(tf_fixtures, tmp_path, config_name, expected_name):
    exp = expected(tf_fixtures, C, expected_name)
    result = convert_tf_checkpoint(
        tf_fixtures / C / "model.ckpt", tf_fixtures / C / config_name, tmp_path / "out", backend="native"
    )
    assert result.layout == "albert_zh" and result.global_step == 3000
    assert result.config.embedding_layout == "albert_zh"
    assert result.config.layer_norm_position == ("pre" if "preln" in config_name else "post")
    assert len(result.report.loaded) == 31 and len(result.report.skipped_optimizer) == 7
    assert_matches(outputs_of(result.model, exp), exp)
    # the saved directory is litebert-only and reloads to the same outputs
    saved = json.loads((tmp_path / "out" / "config.json").read_text())
    assert saved["model_type"] == "litebert_albert"
    reloaded = AlbertForPreTraining.from_pretrained(tmp_path / "out")
    assert_matches(outputs_of(reloaded, exp), exp)


def test_pre_ln_and_post_ln_are_distinguished(tf_fixtures):
    """One checkpoint, two ln_type configs: each conversion reproduces real TensorFlow's outputs for its own ln_type
    and not the other's, so a converter that ignored ln_type (or swapped the two LayerNorms) fails here."""
    exp = {
        ln: expected(tf_fixtures, C, name)
        for ln, name in (("post", "expected_outputs.json"), ("pre", "expected_outputs_preln.json"))
    }
    for ln, config_name in (("post", "albert_config.json"), ("pre", "albert_config_preln.json")):
        model = convert_tf_checkpoint(tf_fixtures / C / "model.ckpt", tf_fixtures / C / config_name).model
        assert model.config.layer_norm_position == ln
        got = outputs_of(model, exp[ln])
        assert_matches(got, exp[ln])
        other = exp["pre" if ln == "post" else "post"]
        with pytest.raises(AssertionError, match="last_hidden_state: max abs diff"):
            assert_matches(got, other)


def test_official_cli_output_loads_in_transformers(tf_fixtures, tmp_path, capsys):
    transformers = pytest.importorskip("transformers")
    out = tmp_path / "albert_hf"
    rc = cli_main(
        [
            "convert-tf",
            "--checkpoint",
            str(tf_fixtures / A / "model.ckpt"),
            "--config",
            str(tf_fixtures / A / "albert_config.json"),
            "--output",
            str(out),
        ]
    )
    assert rc == 0
    printed = capsys.readouterr().out
    assert "layout: official" in printed and "skipped 11 optimizer" in printed
    config = json.loads((out / "config.json").read_text())
    assert config["model_type"] == "albert" and config["hidden_act"] == "gelu_new"
    exp = expected(tf_fixtures, A)

    hf = transformers.AlbertForPreTraining.from_pretrained(out, attn_implementation="eager")
    assert not hf.training  # from_pretrained returns eval mode; dropout 0.1 in the config must be off
    assert_matches(outputs_of(hf, exp), exp)
    base = transformers.AlbertModel.from_pretrained(out, attn_implementation="eager").eval()
    with torch.no_grad():
        o = base(**inputs(exp))
    assert (o.last_hidden_state[:, :9] - torch.tensor(exp["last_hidden_state"])).abs().max() <= ATOL
    assert (o.pooler_output - torch.tensor(exp["pooler_output"])).abs().max() <= ATOL
    # and litebert reads its own output back
    assert_matches(outputs_of(AlbertForPreTraining.from_pretrained(out), exp), exp)


def test_albert_zh_cli_with_layout_and_vocab(tf_fixtures, tmp_path, capsys):
    vocab = tmp_path / "vocab.txt"
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [chr(0x4E00 + i) for i in range(59)]
    vocab.write_text("\n".join(tokens) + "\n", encoding="utf-8")
    out = tmp_path / "zh"
    rc = cli_main(
        [
            "convert-tf",
            "--checkpoint",
            str(tf_fixtures / C / "model.ckpt"),
            "--config",
            str(tf_fixtures / C / "albert_config_preln.json"),
            "--vocab",
            str(vocab),
            "--output",
            str(out),
            "--layout",
            "albert_zh",
        ]
    )
    assert rc == 0
    printed = capsys.readouterr().out
    assert "litebert-only" in printed and "pre-LN" in printed
    assert {"vocab.txt", "tokenizer_config.json", "config.json", "model.safetensors"} <= {p.name for p in out.iterdir()}
    from litebert.tokenization import load_tokenizer

    tok = load_tokenizer(out)
    assert tok.vocab_size == 64 and tok.cls_token_id == 2
    capsys.readouterr()
    assert cli_main(["info", str(out)]) == 0
    text = capsys.readouterr().out
    assert re.search(r"^layout: +albert_zh$", text, re.M) and "litebert_albert" in text and "vocab_size 64" in text


# ---------------------------------------------------------------------------------------------------- slots
def test_changed_slots_do_not_change_outputs(tf_fixtures, tmp_path):
    """A checkpoint whose slot values (adam_m/v, lamb_m/v) are replaced, written with correct CRCs, converts to
    the same weights and outputs: slots are never loaded over weights."""
    for fixture in (A, C):
        arrays = fixture_arrays(tf_fixtures, fixture)
        rng = np.random.RandomState(1)
        changed = {
            n: (rng.standard_normal(a.shape) * 10).astype(a.dtype)
            if is_optimizer_variable(n) and n != "global_step"
            else a
            for n, a in arrays.items()
        }
        assert sum(not np.array_equal(changed[n], arrays[n]) for n in arrays) >= 6
        write_bundle(tmp_path / f"{fixture}.ckpt", changed)
        cfg = tf_fixtures / fixture / "albert_config.json"
        base = convert_tf_checkpoint(tf_fixtures / fixture / "model.ckpt", cfg).model.state_dict()
        new = convert_tf_checkpoint(tmp_path / f"{fixture}.ckpt", cfg, backend="native").model.state_dict()
        assert base.keys() == new.keys()
        for k in base:
            assert torch.equal(base[k], new[k]), k
    exp = expected(tf_fixtures, A)
    assert_matches(
        outputs_of(convert_tf_checkpoint(tmp_path / f"{A}.ckpt", tf_fixtures / A / "albert_config.json").model, exp),
        exp,
    )


def test_slot_loaded_as_weight_would_be_caught(tf_fixtures):
    """Sanity of the test above: putting the pooler's lamb_m in place of the kernel changes outputs a lot."""
    arrays = fixture_arrays(tf_fixtures, A)
    arrays["bert/pooler/dense/kernel"] = arrays["bert/pooler/dense/kernel/lamb_m"]
    model = convert_tf_checkpoint(arrays, tf_fixtures / A / "albert_config.json").model
    exp = expected(tf_fixtures, A)
    with pytest.raises(AssertionError, match="pooler_output"):
        assert_matches(outputs_of(model, exp), exp)


def test_tf_hub_module_prefix(tf_fixtures):
    arrays = {"module/" + n: a for n, a in fixture_arrays(tf_fixtures, A).items()}
    result = convert_tf_checkpoint(arrays, tf_fixtures / A / "albert_config.json")
    assert result.global_step == 1000
    assert_matches(outputs_of(result.model, expected(tf_fixtures, A)), expected(tf_fixtures, A))


# ---------------------------------------------------------------------------------------------------- structure
def test_several_groups_and_inner_layers_roundtrip(tmp_path):
    """G=2 groups of K=2 layers over L=4: each group_g/inner_group_k lands on albert_layer_groups.g.albert_layers.k,
    and transformers loading the converted directory agrees with litebert."""
    transformers = pytest.importorskip("transformers")
    raw = {
        "vocab_size": 50,
        "embedding_size": 6,
        "hidden_size": 12,
        "num_hidden_layers": 4,
        "num_hidden_groups": 2,
        "inner_group_num": 2,
        "num_attention_heads": 3,
        "intermediate_size": 20,
        "hidden_act": "gelu",
        "max_position_embeddings": 16,
        "type_vocab_size": 2,
        "hidden_dropout_prob": 0.0,
        "attention_probs_dropout_prob": 0.0,
        "initializer_range": 0.3,
    }
    torch.manual_seed(0)
    source = AlbertForPreTraining(AlbertConfig(**tf_config_to_hf(raw, "official")[0]))
    with torch.no_grad():
        for p in source.parameters():
            p.add_(torch.randn_like(p) * 0.1)  # LayerNorm and biases away from 1/0
    arrays = tf_arrays_from_model(source, "official")
    assert "bert/encoder/transformer/group_1/inner_group_1/ffn_1/intermediate/output/dense/kernel" in arrays
    arrays["global_step"] = np.array(7, dtype=np.int64)
    write_bundle(tmp_path / "m.ckpt", arrays)
    (tmp_path / "cfg.json").write_text(json.dumps(raw))
    result = convert_tf_checkpoint(tmp_path / "m.ckpt", tmp_path / "cfg.json", tmp_path / "out")
    want, got = source.state_dict(), result.model.state_dict()
    assert want.keys() == got.keys()
    for k in want:
        assert torch.equal(want[k], got[k]), k
    ids = torch.tensor([[2, 7, 9, 11, 3, 0]])
    mask = torch.tensor([[1, 1, 1, 1, 1, 0]])
    hf = transformers.AlbertForPreTraining.from_pretrained(tmp_path / "out", attn_implementation="eager").eval()
    with torch.no_grad():
        a = result.model(input_ids=ids, attention_mask=mask).prediction_logits
        b = hf(input_ids=ids, attention_mask=mask).prediction_logits
    assert (a - b).abs().max() <= ATOL


def test_identity_projection_when_mapping_in_is_absent(tmp_path):
    """E == H checkpoints have no embedding_hidden_mapping_in: identity weight, zero bias."""
    raw = {
        "vocab_size": 30,
        "embedding_size": 8,
        "hidden_size": 8,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "intermediate_size": 16,
        "hidden_act": "gelu",
        "max_position_embeddings": 16,
        "type_vocab_size": 2,
    }
    torch.manual_seed(1)
    source = AlbertForPreTraining(AlbertConfig(**tf_config_to_hf(raw, "official")[0]))
    arrays = {
        n: a for n, a in tf_arrays_from_model(source, "official").items() if "embedding_hidden_mapping_in" not in n
    }
    result = convert_tf_checkpoint(arrays, raw)
    assert result.report.identity_projection
    proj = result.model.albert.encoder.embedding_hidden_mapping_in
    assert torch.equal(proj.weight, torch.eye(8)) and torch.equal(proj.bias, torch.zeros(8))
    # E != H without the projection is a missing parameter, named by its TF variable
    raw2 = {**raw, "embedding_size": 4}
    model2 = AlbertForPreTraining(AlbertConfig(**tf_config_to_hf(raw2, "official")[0]))
    arrays2 = {
        n: a for n, a in tf_arrays_from_model(model2, "official").items() if "embedding_hidden_mapping_in" not in n
    }
    with pytest.raises(
        LitebertError,
        match=r"no value for 2 model parameter\(s\): "
        r"bert/encoder/embedding_hidden_mapping_in/kernel, bert/encoder/embedding_hidden_mapping_in/bias",
    ):
        convert_tf_checkpoint(arrays2, raw2)


def test_checkpoint_without_heads_gives_albert_model(tf_fixtures, tmp_path):
    transformers = pytest.importorskip("transformers")
    arrays = {n: a for n, a in fixture_arrays(tf_fixtures, A).items() if not n.startswith("cls/")}
    result = convert_tf_checkpoint(arrays, tf_fixtures / A / "albert_config.json", tmp_path / "base")
    assert isinstance(result.model, AlbertModel)
    exp = expected(tf_fixtures, A)
    hf = transformers.AlbertModel.from_pretrained(tmp_path / "base", attn_implementation="eager").eval()
    with torch.no_grad():
        o = hf(**inputs(exp))
    assert (o.last_hidden_state[:, :9] - torch.tensor(exp["last_hidden_state"])).abs().max() <= ATOL
    with pytest.raises(LitebertError, match="cls/seq_relationship/output_weights"):
        convert_tf_checkpoint(arrays, tf_fixtures / A / "albert_config.json", heads="pretraining")


# ---------------------------------------------------------------------------------------------------- bad input
def test_cli_prefix_without_index(tf_fixtures, tmp_path, capsys):
    rc = cli_main(
        [
            "convert-tf",
            "--checkpoint",
            str(tmp_path / "model.ckpt"),
            "--config",
            str(tf_fixtures / A / "albert_config.json"),
            "--output",
            str(tmp_path / "o"),
        ]
    )
    assert rc == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "model.ckpt.index not found" in err
    assert not (tmp_path / "o").exists()


def test_truncated_data_file_fails_conversion(tf_fixtures, tmp_path, capsys):
    d = tmp_path / "ckpt"
    shutil.copytree(tf_fixtures / A, d)
    for f in d.iterdir():
        f.chmod(0o644)
    data = d / "model.ckpt.data-00000-of-00001"
    data.write_bytes(data.read_bytes()[:-200])
    rc = cli_main(
        [
            "convert-tf",
            "--checkpoint",
            str(d / "model.ckpt"),
            "--config",
            str(d / "albert_config.json"),
            "--output",
            str(tmp_path / "o"),
        ]
    )
    assert rc == 2
    err = capsys.readouterr().err
    # the first variable read that lies past the cut: bytes [22880, 23392) of a 23336-byte file
    assert str(data) in err and "'cls/predictions/transform/dense/kernel'" in err and "truncated" in err


def test_cli_output_that_is_a_file_or_unwritable(tf_fixtures, tmp_path, capsys, monkeypatch):
    (tmp_path / "f").write_text("x")
    args = [
        "convert-tf",
        "--checkpoint",
        str(tf_fixtures / A / "model.ckpt"),
        "--config",
        str(tf_fixtures / A / "albert_config.json"),
        "--output",
    ]
    assert cli_main([*args, str(tmp_path / "f")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "exists and is not a directory" in err and "Traceback" not in err

    def refuse(*_a, **_k):
        raise PermissionError(13, "Permission denied", str(tmp_path / "o"))

    monkeypatch.setattr("pathlib.Path.mkdir", refuse)  # an OSError from the file system: one line, exit 2
    assert cli_main([*args, str(tmp_path / "o")]) == 2
    assert capsys.readouterr().err.startswith("error: [Errno 13] Permission denied")


def test_config_disagreeing_with_checkpoint_shapes(tf_fixtures, tmp_path):
    raw = json.loads((tf_fixtures / A / "albert_config.json").read_text())
    (tmp_path / "bad.json").write_text(json.dumps({**raw, "embedding_size": 12}))
    with pytest.raises(LitebertError) as err:
        convert_tf_checkpoint(tf_fixtures / A / "model.ckpt", tmp_path / "bad.json")
    msg = str(err.value)
    assert "bert/encoder/embedding_hidden_mapping_in/kernel: checkpoint shape [8, 16]" in msg
    assert "implies [12, 16]" in msg and "bad.json" in msg
    assert "bert/embeddings/word_embeddings: checkpoint shape [64, 8]" in msg and "implies [64, 12]" in msg


def test_config_with_more_groups_than_the_checkpoint(tf_fixtures):
    raw = json.loads((tf_fixtures / A / "albert_config.json").read_text())
    with pytest.raises(
        LitebertError, match=r"no value for 32 model parameter\(s\): bert/encoder/transformer/group_1/.* and 12 more"
    ):
        convert_tf_checkpoint(tf_fixtures / A / "model.ckpt", {**raw, "num_hidden_groups": 3})
    arrays = fixture_arrays(tf_fixtures, A)
    extra = {n.replace("group_0/", "group_1/"): a for n, a in arrays.items() if "/group_0/" in n}
    with pytest.raises(LitebertError, match=r"has no parameter for: bert/encoder/transformer/group_1/"):
        convert_tf_checkpoint({**arrays, **extra}, raw)


def test_unknown_variables_are_listed(tf_fixtures):
    arrays = fixture_arrays(tf_fixtures, A)
    arrays["output_weights"] = np.zeros((3, 16), np.float32)  # run_classifier.py's fine-tuned head
    arrays["output_bias"] = np.zeros(3, np.float32)
    arrays["bert/encoder/layer_normalization/gamma"] = np.ones(16, np.float32)
    with pytest.raises(LitebertError) as err:
        convert_tf_checkpoint(arrays, tf_fixtures / A / "albert_config.json")
    msg = str(err.value)
    assert "3 variable(s) are neither official-layout ALBERT weights nor optimizer slots" in msg
    for name in ("output_weights [3, 16]", "output_bias [3]", "bert/encoder/layer_normalization/gamma [16]"):
        assert name in msg
    assert "fine-tuned" in msg and "layer_normalization" in msg and "--skip-unknown" in msg
    result = convert_tf_checkpoint(arrays, tf_fixtures / A / "albert_config.json", skip_unknown=True)
    assert sorted(result.report.skipped_unknown) == sorted(
        ["output_weights", "output_bias", "bert/encoder/layer_normalization/gamma"]
    )
    assert_matches(outputs_of(result.model, expected(tf_fixtures, A)), expected(tf_fixtures, A))


def test_forced_layout_must_match(tf_fixtures):
    with pytest.raises(LitebertError, match="--layout albert_zh but the variable names are those of the official"):
        convert_tf_checkpoint(
            tf_fixtures / A / "model.ckpt", tf_fixtures / A / "albert_config.json", layout="albert_zh"
        )


def test_vocab_larger_than_model_is_refused(tf_fixtures, tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(95)]) + "\n")
    with pytest.raises(LitebertError, match=r"100 tokens but .* vocab_size 64"):
        convert_tf_checkpoint(
            tf_fixtures / A / "model.ckpt", tf_fixtures / A / "albert_config.json", tmp_path / "o", vocab=vocab
        )
    assert not (tmp_path / "o").exists()


def test_load_tf_weights_into_transformers_model_directly(tf_fixtures):
    """The map is transformers' own: loading the fixture into transformers.AlbertForPreTraining (no litebert
    model in between) reproduces the expected outputs."""
    transformers = pytest.importorskip("transformers")
    raw = json.loads((tf_fixtures / A / "albert_config.json").read_text())
    kwargs, _ = tf_config_to_hf(raw, "official")
    model = transformers.AlbertForPreTraining(transformers.AlbertConfig(**kwargs, attn_implementation="eager"))
    report = load_tf_weights(model, fixture_arrays(tf_fixtures, A), "official")
    assert report.tied == {
        "predictions.decoder.weight": "albert.embeddings.word_embeddings.weight",
        "predictions.decoder.bias": "predictions.bias",
    }
    assert_matches(outputs_of(model, expected(tf_fixtures, A)), expected(tf_fixtures, A))
