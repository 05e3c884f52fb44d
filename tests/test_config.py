"""AlbertConfig: transformers' names and defaults, presets, JSON I/O, validation messages."""

from __future__ import annotations

import dataclasses
import json

import pytest

from litebert import PRESETS, AlbertConfig, LitebertError

HF_FIELDS = [
    "vocab_size",
    "embedding_size",
    "hidden_size",
    "num_hidden_layers",
    "num_hidden_groups",
    "num_attention_heads",
    "intermediate_size",
    "inner_group_num",
    "hidden_act",
    "hidden_dropout_prob",
    "attention_probs_dropout_prob",
    "max_position_embeddings",
    "type_vocab_size",
    "initializer_range",
    "layer_norm_eps",
    "classifier_dropout_prob",
    "pad_token_id",
    "bos_token_id",
    "eos_token_id",
]


def test_defaults_equal_transformers():
    transformers = pytest.importorskip("transformers")
    ours, theirs = AlbertConfig(), transformers.AlbertConfig()
    for name in HF_FIELDS:
        assert getattr(ours, name) == getattr(theirs, name), name
    assert ours.num_labels == theirs.num_labels == 2
    assert ours.id2label == theirs.id2label and ours.label2id == theirs.label2id
    assert ours.problem_type is None and ours.sharing == "all"
    assert ours.embedding_layout == "factorized" and ours.layer_norm_position == "post"


def test_reads_transformers_config_json_and_keeps_unknown_keys(tmp_path):
    transformers = pytest.importorskip("transformers")
    hf = transformers.AlbertConfig(
        hidden_size=64,
        num_attention_heads=4,
        intermediate_size=128,
        embedding_size=16,
        num_hidden_layers=3,
        vocab_size=100,
        id2label={0: "neg", 1: "neu", 2: "pos"},
    )
    hf.save_pretrained(tmp_path)
    data = json.loads((tmp_path / "config.json").read_text())
    data["position_embedding_type"] = "absolute"
    data["some_future_key"] = [1, 2]
    (tmp_path / "config.json").write_text(json.dumps(data))
    cfg = AlbertConfig.from_json_file(tmp_path / "config.json")
    assert (cfg.hidden_size, cfg.num_attention_heads, cfg.vocab_size, cfg.num_labels) == (64, 4, 100, 3)
    assert cfg.id2label == {0: "neg", 1: "neu", 2: "pos"} and cfg.label2id == {"neg": 0, "neu": 1, "pos": 2}
    assert cfg.extra["some_future_key"] == [1, 2] and "transformers_version" in cfg.extra
    cfg.save(tmp_path / "again")
    written = json.loads((tmp_path / "again" / "config.json").read_text())
    assert written["some_future_key"] == [1, 2] and written["model_type"] == "albert"
    assert written["id2label"] == {"0": "neg", "1": "neu", "2": "pos"}
    back = transformers.AlbertConfig.from_pretrained(tmp_path / "again")
    assert back.hidden_size == 64 and back.num_labels == 3


def test_json_round_trip(tmp_path):
    cfg = AlbertConfig.from_preset("albert-debug", sharing="ffn", problem_type="regression", num_labels=1)
    path = cfg.save(tmp_path)
    back = AlbertConfig.from_json_file(path)
    assert back == cfg
    assert json.loads(path.read_text())["model_type"] == "litebert_albert"
    assert AlbertConfig.load(path) == cfg and AlbertConfig.load(tmp_path / "config.json") == cfg


@pytest.mark.parametrize("name", list(PRESETS))
def test_presets_build(name):
    cfg = AlbertConfig.from_preset(name)
    assert cfg.hidden_size % cfg.num_attention_heads == 0
    assert AlbertConfig.load(name) == cfg


def test_preset_values():
    base = AlbertConfig.from_preset("albert-base")
    assert (
        base.vocab_size,
        base.embedding_size,
        base.hidden_size,
        base.num_hidden_layers,
        base.num_attention_heads,
        base.intermediate_size,
    ) == (30000, 128, 768, 12, 12, 3072)
    assert base.hidden_dropout_prob == base.attention_probs_dropout_prob == base.classifier_dropout_prob == 0
    assert base.hidden_act == "gelu_new" and base.sharing == "all"
    unit = AlbertConfig.from_preset("albert-unittest")
    assert (
        unit.embedding_size,
        unit.hidden_size,
        unit.num_hidden_layers,
        unit.num_attention_heads,
        unit.intermediate_size,
    ) == (24, 64, 6, 1, 256)
    tiny = AlbertConfig.from_preset("albert-zh-tiny")
    assert (
        tiny.vocab_size,
        tiny.hidden_size,
        tiny.num_hidden_layers,
        tiny.num_attention_heads,
        tiny.intermediate_size,
    ) == (21128, 312, 4, 12, 1248)
    assert {n for n in PRESETS} >= {
        "albert-debug",
        "albert-unittest",
        "albert-base",
        "albert-large",
        "albert-xlarge",
        "albert-xxlarge",
        "albert-zh-tiny",
        "albert-zh-small",
        "albert-zh-base",
        "albert-zh-large",
        "albert-zh-xlarge",
        "albert-zh-xxlarge",
    }


