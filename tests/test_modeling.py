"""The model against transformers as the oracle (minGPT's test_huggingface_import idea), plus the litebert-only
variants against independent references written here from docs/algorithms.md §1 and fixtures/tf/README.md."""

from __future__ import annotations

import logging
import math

import pytest
import torch
import torch.nn.functional as F

transformers = pytest.importorskip("transformers")

from litebert import (  # noqa: E402
    AlbertConfig,
    AlbertForMaskedLM,
    AlbertForMultipleChoice,
    AlbertForPreTraining,
    AlbertForQuestionAnswering,
    AlbertForSequenceClassification,
    AlbertForTokenClassification,
    AlbertModel,
    LitebertError,
)

transformers.logging.set_verbosity_error()
transformers.logging.disable_progress_bar()
ATOL = 1e-5
V, B, S = 97, 3, 11

# E != H and E = H; G = 1, 2, L; K = 1, 2; gelu_new, gelu, relu
SHAPES = {
    "e16-h32-g1-k1-gelu_new": dict(
        embedding_size=16,
        hidden_size=32,
        num_attention_heads=4,
        intermediate_size=37,
        num_hidden_layers=3,
        num_hidden_groups=1,
        inner_group_num=1,
        hidden_act="gelu_new",
    ),
    "e32-h32-g2-k2-gelu": dict(
        embedding_size=32,
        hidden_size=32,
        num_attention_heads=2,
        intermediate_size=64,
        num_hidden_layers=4,
        num_hidden_groups=2,
        inner_group_num=2,
        hidden_act="gelu",
    ),
    "e8-h24-gL-k1-relu": dict(
        embedding_size=8,
        hidden_size=24,
        num_attention_heads=3,
        intermediate_size=48,
        num_hidden_layers=3,
        num_hidden_groups=3,
        inner_group_num=1,
        hidden_act="relu",
    ),
    "e8-h16-g2of3-k2-gelu_new": dict(
        embedding_size=8,
        hidden_size=16,
        num_attention_heads=2,
        intermediate_size=32,
        num_hidden_layers=3,
        num_hidden_groups=2,
        inner_group_num=2,
        hidden_act="gelu_new",
    ),
}


def make_config(shape: str = "e16-h32-g1-k1-gelu_new", **kw) -> AlbertConfig:
    values = dict(vocab_size=V, max_position_embeddings=32, classifier_dropout_prob=0.1, **SHAPES[shape])
    values.update(kw)
    return AlbertConfig(**values)


