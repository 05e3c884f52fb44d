"""LAMB (docs/algorithms.md §4), parameter groups by name, AdamW construction, the warmup + polynomial-decay schedule."""

from __future__ import annotations

import copy
import math
from pathlib import Path

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


# ------------------------------------------------------------------------------------------------------------------
# LAMB as it was before the step stopped reading the host (litebert 0dcbf0a, optim.py), kept verbatim as the reference
# the device-only step must reproduce.
class _ReferenceLamb(torch.optim.Optimizer):
    def __init__(
        self,
        params,
        lr=1e-3,
        betas=(0.9, 0.999),
        eps=1e-6,
        weight_decay=0.01,
        adapt=True,
        bias_correction=False,
        foreach=True,
    ):
        defaults = dict(
            lr=lr,
            betas=tuple(betas),
            eps=eps,
            weight_decay=weight_decay,
            adapt=adapt,
            bias_correction=bias_correction,
            foreach=foreach,
        )
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            params, grads, exp_avgs, exp_avg_sqs = [], [], [], []
            steps = []
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.grad.is_sparse:
                    raise RuntimeError("Lamb does not support sparse gradients")
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = torch.zeros((), dtype=torch.float64)
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["step"] += 1
                steps.append(int(state["step"].item()))
                params.append(p)
                grads.append(p.grad)
                exp_avgs.append(state["exp_avg"])
                exp_avg_sqs.append(state["exp_avg_sq"])
            if not params:
                continue
            kwargs = dict(
                lr=group["lr"],
                beta1=group["betas"][0],
                beta2=group["betas"][1],
                eps=group["eps"],
                weight_decay=group["weight_decay"],
                adapt=group["adapt"],
                bias_correction=group["bias_correction"],
            )
            same_kind = all(p.device == params[0].device and p.dtype == params[0].dtype for p in params)
            if group["foreach"] and same_kind and len(set(steps)) == 1:
                _ref_foreach(params, grads, exp_avgs, exp_avg_sqs, step=steps[0], **kwargs)
            else:
                for p, g, m, v, t in zip(params, grads, exp_avgs, exp_avg_sqs, steps):
                    _ref_single(p, g, m, v, step=t, **kwargs)
        return loss


def _ref_single(p, g, m, v, *, step, lr, beta1, beta2, eps, weight_decay, adapt, bias_correction) -> None:

    m.mul_(beta1).add_(g, alpha=1 - beta1)
    v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
    if bias_correction:
        denom = (v / (1 - beta2**step)).sqrt_().add_(eps)
        u = (m / (1 - beta1**step)).div_(denom)
    else:
        u = m / v.sqrt().add_(eps)
    if weight_decay != 0:
        u.add_(p, alpha=weight_decay)
    if adapt:
        w_norm = torch.linalg.vector_norm(p)
        u_norm = torch.linalg.vector_norm(u)
        ratio = torch.where((w_norm > 0) & (u_norm > 0), w_norm / u_norm, torch.ones_like(w_norm))
        u.mul_(ratio)
    p.add_(u, alpha=-lr)


def _ref_foreach(
    params, grads, exp_avgs, exp_avg_sqs, *, step, lr, beta1, beta2, eps, weight_decay, adapt, bias_correction
) -> None:

    torch._foreach_mul_(exp_avgs, beta1)
    torch._foreach_add_(exp_avgs, grads, alpha=1 - beta1)
    torch._foreach_mul_(exp_avg_sqs, beta2)
    torch._foreach_addcmul_(exp_avg_sqs, grads, grads, value=1 - beta2)
    if bias_correction:
        denom = torch._foreach_div(exp_avg_sqs, 1 - beta2**step)
        torch._foreach_sqrt_(denom)
        torch._foreach_add_(denom, eps)
        updates = torch._foreach_div(exp_avgs, 1 - beta1**step)
        torch._foreach_div_(updates, denom)
    else:
        denom = torch._foreach_sqrt(exp_avg_sqs)
        torch._foreach_add_(denom, eps)
        updates = torch._foreach_div(exp_avgs, denom)
    del denom
    if weight_decay != 0:
        torch._foreach_add_(updates, params, alpha=weight_decay)
    if adapt:
        w_norms = torch._foreach_norm(params)
        u_norms = torch._foreach_norm(updates)
        ratios = [torch.where((w > 0) & (u > 0), w / u, torch.ones_like(w)) for w, u in zip(w_norms, u_norms)]
        torch._foreach_mul_(updates, ratios)
    torch._foreach_add_(params, updates, alpha=-lr)


