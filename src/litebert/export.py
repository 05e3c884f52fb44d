"""``litebert export``: a model directory or a training checkpoint → an HF model directory or an ONNX directory.

ONNX layout (``--format onnx``)::

    DIR/model.onnx     every output of the directory's head class (:data:`ONNX_OUTPUTS`), inputs ``input_ids``,
                       ``attention_mask``, ``token_type_ids`` int64 (B, S) — (B, C, S) for multiple choice — with
                       dynamic batch / choice / sequence axes; opset :data:`OPSET`
    DIR/config.json    the model's config (``architectures`` names the head; ``litebert_onnx`` records the export)
    DIR/<tokenizer files>

Shared layers stay shared: the graph is traced with the model's layer loop, so every application of a group reads the
same parameters; constant folding then writes the pre-transposed copy of a weight once per *use*, which
:func:`dedupe_initializers` folds back into one initializer (an all-shared 12-layer model's file is about its
``model.safetensors``, not 12× the layer; tests/test_export.py checks the bound). ``--quantize int8`` runs
onnxruntime's dynamic quantizer (``onnxruntime.quantization.quantize_dynamic``: int8 weights of every MatMul, int8
activations quantized per batch at run time) and dedupes again.

Everything is written to a temporary directory beside ``--output`` and renamed at the end, so a failure leaves nothing
half-written: the source, its config and the head are checked before anything is created; on a failure, or a
``kill`` (SIGTERM, turned into ``SystemExit(143)`` while the export runs), the temporary directory and the parent
directories of ``--output`` that the export created are removed. An ``--output`` that cannot be created (a file
among its parents, a read-only file system) is one error naming it.

Heads (``--head``): a model exports with its own head (``architectures``), or with one whose weights it holds. A
pretraining model or checkpoint exports as ``AlbertForPreTraining``, ``AlbertForMaskedLM`` or the bare
``AlbertModel``; a fine-tuned model (a task head in ``architectures``, or ``finetuning_task`` /
``litebert_task_type`` in its config) exports with its own head or as ``AlbertModel`` (its encoder, with the task
keys dropped from ``config.json``). Any other head is refused (:func:`check_head`), before anything is written: its
weights would be a fresh random init, under the fine-tuned task's metadata, or, for a pretraining source, as a task
head that ``predict`` would run as if it were trained.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import shutil
import signal
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

import torch

from litebert.errors import LitebertError
from litebert.inference import ONNX_NAME, ONNX_OUTPUTS, POOLED_HEADS, require_onnx

log = logging.getLogger("litebert.export")

FORMATS = ("hf", "onnx")
QUANTIZE = ("int8",)
#: The opset written; onnxruntime ≥ 1.14 runs it on CPU (no einsum or newer attention ops are emitted).
OPSET = 17
#: Short head names accepted by ``--head`` besides the class names.
HEAD_ALIASES = {
    "base": "AlbertModel",
    "pretraining": "AlbertForPreTraining",
    "masked-lm": "AlbertForMaskedLM",
    "sequence-classification": "AlbertForSequenceClassification",
    "token-classification": "AlbertForTokenClassification",
    "question-answering": "AlbertForQuestionAnswering",
    "multiple-choice": "AlbertForMultipleChoice",
}
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
#: Heads that fine-tuning writes (``litebert finetune``'s ``best/``): their weights exist only in a fine-tuned model.
TASK_HEADS = (
    "AlbertForSequenceClassification",
    "AlbertForTokenClassification",
    "AlbertForQuestionAnswering",
    "AlbertForMultipleChoice",
)
#: ``config.json`` keys that describe a fine-tuned task (read back by ``evaluate``/``predict``); dropped when a
#: fine-tuned model is exported as its bare encoder.
TASK_CONFIG_KEYS = (
    "finetuning_task",
    "litebert_task_type",
    "litebert_data_options",
    "litebert_label_separator",
    "litebert_qa_metric",
    "litebert_max_seq_length",
    "litebert_null_score_diff_threshold",
)


@dataclass
class ExportResult:
    """What :func:`export_model` wrote: ``output_dir``; ``format``; ``head`` (class name); ``onnx_bytes`` (size of
    ``model.onnx``, None for hf); ``weights_bytes`` (the source's ``model.safetensors`` size, when it has one)."""

    output_dir: Path
    format: str
    head: str
    onnx_bytes: int | None = None
    weights_bytes: int | None = None


def resolve_head(name: str | None, config) -> str:
    """The head class name: ``name`` (a class name or a :data:`HEAD_ALIASES` key) or the config's
    ``architectures[0]``. Raises LitebertError for an unknown name."""
    if name is None:
        archs = config.architectures or ["AlbertForPreTraining"]
        name = archs[0]
        where = "config.json architectures"
    else:
        where = "--head"
    cls = HEAD_ALIASES.get(name, name)
    if cls not in ONNX_OUTPUTS:
        raise LitebertError(
            f"unknown head {name!r} ({where}); expected one of {', '.join(list(HEAD_ALIASES) + list(ONNX_OUTPUTS))}"
        )
    return cls


def source_head(config) -> str:
    """The head a model directory holds: its ``architectures[0]`` (``AlbertForPreTraining`` when it names none)."""
    return (config.architectures or ["AlbertForPreTraining"])[0]


def fine_tuned_task(config) -> str | None:
    """A description of the fine-tuned task ``config`` carries (``"AlbertForSequenceClassification, task sst2"``),
    or ``None`` for a pretraining / base / masked-LM model."""
    extra = config.extra or {}
    head = source_head(config)
    task = extra.get("finetuning_task") or extra.get("litebert_task_type")
    if head not in TASK_HEADS and not task:
        return None
    return head + (f", task {task}" if task else "")


def check_head(config, cls_name: str, where: Path) -> None:
    """Refuse a head whose weights the source does not hold (see the module docstring).

    Raises:
        LitebertError: ``config`` is fine-tuned (:func:`fine_tuned_task`) and ``cls_name`` is neither its own head
            nor ``AlbertModel``; or ``config`` is not fine-tuned (a pretraining, masked-LM or base model) and
            ``cls_name`` is a task head (:data:`TASK_HEADS`), whose weights would be a fresh random init that
            ``predict`` would run as a classifier.
    """
    task = fine_tuned_task(config)
    alias = {v: k for k, v in HEAD_ALIASES.items()}.get(cls_name, cls_name)  # as the user types it
    if task is None:
        if cls_name not in TASK_HEADS:
            return
        raise LitebertError(
            f"{where} holds an {source_head(config)}, not a fine-tuned model: exporting it with --head {alias} "
            "would write that head as a fresh random init; fine-tune it first (`litebert "
            "finetune`, then export OUTPUT/best), or export it with its own head, --head masked-lm or --head base"
        )
    if cls_name in (source_head(config), "AlbertModel"):
        return
    raise LitebertError(
        f"{where} is a fine-tuned model ({task}): exporting it with --head {alias} would write that head as a "
        f"fresh random init under the fine-tuned task's config; drop --head (or --head base for the encoder alone)"
    )


def config_for_head(config, cls_name: str):
    """``config`` as the exported directory states it: ``architectures`` = ``[cls_name]``; exported as the bare
    ``AlbertModel``, a fine-tuned model's task keys (:data:`TASK_CONFIG_KEYS`) are dropped, so that ``evaluate``
    / ``predict`` see an encoder, not the task."""
    extra = dict(config.extra or {})
    if cls_name == "AlbertModel":
        for key in TASK_CONFIG_KEYS:
            extra.pop(key, None)
    return dataclasses.replace(config, architectures=[cls_name], extra=extra)


def _is_checkpoint(path: Path) -> bool:
    from litebert.training.state import COMPLETE_MARKER

    return (path / COMPLETE_MARKER).is_file() or (path / "model.pt").is_file()


def export_model(
    source: str | os.PathLike,
    output: str | os.PathLike,
    *,
    format: str = "hf",
    quantize: str | None = None,
    head: str | None = None,
    opset: int = OPSET,
) -> ExportResult:
    """Export ``source`` (a model directory, or a ``RUN/checkpoints/step-N`` training checkpoint) to ``output``.

    ``format="hf"``: an HF model directory with the tokenizer (for a checkpoint: what ``RUN/final/`` would have been
    at step N). ``format="onnx"``: see the module docstring. ``head`` overrides the class in ``architectures``.

    Without tokenizer files in the source (for a checkpoint: in the run's training data) the model is exported
    without them, with a warning naming ``output`` and how to add them.

    Raises:
        LitebertError: ``output`` exists or cannot be created (a parent is a file, permission denied); ``source``
            is neither a model directory (``config.json`` + weights) nor a complete training checkpoint; an unknown
            head; a head the source does not hold (:func:`check_head`); ``quantize`` with ``format="hf"``;
            onnx/onnxruntime missing. Nothing is left behind (see the module docstring).
        SystemExit: SIGTERM while exporting (status 143), after the clean-up.
    """
    from litebert.checkpoint import CONFIG_NAME, check_not_run_dir, load_config
    from litebert.config import AlbertConfig

    src, out = Path(source), Path(output)
    if format not in FORMATS:
        raise LitebertError(f"export: format must be one of {', '.join(FORMATS)}, got {format!r}")
    if quantize is not None and quantize not in QUANTIZE:
        raise LitebertError(f"export: quantize must be one of {', '.join(QUANTIZE)}, got {quantize!r}")
    if quantize is not None and format == "hf":
        raise LitebertError("export: --quantize int8 needs --format onnx (an HF directory keeps float weights)")
    if format == "onnx":
        require_onnx()
    if out.exists():
        raise LitebertError(f"{out} exists; choose a new output directory")
    if not src.is_dir():
        raise LitebertError(f"{src}: not a directory (expected a model directory or RUN/checkpoints/step-N)")
    checkpoint = _is_checkpoint(src)
    if not checkpoint:
        check_not_run_dir(src)  # RUN itself: names RUN/final (RUN/best) rather than a missing config.json
    if not checkpoint and not (src / CONFIG_NAME).is_file():
        raise LitebertError(
            f"{src}: not a model directory (no {CONFIG_NAME}) nor a training checkpoint (no COMPLETE marker)"
        )
    # everything that can be checked before writing: the source, its config and the head
    if checkpoint:
        from litebert.training.pretrain import checkpoint_run

        source_config = AlbertConfig.from_json_file(checkpoint_run(src) / CONFIG_NAME)  # the run's, not a model's
    else:
        source_config = load_config(src)
    if head is not None or not checkpoint:  # a checkpoint without --head exports as the model it trains
        check_head(source_config, resolve_head(head, source_config), src)
    created = _missing_parents(out)  # before anything is made, to remove them again if the export fails
    tmp_root = None
    done = False
    with _sigterm_exits():  # a `kill` (SIGTERM) runs the clean-up below, as Ctrl-C does
        try:
            try:
                out.parent.mkdir(parents=True, exist_ok=True)
                tmp_root = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
            except OSError as exc:
                raise LitebertError(
                    f"--output {out}: cannot create it ({exc.strerror or exc}); nothing was written"
                ) from None
            result = _export(src, out, tmp_root, checkpoint, format, quantize, head, opset)
            done = True
        finally:
            if tmp_root is not None:
                shutil.rmtree(tmp_root, ignore_errors=True)
            if not done:
                for parent in created:  # deepest first; only those still empty
                    with contextlib.suppress(OSError):
                        parent.rmdir()
    return result


def _missing_parents(out: Path) -> list[Path]:
    """The parent directories of ``out`` that do not exist yet, deepest first.

    Raises:
        LitebertError: one of them is a file (the nearest existing parent is not a directory).
    """
    missing = []
    for parent in out.parents:
        if parent.is_dir():
            break
        if parent.exists() or parent.is_symlink():
            raise LitebertError(f"--output {out}: {parent} is not a directory; choose another --output")
        missing.append(parent)
    return missing


@contextlib.contextmanager
def _sigterm_exits():
    """While the block runs, SIGTERM raises ``SystemExit(143)`` (128 + 15, the status of a process killed by it)
    in the main thread, so that ``finally`` clauses run and remove what they must; a second SIGTERM during that
    clean-up is ignored. The previous handler is restored after. Outside the main thread (where no handler can be
    set) this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    fired = False

    def handler(signum, frame):
        nonlocal fired
        if not fired:
            fired = True
            raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)


def _export(src, out, tmp_root, checkpoint, format, quantize, head, opset) -> ExportResult:
    """:func:`export_model`'s writing part: everything in ``tmp_root``, the result renamed to ``out`` at the end."""
    from litebert.checkpoint import CONFIG_NAME, SAFETENSORS_NAME, load_config

    model_dir = src
    if checkpoint:
        from litebert.training.pretrain import export_checkpoint

        model_dir = export_checkpoint(src, tmp_root / "hf", shown_as=out, checked=True)
    config = load_config(model_dir)
    cls_name = resolve_head(head, config)
    check_head(config, cls_name, src)
    config = config_for_head(config, cls_name)
    weights = model_dir / SAFETENSORS_NAME
    weights_bytes = weights.stat().st_size if weights.is_file() else None
    if format == "hf":
        if checkpoint and head is None:
            staged = model_dir
        else:
            staged = tmp_root / "out"
            _load_head(model_dir, cls_name, config).save_pretrained(staged)
            _copy_tokenizer(model_dir, staged, out, warn=not checkpoint)
        result = ExportResult(out, "hf", cls_name, weights_bytes=weights_bytes)
    else:
        staged = tmp_root / "out"
        staged.mkdir()
        model = _load_head(model_dir, cls_name, config)
        onnx_path = staged / ONNX_NAME
        export_onnx(model, onnx_path, opset=opset)
        if quantize == "int8":
            quantize_onnx(onnx_path)
        config = model.config
        config.extra = {
            **(config.extra or {}),
            "litebert_onnx": {"opset": opset, "quantize": quantize, "outputs": list(ONNX_OUTPUTS[cls_name])},
        }
        (staged / CONFIG_NAME).write_text(config.to_json_string(), encoding="utf-8")
        _copy_tokenizer(model_dir, staged, out, warn=not checkpoint)
        result = ExportResult(out, "onnx", cls_name, onnx_bytes=onnx_path.stat().st_size, weights_bytes=weights_bytes)
    try:
        staged.rename(out)
    except OSError as exc:  # e.g. another process made --output meanwhile
        raise LitebertError(f"--output {out}: cannot create it ({exc.strerror or exc}); nothing was written") from None
    return result


def _load_head(model_dir: Path, cls_name: str, config):
    """``cls_name`` built from ``config`` with the weights of ``model_dir`` (a missing head tensor keeps its fresh
    init, with a warning; a missing encoder tensor is an error)."""
    from litebert.checkpoint import load_state_dict_file, load_weights
    from litebert.modeling import MODEL_CLASSES

    model = MODEL_CLASSES[cls_name](config)
    state, source = load_state_dict_file(model_dir)
    report = load_weights(model, state, source)
    encoder_missing = [
        k
        for k in report["missing"]
        if not k.startswith(
            ("albert.pooler.", "pooler.", "classifier.", "qa_outputs.", "predictions.", "sop_classifier.")
        )
    ]
    if encoder_missing:
        raise LitebertError(
            f"{source}: the weights lack {len(encoder_missing)} encoder tensors "
            f"(e.g. {encoder_missing[:3]}); is this an ALBERT model directory?"
        )
    if report["missing"]:
        log.warning(
            "export: %s: %d tensors of %s are not in the directory and keep a fresh init: %s",
            model_dir,
            len(report["missing"]),
            cls_name,
            ", ".join(report["missing"][:5]),
        )
    return model.eval()


def _copy_tokenizer(model_dir: Path, staged: Path, out: Path, warn: bool = True) -> None:
    """Write the tokenizer of ``model_dir`` into ``staged`` (to become ``out``, the user's ``--output``). Without
    one, the export goes on without tokenizer files, with a warning that names ``out`` and how to add them (none
    with ``warn=False``: a checkpoint's export has already said so)."""
    from litebert.tokenization import load_tokenizer

    try:
        tokenizer = load_tokenizer(model_dir)
    except LitebertError:
        if warn:
            log.warning(
                "export: %s has no tokenizer files, so %s has none: copy the model's tokenizer files (spiece.model "
                "or vocab.txt, tokenizer_config.json ...) into it, or pass --tokenizer DIR to finetune/evaluate/predict",
                model_dir,
                out,
            )
        return
    tokenizer.save(staged)


class _OnnxWrapper(torch.nn.Module):
    """Positional inputs → the head's outputs as a tuple, in :data:`ONNX_OUTPUTS` order (a :data:`POOLED_HEADS`
    head with ``pooled_only``: its last layer traced for [CLS] only)."""

    def __init__(self, model):
        super().__init__()
        self.model = model
        self.names = ONNX_OUTPUTS[type(model).__name__]
        self.kwargs = {"pooled_only": True} if type(model).__name__ in POOLED_HEADS else {}

    def forward(self, input_ids, attention_mask, token_type_ids):
        out = self.model(
            input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids, **self.kwargs
        )
        return tuple(out[n] for n in self.names)


def example_inputs(config, multiple_choice: bool = False) -> tuple[torch.Tensor, ...]:
    """A padded example batch for tracing: (2, 5) — (2, 2, 5) for multiple choice — with the last row padded."""
    shape = (2, 2, 5) if multiple_choice else (2, 5)
    ids = torch.randint(0, config.vocab_size, shape)
    mask = torch.ones(shape, dtype=torch.long)
    mask[-1, ..., 3:] = 0
    types = torch.zeros(shape, dtype=torch.long)
    types[..., 2:] = 1
    return ids, mask, types


def export_onnx(model, path: str | os.PathLike, opset: int = OPSET) -> Path:
    """Trace ``model`` (an eval-mode litebert head, fp32) into ``path`` and dedupe its initializers.

    Uses the TorchScript exporter (``dynamo=False``): it traces the layer loop once per application with the same
    parameter tensors, exports in about a second for small models, and needs no newer opset. Returns ``path``.
    """
    import warnings

    import onnx

    path = Path(path)
    name = type(model).__name__
    mc = name == "AlbertForMultipleChoice"
    axes = {0: "batch", 1: "choice", 2: "sequence"} if mc else {0: "batch", 1: "sequence"}
    outputs = ONNX_OUTPUTS[name]
    out_axes = {
        "last_hidden_state": {0: "batch", 1: "sequence"},
        "pooler_output": {0: "batch"},
        "prediction_logits": {0: "batch", 1: "sequence"},
        "sop_logits": {0: "batch"},
        "start_logits": {0: "batch", 1: "sequence"},
        "end_logits": {0: "batch", 1: "sequence"},
    }
    logits_axes = {
        "AlbertForMaskedLM": {0: "batch", 1: "sequence"},
        "AlbertForTokenClassification": {0: "batch", 1: "sequence"},
        "AlbertForSequenceClassification": {0: "batch"},
        "AlbertForMultipleChoice": {0: "batch", 1: "choice"},  # (B, C): the inputs' choice axis
    }
    dynamic = {n: axes for n in INPUT_NAMES}
    for o in outputs:
        dynamic[o] = logits_axes[name] if o == "logits" else out_axes[o]
    was_training = model.training
    model.eval()
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # tracer warnings about Python ints from shapes: the axes are declared dynamic
        torch.onnx.export(
            _OnnxWrapper(model),
            example_inputs(model.config, mc),
            str(path),
            input_names=list(INPUT_NAMES),
            output_names=list(outputs),
            dynamic_axes=dynamic,
            opset_version=opset,
            do_constant_folding=True,
            dynamo=False,
        )
    model.train(was_training)
    proto = onnx.load(str(path))
    dedupe_initializers(proto)
    _save_onnx(proto, path)
    return path


def _save_onnx(proto, path: Path) -> None:
    import onnx

    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    onnx.save(proto, str(tmp))
    os.replace(tmp, path)


def dedupe_initializers(proto) -> int:
    """Merge initializers with the same dtype, shape and bytes into the first of them (in place) and point every
    node input at it; also replace an initializer that is the transpose of another (the tied MLM decoder, folded
    from the word embeddings) with a ``Transpose`` node. Returns the number of initializers removed.

    Why: constant folding evaluates ``Transpose(W)`` once per node, and a shared layer's nodes are repeated for each
    of its L applications, so without this the file holds L copies of every shared weight.
    """
    import numpy as np
    from onnx import helper, numpy_helper

    graph = proto.graph
    first: dict[tuple, str] = {}
    rename: dict[str, str] = {}
    keep = []
    arrays: dict[str, np.ndarray] = {}
    for init in graph.initializer:
        arr = numpy_helper.to_array(init)
        key = (init.data_type, tuple(init.dims), arr.tobytes())
        if key in first:
            rename[init.name] = first[key]
            continue
        first[key] = init.name
        keep.append(init)
        arrays[init.name] = arr
    # transposed copies of a 2-D matrix (large ones only: small ones cost less than a node)
    transposed: dict[tuple, str] = {}
    for name, arr in arrays.items():
        if arr.ndim == 2 and arr.size >= 4096:
            transposed.setdefault((arr.dtype.str, arr.T.shape, np.ascontiguousarray(arr.T).tobytes()), name)
    new_nodes = []
    final = []
    replaced: set[str] = set()
    for init in keep:
        arr = arrays[init.name]
        src = transposed.get((arr.dtype.str, arr.shape, arr.tobytes())) if arr.ndim == 2 else None
        if src is not None and src != init.name and src not in replaced:  # keep one of a pair (no cycle)
            replaced.add(init.name)
            new_nodes.append(
                helper.make_node("Transpose", [src], [init.name], perm=[1, 0], name=f"{init.name}_transpose")
            )
            continue
        final.append(init)
    removed = len(graph.initializer) - len(final)
    del graph.initializer[:]
    graph.initializer.extend(final)
    # the TorchScript exporter marks a parameter's later uses with Identity(initializer); the uses must read the
    # initializer itself, or onnxruntime's quantizer (which quantizes MatMuls whose weight is an initializer) would
    # leave every application of a shared layer but the first in fp32
    names = {init.name for init in graph.initializer} | {n.output[0] for n in new_nodes}
    outputs = {o.name for o in graph.output}
    for node in graph.node:
        if (
            node.op_type == "Identity"
            and rename.get(node.input[0], node.input[0]) in names
            and node.output[0] not in outputs
        ):
            rename[node.output[0]] = rename.get(node.input[0], node.input[0])
    kept_nodes = [n for n in graph.node if not (n.op_type == "Identity" and n.output[0] in rename)]
    for node in kept_nodes:
        for i, name in enumerate(node.input):
            while name in rename:
                name = rename[name]
            node.input[i] = name
    del graph.node[:]
    graph.node.extend(new_nodes + kept_nodes)
    return removed


def quantize_onnx(path: str | os.PathLike) -> Path:
    """Rewrite ``path`` with int8 dynamic quantization (onnxruntime's ``quantize_dynamic``, signed int8 weights
    per tensor) and dedupe the initializers again. Returns ``path``."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    path = Path(path)
    tmp = path.with_name(f".{path.stem}.int8.tmp-{os.getpid()}.onnx")
    try:
        quantize_dynamic(str(path), str(tmp), weight_type=QuantType.QInt8)
        proto = onnx.load(str(tmp))
        dedupe_initializers(proto)
        _save_onnx(proto, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def read_onnx_meta(directory: str | os.PathLike) -> dict:
    """The ``litebert_onnx`` entry of an ONNX directory's config.json ({} when absent)."""
    path = Path(directory) / "config.json"
    try:
        return json.loads(path.read_text()).get("litebert_onnx", {}) or {}
    except (OSError, ValueError):
        return {}


__all__ = [
    "FORMATS",
    "HEAD_ALIASES",
    "ONNX_NAME",
    "ONNX_OUTPUTS",
    "OPSET",
    "TASK_HEADS",
    "ExportResult",
    "check_head",
    "config_for_head",
    "dedupe_initializers",
    "export_model",
    "export_onnx",
    "quantize_onnx",
    "require_onnx",
    "resolve_head",
]
