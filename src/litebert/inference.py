"""Fast inference: length-bucketed batches, torch (fp32 / bf16 / dynamic int8) and onnxruntime backends.

A *runner* is called like a litebert model, ``runner(input_ids=, attention_mask=, token_type_ids=)`` (int64 (B, S),
or (B, C, S) for multiple choice), and returns the head's outputs by name (float32 tensors, as
:data:`ONNX_OUTPUTS` names them), so every task kind's inference code
(:func:`litebert.finetune.kinds.run_features`) drives a torch model, a bf16 / int8 torch model or an onnxruntime
session alike. Batches come from :func:`length_batches`: rows sorted by length, so little padding is computed, and
the results are put back in file order.

Where the speed comes from (docs/deploy.md has the measurements):

- no padding computed: rows sorted by length, each batch padded to its own longest row;
- no autograd bookkeeping: ``torch.inference_mode``;
- fused attention: ``F.scaled_dot_product_attention`` (modeling.py) and one QKV matmul
  (:meth:`~litebert.modeling.AlbertAttention.fuse_qkv`);
- bf16 weights and activations where the processor has bf16 dot products (AVX512-BF16 / AMX), int8 weights with
  ``torch.ao.quantization.quantize_dynamic`` (Linear layers) or onnxruntime's quantized MatMuls (VNNI);
- fp32 Linear layers on oneDNN's prepacked GEMM (:func:`pack_linear_onednn`) where the CPU has AVX-512, instead of
  the BLAS that ``nn.Linear`` calls (MKL in stock torch CPU builds, which runs its AVX2 kernels on AMD processors:
  1.3-1.6x slower on the AVX-512 AMD EPYC of docs/deploy.md, ``benchmarks/bench_gemm.py``), the FFN's GELU fused
  into its GEMM as a post-op; on AVX2-only CPUs ``nn.Linear`` stays (:func:`onednn_gemm_preferred`);
- heads that read only the pooled [CLS] vector (sequence classification, multiple choice): the last layer runs for
  position 0 only (``pooled_only``, :meth:`litebert.modeling.AlbertModel.forward`), all of that layer's
  matmuls but the QKV projection saved;
- onnxruntime: a graph optimised for inference (fused LayerNorm / GELU / attention kernels, no Python per op).
"""

from __future__ import annotations

import functools
import logging
import os
from pathlib import Path

import numpy as np
import torch

from litebert import precision as precision_lib
from litebert.errors import LitebertError

log = logging.getLogger("litebert.inference")

BACKENDS = ("torch", "onnxruntime")
PRECISIONS = ("fp32", "bf16")
QUANTIZE = ("int8",)
ONNX_NAME = "model.onnx"
#: Output names of each head class (the ONNX file's outputs too), in the order of its output dataclass.
ONNX_OUTPUTS = {
    "AlbertModel": ("last_hidden_state", "pooler_output"),
    "AlbertForPreTraining": ("prediction_logits", "sop_logits"),
    "AlbertForMaskedLM": ("logits",),
    "AlbertForSequenceClassification": ("logits",),
    "AlbertForTokenClassification": ("logits",),
    "AlbertForQuestionAnswering": ("start_logits", "end_logits"),
    "AlbertForMultipleChoice": ("logits",),
}
ONNX_INSTALL_HINT = "pip install 'litebert[onnx]'"
#: Heads whose output reads only the pooled [CLS] vector: at inference their last layer runs for position 0 only
#: (``pooled_only``, :meth:`litebert.modeling.AlbertModel.forward`), in the torch runners and in the ONNX export.
POOLED_HEADS = ("AlbertForSequenceClassification", "AlbertForMultipleChoice")


def require_onnx() -> None:
    """Raise LitebertError naming the extra to install when ``onnx`` or ``onnxruntime`` cannot be imported."""
    for name in ("onnx", "onnxruntime"):
        try:
            __import__(name)
        except ImportError:
            raise LitebertError(f"the ONNX backend needs the '{name}' package: {ONNX_INSTALL_HINT}") from None