def randomize(model: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    """Weights of order 0.1 and LayerNorm gains 1 ± 0.1 (as the TF fixtures), so that any mistake shows."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=g) * 0.1
            p.copy_(1 + noise if "LayerNorm.weight" in name or "layer_norm.weight" in name else noise)
    return model


def make_batch(seed: int = 0, b: int = B, s: int = S):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, V, (b, s), generator=g)
    mask = torch.ones(b, s, dtype=torch.long)
    mask[1, 7:] = 0  # padding in the batch
    mask[2, 4:] = 0
    ids[mask == 0] = 0
    tt = torch.zeros(b, s, dtype=torch.long)
    tt[:, 5:] = 1  # both token types
    labels = torch.full((b, s), -100)
    labels[0, [1, 3, 8]] = torch.tensor([5, 6, 7])
    labels[1, 2] = 9
    labels[2, [0, 3]] = torch.tensor([11, 12])
    return dict(input_ids=ids, attention_mask=mask, token_type_ids=tt), labels


def to_hf(model, tmp_path, hf_cls, **kw):
    model.save_pretrained(tmp_path)
    hf, info = hf_cls.from_pretrained(tmp_path, output_loading_info=True, **kw)
    return hf.eval(), info


def close(a, b, atol=ATOL):
    assert a.shape == b.shape, (a.shape, b.shape)
    diff = (a - b).abs().max().item()
    assert diff <= atol, diff


# ---------------------------------------------------------------------------------------------- parity: ours → HF
@pytest.mark.parametrize("shape", list(SHAPES))
def test_pretraining_parity_ours_to_hf(shape, tmp_path):
    ours = randomize(AlbertForPreTraining(make_config(shape))).eval()
    hf, info = to_hf(ours, tmp_path, transformers.AlbertForPreTraining)
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"], info
    batch, labels = make_batch()
    with torch.no_grad():
        a, b = ours(**batch), hf(**batch)
        close(a.prediction_logits, b.prediction_logits)
        close(a.sop_logits, b.sop_logits)
        ma, mb = ours.albert(**batch), hf.albert(**batch)
        close(ma.last_hidden_state, mb.last_hidden_state)
        close(ma.pooler_output, mb.pooler_output)
        # masked positions only: [P_total, V] aligned with labels[labels != -100]
        sol = torch.tensor([0, 1, 1])
        a = ours(**batch, labels=labels, sentence_order_label=sol)
        b = hf(**batch, labels=labels, sentence_order_label=sol)
        assert a.prediction_logits.shape == (int((labels != -100).sum()), V)
        close(a.prediction_logits, b.prediction_logits[labels != -100])
        close(a.loss, b.loss)
        close(a.mlm_loss + a.sop_loss, a.loss)
        close(a.sop_loss, F.cross_entropy(b.sop_logits, sol))


@pytest.mark.parametrize("shape", ["e32-h32-g2-k2-gelu", "e8-h24-gL-k1-relu"])
def test_pretraining_parity_hf_to_ours(shape, tmp_path):
    torch.manual_seed(1)
    hf = randomize(transformers.AlbertForPreTraining(transformers.AlbertConfig(**make_config(shape).to_dict())), 3)
    hf.save_pretrained(tmp_path)
    ours = AlbertForPreTraining.from_pretrained(tmp_path)
    assert ours.loading_info == {"missing": [], "unexpected": [], "mismatched": []}
    hf.eval()
    batch, _ = make_batch(seed=2)
    with torch.no_grad():
        a, b = ours(**batch), hf(**batch)
        close(a.prediction_logits, b.prediction_logits)
        close(a.sop_logits, b.sop_logits)
        close(ours.albert(**batch).last_hidden_state, hf.albert(**batch).last_hidden_state)


def test_gradients_match_transformers(tmp_path):
    """Same loss and same gradients for every parameter (shared layers, tied decoder, padding row)."""
    ours = randomize(AlbertForPreTraining(make_config("e8-h16-g2of3-k2-gelu_new", classifier_dropout_prob=0.0)))
    hf, _ = to_hf(ours, tmp_path, transformers.AlbertForPreTraining)
    batch, labels = make_batch(seed=4)
    sol = torch.tensor([1, 0, 1])
    la = ours.train()(**batch, labels=labels, sentence_order_label=sol).loss
    lb = hf.train()(**batch, labels=labels, sentence_order_label=sol).loss
    close(la, lb)
    la.backward()
    lb.backward()
    theirs = dict(hf.named_parameters())
    for name, p in ours.named_parameters():
        assert p.grad is not None, name
        torch.testing.assert_close(p.grad, theirs[name].grad, atol=1e-5, rtol=1e-4, msg=name)


def test_hidden_states_and_attentions_match_transformers(tmp_path):
    ours = randomize(AlbertModel(make_config("e32-h32-g2-k2-gelu"))).eval()
    ours.save_pretrained(tmp_path)
    hf = transformers.AlbertModel.from_pretrained(tmp_path, attn_implementation="eager").eval()
    batch, _ = make_batch()
    with torch.no_grad():
        a = ours(**batch, output_hidden_states=True, output_attentions=True)
        b = hf(**batch, output_hidden_states=True, output_attentions=True)
    assert len(a.hidden_states) == len(b.hidden_states) == 4 * 2 + 1
    assert len(a.attentions) == len(b.attentions) == 4 * 2
    for x, y in zip(a.hidden_states, b.hidden_states):
        close(x, y)
    for x, y in zip(a.attentions, b.attentions):
        close(x, y)
    close(a.last_hidden_state, b.last_hidden_state)


def test_return_dict_false_and_indexing():
    model = randomize(AlbertModel(make_config())).eval()
    batch, _ = make_batch()
    with torch.no_grad():
        out = model(**batch)
        tup = model(**batch, return_dict=False)
    assert len(tup) == 2 and torch.equal(tup[0], out[0]) and torch.equal(out["pooler_output"], tup[1])


# ---------------------------------------------------------------------------------------------- task heads
HEADS = [
    (AlbertForMaskedLM, transformers.AlbertForMaskedLM, {}),
    (AlbertForSequenceClassification, transformers.AlbertForSequenceClassification, {"num_labels": 3}),
    (AlbertForTokenClassification, transformers.AlbertForTokenClassification, {"num_labels": 5}),
    (AlbertForQuestionAnswering, transformers.AlbertForQuestionAnswering, {}),
]


@pytest.mark.parametrize("ours_cls,hf_cls,kw", HEADS, ids=[h[0].__name__ for h in HEADS])
def test_task_heads_match_transformers(ours_cls, hf_cls, kw, tmp_path):
    ours = randomize(ours_cls(make_config("e8-h24-gL-k1-relu", **kw))).eval()
    hf, info = to_hf(ours, tmp_path, hf_cls)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    batch, labels = make_batch(seed=5)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        if ours_cls is AlbertForQuestionAnswering:
            pos = dict(start_positions=torch.tensor([1, 3, 40]), end_positions=torch.tensor([2, 6, 1]))
            a, b = ours(**batch, **pos), hf(**batch, **pos)
            close(a.start_logits, b.start_logits)
            close(a.end_logits, b.end_logits)
            close(a.loss, b.loss)
            return
        a, b = ours(**batch), hf(**batch)
        close(a.logits, b.logits)
        if ours_cls is AlbertForMaskedLM:
            a, b = ours(**batch, labels=labels), hf(**batch, labels=labels)
            close(a.logits, b.logits[labels != -100])
        elif ours_cls is AlbertForTokenClassification:
            y = torch.randint(0, 5, (B, S), generator=g).masked_fill(batch["attention_mask"] == 0, -100)
            a, b = ours(**batch, labels=y), hf(**batch, labels=y)
        else:
            y = torch.tensor([0, 2, 1])
            a, b = ours(**batch, labels=y), hf(**batch, labels=y)
        close(a.loss, b.loss)


@pytest.mark.parametrize("problem", ["regression", "single", "multi"])
def test_sequence_classification_problem_types(problem, tmp_path):
    num_labels = 1 if problem == "regression" else 3
    ours = randomize(AlbertForSequenceClassification(make_config(num_labels=num_labels))).eval()
    hf, _ = to_hf(ours, tmp_path, transformers.AlbertForSequenceClassification)
    batch, _ = make_batch(seed=6)
    labels = {
        "regression": torch.tensor([0.5, -1.0, 2.0]),
        "single": torch.tensor([2, 0, 1]),
        "multi": torch.tensor([[1.0, 0, 1], [0, 0, 1], [1, 1, 0]]),
    }[problem]
    with torch.no_grad():
        a, b = ours(**batch, labels=labels), hf(**batch, labels=labels)
    close(a.logits, b.logits)
    close(a.loss, b.loss)
    expected = {
        "regression": "regression",
        "single": "single_label_classification",
        "multi": "multi_label_classification",
    }[problem]
    assert ours.config.problem_type == hf.config.problem_type == expected


def test_regression_head_is_fp32_under_bf16_autocast():
    """Under bf16 autocast (`--precision auto` on a bf16 CPU) the encoder runs in bf16 but a regression head's
    output, the prediction itself, is computed in fp32: its logits equal the fp32 head applied to the pooled output
    of the same autocast forward to float rounding, and are not bf16-rounded values (before, every prediction had 8
    significant bits and Pearson/Spearman saw ties). Classification heads keep autocast's dtype."""
    reg = randomize(AlbertForSequenceClassification(make_config(num_labels=1))).eval()
    batch, _ = make_batch(seed=6)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        out = reg(**batch)
        pooled = reg.albert(**batch).pooler_output
    assert out.logits.dtype == torch.float32
    with torch.no_grad():
        expected = F.linear(pooled.float(), reg.classifier.weight, reg.classifier.bias)
    torch.testing.assert_close(out.logits, expected, rtol=1e-6, atol=1e-6)
    assert (out.logits.bfloat16().float() != out.logits).any()  # more precision than bf16 holds
    cls = randomize(AlbertForSequenceClassification(make_config(num_labels=3))).eval()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        assert cls(**batch).logits.dtype == torch.bfloat16


def test_multiple_choice_matches_transformers(tmp_path):
    ours = randomize(AlbertForMultipleChoice(make_config("e32-h32-g2-k2-gelu"))).eval()
    hf, info = to_hf(ours, tmp_path, transformers.AlbertForMultipleChoice)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    batch, _ = make_batch(seed=7, b=4)
    mc = {k: v.view(2, 2, S) for k, v in batch.items()}  # (B=2, C=2, S)
    y = torch.tensor([1, 0])
    with torch.no_grad():
        a, b = ours(**mc, labels=y), hf(**mc, labels=y)
    assert a.logits.shape == (2, 2)
    close(a.logits, b.logits)
    close(a.loss, b.loss)


@pytest.mark.parametrize("shape", list(SHAPES))
def test_pooled_only_gives_transformers_logits(shape, tmp_path):
    """``pooled_only=True`` (inference: the last layer computes [CLS] only) leaves the sequence-classification and
    multiple-choice logits and the pooled output equal to transformers' full forward, for every group / inner-group
    / activation layout; the last hidden state is then (B, 1, H) and equals the full model's position 0."""
    ours = randomize(AlbertForSequenceClassification(make_config(shape, num_labels=3))).eval()
    hf, _ = to_hf(ours, tmp_path / "cls", transformers.AlbertForSequenceClassification)
    batch, _ = make_batch(seed=8)
    with torch.no_grad():
        close(ours(**batch, pooled_only=True).logits, hf(**batch).logits)
        full = hf.albert(**batch)
        part = ours.albert(**batch, pooled_only=True)
        assert part.last_hidden_state.shape == (B, 1, ours.config.hidden_size)
        close(part.last_hidden_state, full.last_hidden_state[:, :1])
        close(part.pooler_output, full.pooler_output)
    mc = randomize(AlbertForMultipleChoice(make_config(shape))).eval()
    hf_mc, _ = to_hf(mc, tmp_path / "mc", transformers.AlbertForMultipleChoice)
    batch, _ = make_batch(seed=9, b=4)
    choices = {k: v.view(2, 2, S) for k, v in batch.items()}  # (B=2, C=2, S)
    with torch.no_grad():
        close(mc(**choices, pooled_only=True).logits, hf_mc(**choices).logits)


@pytest.mark.parametrize("mode", ["attention", "ffn"])
def test_pooled_only_with_partial_sharing_and_pre_ln(mode):
    """The same for litebert-only layouts (partial sharing, pre-LN), against the model's own full forward."""
    for ln in ("post", "pre"):
        cfg = make_config("e8-h16-g2of3-k2-gelu_new", sharing=mode, layer_norm_position=ln, num_labels=2)
        model = randomize(AlbertForSequenceClassification(cfg)).eval()
        batch, _ = make_batch(seed=10)
        with torch.no_grad():
            close(model(**batch, pooled_only=True).logits, model(**batch).logits)


def test_base_directory_into_head_class_initialises_head(tmp_path, caplog):
    """transformers' behaviour: a pretraining directory loads into a fine-tuning class, the new head is fresh."""
    pre = randomize(AlbertForPreTraining(make_config()))
    pre.save_pretrained(tmp_path)
    with caplog.at_level(logging.WARNING, logger="litebert"):
        cls = AlbertForSequenceClassification.from_pretrained(tmp_path, num_labels=4)
    assert cls.loading_info["missing"] == ["classifier.weight", "classifier.bias"]
    assert "classifier.weight" in caplog.text and "newly initialised" in caplog.text
    assert cls.config.num_labels == 4 and cls.classifier.out_features == 4
    torch.testing.assert_close(
        cls.albert.embeddings.word_embeddings.weight, pre.albert.embeddings.word_embeddings.weight
    )
    # and a bare AlbertModel directory (keys without the "albert." prefix) into a head class
    base_dir = tmp_path / "base"
    pre.albert.save_pretrained(base_dir)
    mlm = AlbertForMaskedLM.from_pretrained(base_dir)
    torch.testing.assert_close(
        mlm.albert.pooler.weight if mlm.albert.pooler is not None else pre.albert.pooler.weight,
        pre.albert.pooler.weight,
    )
    torch.testing.assert_close(
        mlm.albert.encoder.embedding_hidden_mapping_in.weight, pre.albert.encoder.embedding_hidden_mapping_in.weight
    )
    assert set(mlm.loading_info["missing"]) == {
        "predictions.LayerNorm.weight",
        "predictions.LayerNorm.bias",
        "predictions.bias",
        "predictions.dense.weight",
        "predictions.dense.bias",
    }


# ---------------------------------------------------------------------------------------------- structure
def test_state_dict_keys_equal_transformers():
    cfg = make_config("e8-h16-g2of3-k2-gelu_new")
    for ours_cls, hf_cls in [
        (AlbertForPreTraining, transformers.AlbertForPreTraining),
        (AlbertModel, transformers.AlbertModel),
        (AlbertForMaskedLM, transformers.AlbertForMaskedLM),
        (AlbertForMultipleChoice, transformers.AlbertForMultipleChoice),
    ]:
        ours, hf = ours_cls(cfg), hf_cls(transformers.AlbertConfig(**cfg.to_dict()))
        assert set(ours.state_dict()) == set(hf.state_dict()), ours_cls.__name__
        assert ours.num_parameters() == hf.num_parameters(), ours_cls.__name__


def test_decoder_is_tied_to_word_embeddings():
    model = AlbertForPreTraining(make_config())
    assert model.predictions.decoder.weight is model.albert.embeddings.word_embeddings.weight
    assert model.predictions.decoder.bias is model.predictions.bias


def test_init_as_transformers():
    torch.manual_seed(0)
    model = AlbertForPreTraining(
        make_config(hidden_size=256, num_attention_heads=4, intermediate_size=512, initializer_range=0.05)
    )
    assert abs(model.albert.encoder.albert_layer_groups[0].albert_layers[0].ffn.weight.std().item() - 0.05) < 0.002
    assert torch.all(model.albert.embeddings.word_embeddings.weight[0] == 0)  # padding row
    assert torch.all(model.albert.embeddings.LayerNorm.weight == 1) and torch.all(model.predictions.bias == 0)
    assert torch.all(model.albert.pooler.bias == 0)


PRESET_COUNTS = {  # docs/algorithms.md §1: AlbertModel (with pooler) / AlbertForPreTraining
    "albert-base": (11_683_584, 11_813_810),
    "albert-large": (17_683_968, 17_847_474),
    "albert-xlarge": (58_724_864, 59_021_490),
    "albert-xxlarge": (222_595_584, 223_158_450),
    "albert-zh-tiny": (4_080_520, None),
    "albert-zh-base": (10_547_968, None),
    "albert-zh-large": (16_548_352, None),
}


@pytest.mark.parametrize("preset", list(PRESET_COUNTS))
def test_preset_parameter_counts(preset):
    config = AlbertConfig.from_preset(preset)
    with torch.device("meta"):
        base, pre = AlbertModel(config).num_parameters(), AlbertForPreTraining(config).num_parameters()
    want_base, want_pre = PRESET_COUNTS[preset]
    assert base == want_base
    if want_pre is not None:
        assert pre == want_pre


def test_unshared_base_count_and_all_sharing_independent_of_depth():
    with torch.device("meta"):
        assert AlbertModel(AlbertConfig.from_preset("albert-base", num_hidden_groups=12)).num_parameters() == 89_650_176
        assert AlbertModel(AlbertConfig.from_preset("albert-base", sharing="none")).num_parameters() == 89_650_176
        counts = {
            AlbertModel(AlbertConfig.from_preset("albert-base", num_hidden_layers=n, sharing="all")).num_parameters()
            for n in (1, 6, 12, 24, 48)
        }
    assert counts == {11_683_584}


# ---------------------------------------------------------------------------------------------- sharing modes
@pytest.mark.parametrize("mode", ["attention", "ffn"])
def test_partial_sharing_modes(mode, tmp_path):
    cfg = {m: make_config(sharing=m) for m in ("all", "none", mode)}
    counts = {m: AlbertForPreTraining(c).num_parameters() for m, c in cfg.items()}
    assert counts["all"] < counts[mode] < counts["none"]
    model = randomize(AlbertForPreTraining(cfg[mode])).eval()
    layers = [g.albert_layers[0] for g in model.albert.encoder.albert_layer_groups]
    assert len(layers) == 3
    shared, own = ("attention", "ffn") if mode == "attention" else ("ffn", "attention")
    assert getattr(layers[0], shared) is getattr(layers[2], shared)
    assert getattr(layers[0], own) is not getattr(layers[2], own)
    batch, labels = make_batch()
    with torch.no_grad():
        out = model(**batch, labels=labels, sentence_order_label=torch.tensor([0, 1, 0]))
    assert torch.isfinite(out.loss)
    # litebert format round trip; transformers' format refused with the reason
    model.save_pretrained(tmp_path)
    import json

    assert json.loads((tmp_path / "config.json").read_text())["model_type"] == "litebert_albert"
    back = AlbertForPreTraining.from_pretrained(tmp_path)
    assert back.loading_info["missing"] == [] and back.num_parameters() == counts[mode]
    assert getattr(back.albert.encoder.albert_layer_groups[0].albert_layers[0], shared) is getattr(
        back.albert.encoder.albert_layer_groups[2].albert_layers[0], shared
    )
    with torch.no_grad():
        close(back(**batch).prediction_logits, model(**batch).prediction_logits, atol=0)
    with pytest.raises(LitebertError, match=f"sharing='{mode}'"):
        model.save_pretrained(tmp_path / "hf", hf=True)


def test_partial_sharing_follows_groups():
    model = AlbertModel(make_config("e8-h16-g2of3-k2-gelu_new", sharing="attention"))  # L3, G2: groups [0, 0, 1]
    groups = model.encoder.albert_layer_groups
    assert groups[0].albert_layers[1].attention is groups[1].albert_layers[1].attention
    assert groups[0].albert_layers[1].attention is not groups[2].albert_layers[1].attention
    assert groups[0].albert_layers[0].attention is not groups[0].albert_layers[1].attention


# ---------------------------------------------------------------------------------------------- albert_zh / pre-LN
def _gelu_tanh(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def _ln(x, w, b, eps=1e-12):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * w + b


def reference_albert_zh(sd, cfg, ids, tt, mask):
    """fixtures/tf/README.md, fixture C formulas (brightmart albert_zh), written out in float64."""
    sd = {k: v.double() for k, v in sd.items()}
    P = "albert.encoder.albert_layer_groups.0.albert_layers.0."
    Bn, Sn = ids.shape
    N, H = cfg.num_attention_heads, cfg.hidden_size
    d = H // N
    e = sd["albert.embeddings.word_embeddings.weight"][ids] @ sd["albert.embeddings.word_embeddings_2.weight"].T
    e = (
        e
        + sd["albert.embeddings.token_type_embeddings.weight"][tt]
        + sd["albert.embeddings.position_embeddings.weight"][:Sn]
    )
    h = _ln(e, sd["albert.embeddings.LayerNorm.weight"], sd["albert.embeddings.LayerNorm.bias"])

    def lin(x, name):
        return x @ sd[P + name + ".weight"].T + sd[P + name + ".bias"]

    def attn(x):
        q, k, v = (lin(x, "attention." + n).view(Bn, Sn, N, d).transpose(1, 2) for n in ("query", "key", "value"))
        s = q @ k.transpose(-1, -2) / math.sqrt(d) + (1.0 - mask[:, None, None, :].double()) * -10000.0
        return (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(Bn, Sn, H)

    ln_a = (sd[P + "attention.LayerNorm.weight"], sd[P + "attention.LayerNorm.bias"])
    ln_o = (sd[P + "full_layer_layer_norm.weight"], sd[P + "full_layer_layer_norm.bias"])
    for _ in range(cfg.num_hidden_layers):
        if cfg.layer_norm_position == "post":
            a = _ln(h + lin(attn(h), "attention.dense"), *ln_a)
            h = _ln(a + lin(_gelu_tanh(lin(a, "ffn")), "ffn_output"), *ln_o)
        else:
            a = h + lin(attn(_ln(h, *ln_a)), "attention.dense")
            h = a + lin(_gelu_tanh(lin(_ln(a, *ln_o), "ffn")), "ffn_output")
    pooled = torch.tanh(h[:, 0] @ sd["albert.pooler.weight"].T + sd["albert.pooler.bias"])
    t = _ln(
        _gelu_tanh(h @ sd["predictions.dense.weight"].T + sd["predictions.dense.bias"]),
        sd["predictions.LayerNorm.weight"],
        sd["predictions.LayerNorm.bias"],
    )
    mlm = (t @ sd["albert.embeddings.word_embeddings_2.weight"]) @ sd["albert.embeddings.word_embeddings.weight"].T
    mlm = mlm + sd["predictions.bias"]
    sop = pooled @ sd["sop_classifier.classifier.weight"].T + sd["sop_classifier.classifier.bias"]
    return h, pooled, mlm, sop


@pytest.mark.parametrize("ln", ["post", "pre"])
def test_albert_zh_layout_against_reference(ln, tmp_path):
    cfg = AlbertConfig(
        vocab_size=64,
        embedding_size=8,
        hidden_size=16,
        num_hidden_layers=3,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=32,
        hidden_act="gelu_new",
        embedding_layout="albert_zh",
        layer_norm_position=ln,
    )
    model = randomize(AlbertForPreTraining(cfg), seed=9).eval()
    assert model.albert.embeddings.word_embeddings_2.weight.shape == (16, 8)  # Linear E→H: (H, E)
    assert model.albert.embeddings.position_embeddings.weight.shape == (32, 16)
    assert not hasattr(model.albert.encoder, "embedding_hidden_mapping_in")
    assert model.predictions.dense.weight.shape == (16, 16)
    ids = torch.tensor([[2, 5, 9, 17, 33, 3, 40, 41, 3, 0], [2, 7, 8, 3, 50, 51, 3, 0, 0, 0]])
    tt = torch.tensor([[0, 0, 0, 0, 0, 0, 1, 1, 1, 0], [0, 0, 0, 0, 1, 1, 1, 0, 0, 0]])
    mask = (torch.arange(10) < torch.tensor([[9], [7]])).long()
    h, pooled, mlm, sop = reference_albert_zh(model.state_dict(), cfg, ids, tt, mask)
    with torch.no_grad():
        out, base = model(ids, mask, tt), model.albert(ids, mask, tt)
    keep = mask.bool()
    close(base.last_hidden_state[keep], h[keep].float())
    close(base.pooler_output, pooled.float())
    close(out.prediction_logits[keep], mlm[keep].float())
    close(out.sop_logits, sop.float())
    # litebert format only
    model.save_pretrained(tmp_path)
    back = AlbertForPreTraining.from_pretrained(tmp_path)
    assert back.config.embedding_layout == "albert_zh" and back.config.layer_norm_position == ln
    with torch.no_grad():
        close(back(ids, mask, tt).prediction_logits, out.prediction_logits, atol=0)
    with pytest.raises(LitebertError, match="embedding_layout"):
        model.save_pretrained(tmp_path / "hf", hf=True)


def reference_factorized(sd, cfg, ids, tt, mask):
    """The factorized (official) layout written out in float64: E-wide embeddings, LayerNorm(E), the E→H mapping,
    then cfg.num_hidden_layers applications of layer 0 of group 0 in post- or pre-LN form (as reference_albert_zh),
    and the MLM head H→E→V. Returns (last_hidden_state, prediction_logits)."""
    sd = {k: v.double() for k, v in sd.items()}
    P = "albert.encoder.albert_layer_groups.0.albert_layers.0."
    Bn, Sn = ids.shape
    N, H = cfg.num_attention_heads, cfg.hidden_size
    d = H // N
    e = sd["albert.embeddings.word_embeddings.weight"][ids] + sd["albert.embeddings.token_type_embeddings.weight"][tt]
    e = _ln(
        e + sd["albert.embeddings.position_embeddings.weight"][:Sn],
        sd["albert.embeddings.LayerNorm.weight"],
        sd["albert.embeddings.LayerNorm.bias"],
    )
    m = "albert.encoder.embedding_hidden_mapping_in."
    h = e @ sd[m + "weight"].T + sd[m + "bias"]  # (B, S, E) -> (B, S, H)

    def lin(x, name):
        return x @ sd[P + name + ".weight"].T + sd[P + name + ".bias"]

    def attn(x):
        q, k, v = (lin(x, "attention." + n).view(Bn, Sn, N, d).transpose(1, 2) for n in ("query", "key", "value"))
        s = q @ k.transpose(-1, -2) / math.sqrt(d) + (1.0 - mask[:, None, None, :].double()) * -10000.0
        return (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(Bn, Sn, H)

    ln_a = (sd[P + "attention.LayerNorm.weight"], sd[P + "attention.LayerNorm.bias"])
    ln_o = (sd[P + "full_layer_layer_norm.weight"], sd[P + "full_layer_layer_norm.bias"])
    for _ in range(cfg.num_hidden_layers):
        if cfg.layer_norm_position == "post":
            a = _ln(h + lin(attn(h), "attention.dense"), *ln_a)
            h = _ln(a + lin(_gelu_tanh(lin(a, "ffn")), "ffn_output"), *ln_o)
        else:
            a = h + lin(attn(_ln(h, *ln_a)), "attention.dense")
            h = a + lin(_gelu_tanh(lin(_ln(a, *ln_o), "ffn")), "ffn_output")
    t = _ln(
        _gelu_tanh(h @ sd["predictions.dense.weight"].T + sd["predictions.dense.bias"]),
        sd["predictions.LayerNorm.weight"],
        sd["predictions.LayerNorm.bias"],
    )
    mlm = t @ sd["albert.embeddings.word_embeddings.weight"].T + sd["predictions.bias"]
    return h, mlm


@pytest.mark.parametrize("ln", ["post", "pre"])
def test_factorized_layer_norm_positions_against_reference(ln, tmp_path):
    """Pre-LN with the official (factorized) layout against the reference; post-LN against the same reference and
    transformers, which shows that the reference's shared parts are right."""
    cfg = make_config(layer_norm_position=ln)
    model = randomize(AlbertForPreTraining(cfg), seed=4).eval()
    batch, _ = make_batch(seed=5)
    h, mlm = reference_factorized(
        model.state_dict(), cfg, batch["input_ids"], batch["token_type_ids"], batch["attention_mask"]
    )
    with torch.no_grad():
        out, base = model(**batch), model.albert(**batch)
    keep = batch["attention_mask"].bool()
    close(base.last_hidden_state[keep], h[keep].float())
    close(out.prediction_logits[keep], mlm[keep].float())
    if ln == "post":
        hf, _ = to_hf(model, tmp_path, transformers.AlbertForPreTraining)
        with torch.no_grad():
            close(hf(**batch).prediction_logits[keep], mlm[keep].float())


# ---------------------------------------------------------------------------------------------- edge cases
def test_no_predicted_position_gives_zero_loss():
    model = AlbertForMaskedLM(make_config()).eval()
    batch, _ = make_batch()
    out = model(**batch, labels=torch.full((B, S), -100))
    assert out.logits.shape == (0, V) and out.loss.item() == 0.0


def test_input_errors():
    model = AlbertModel(make_config())
    with pytest.raises(ValueError, match="exactly one"):
        model()
    with pytest.raises(ValueError, match="max_position_embeddings"):
        model(torch.zeros(1, 33, dtype=torch.long))
    with pytest.raises(TypeError, match="AlbertConfig"):
        AlbertModel({"hidden_size": 8})
    # inputs_embeds stands for the word-embedding lookup: E wide (16 here), not H (32)
    with pytest.raises(
        ValueError, match=r"inputs_embeds has shape \[2, 5, 32\]; it must be \(B, S, embedding_size=16\)"
    ):
        model(inputs_embeds=torch.zeros(2, 5, 32))
    assert model(inputs_embeds=torch.zeros(2, 5, 16)).last_hidden_state.shape == (2, 5, 32)
    batch, labels = make_batch()
    for cls in (AlbertForPreTraining, AlbertForMaskedLM):  # labels not (B, S): an error, not misaligned logits
        with pytest.raises(ValueError, match=r"labels have shape \[3, 10\], expected \[3, 11\]"):
            cls(make_config())(**batch, labels=labels[:, :10])


def test_dropout_active_in_training_only():
    model = AlbertModel(make_config(hidden_dropout_prob=0.5)).train()
    batch, _ = make_batch()
    a, b = model(**batch).last_hidden_state, model(**batch).last_hidden_state
    assert not torch.allclose(a, b)
    model.eval()
    with torch.no_grad():
        assert torch.equal(model(**batch).last_hidden_state, model(**batch).last_hidden_state)