def _model_and_grads(steps: int, seed: int = 0):
    """albert-debug's parameters and ``steps`` seeded gradients for each (some tensors left without one)."""
    torch.manual_seed(seed)
    model = AlbertForPreTraining(AlbertConfig.from_preset("albert-debug"))
    g = torch.Generator().manual_seed(seed + 1)
    names = [n for n, _ in model.named_parameters()]
    grads = [{n: torch.randn(p.shape, generator=g) * 1e-2 for n, p in model.named_parameters()} for _ in range(steps)]
    for k in range(0, steps, 7):  # now and then a tensor without a gradient: its step count falls behind
        del grads[k][names[k % len(names)]]
    return model, grads


def _train(model, opt, grads, skip=()):
    """``len(grads)`` optimizer steps (steps in ``skip`` flagged non-finite through ``found_inf``)."""
    params = dict(model.named_parameters())
    for k, step_grads in enumerate(grads):
        for name, p in params.items():
            p.grad = step_grads[name].clone() if name in step_grads else None
        if skip:
            opt.found_inf = torch.tensor([1.0 if k in skip else 0.0])
            if k in skip:  # a skipped step's gradients may hold inf and NaN
                for p in params.values():
                    if p.grad is not None:
                        p.grad[..., 0] = float("nan")
                        p.grad.view(-1)[-1] = float("inf")
        opt.step()
    return {n: p.detach().clone() for n, p in params.items()}


@pytest.mark.parametrize(("foreach", "bias_correction"), [(True, False), (False, False), (True, True), (False, True)])
def test_lamb_matches_the_host_reading_lamb_after_100_steps(foreach, bias_correction):
    # the decayed+adapted group and the excluded group (LayerNorm, bias: no decay, no trust ratio), both as
    # build_param_groups makes them; step counts that differ between tensors
    results = []
    for cls in (Lamb, _ReferenceLamb):
        model, grads = _model_and_grads(100)
        opt = cls(
            build_param_groups(model, 0.01),
            lr=5e-3,
            weight_decay=0.01,
            bias_correction=bias_correction,
            foreach=foreach,
        )
        results.append(_train(model, opt, grads))
    new, ref = results
    assert max((new[n] - ref[n]).abs().max().item() for n in new) <= 1e-6


def test_a_step_flagged_by_found_inf_changes_nothing():
    # skipping steps 3 and 10 on the device = training without them (gradients there are inf/NaN)
    model, grads = _model_and_grads(20)
    opt = Lamb(build_param_groups(model, 0.01), lr=5e-3)
    skipped = _train(model, opt, grads, skip={3, 10})
    model2, grads2 = _model_and_grads(20)
    opt2 = Lamb(build_param_groups(model2, 0.01), lr=5e-3)
    without = _train(model2, opt2, [g for k, g in enumerate(grads2) if k not in (3, 10)])
    assert all(torch.equal(skipped[n], without[n]) for n in skipped)
    states = [{k: v.clone() for k, v in s.items()} for s in (opt.state[p] for p in model.parameters())]
    states2 = [{k: v.clone() for k, v in s.items()} for s in (opt2.state[p] for p in model2.parameters())]
    assert all(torch.equal(a[k], b[k]) for a, b in zip(states, states2) for k in a)


def test_lamb_step_reads_nothing_from_the_host():
    from _training_helpers import HostReads

    model, grads = _model_and_grads(3)
    opt = Lamb(build_param_groups(model, 0.01), lr=5e-3, bias_correction=True)
    with HostReads() as reads:
        reads.counting = True
        _train(model, opt, grads, skip={1})
    assert reads.calls == []


def test_a_checkpoint_of_the_host_reading_lamb_resumes():
    # its step counts are float64 tensors on the CPU: loaded into today's Lamb they continue the same trajectory
    model, grads = _model_and_grads(30)
    ref_opt = _ReferenceLamb(build_param_groups(model, 0.01), lr=5e-3, bias_correction=True)
    _train(model, ref_opt, grads[:15])
    saved_weights = {n: p.detach().clone() for n, p in model.named_parameters()}
    saved_state = copy.deepcopy(ref_opt.state_dict())
    ref_final = _train(model, ref_opt, grads[15:])
    model2, _ = _model_and_grads(1)
    model2.load_state_dict(saved_weights, strict=False)
    opt = Lamb(build_param_groups(model2, 0.01), lr=5e-3, bias_correction=True)
    opt.load_state_dict(saved_state)
    final = _train(model2, opt, grads[15:])
    assert max((final[n] - ref_final[n]).abs().max().item() for n in final) <= 1e-6


