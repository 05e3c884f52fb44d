"""LAMB (docs/algorithms.md §4), parameter groups by name, AdamW construction, the warmup + polynomial-decay schedule."""

from __future__ import annotations

import math

import pytest
import torch

from litebert import AlbertConfig, AlbertForPreTraining
from litebert.errors import LitebertError
from litebert.optim import Lamb, WarmupPolyDecay, build_optimizer, build_param_groups, build_scheduler


@pytest.mark.parametrize("foreach", [True, False])
def test_lamb_matches_hand_computed_test_vector(foreach):
    w = torch.nn.Parameter(torch.tensor([1.0, -2.0, 0.5]))
    opt = Lamb([w], lr=0.01, weight_decay=0.01, foreach=foreach)
    expected = [[0.98671, -2.013166, 0.51323], [0.973386, -2.026398, 0.526509]]
    for step in range(2):
        w.grad = torch.tensor([0.1, 0.2, -0.3])
        before = w.detach().clone()
        opt.step()
        assert torch.allclose(w.detach(), torch.tensor(expected[step]), atol=1e-6, rtol=0), (step, w)
        if step == 0:  # the trust ratio of docs/algorithms.md §4: ||Δw|| = η r ||u|| and ||Δw|| = η ||w||
            delta = (w.detach() - before).norm()
            assert delta.item() == pytest.approx(0.01 * before.norm().item(), rel=1e-5)


def _reference_step(w, g, m, v, lr, wd, adapt, eps=1e-6, b1=0.9, b2=0.999):
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    u = m / (v.sqrt() + eps) + wd * w
    wn, un = w.norm(), u.norm()
    r = (wn / un) if (adapt and wn > 0 and un > 0) else 1.0
    return w - lr * r * u, m, v


def test_lamb_trust_ratio_and_exclusions_on_a_model():
    torch.manual_seed(0)
    model = AlbertForPreTraining(AlbertConfig.from_preset("albert-debug"))
    groups = build_param_groups(model, weight_decay=0.01)
    decayed, excluded = groups[0], groups[1]
    assert decayed["adapt"] and decayed["weight_decay"] == 0.01
    assert not excluded["adapt"] and excluded["weight_decay"] == 0.0

    def by_name(n):
        return "LayerNorm" in n or "layer_norm" in n or "bias" in n

    assert all(by_name(n) for n in excluded["names"])
    assert not any(by_name(n) for n in decayed["names"])
    assert any("full_layer_layer_norm" in n for n in excluded["names"])
    assert "albert.embeddings.LayerNorm.weight" in excluded["names"]
    assert "predictions.bias" in excluded["names"]
    # tied decoder weight is the word embedding: one parameter, one trust ratio
    assert "predictions.decoder.weight" not in decayed["names"]
    assert "albert.embeddings.word_embeddings.weight" in decayed["names"]

    opt = build_optimizer(model, "lamb", lr=0.05, weight_decay=0.01)
    params = dict(model.named_parameters())
    for p in model.parameters():
        p.grad = torch.randn_like(p)
    before = {n: p.detach().clone() for n, p in params.items()}
    grads = {n: p.grad.clone() for n, p in params.items()}
    opt.step()
    for n, p in params.items():
        adapt = n in decayed["names"]
        ref, _, _ = _reference_step(
            before[n], grads[n], torch.zeros_like(p), torch.zeros_like(p), 0.05, 0.01 if adapt else 0.0, adapt
        )
        assert torch.allclose(p.detach(), ref, atol=1e-6, rtol=1e-5), n
        if adapt and before[n].norm() > 0:
            # ||Δw|| = η ||w|| for every adapted parameter
            assert (p.detach() - before[n]).norm().item() == pytest.approx(0.05 * before[n].norm().item(), rel=1e-4)


def test_lamb_zero_norm_guard_and_no_grad():
    w = torch.nn.Parameter(torch.zeros(4))  # ||w|| = 0 -> ratio 1, not 0 or nan
    idle = torch.nn.Parameter(torch.ones(2))  # no gradient -> untouched
    opt = Lamb([w, idle], lr=0.1, weight_decay=0.0)
    w.grad = torch.ones(4)
    opt.step()
    assert torch.isfinite(w).all() and (w != 0).all()
    assert torch.equal(idle.detach(), torch.ones(2))
    z = torch.nn.Parameter(torch.ones(3))  # ||u|| = 0 (zero gradient, no decay) -> ratio 1, w unchanged
    opt2 = Lamb([z], lr=0.1, weight_decay=0.0)
    z.grad = torch.zeros(3)
    opt2.step()
    assert torch.equal(z.detach(), torch.ones(3))


def test_lamb_bias_correction_and_foreach_agree():
    torch.manual_seed(1)
    shapes = [(5, 3), (7,), (2, 2, 2)]
    ws = [torch.randn(s) for s in shapes]
    results = []
    for foreach in (True, False):
        ps = [torch.nn.Parameter(w.clone()) for w in ws]
        opt = Lamb(ps, lr=0.01, bias_correction=True, foreach=foreach)
        g = torch.Generator().manual_seed(3)
        for _ in range(3):
            for p in ps:
                p.grad = torch.randn(p.shape, generator=g)
            opt.step()
        results.append([p.detach().clone() for p in ps])
    for a, b in zip(*results):
        assert torch.allclose(a, b, atol=1e-7)
    # step 1 with bias correction: m̂/√v̂ = g/|g| elementwise (up to eps)
    p = torch.nn.Parameter(torch.tensor([1.0, 2.0]))
    opt = Lamb([p], lr=0.1, weight_decay=0.0, adapt=False, bias_correction=True)
    p.grad = torch.tensor([0.5, -0.25])
    opt.step()
    assert torch.allclose(p.detach(), torch.tensor([0.9, 2.1]), atol=1e-5)


def test_adamw_and_unknown_optimizer():
    model = AlbertForPreTraining(AlbertConfig.from_preset("albert-debug"))
    opt = build_optimizer(model, "adamw", lr=1e-3, weight_decay=0.01)
    assert isinstance(opt, torch.optim.AdamW)
    assert [g["weight_decay"] for g in opt.param_groups] == [0.01, 0.0]
    with pytest.raises(LitebertError, match="unknown optimizer"):
        build_optimizer(model, "sgd")


def test_schedule_values_equal_the_formula():
    p = torch.nn.Parameter(torch.zeros(1))
    peak, warmup, total = 0.00176, 10, 50
    opt = Lamb([p], lr=peak)
    sched = build_scheduler(opt, warmup, total)
    seen = {}
    for step in range(total + 3):
        seen[step] = opt.param_groups[0]["lr"]
        opt.step()
        sched.step()
    for step in (0, 1, 5, 9):
        assert seen[step] == pytest.approx(peak * step / warmup, abs=1e-12)
    assert seen[10] == pytest.approx(peak)
    for step in (11, 30, 49):
        assert seen[step] == pytest.approx(peak * (total - step) / (total - warmup), abs=1e-12)
    assert seen[50] == 0.0 and seen[52] == 0.0
    sq = WarmupPolyDecay(0, 100, power=2.0)
    assert sq(50) == pytest.approx(0.25) and sq(0) == 1.0
    with pytest.raises(LitebertError):
        WarmupPolyDecay(0, 10, power=0)
    assert math.isclose(WarmupPolyDecay(4, 8)(6), 0.5)