def test_preset_overrides_and_unknown_preset():
    assert AlbertConfig.from_preset("albert-base", num_hidden_layers=24).num_hidden_layers == 24
    with pytest.raises(LitebertError, match=r"unknown model preset 'albert-huge'.*albert-base"):
        AlbertConfig.from_preset("albert-huge")
    with pytest.raises(LitebertError, match="neither a model preset"):
        AlbertConfig.load("albert-huge")


@pytest.mark.parametrize(
    "kwargs,field",
    [
        (dict(hidden_size=100, num_attention_heads=3), "hidden_size"),
        (dict(num_hidden_layers=0), "num_hidden_layers"),
        (dict(num_hidden_groups=13), "num_hidden_groups"),
        (dict(hidden_act="swishy"), "hidden_act"),
        (dict(hidden_dropout_prob=1.5), "hidden_dropout_prob"),
        (dict(sharing="some"), "sharing"),
        (dict(embedding_layout="bert"), "embedding_layout"),
        (dict(layer_norm_position="middle"), "layer_norm_position"),
        (dict(problem_type="ranking"), "problem_type"),
        (dict(vocab_size=2.5), "vocab_size"),
        (dict(layer_norm_eps=0), "layer_norm_eps"),
    ],
)
def test_validation_names_the_field(kwargs, field):
    with pytest.raises(LitebertError, match=f"AlbertConfig.{field}"):
        AlbertConfig(**kwargs)


def test_validation_error_from_file_names_file(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"hidden_size": 100, "num_attention_heads": 3}))
    with pytest.raises(
        LitebertError, match=r"config\.json.*hidden_size: 100 is not divisible by num_attention_heads=3"
    ):
        AlbertConfig.from_json_file(path)
    path.write_text(json.dumps({"model_type": "bert"}))
    with pytest.raises(LitebertError, match="not an ALBERT model"):
        AlbertConfig.from_json_file(path)


def test_not_json_and_missing_file(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text("{hidden_size: 12")
    with pytest.raises(LitebertError, match=r"config\.json: not valid JSON .*line 1"):
        AlbertConfig.from_json_file(bad)
    with pytest.raises(LitebertError, match=r"nope\.json: config file not found"):
        AlbertConfig.load(tmp_path / "nope.json")
    with pytest.raises(LitebertError, match="config file not found"):
        AlbertConfig.from_json_file(tmp_path / "empty_dir")


def test_sharing_defaults_follow_groups():
    assert AlbertConfig(num_hidden_layers=12, num_hidden_groups=1).sharing == "all"
    assert AlbertConfig(num_hidden_layers=12, num_hidden_groups=12).sharing == "none"
    assert AlbertConfig(num_hidden_layers=12, num_hidden_groups=3).sharing == "all"
    assert AlbertConfig(num_hidden_layers=1, num_hidden_groups=1).sharing == "all"
    none = AlbertConfig(num_hidden_layers=6, sharing="none")
    assert none.num_hidden_groups == 6


def test_hf_compatibility_flags():
    assert AlbertConfig().hf_compatible
    assert AlbertConfig(num_hidden_groups=12).hf_compatible
    for kw in (
        dict(sharing="attention"),
        dict(sharing="ffn"),
        dict(embedding_layout="albert_zh"),
        dict(layer_norm_position="pre"),
    ):
        cfg = AlbertConfig(**kw)
        assert not cfg.hf_compatible and cfg.hf_incompatibility
        assert cfg.to_dict()["model_type"] == "litebert_albert"


def test_num_labels_override_resets_label_names():
    cfg = AlbertConfig(id2label={0: "a", 1: "b", 2: "c"})
    assert cfg.num_labels == 3
    four = cfg.replace(num_labels=4)
    assert four.num_labels == 4 and four.id2label == {i: f"LABEL_{i}" for i in range(4)}
    assert dataclasses.replace(cfg).id2label == {0: "a", 1: "b", 2: "c"}
    assert AlbertConfig.from_dict({"num_labels": 5}).num_labels == 5


def test_unsupported_position_embedding_type():
    with pytest.raises(LitebertError, match="position_embedding_type"):
        AlbertConfig.from_dict({"position_embedding_type": "relative_key"})


def test_misspelt_key_is_refused_not_silently_defaulted(tmp_path):
    # {"hiden_size": 32} used to be kept in `extra` and the model built with the default hidden_size 4096 (7 GB).
    path = tmp_path / "model.json"
    path.write_text(json.dumps({"vocab_size": 100, "hiden_size": 32}))
    with pytest.raises(LitebertError, match=r"model\.json: unknown key 'hiden_size'; did you mean 'hidden_size'"):
        AlbertConfig.from_json_file(path)
    # albert_zh's and transformers' own extra keys are still kept
    zh = {
        "vocab_size": 100,
        "directionality": "bidi",
        "pooler_fc_size": 768,
        "pooler_type": "first_token_transform",
        "ln_type": "postln",
        "position_embedding_type": "absolute",
        "torch_dtype": "float32",
    }
    assert AlbertConfig.from_dict(zh).extra["pooler_type"] == "first_token_transform"
