"""fp32 GEMM throughput of the CPU kernels litebert's backends end up in, side by side in one process.

An ``nn.Linear`` in a stock torch CPU build runs MKL's sgemm; ``torch.utils.mkldnn`` / the prepacked
``mkldnn._linear_pointwise`` op runs oneDNN's; onnxruntime runs MLAS. On some processors (AMD EPYC here) they differ
by 1.3-1.6x on the same shape, which is the gap between ``predict`` torch-fp32 and onnxruntime-fp32 on a base-sized
model (docs/deploy.md). Shapes are albert-base's FFN input projection at batch x sequence = M rows.

    python benchmarks/bench_gemm.py --threads 2 --rows 1024
"""

from __future__ import annotations

import argparse
import time

import torch


def gflops(fn, flops: float, repeats: int) -> float:
    """GFLOP/s of ``fn`` over ``repeats`` timed calls (mean time), after 3 untimed warm-up calls."""
    for _ in range(3):
        fn()
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    return flops / ((time.perf_counter() - start) / repeats) / 1e9


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rows", type=int, default=1024, help="M: batch x sequence")
    p.add_argument("--in-features", type=int, default=768)
    p.add_argument("--out-features", type=int, default=3072)
    p.add_argument("--repeats", type=int, default=30)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    m, k, n = args.rows, args.in_features, args.out_features
    flops = 2.0 * m * k * n
    x = torch.randn(m, k)
    lin = torch.nn.Linear(k, n).eval()
    rows = []
    with torch.inference_mode():
        rows.append(("torch nn.Linear (MKL sgemm)", gflops(lambda: lin(x), flops, args.repeats)))
        packed = torch.ops.mkldnn._reorder_linear_weight(lin.weight, m)
        rows.append(
            (
                "torch mkldnn._linear_pointwise (oneDNN, prepacked)",
                gflops(
                    lambda: torch.ops.mkldnn._linear_pointwise(x, packed, lin.bias, "none", [], ""),
                    flops,
                    args.repeats,
                ),
            )
        )
    try:
        import onnxruntime as ort
        from onnx import TensorProto, helper, numpy_helper
    except ImportError:
        print("onnxruntime row skipped: pip install 'litebert[onnx]'")
    else:
        graph = helper.make_graph(
            [helper.make_node("MatMul", ["A", "B"], ["C"])],
            "gemm",
            [helper.make_tensor_value_info("A", TensorProto.FLOAT, [m, k])],
            [helper.make_tensor_value_info("C", TensorProto.FLOAT, [m, n])],
            [numpy_helper.from_array(lin.weight.detach().T.contiguous().numpy(), "B")],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        options = ort.SessionOptions()
        options.intra_op_num_threads = args.threads
        session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        a = x.numpy()
        rows.append(("onnxruntime MatMul (MLAS)", gflops(lambda: session.run(None, {"A": a}), flops, args.repeats)))
    base = rows[0][1]
    print(f"fp32 GEMM {m}x{k} @ {k}x{n}, {args.threads} thread(s)")
    print("| kernel | GFLOP/s | x MKL |\n|---|---:|---:|")
    for name, value in rows:
        print(f"| {name} | {value:.1f} | {value / base:.2f} |")


if __name__ == "__main__":
    main()