# ------------------------------------------------------------------------------------------------ processor
def cpu_capabilities() -> dict[str, bool]:
    """The CPU's SIMD features that decide the fastest backend: ``avx2``, ``avx512`` (AVX-512F), ``avx512_bf16``,
    ``avx512_vnni`` (int8 dot products), ``amx_bf16``, ``amx_int8``; from torch's own feature table
    (:func:`litebert.precision.cpu_capabilities`; all False where torch has none)."""
    caps = precision_lib.cpu_capabilities()
    names = {
        "avx2": "avx2",
        "avx512": "avx512_f",
        "avx512_bf16": "avx512_bf16",
        "avx512_vnni": "avx512_vnni",
        "amx_bf16": "amx_bf16",
        "amx_int8": "amx_int8",
    }
    return {k: bool(caps.get(v, False)) for k, v in names.items()}


def native_bf16(device: torch.device | str = "cpu") -> bool:
    """Whether ``device`` computes bf16 natively (the same check as ``--precision auto``:
    :func:`litebert.precision.native_support`); elsewhere torch emulates bf16 matmuls, slower than fp32."""
    return precision_lib.native_support("bf16", device)[0]


# ------------------------------------------------------------------------------------------------ fp32 GEMM
class OneDnnLinear(torch.nn.Module):
    """An inference-only fp32 ``nn.Linear`` on oneDNN's GEMM, its weight reordered once into oneDNN's blocked layout.

    Input (..., in_features) float32 → output (..., out_features) float32; equals ``F.linear`` up to float rounding
    (summation order), or ``F.gelu(F.linear(x))`` with ``gelu`` = "none" (exact erf GELU) / "tanh" (the tanh
    approximation), applied by oneDNN as a post-op of the GEMM, so the (..., out_features) activation is not read and
    written a second time. ``weight`` and ``bias`` stay the original tensors (code that reads ``.weight``, such as
    the MLM head's tied decoder, keeps working); the packed copy is what the forward uses. Built by
    :func:`pack_linear_onednn`; the op is torch's own (``torch.ops.mkldnn``, the path ``torch.compile`` with freezing
    takes on CPU), so no kernel is ours.
    """

    #: below this many multiply-adds per call (a small model at batch 1) the oneDNN call's fixed cost (~30 µs against
    #: ~5 µs) outweighs its faster kernel: such calls take ``nn.Linear``'s path (measured with 2 threads on the CPU of
    #: docs/deploy.md; the two paths cross between 2 and 4 M multiply-adds)
    min_macs = 1 << 22

    def __init__(self, linear: torch.nn.Linear, rows_hint: int = 1024, gelu: str | None = None):
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight, self.bias = linear.weight, linear.bias
        self.gelu = gelu
        packed = torch.ops.mkldnn._reorder_linear_weight(linear.weight.detach().contiguous(), rows_hint)
        self.register_buffer("packed_weight", packed, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        small = x.numel() * self.out_features < self.min_macs  # rows × in_features × out_features
        if small or x.dtype != torch.float32 or torch.is_autocast_enabled("cpu"):  # bf16 autocast: as nn.Linear
            y = torch.nn.functional.linear(x, self.weight, self.bias)
            return y if self.gelu is None else torch.nn.functional.gelu(y, approximate=self.gelu)
        if self.gelu is None:
            return torch.ops.mkldnn._linear_pointwise(x, self.packed_weight, self.bias, "none", [], "")
        return torch.ops.mkldnn._linear_pointwise(x, self.packed_weight, self.bias, "gelu", [], self.gelu)


def _gelu_algorithm(activation) -> str | None:
    """oneDNN's name for ``activation`` when it is a GELU (``F.gelu``: "none", its tanh approximation: "tanh",
    :func:`litebert.modeling.get_activation`'s two GELUs), else None."""
    F = torch.nn.functional
    if activation is F.gelu:
        return "none"
    if (
        isinstance(activation, functools.partial)
        and activation.func is F.gelu
        and not activation.args
        and activation.keywords == {"approximate": "tanh"}
    ):
        return "tanh"
    return None


def onednn_gemm_preferred() -> bool:
    """Whether predict's fp32 torch backend moves its Linear layers onto oneDNN (:func:`pack_linear_onednn`): on CPUs
    with AVX-512 (:func:`cpu_capabilities`), else it keeps ``nn.Linear``'s BLAS.

    Measured on albert-base-sized and quick-start-sized classifiers over SST-2 dev, 2 threads (docs/deploy.md): on an
    AMD EPYC with AVX-512 oneDNN made the whole forward 1.5x faster (MKL, the BLAS of stock torch CPU builds, runs
    its AVX2 kernels on AMD processors); on an AMD EPYC with AVX2 only it made it 1.12-1.19x *slower* (MKL 162,
    oneDNN 149 GFLOP/s on 1024 x 768 @ 768 x 3072, ``benchmarks/bench_gemm.py``). A rule, not a timing at load, so
    that one machine always runs the same kernels (the two differ by float rounding).
    """
    return cpu_capabilities()["avx512"]


def _identity(x: torch.Tensor) -> torch.Tensor:
    return x


def pack_linear_onednn(model: torch.nn.Module) -> int:
    """Replace every fp32 CPU ``nn.Linear`` of ``model`` (in place; for inference only) by :class:`OneDnnLinear`.

    Returns the number replaced; 0 (model unchanged) where torch has no oneDNN (``torch.backends.mkldnn``) or its
    prepacked linear op is missing. A Linear applied several times (ALBERT's shared layers) is packed once and the
    packed module shared the same way. An :class:`~litebert.modeling.AlbertLayer` whose activation is a GELU gets
    it fused into its ``ffn`` (the GEMM's post-op) and its own ``activation`` set to the identity.
    """
    from litebert.modeling import AlbertLayer

    if not torch.backends.mkldnn.is_available() or not hasattr(torch.ops.mkldnn, "_linear_pointwise"):
        return 0
    sites = [
        (parent, name, child)
        for parent in model.modules()
        for name, child in parent.named_children()
        if type(child) is torch.nn.Linear and child.weight.device.type == "cpu" and child.weight.dtype == torch.float32
    ]
    # ffn Linear -> the GELU of every layer that applies it (a shared FFN is fused only if all of them agree)
    gelu_of: dict[int, set] = {}
    layers = [m for m in model.modules() if isinstance(m, AlbertLayer) and type(m.ffn) is torch.nn.Linear]
    for layer in layers:
        gelu_of.setdefault(id(layer.ffn), set()).add(_gelu_algorithm(layer.activation))
    fused = {k for k, algos in gelu_of.items() if len(algos) == 1 and None not in algos}
    packed: dict[int, OneDnnLinear] = {}
    try:  # pack every weight first, so a failure leaves the model untouched
        for _, _, child in sites:
            if id(child) not in packed:
                gelu = next(iter(gelu_of[id(child)])) if id(child) in fused else None
                packed[id(child)] = OneDnnLinear(child, gelu=gelu)
    except RuntimeError as exc:  # an op this torch build lacks: keep nn.Linear
        log.info("predict: oneDNN linear unavailable (%s); fp32 stays on nn.Linear", exc)
        return 0
    for parent, name, child in sites:
        setattr(parent, name, packed[id(child)])
    for layer in layers:
        if isinstance(layer.ffn, OneDnnLinear) and layer.ffn.gelu is not None:
            layer.activation = _identity
    return len(packed)


# ------------------------------------------------------------------------------------------------ batching
def length_batches(lengths, batch_size: int, bucket: bool = True) -> list[np.ndarray]:
    """Row indices per batch: with ``bucket``, rows sorted by length (stable, so equal lengths keep file order)
    and cut into ``batch_size`` runs; without, file order. lengths: N ints → list of int64 index arrays."""
    if batch_size < 1:
        raise LitebertError(f"batch_size must be >= 1, got {batch_size}")
    n = len(lengths)
    order = np.argsort(np.asarray(lengths, dtype=np.int64), kind="stable") if bucket else np.arange(n)
    return [order[i : i + batch_size] for i in range(0, n, batch_size)]


#: evaluate/predict's batch on the CPU when none is given (the CPU runs no faster with more rows per forward)
CPU_BATCH_SIZE = 64


def device_batch_size(device: torch.device | str, config, seq: int) -> int:
    """Rows per forward when the user gives none: :data:`CPU_BATCH_SIZE` on the CPU; on a GPU the power of two
    (64 to 4096) whose activations of one layer in fp32 — ``seq × (3H + I + nh·seq)`` floats a row: QKV, FFN,
    attention scores — fill at most a quarter of the memory free now (``torch.cuda.mem_get_info``), so that a
    forward keeps the device's thousands of cores busy (a batch of 32 short sentences does not)."""
    device = torch.device(device)
    if device.type != "cuda":
        return CPU_BATCH_SIZE
    free, _ = torch.cuda.mem_get_info(device)
    H, I, nh = config.hidden_size, config.intermediate_size, config.num_attention_heads
    per_row = 4 * seq * (3 * H + I + nh * seq)
    rows = max(int(free // 4 // per_row), 1)
    return int(min(max(2 ** int(np.log2(rows)), 64), 4096))


def prefetched(batches, device: torch.device | str | None, depth: int = 2):
    """Yield the dicts of tensors that ``batches`` (an iterator, run in a thread) makes, moved to ``device``,
    while the caller runs the previous ones: collation (and, on a GPU, the copy from pinned host memory,
    ``non_blocking``) overlaps the forward instead of waiting for it. ``device`` None: the items as made (any
    objects). Order is kept; an exception in the thread is raised here. ``depth``: items made ahead."""
    import queue
    import threading

    device = torch.device(device) if device is not None else None
    pin = device is not None and device.type == "cuda"
    q: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()
    done = object()

    def put(item) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def work() -> None:
        try:
            for batch in batches:
                if pin:
                    batch = {k: v.pin_memory().to(device, non_blocking=True) for k, v in batch.items()}
                elif device is not None and device.type != "cpu":
                    batch = {k: v.to(device) for k, v in batch.items()}
                if not put(batch):
                    return
        except BaseException as exc:  # handed to the consumer
            put(exc)
            return
        put(done)

    thread = threading.Thread(target=work, name="litebert-prefetch", daemon=True)
    thread.start()
    try:
        while True:
            item = q.get()
            if item is done:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        thread.join()


# ------------------------------------------------------------------------------------------------ runners
def _output_names(model) -> tuple[str, ...]:
    return ONNX_OUTPUTS[type(model).__name__]


class InferenceOutput(dict):
    """Named outputs, by key or attribute (``out["logits"]``, ``out.logits``); ``out[0]`` is the first."""

    def __getattr__(self, name: str):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __getitem__(self, key):
        return list(self.values())[key] if isinstance(key, int) else super().__getitem__(key)


class _Runner:
    """Model-like surface shared by the runners: always in eval mode; ``eval()``/``train()`` are accepted."""

    training = False

    def eval(self):
        return self

    def train(self, mode: bool = True):
        return self


class TorchRunner(_Runner):
    """A litebert model in eval mode under ``torch.inference_mode``; outputs float32 (on ``device``).

    ``precision="bf16"`` casts the weights to bfloat16 (activations follow); ``quantize="int8"`` applies
    ``torch.ao.quantization.quantize_dynamic`` to the Linear layers (int8 weights, activations quantized per batch;
    CPU only; with ``precision="fp32"`` only, since those layers take float32 activations). Both, and ``fuse=True``, change the model in place: pass a model that is only used for inference.
    ``fuse=True`` also fuses the QKV projections and, for fp32 on a CPU with AVX-512, packs the Linear layers for
    oneDNN (:func:`pack_linear_onednn`, :func:`onednn_gemm_preferred`). Sequence-classification and multiple-choice
    models run with ``pooled_only``. ``kernel`` names what the Linear layers run on: ``"onednn"``, ``"blas"``
    (``nn.Linear``), ``"int8"`` (dynamic int8) or ``"bf16"``.
    """

    def __init__(
        self,
        model,
        device: torch.device | str = "cpu",
        precision: str = "fp32",
        quantize: str | None = None,
        fuse: bool = False,
    ):
        if precision not in PRECISIONS:
            raise LitebertError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
        if quantize is not None and quantize not in QUANTIZE:
            raise LitebertError(f"quantize must be one of {', '.join(QUANTIZE)}, got {quantize!r}")
        self.device = torch.device(device)
        self.names = _output_names(model)
        self.forward_kwargs = {"pooled_only": True} if type(model).__name__ in POOLED_HEADS else {}
        self.precision, self.quantize = precision, quantize
        if quantize and self.device.type != "cpu":
            raise LitebertError("--quantize int8 (dynamic int8) runs on the CPU only; drop --device cuda")
        if quantize and precision != "fp32":  # torch's dynamic int8 Linear refuses bf16 input
            raise LitebertError(
                f"--quantize {quantize} and --precision {precision}: torch's dynamic int8 Linear layers take float32 "
                "activations only"
            )
        if fuse or quantize:
            from litebert.modeling import AlbertAttention

            for module in model.modules():
                if isinstance(module, AlbertAttention):
                    module.fuse_qkv()
        model = model.to(self.device).eval()
        self.kernel = "bf16" if precision == "bf16" else "int8" if quantize else "blas"
        if precision == "bf16":
            if not native_bf16(self.device):
                log.warning(
                    "predict: %s has no native bf16 matmuls; bf16 runs emulated (slower than fp32)", self.device
                )
            model = model.to(torch.bfloat16)
        elif quantize is None and self.device.type == "cpu" and fuse and onednn_gemm_preferred():
            self.kernel = "onednn" if pack_linear_onednn(model) else "blas"
        if quantize == "int8":
            import warnings

            with warnings.catch_warnings():  # torch.ao's deprecation notes (the torchao successor is not a dependency)
                warnings.simplefilter("ignore")
                model = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
        self.model = model

    def __call__(self, input_ids=None, attention_mask=None, token_type_ids=None, **_) -> InferenceOutput:
        """int64 (B, S) tensors → :class:`InferenceOutput` of float32 tensors (:data:`ONNX_OUTPUTS`)."""
        with torch.inference_mode():
            out = self.model(
                input_ids=input_ids.to(self.device),
                attention_mask=attention_mask.to(self.device),
                token_type_ids=None if token_type_ids is None else token_type_ids.to(self.device),
                **self.forward_kwargs,
            )
            return InferenceOutput((n, out[n].float()) for n in self.names)


class OrtRunner(_Runner):
    """An ONNX directory (``model.onnx`` from ``litebert export --format onnx``) in an onnxruntime CPU session with
    every graph optimisation on; ``threads`` sets the intra-op thread count (default: onnxruntime's)."""

    def __init__(self, directory: str | os.PathLike, threads: int | None = None):
        require_onnx()
        import onnxruntime as ort

        path = Path(directory) / ONNX_NAME
        if not path.is_file():
            raise LitebertError(
                f"{path} not found: export one with `litebert export {directory} --output DIR --format onnx`"
            )
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.inter_op_num_threads = 1
        if threads:
            opts.intra_op_num_threads = threads
        try:
            self.session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own exception types for unreadable or invalid files
            raise LitebertError(f"{path}: onnxruntime cannot load it ({str(exc).splitlines()[0]})") from None
        self.inputs = [i.name for i in self.session.get_inputs()]
        self.names = tuple(o.name for o in self.session.get_outputs())

    def __call__(self, input_ids=None, attention_mask=None, token_type_ids=None, **_) -> InferenceOutput:
        """As :meth:`TorchRunner.__call__` (``token_type_ids`` None = zeros)."""
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        given = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}
        feed = {k: np.ascontiguousarray(given[k].cpu().numpy(), dtype=np.int64) for k in self.inputs}
        return InferenceOutput(
            (n, torch.from_numpy(v)) for n, v in zip(self.names, self.session.run(None, feed), strict=True)
        )


def onnx_dir(directory: str | os.PathLike) -> bool:
    """Whether ``directory`` holds an exported ``model.onnx``."""
    return (Path(directory) / ONNX_NAME).is_file()


def check_backend_files(directory: str | os.PathLike, backend: str) -> None:
    """Check that ``directory`` holds what ``backend`` runs (and, for onnxruntime, that it is installed), before any
    data is read.

    Raises:
        LitebertError: onnxruntime on a directory without ``model.onnx``, or without the onnx packages; torch on a
            directory that holds ``model.onnx`` but no torch weights.
    """
    from litebert.checkpoint import find_weight_files

    if backend == "onnxruntime":
        if not onnx_dir(directory):
            raise LitebertError(
                f"{Path(directory) / ONNX_NAME} not found: export one with `litebert export {directory} --output DIR "
                "--format onnx`, or drop --backend onnxruntime"
            )
        require_onnx()
    elif onnx_dir(directory) and find_weight_files(directory)[1] is None:
        raise LitebertError(f"{directory} holds {ONNX_NAME} but no torch weights: use --backend onnxruntime")


def load_runner(
    directory: str | os.PathLike,
    head: str,
    *,
    backend: str | None = None,
    precision: str = "fp32",
    quantize: str | None = None,
    threads: int | None = None,
    device: torch.device | str = "cpu",
):
    """A runner for a model directory: onnxruntime when it holds ``model.onnx`` (or ``backend="onnxruntime"``),
    else torch with ``head`` (a :data:`litebert.modeling.MODEL_CLASSES` name). ``threads`` also sets torch's
    intra-op threads.

    Raises:
        LitebertError: an unknown backend; onnxruntime asked for a directory without ``model.onnx`` or combined with
            ``precision``/``quantize`` (quantize at export instead); torch asked for an ONNX-only directory; the
            loading errors of the directory.
    """
    if backend is not None and backend not in BACKENDS:
        raise LitebertError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    if threads is not None:
        if threads < 1:
            raise LitebertError(f"threads must be >= 1, got {threads}")
        torch.set_num_threads(threads)
    backend = backend or ("onnxruntime" if onnx_dir(directory) else "torch")
    check_backend_files(directory, backend)
    if backend == "onnxruntime":
        if quantize:
            raise LitebertError(
                "--quantize with the onnxruntime backend: quantize at export instead "
                "(`litebert export SOURCE --output DIR --format onnx --quantize int8`)"
            )
        if precision != "fp32":
            raise LitebertError(
                f"--precision {precision} with the onnxruntime backend: it runs the ONNX file as exported (fp32, or "
                "int8 with `litebert export --quantize int8`)"
            )
        return OrtRunner(directory, threads)
    from litebert.modeling import MODEL_CLASSES

    model = MODEL_CLASSES[head].from_pretrained(Path(directory))
    return TorchRunner(model, device, precision=precision, quantize=quantize, fuse=True)


__all__ = [
    "BACKENDS",
    "POOLED_HEADS",
    "PRECISIONS",
    "QUANTIZE",
    "InferenceOutput",
    "OrtRunner",
    "TorchRunner",
    "check_backend_files",
    "cpu_capabilities",
    "length_batches",
    "load_runner",
    "native_bf16",
    "onednn_gemm_preferred",
    "onnx_dir",
]
