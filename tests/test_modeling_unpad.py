"""Unpadding (modeling.Unpadded, AlbertModel.unpad): the layers run on the real tokens only and give the padded
path's function — against today's padded model and against transformers, forward and gradients."""

from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")

from test_modeling import SHAPES, close, make_batch, make_config, randomize, to_hf  # noqa: E402

from litebert import AlbertForPreTraining, AlbertForSequenceClassification, AlbertModel  # noqa: E402
from litebert.modeling import Unpadded, set_unpad  # noqa: E402

transformers.logging.set_verbosity_error()


def real(t: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """t (B, S, ...) → the rows at mask == 1."""
    return t[mask.bool()]


def test_unpadded_gather_and_scatter_by_hand():
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    u = Unpadded(mask.reshape(-1).nonzero().squeeze(1), 2, 3)
    x = torch.arange(12.0).view(2, 3, 2)
    t = u.unpad(x)
    assert t.tolist() == [[0.0, 1.0], [2.0, 3.0], [6.0, 7.0]]
    assert u.pad(t).tolist() == [[[0, 1], [2, 3], [0, 0]], [[6, 7], [0, 0], [0, 0]]]


def test_unpadding_rule():
    m = AlbertModel(make_config())
    full, padded = torch.ones(2, 5, dtype=torch.long), torch.tensor([[1, 1, 1, 0, 0], [1] * 5])
    assert m.unpadding(padded) is None  # off by default
    assert set_unpad(AlbertForPreTraining(make_config()), True) == 1
    m.unpad = True
    assert m.unpadding(None) is None and m.unpadding(full) is None  # nothing to skip
    assert m.unpadding(padded).index.tolist() == [0, 1, 2, 5, 6, 7, 8, 9]


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("ln", ["post", "pre"])
def test_unpadded_forward_equals_padded_and_transformers(shape, ln, tmp_path):
    cfg = make_config(shape, layer_norm_position=ln)
    ours = randomize(AlbertForPreTraining(cfg)).eval()
    batch, labels = make_batch(seed=3)
    mask = batch["attention_mask"]
    sol = torch.tensor([0, 1, 1])
    with torch.no_grad():
        ref = ours(**batch, labels=labels, sentence_order_label=sol, output_hidden_states=True)
        ref_h = ours.albert(**batch).last_hidden_state
        set_unpad(ours, True)
        got = ours(**batch, labels=labels, sentence_order_label=sol, output_hidden_states=True)
        got_h = ours.albert(**batch).last_hidden_state
    close(got.prediction_logits, ref.prediction_logits)
    close(got.sop_logits, ref.sop_logits)
    close(got.loss, ref.loss)
    close(real(got_h, mask), real(ref_h, mask))
    assert not got_h[~mask.bool()].any()  # padded positions are 0, not garbage
    assert len(got.hidden_states) == len(ref.hidden_states)
    for a, b in zip(got.hidden_states, ref.hidden_states):
        close(real(a, mask), real(b, mask))
    if ln == "post":  # transformers has post-LN only
        hf, _ = to_hf(ours, tmp_path, transformers.AlbertForPreTraining)
        with torch.no_grad():
            theirs = hf.albert(**batch).last_hidden_state
            hf_out = hf(**batch)
        close(real(got_h, mask), real(theirs, mask))
        close(got.sop_logits, hf_out.sop_logits)
        close(got.prediction_logits, hf_out.prediction_logits[labels != -100])


def test_unpadded_gradients_equal_padded_and_transformers(tmp_path):
    cfg = make_config("e8-h16-g2of3-k2-gelu_new", classifier_dropout_prob=0.0)
    padded = randomize(AlbertForPreTraining(cfg)).train()
    unpadded = randomize(AlbertForPreTraining(cfg)).train()
    set_unpad(unpadded, True)
    hf, _ = to_hf(padded, tmp_path, transformers.AlbertForPreTraining)
    batch, labels = make_batch(seed=4)
    sol = torch.tensor([1, 0, 1])
    losses = [m.train()(**batch, labels=labels, sentence_order_label=sol).loss for m in (padded, unpadded, hf)]
    close(losses[1], losses[0])
    close(losses[1], losses[2])
    for loss in losses:
        loss.backward()
    theirs, today = dict(hf.named_parameters()), dict(padded.named_parameters())
    names = [n for n, _ in unpadded.named_parameters()]
    assert names == list(today)  # parameter names unchanged
    for name, p in unpadded.named_parameters():
        assert p.grad is not None, name
        torch.testing.assert_close(p.grad, today[name].grad, atol=1e-5, rtol=1e-4, msg=name)
        torch.testing.assert_close(p.grad, theirs[name].grad, atol=1e-5, rtol=1e-4, msg=name)


def test_unpadded_pooled_only_and_classifier(tmp_path):
    ours = randomize(AlbertForSequenceClassification(make_config("e32-h32-g2-k2-gelu", num_labels=3))).eval()
    hf, _ = to_hf(ours, tmp_path, transformers.AlbertForSequenceClassification)
    batch, _ = make_batch(seed=5)
    set_unpad(ours, True)
    with torch.no_grad():
        want = hf(**batch).logits
        close(ours(**batch).logits, want)
        close(ours(**batch, pooled_only=True).logits, want)


def test_unpadded_attention_probabilities_equal_padded():
    ours = randomize(AlbertModel(make_config("e32-h32-g2-k2-gelu"))).eval()
    batch, _ = make_batch(seed=6)
    with torch.no_grad():
        ref = ours(**batch, output_attentions=True).attentions
        ours.unpad = True
        got = ours(**batch, output_attentions=True).attentions
    keep = batch["attention_mask"].bool()[:, None, :, None]  # real queries
    for a, b in zip(got, ref):
        close(a * keep, b * keep)


def test_given_unpad_indices_give_the_nonzero_paths_outputs_and_gradients():
    """unpad_indices from the collator (the host) stand for the device's nonzero: bit for bit the same outputs and
    gradients, and the model does not call nonzero when they are given."""
    model = randomize(AlbertForPreTraining(make_config("e8-h16-g2of3-k2-gelu_new"))).train()
    set_unpad(model, True)
    batch, labels = make_batch(seed=8)
    index = batch["attention_mask"].reshape(-1).nonzero().squeeze(1)
    assert 0 < len(index) < batch["attention_mask"].numel()  # padded: the unpadded path runs
    sol = torch.tensor([1, 0, 1])
    runs = []
    for extra in ({}, {"unpad_indices": index}):
        torch.manual_seed(0)  # the same dropout draws
        out = model(**batch, labels=labels, sentence_order_label=sol, output_hidden_states=True, **extra)
        grads = torch.autograd.grad(out.loss, list(model.parameters()))
        runs.append((out, grads))
    (a, ga), (b, gb) = runs
    for x, y in [(a.loss, b.loss), (a.prediction_logits, b.prediction_logits), (a.sop_logits, b.sop_logits)]:
        assert torch.equal(x, y)
    assert all(torch.equal(x, y) for x, y in zip(a.hidden_states, b.hidden_states))
    assert all(torch.equal(x, y) for x, y in zip(ga, gb))
    calls = []
    nonzero = torch.Tensor.nonzero
    torch.Tensor.nonzero = lambda self, *a, **k: calls.append(1) or nonzero(self, *a, **k)
    try:
        model(**batch, unpad_indices=index)  # no labels: no masked-LM gather either
        assert calls == []
        model(**batch)
        assert calls  # the fallback (inference, other callers) still finds them itself
    finally:
        torch.Tensor.nonzero = nonzero


@pytest.mark.slow
@pytest.mark.parametrize("given", [False, True], ids=["nonzero", "unpad_indices"])
def test_unpadded_compiles_once_for_every_token_count(given):
    """Under torch.compile T is a dynamic size: batches with different padding reuse one graph (a second at most:
    given indices of a new length are made dynamic by dynamo's automatic dynamic shapes)."""
    from litebert.training.distributed import compile_model

    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    model = randomize(AlbertForPreTraining(make_config())).train()
    set_unpad(model, True)
    eager = randomize(AlbertForPreTraining(make_config())).train()
    compiled = compile_model(model)
    counts = torch._dynamo.utils.counters
    for seed, cut in ((1, 10), (2, 9), (3, 11)):
        batch, labels = make_batch(seed=seed)
        batch["attention_mask"][0, cut:] = 0  # another T each time (row 0's labels are at 1, 3, 8: kept)
        extra = {"unpad_indices": batch["attention_mask"].reshape(-1).nonzero().squeeze(1)} if given else {}
        a = compiled(**batch, labels=labels, **extra).loss
        b = eager(**batch, labels=labels).loss
        close(a, b)
    assert counts["stats"]["unique_graphs"] <= 2, dict(counts["stats"])


def _positions(labels: torch.Tensor, P: int) -> torch.Tensor:
    """(B, P) predicted positions of each row, padded with 0 ([CLS], label -100)."""
    out = torch.zeros(labels.shape[0], P, dtype=torch.long)
    for b in range(labels.shape[0]):
        pos = (labels[b] != -100).nonzero().squeeze(1)
        out[b, : len(pos)] = pos
    return out


@pytest.mark.parametrize("cls", [AlbertForPreTraining, transformers.AlbertForMaskedLM])
def test_masked_positions_give_the_label_paths_logits_and_loss(cls, tmp_path):
    """Static-shape gather (masked_positions, for CUDA graphs): the same loss and, at real slots, the same logits
    as the labels-only path; gradients too; and transformers' full logits at those positions."""
    from litebert import AlbertForMaskedLM

    ours_cls = AlbertForPreTraining if cls is AlbertForPreTraining else AlbertForMaskedLM
    model = randomize(ours_cls(make_config())).train()
    batch, labels = make_batch(seed=7)
    labels[2, 0], labels[2, 1] = -100, 11  # position 0 ([CLS]) is never predicted: the pad slots point there
    pos = _positions(labels, 4)  # rows hold 3, 1, 2 predictions: 1–3 pad slots each
    a = model(**batch, labels=labels)
    b = model(**batch, labels=labels, masked_positions=pos)
    logits_a = a.prediction_logits if ours_cls is AlbertForPreTraining else a.logits
    logits_b = b.prediction_logits if ours_cls is AlbertForPreTraining else b.logits
    assert logits_b.shape == (3 * 4, logits_a.shape[1])
    real_slots = labels.gather(1, pos).reshape(-1) != -100
    close(logits_b[real_slots], logits_a)
    loss_a = a.mlm_loss if ours_cls is AlbertForPreTraining else a.loss
    loss_b = b.mlm_loss if ours_cls is AlbertForPreTraining else b.loss
    close(loss_b, loss_a)
    ga = torch.autograd.grad(loss_a, model.albert.embeddings.word_embeddings.weight)[0]
    gb = torch.autograd.grad(loss_b, model.albert.embeddings.word_embeddings.weight)[0]
    torch.testing.assert_close(gb, ga, atol=1e-6, rtol=1e-5)
    # without labels: the same logits, bit for bit, and no loss (pretraining sums its own cross-entropy)
    c = model(**batch, masked_positions=pos)
    logits_c = c.prediction_logits if ours_cls is AlbertForPreTraining else c.logits
    assert torch.equal(logits_c, logits_b) and (c.mlm_loss if ours_cls is AlbertForPreTraining else c.loss) is None
    hf, _ = to_hf(model.eval(), tmp_path, transformers.AlbertForMaskedLM)
    with torch.no_grad():
        full = hf(**batch).logits  # (B, S, V)
        got = model(**batch, labels=labels, masked_positions=pos)
    got = got.prediction_logits if ours_cls is AlbertForPreTraining else got.logits
    close(got.view(3, 4, -1), full.gather(1, pos[..., None].expand(-1, -1, full.shape[-1])))
