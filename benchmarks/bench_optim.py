"""Time one optimizer step on a preset's parameters: LAMB (multi-tensor, and one tensor at a time) against torch's
AdamW (fused on a GPU, foreach on the CPU), and print LAMB's cost as a ratio of AdamW's (issue 25: ≤ 1.5× on a GPU).

On a GPU the steps are timed with CUDA events (device time of a burst of steps, the host never waiting in between);
on the CPU with the wall clock (the median step). LAMB's step reads nothing back to the host, so a GPU runs it without a sync.
Beside each time: the ATen operations one step dispatches and the CUDA kernels they make (:class:`OpCounter`), the
same count on any device: a step made of many small kernels is bound by their launches on a GPU.

Usage: python benchmarks/bench_optim.py [--preset albert-base] [--steps 50] [--device cpu|cuda] [--threads N]
"""

from __future__ import annotations

import argparse
import time

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from litebert import AlbertConfig, AlbertForPreTraining
from litebert.optim import Lamb, build_param_groups


def seeded_grads(params: list[torch.Tensor]) -> None:
    """Give every parameter the same seeded gradient (scale 1e-3) in every call."""
    g = torch.Generator(device=params[0].device).manual_seed(0)
    for p in params:
        p.grad = torch.randn(p.shape, generator=g, device=p.device) * 1e-3


class OpCounter(TorchDispatchMode):
    """Counts the ATen operations dispatched while active: ``ops`` (views and profiler marks left out: they launch
    nothing) and ``kernels``, the CUDA kernels they make, one per op except a ``_foreach_*`` op whose tensor lists
    differ in shape from its first (e.g. tensors times a list of 0-d tensors): CUDA runs such a call one tensor at a
    time, so it counts one per tensor (its multi-tensor kernel needs equal shapes; the CPU always loops over
    tensors). An estimate: a multi-tensor kernel over very many tensors takes more than one launch."""

    def __init__(self) -> None:
        super().__init__()
        self.ops = self.kernels = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not func.is_view and func.namespace != "profiler":
            self.ops += 1
            self.kernels += 1
            if func.name().startswith("aten::_foreach_"):
                lists = [a for a in args if isinstance(a, (list, tuple)) and a and isinstance(a[0], torch.Tensor)]
                if any(x.shape != y.shape for other in lists[1:] for x, y in zip(lists[0], other)):
                    self.kernels += len(lists[0]) - 1
        return func(*args, **(kwargs or {}))


def ops_per_step(opt: torch.optim.Optimizer, params: list[torch.Tensor], found_inf: bool = False) -> dict:
    """``{"ops", "kernels"}`` (:class:`OpCounter`) of one ``opt.step()`` on seeded gradients, after two steps that
    make the optimizer's state. ``found_inf``: with the skip flag set (0, no skip), as the training loop steps LAMB
    and fused AdamW (litebert.training.loop)."""
    seeded_grads(params)
    if found_inf:
        opt.found_inf = torch.zeros((), device=params[0].device)
    for _ in range(2):
        opt.step()
    with OpCounter() as count:
        opt.step()
    if found_inf:
        del opt.found_inf
    return {"ops": count.ops, "kernels": count.kernels}