@pytest.mark.parametrize(("foreach", "bias_correction"), [(True, False), (False, False), (True, True)])
def test_a_learning_rate_held_in_a_tensor_trains_as_the_float_one(foreach, bias_correction):
    # what a CUDA-graphed step does (litebert.training.cuda_graph): the group's lr is a 0-d tensor the kernels read,
    # refilled before each step with the schedule's value; 100 steps with a changing lr and two skipped steps
    results = []
    for on_device in (False, True):
        model, grads = _model_and_grads(100)
        opt = Lamb(build_param_groups(model, 0.01), lr=5e-3, bias_correction=bias_correction, foreach=foreach)
        lrs = [torch.zeros(()) for _ in opt.param_groups]
        params = dict(model.named_parameters())
        for k, step_grads in enumerate(grads):
            lr = 5e-3 * (1 - k / 100)
            for name, p in params.items():
                p.grad = step_grads[name].clone() if name in step_grads else None
            opt.found_inf = torch.tensor(1.0 if k in (3, 50) else 0.0)
            for group, t in zip(opt.param_groups, lrs):
                t.fill_(lr)
                group["lr"] = t if on_device else lr
            opt.step()
        results.append({n: p.detach().clone() for n, p in params.items()})
    floats, tensors = results
    assert max((floats[n] - tensors[n]).abs().max().item() for n in floats) <= 1e-6
    # and it trained: the weights moved by far more than the tolerance
    model0, _ = _model_and_grads(1)
    assert max((floats[n] - p).abs().max().item() for n, p in model0.named_parameters()) > 1e-3


# ------------------------------------------------------------------------------------------------------------------
# One set of foreach kernels for all the groups that share device, dtype, betas, eps and bias_correction.
def _four_groups(model, lrs=(5e-3, 3e-3, 2e-3, 4e-3), decays=(0.01, 0.02, 0.0, 0.005)) -> list[dict]:
    """build_param_groups' two groups each split in two, with the given lrs and weight decays (adapted, adapted,
    excluded, excluded)."""
    adapted, excluded = build_param_groups(model, 0.01)
    a, e = len(adapted["params"]) // 2, len(excluded["params"]) // 2
    parts = [adapted["params"][:a], adapted["params"][a:], excluded["params"][:e], excluded["params"][e:]]
    return [
        {"params": ps, "lr": lr, "weight_decay": wd, "adapt": k < 2}
        for k, (ps, lr, wd) in enumerate(zip(parts, lrs, decays))
    ]


def _ops_of_a_step(groups_of, found_inf=False, lr_tensors=False) -> dict:
    """bench_optim's op count of one LAMB step on albert-debug's parameters in ``groups_of(model)``."""
    from bench_optim import ops_per_step

    model = AlbertForPreTraining(AlbertConfig.from_preset("albert-debug"))
    opt = Lamb(groups_of(model), lr=5e-3)
    if lr_tensors:
        for group in opt.param_groups:
            group["lr"] = torch.tensor(group["lr"])
    return ops_per_step(opt, [p for g in opt.param_groups for p in g["params"]], found_inf=found_inf)


def test_a_step_dispatches_a_fixed_few_ops_whatever_the_number_of_groups(monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "benchmarks"))
    model = AlbertForPreTraining(AlbertConfig.from_preset("albert-debug"))
    n_adapted = len(build_param_groups(model, 0.01)[0]["params"])
    # build_param_groups' two groups, one float lr. Derived by hand: step counts 1, moments 4, u = m/(√v+ε) 3,
    # weight decay 1, both norms 2 (one _foreach_norm, one stack), trust ratios 4 (minimum, >, /, where), applied 1,
    # w += −lr·u 1 = 17. With found_inf: + the flag as bool, float32, int64, float64 4, gradients zeroed 1,
    # where(ok, β, 1) 1, ratios·keep 1, the others' updates·keep 1 = 25. The code before the groups were merged
    # dispatched 30 and 60 (one set per group; the flag's arithmetic per group).
    two = _ops_of_a_step(lambda m: build_param_groups(m, 0.01))
    flagged = _ops_of_a_step(lambda m: build_param_groups(m, 0.01), found_inf=True)
    assert two["ops"] <= 17 and flagged["ops"] <= 25
    # on a GPU only the trust ratios (a list of 0-d tensors) run one kernel per tensor
    assert two["kernels"] == two["ops"] + n_adapted - 1 and flagged["kernels"] == flagged["ops"] + n_adapted - 1
    # the same hyperparameters in four groups: the same ops
    same = (5e-3,) * 4, (0.01, 0.01, 0.0, 0.0)
    assert _ops_of_a_step(lambda m: _four_groups(m, *same)) == two
    assert _ops_of_a_step(lambda m: _four_groups(m, *same), found_inf=True) == flagged
    # float lrs that differ between groups: one kernel more (the lrs its arguments), whatever their number; then
    # one more per extra weight decay λ (four lrs, three λs)
    for flag in (False, True):
        base = flagged if flag else two
        own = _ops_of_a_step(lambda m: _four_groups(m, (5e-3, 5e-3, 2e-3, 2e-3), (0.01, 0.01, 0.0, 0.0)), flag)
        assert own["ops"] == base["ops"] + 1
        assert _ops_of_a_step(_four_groups, flag)["ops"] == own["ops"] + 2
    # an lr tensor per group (as --cuda-graphs steps): + ratios·lr and the others' updates·lr (2); four groups:
    # + 1 per extra λ (2), per extra tensor keep·lr (2), per extra excluded group's lr (1), the adapted lrs stacked (1)
    graphed = _ops_of_a_step(lambda m: build_param_groups(m, 0.01), found_inf=True, lr_tensors=True)
    assert graphed["ops"] == flagged["ops"] + 2
    assert _ops_of_a_step(_four_groups, found_inf=True, lr_tensors=True)["ops"] == graphed["ops"] + 2 + 2 + 1 + 1


@pytest.mark.parametrize(("lr_tensors", "bias_correction"), [(False, False), (True, False), (False, True)])
def test_groups_updated_together_give_each_group_its_own_update(lr_tensors, bias_correction):
    # four groups with their own lr, weight decay and adapt (one bucket of foreach kernels), a fifth with other betas
    # (a bucket of its own): 30 steps, two skipped, against the one-tensor-at-a-time reference
    results = []
    for foreach in (True, False):
        model, grads = _model_and_grads(30, seed=3)
        groups = _four_groups(model)
        groups.append({"params": groups[0]["params"][:2], "lr": 1e-2, "betas": (0.8, 0.99), "eps": 1e-8})
        del groups[0]["params"][:2]
        opt = Lamb(groups, bias_correction=bias_correction, foreach=foreach)
        lrs = [torch.tensor(g["lr"]) for g in opt.param_groups]
        params = dict(model.named_parameters())
        for k, step_grads in enumerate(grads):
            for name, p in params.items():
                p.grad = step_grads[name].clone() if name in step_grads else None
                if k in (4, 17) and p.grad is not None:
                    p.grad.view(-1)[0] = float("nan")
            opt.found_inf = torch.tensor(1.0 if k in (4, 17) else 0.0)
            for group, t, base in zip(opt.param_groups, lrs, [5e-3, 3e-3, 2e-3, 4e-3, 1e-2]):
                t.fill_(base * (1 - k / 30))
                group["lr"] = t if lr_tensors else base * (1 - k / 30)
            opt.step()
        results.append(({n: p.detach().clone() for n, p in params.items()}, opt.state_dict()["state"]))
    (merged, merged_state), (single, single_state) = results
    assert max((merged[n] - single[n]).abs().max().item() for n in merged) <= 1e-6
    for i, state in merged_state.items():
        assert torch.equal(state["step"], single_state[i]["step"]) and state["step"].dtype == torch.float64
        assert torch.allclose(state["exp_avg"], single_state[i]["exp_avg"], rtol=0, atol=1e-7)
    # and it trained: the weights moved by far more than the tolerance
    model0, _ = _model_and_grads(1, seed=3)
    assert max((merged[n] - p).abs().max().item() for n, p in model0.named_parameters()) > 1e-3