def cuda_burst(fn, steps: int) -> float:
    """Seconds per call of ``fn`` on the GPU: CUDA events around ``steps`` calls, the host never waiting between."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(steps):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3 / steps


def time_steps(opt: torch.optim.Optimizer, params: list[torch.Tensor], steps: int, device: torch.device) -> float:
    """Seconds per ``opt.step()`` over ``steps`` steps (GPU: the mean of a burst; CPU: the median step), after 10
    warm-up steps."""
    seeded_grads(params)
    for _ in range(10):  # the state's allocation, and the first steps of a process, which run slower on a CPU
        opt.step()
    if device.type == "cuda":
        return cuda_burst(opt.step, steps)
    times = []
    for _ in range(steps):  # the median step: a shared CPU's stalls do not count
        t0 = time.perf_counter()
        opt.step()
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def time_graphed_steps(opt: torch.optim.Optimizer, params: list[torch.Tensor], steps: int) -> float:
    """Seconds per replay of ``opt.step()`` captured in a CUDA graph, as ``pretrain --cuda-graphs`` runs it (each
    group's lr held in a tensor, AdamW ``capturable``; litebert.training.cuda_graph): the mean of a burst of
    replays, after 3 eager steps on a side stream."""
    import warnings

    device = params[0].device
    seeded_grads(params)
    for group in opt.param_groups:
        group["lr"] = torch.full((), float(group["lr"]), device=device)
        if "capturable" in group:
            group["capturable"] = True
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # AdamW: "capturable=True, but step() is running without CUDA graph capture"
        for _ in range(3):
            opt.step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, capture_error_mode="thread_local"):
        opt.step()
    for _ in range(3):
        graph.replay()
    return cuda_burst(graph.replay, steps)


def compare_lamb_adamw(
    preset: str = "albert-base", device: str | None = None, steps: int = 50, compiled: bool = False
) -> dict:
    """``{"lamb_ms", "adamw_ms", "ratio", "adamw"}``: one LAMB step and one torch AdamW step (fused on a GPU,
    foreach on the CPU) on ``preset``'s parameters, timed as :func:`time_steps` (what benchmarks/bench_gpu.py
    reports); with :func:`ops_per_step` of each, ``lamb_ops``, ``lamb_kernels``, ``adamw_ops``, ``adamw_kernels``,
    and LAMB's with ``found_inf`` set as the training loop steps it, ``lamb_loop_ops``, ``lamb_loop_kernels``. On a
    GPU also each step replayed from a CUDA graph (:func:`time_graphed_steps`): ``lamb_graphed_ms``,
    ``adamw_graphed_ms``, ``graphed_ratio`` (LAMB graphed ÷ fused AdamW eager) and ``graphed_both_ratio`` (both
    graphed); a capture that fails is recorded as ``graphed_error``. ``compiled``: also LAMB with its step compiled
    (``torch.compile(opt.step)``: Inductor fuses the foreach ops), ``lamb_compiled_ms``, ``compiled_ratio`` and
    ``compile_s`` (the first steps' time), or ``compiled_error``."""
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    model = AlbertForPreTraining(AlbertConfig.from_preset(preset)).to(dev)
    params = [p for p in model.parameters() if p.requires_grad]
    kind = "fused" if dev.type == "cuda" else "foreach"
    lamb = time_steps(Lamb(build_param_groups(model, 0.01), lr=1e-3), params, steps, dev)
    adamw = time_steps(_adamw(model, kind), params, steps, dev)
    res = {"lamb_ms": lamb * 1e3, "adamw_ms": adamw * 1e3, "ratio": lamb / adamw, "adamw": kind}
    for name, make, flag in (
        ("lamb", lambda: Lamb(build_param_groups(model, 0.01), lr=1e-3), False),
        ("lamb_loop", lambda: Lamb(build_param_groups(model, 0.01), lr=1e-3), True),
        ("adamw", lambda: _adamw(model, kind), False),
    ):
        counts = ops_per_step(make(), params, found_inf=flag)
        res.update({f"{name}_ops": counts["ops"], f"{name}_kernels": counts["kernels"]})
    if dev.type == "cuda":
        try:
            lamb_g = time_graphed_steps(Lamb(build_param_groups(model, 0.01), lr=1e-3), params, steps)
            adamw_g = time_graphed_steps(_adamw(model, kind), params, steps)
            res.update(lamb_graphed_ms=lamb_g * 1e3, adamw_graphed_ms=adamw_g * 1e3, graphed_ratio=lamb_g / adamw,
                       graphed_both_ratio=lamb_g / adamw_g)  # fmt: skip
        except Exception as exc:  # recorded; the eager figures stand
            res["graphed_error"] = f"{type(exc).__name__}: {exc}"
    if compiled:
        try:
            opt = Lamb(build_param_groups(model, 0.01), lr=1e-3)
            opt.step = torch.compile(opt.step)
            seeded_grads(params)
            t0 = time.perf_counter()
            opt.step()
            if dev.type == "cuda":
                torch.cuda.synchronize()
            res["compile_s"] = time.perf_counter() - t0
            lamb_c = time_steps(opt, params, steps, dev)
            res.update(lamb_compiled_ms=lamb_c * 1e3, compiled_ratio=lamb_c / adamw)
        except Exception as exc:  # recorded; the eager figures stand
            res["compiled_error"] = f"{type(exc).__name__}: {exc}"
    return res


def _adamw(model: torch.nn.Module, kind: str) -> torch.optim.AdamW:
    groups = build_param_groups(model, 0.01)
    for group in groups:
        group.pop("adapt")
    return torch.optim.AdamW(groups, lr=1e-3, weight_decay=0.01, **{kind: True})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="albert-base")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument(
        "--compile", action="store_true", help="add LAMB with its step compiled (torch.compile fuses the foreach ops)"
    )
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    model = AlbertForPreTraining(AlbertConfig.from_preset(args.preset)).to(device)
    params = [p for p in model.parameters() if p.requires_grad]
    n = sum(p.numel() for p in params)
    cuda = device.type == "cuda"
    adamw_kind = "fused" if cuda else "foreach"

    def compiled_lamb():
        opt = Lamb(build_param_groups(model, 0.01), lr=1e-3, foreach=True)
        opt.step = torch.compile(opt.step)
        return opt

    results, counts = {}, {}
    candidates = [
        ("lamb", lambda: Lamb(build_param_groups(model, 0.01), lr=1e-3, foreach=True)),
        ("lamb one tensor at a time", lambda: Lamb(build_param_groups(model, 0.01), lr=1e-3, foreach=False)),
        (f"torch AdamW ({adamw_kind})", lambda: _adamw(model, adamw_kind)),
    ]
    if args.compile:
        candidates.append(("lamb, step compiled", compiled_lamb))
    for name, make in candidates:
        results[name] = time_steps(make(), params, args.steps, device)
        if name != "lamb, step compiled":
            counts[name] = ops_per_step(make(), params)
    counts["lamb, found_inf set (the loop)"] = ops_per_step(candidates[0][1](), params, found_inf=True)
    where = torch.cuda.get_device_name(device) if cuda else f"CPU, {torch.get_num_threads()} threads"
    print(f"{args.preset}: {len(params)} tensors, {n:,} parameters; {where}; torch {torch.__version__}")
    for name, sec in results.items():
        ops = f"  {counts[name]['ops']:4d} ops, {counts[name]['kernels']:4d} CUDA kernels" if name in counts else ""
        print(f"  {name:28s} {sec * 1e3:8.3f} ms/step  ({n / sec / 1e6:9.1f} M params/s){ops}")
    name = "lamb, found_inf set (the loop)"
    print(f"  {name:28s} {'':37s}  {counts[name]['ops']:4d} ops, {counts[name]['kernels']:4d} CUDA kernels")
    ratio = results["lamb"] / results[f"torch AdamW ({adamw_kind})"]
    print(f"  LAMB / AdamW ({adamw_kind}): {ratio:.2f}x" + ("  (target on a GPU: <= 1.5x)" if cuda else ""))
    if args.compile:
        print(
            f"  LAMB compiled / AdamW ({adamw_kind}): {results['lamb, step compiled'] / results[f'torch AdamW ({adamw_kind})']:.2f}x"
        )


if __name__ == "__main__":
    main()
