"""``litebert info PATH``: describe a model directory (litebert or transformers) or a TensorFlow checkpoint.

For a model directory: its ``config.json``, ``model_type``, the element count of its stored weights (read from the
safetensors headers, without loading the tensors) and its tokenizer. For an ONNX directory (``litebert export --format
onnx``: ``model.onnx`` + ``config.json`` + tokenizer): each ``*.onnx`` file's size and, with the ``onnx`` package, its
opset, inputs and outputs (name, type, axes), whether it is int8-quantized and its initializer element count
(without ``onnx``: the size and what ``config.json``'s ``litebert_onnx`` records). For a TensorFlow checkpoint (read by
:mod:`litebert.tf.bundle`, no TensorFlow needed): the detected layout, the ``albert_config.json`` beside it, the
model-weight element count (optimizer slots excluded), ``global_step`` and the tokenizer files beside it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from litebert.checkpoint import (
    RUN_MODEL_DIRS,
    find_weight_files,
    is_training_checkpoint,
    read_pytorch_bin,
    read_safetensors_header,
    training_checkpoint_message,
)
from litebert.errors import LitebertError
from litebert.fileio import read_json, run_command
from litebert.tf.bundle import open_checkpoint
from litebert.tf.convert import summarize_tf_checkpoint
from litebert.tokenization import load_tokenizer

_TOKENIZER_FILES = (
    "spiece.model",
    "30k-clean.model",
    "vocab.txt",
    "vocab_chinese.txt",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
)
_TF_CONFIG_FILES = ("albert_config.json", "bert_config.json", "config.json")


@dataclass
class PathInfo:
    """What :func:`inspect_path` found: a model directory or a TF checkpoint."""

    path: str
    kind: str
    """"model_dir" (config.json + weights), "onnx_dir" (``*.onnx`` files, config.json), "run_dir" (a ``litebert
    pretrain``/``finetune`` run: ``run_settings.json``), "data_dir" (``litebert prepare``'s shards: ``manifest.json``)
    or "tf_checkpoint"."""
    layout: str | None
    """"official"/"factorized", "albert_zh", or None when undetectable."""
    config: dict[str, Any]
    """the model directory's config.json, or the TF checkpoint's albert_config.json (empty when not found)."""
    config_file: str | None
    parameter_count: int
    """elements of the stored model weights (tied tensors once; TF: slots and global_step excluded)."""
    tokenizer: dict[str, Any]
    """tokenizer description (``kind``, ``vocab_size``, files) or ``{"files": []}`` when there is none."""
    details: dict[str, Any] = field(default_factory=dict)
    """kind-specific extras: weights file, model_type; ONNX: file, opset, quantization, inputs, outputs; TF:
    global_step, slot and unknown variable counts."""
    onnx_files: list[dict[str, Any]] = field(default_factory=list)
    """ONNX directories: per ``*.onnx`` file, :func:`describe_onnx`'s dict."""

    def to_text(self) -> str:
        """The human-readable report that ``litebert info`` prints."""
        rows = [
            ("path", self.path),
            ("kind", self.kind),
            ("layout", self.layout or "unknown"),
            ("parameters", f"{self.parameter_count:,}"),
            *self.details.items(),
        ]
        if self.kind == "run_dir":  # a training run: what it is and where its model is, not a model's rows
            rows = [("path", self.path), ("kind", "run directory"), *self.details.items()]
        if self.kind == "data_dir":  # prepared shards: what they hold and how they were made
            rows = [("path", self.path), ("kind", "pretraining data (litebert prepare)"), *self.details.items()]
        tok = self.tokenizer
        if self.kind == "run_dir" and not tok.get("files"):
            pass
        elif tok.get("kind"):
            rows.append(("tokenizer", f"{tok['kind']}, vocab_size {tok['vocab_size']} ({', '.join(tok['files'])})"))
        elif tok.get("files"):
            rows.append(
                ("tokenizer", f"files {', '.join(tok['files'])}" + (f" ({tok['error']})" if tok.get("error") else ""))
            )
        else:
            rows.append(("tokenizer", "none found"))
        if self.kind not in ("run_dir", "data_dir") or self.config_file:  # (a run's model row says where it is)
            rows.append(("config", self.config_file or "none found"))
        width = max(len(k) for k, _ in rows) + 2
        lines = [f"{k + ':':<{width}}{v}" for k, v in rows]
        lines += [f"  {k}: {json.dumps(v)}" for k, v in self.config.items()]
        return "\n".join(lines)


def _describe_tokenizer(directory: Path) -> dict[str, Any]:
    files = [f for f in _TOKENIZER_FILES if (directory / f).is_file()]
    info: dict[str, Any] = {"files": files}
    if not any(f in files for f in ("spiece.model", "vocab.txt", "tokenizer.json")):
        return info
    try:
        tok = load_tokenizer(directory)
        info.update(kind=tok.kind, vocab_size=tok.vocab_size)
    except LitebertError as exc:
        info["error"] = str(exc)
    return info


_QUANT_OPS = (
    "DynamicQuantizeLinear",
    "MatMulInteger",
    "QLinearMatMul",
    "QuantizeLinear",
    "DequantizeLinear",
    "ConvInteger",
    "QLinearConv",
    "DynamicQuantizeMatMul",
    "QAttention",
)
"""Operators that only quantized graphs hold (onnxruntime's ``quantize_dynamic`` / ``quantize_static``)."""


def describe_onnx(path: Path) -> dict[str, Any]:
    """One ONNX file: ``file``, ``bytes``; with the ``onnx`` package also ``opset`` (default domain), ``inputs`` and
    ``outputs`` (``name dtype [axes]`` strings, symbolic axes by name), ``quantized`` (the quantization operators
    found, ``[]`` for a float graph), ``int8_initializers`` and ``elements`` (initializer elements: the stored
    weights, each deduplicated tensor once, plus quantization scales and graph constants). Without ``onnx``:
    ``missing`` = the install hint instead of the graph keys.

    Raises:
        LitebertError: the file is not a readable ONNX model.
    """
    info: dict[str, Any] = {"file": path.name, "bytes": path.stat().st_size}
    try:
        import onnx
    except ImportError:
        from litebert.inference import ONNX_INSTALL_HINT

        info["missing"] = f"the onnx package is not installed ({ONNX_INSTALL_HINT})"
        return info
    try:
        proto = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # protobuf's DecodeError and onnx's own errors: no common base class
        reason = str(exc).splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise LitebertError(f"{path}: not a readable ONNX file ({reason})") from None
    graph = proto.graph

    def value(v) -> str:
        t = v.type.tensor_type
        dtype = onnx.helper.tensor_dtype_to_np_dtype(t.elem_type).name if t.elem_type else "?"
        dims = [d.dim_param or (str(d.dim_value) if d.HasField("dim_value") else "?") for d in t.shape.dim]
        return f"{v.name} {dtype} [{', '.join(dims)}]"

    initializer_names = {i.name for i in graph.initializer}
    ops = {n.op_type for n in graph.node}
    int8 = (onnx.TensorProto.INT8, onnx.TensorProto.UINT8)
    info.update(
        opset=next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), None),
        inputs=[value(v) for v in graph.input if v.name not in initializer_names],
        outputs=[value(v) for v in graph.output],
        quantized=sorted(ops.intersection(_QUANT_OPS)),
        int8_initializers=sum(i.data_type in int8 for i in graph.initializer),
        elements=sum(int(np.prod(i.dims, dtype=np.int64)) for i in graph.initializer),
    )
    return info


def _onnx_rows(files: list[dict[str, Any]], config: dict[str, Any]) -> dict[str, Any]:
    """The report rows of an ONNX directory's files (keys prefixed by the file name when there are several)."""
    meta = config.get("litebert_onnx") or {}
    rows: dict[str, Any] = {}
    for f in files:
        key = "onnx" if len(files) == 1 else f"onnx {f['file']}"
        rows[key] = f"{f['file']}, {f['bytes']:,} bytes"
        if "missing" in f:  # no graph details: what the export recorded in config.json
            rows[key] += f"; {f['missing']}"
            if meta:
                rows[f"{key} (config.json)"] = (
                    f"opset {meta.get('opset', '?')}, quantize {meta.get('quantize') or 'none'}, "
                    f"outputs {', '.join(meta.get('outputs') or []) or '?'}"
                )
            continue
        rows[f"{key} opset"] = f["opset"] if f["opset"] is not None else "?"
        rows[f"{key} quantized"] = (
            f"int8 ({', '.join(f['quantized'])}; {f['int8_initializers']} int8 initializers)"
            if f["quantized"] or f["int8_initializers"]
            else "no (float weights)"
        )
        rows[f"{key} inputs"] = "; ".join(f["inputs"]) or "none"
        rows[f"{key} outputs"] = "; ".join(f["outputs"]) or "none"
    return rows


def _count_weights_file(directory: Path) -> tuple[int, str | None]:
    """Elements of a model directory's stored weights (each stored tensor once) and the file they came from,
    as :func:`litebert.checkpoint.load_state_dict_file` would pick it; safetensors are counted from the headers.
    Raises LitebertError naming a damaged file."""
    files, source = find_weight_files(directory)
    if source is None:
        return 0, None
    if source.suffix == ".bin":
        seen, total = set(), 0
        for t in read_pytorch_bin(source).values():
            key = (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape))
            if key not in seen:
                seen.add(key)
                total += t.numel()
        return total, source.name
    total = sum(int(np.prod(e["shape"], dtype=np.int64)) for f in files for e in read_safetensors_header(f).values())
    return total, source.name


def inspect_path(path: str | os.PathLike, backend: str = "auto") -> PathInfo:
    """Describe a litebert/HF model directory or a TF checkpoint (prefix, index/data file, or directory).

    A directory with ``*.onnx`` files is an ONNX directory: the files (:func:`describe_onnx`), its ``config.json``
    when present, and its tokenizer; ``parameter_count`` is the torch weights' when the directory has them, else the
    ONNX initializers' elements (0 without the ``onnx`` package). A directory with ``config.json`` is a model
    directory: its config, ``model_type``, the element count of ``model.safetensors`` (or ``pytorch_model.bin``)
    and its tokenizer. Anything else is opened as a TF V2
    checkpoint: detected layout, the ``albert_config.json`` beside it (when present), model-weight element count
    (slots excluded), ``global_step``, slot and unknown variable counts, and tokenizer files beside it.
    Raises :class:`LitebertError` when the path is neither.
    """
    p = Path(path)
    if not p.exists() and not p.with_name(p.name + ".index").exists() and not list(p.parent.glob(p.name + ".data-*")):
        raise LitebertError(
            f"{p}: no such file or directory (expected a model directory or a TensorFlow checkpoint prefix)"
        )
    onnx_files = sorted(p.glob("*.onnx"), key=lambda f: (f.name != "model.onnx", f.name)) if p.is_dir() else []
    if onnx_files and not list(p.glob("*.index")):
        return _inspect_onnx_dir(p, onnx_files)
    if p.is_dir() and (p / "manifest.json").is_file() and not (p / "config.json").is_file():
        return _inspect_data_dir(p)
    command = run_command(p) if p.is_dir() else None
    if command is not None:  # before the model check: a pretrain run holds config.json but its weights are in final/
        return _inspect_run_dir(p, command)
    if p.is_dir() and (p / "config.json").is_file() and not list(p.glob("*.index")):
        config = read_json(p / "config.json", what="config file", expect=dict)
        count, weights = _count_weights_file(p)
        layout = config.get("embedding_layout", "factorized")
        details = {
            "model_type": config.get("model_type", "?"),
            "weights": weights or "none found",
            "architectures": ", ".join(config.get("architectures") or []) or "?",
        }
        if config.get("layer_norm_position", "post") != "post":
            details["layer norm"] = config["layer_norm_position"]
        return PathInfo(
            str(p), "model_dir", layout, config, str(p / "config.json"), count, _describe_tokenizer(p), details
        )
    if p.is_dir() and is_training_checkpoint(p):
        raise LitebertError(training_checkpoint_message(p))
    if p.is_dir() and not list(p.glob("*.index")) and not (p / "checkpoint").is_file():
        raise LitebertError(f"{p}: neither a model directory (no config.json) nor a TensorFlow checkpoint (no *.index)")
    reader = open_checkpoint(p, backend=backend)
    summary = summarize_tf_checkpoint(reader)
    directory = Path(reader.prefix).parent
    config, config_file = {}, None
    candidates = [directory / n for n in _TF_CONFIG_FILES] + sorted(directory.glob("albert_config*.json"))
    for cand in candidates:
        if cand.is_file():
            try:
                config = read_json(cand, expect=dict)
                config_file = str(cand)
            except LitebertError:
                continue
            break
    details: dict[str, Any] = {
        "prefix": reader.prefix,
        "global_step": summary.global_step if summary.global_step is not None else "none",
        "variables": f"{len(summary.model_variables)} model, {len(summary.optimizer_variables)} optimizer/bookkeeping, "
        f"{len(summary.unknown_variables)} unknown",
    }
    if summary.unknown_variables:
        details["unknown"] = ", ".join(list(summary.unknown_variables)[:10]) + (
            " ..." if len(summary.unknown_variables) > 10 else ""
        )
    if summary.layout == "albert_zh" and config.get("ln_type"):
        details["ln_type"] = config["ln_type"]
    return PathInfo(
        str(p),
        "tf_checkpoint",
        summary.layout,
        config,
        config_file,
        summary.model_parameter_count,
        _describe_tokenizer(directory),
        details,
    )


#: what a finished run of a command leaves (as ``litebert.training.run.check_output_dir``'s ``finished``)
_RUN_FINISHED = {"pretrain": "final", "finetune": "eval_results.json"}


def _inspect_run_dir(p: Path, command: str) -> PathInfo:
    """A ``litebert pretrain``/``finetune`` run directory: command, steps done, newest checkpoint, the model
    directory it made (``final/``, ``best/``) when there is one."""
    from litebert.training.state import list_checkpoints, stopped_early

    settings = read_json(p / "run_settings.json", what="run settings", expect=dict)
    run_cfg = settings.get(f"{command}_config")
    max_steps = settings.get("max_steps") or (run_cfg.get("max_steps") if isinstance(run_cfg, dict) else None)
    checkpoints = list_checkpoints(p, warn=False)
    details: dict[str, Any] = {"command": f"litebert {command}"}
    if settings.get("started"):
        details["started"] = settings["started"]
    of = f" of {max_steps}" if isinstance(max_steps, int) and max_steps > 0 else ""
    if checkpoints:
        step, newest = checkpoints[-1]
        details["steps"] = f"{step}{of} done (newest checkpoint {newest.relative_to(p)}, {len(checkpoints)} kept)"
    else:
        details["steps"] = f"no checkpoint kept{f' (max_steps {max_steps})' if of else ''}"
    if isinstance(settings.get("num_parameters"), int):
        details["parameters"] = f"{settings['num_parameters']:,}"
    marker = _RUN_FINISHED.get(command)
    if marker is not None:
        stopped = stopped_early(p) if command == "pretrain" else None
        details["state"] = (
            f"stopped {stopped} ({marker}): continue it with --resume auto (the same --max-steps)"
            if stopped is not None and (p / marker).exists()
            else f"finished ({marker})"
            if (p / marker).exists()
            else "unfinished (continue it with --resume auto)"
            if checkpoints
            else "unfinished, no checkpoint to continue from"
        )
    name = RUN_MODEL_DIRS.get(command, (None,))[0]  # the model directory to use
    if name is not None:
        model = p / name
        details["model"] = (
            f"{model} (describe it: litebert info {model})"
            if (model / "config.json").is_file()
            else f"none ({name}/ not written yet)"
        )
    config_file = p / "config.json"
    config = read_json(config_file, what="config file", expect=dict) if config_file.is_file() else {}
    return PathInfo(
        str(p), "run_dir", None, config, str(config_file) if config else None, 0, _describe_tokenizer(p), details
    )


def _inspect_data_dir(p: Path) -> PathInfo:
    """A ``litebert prepare`` output (``manifest.json``, docs/DESIGN.md): counts, the settings a model must match,
    shards, the corpus files, and the tokenizer copied beside the shards.

    Raises:
        LitebertError: a manifest that is not one of this format (:func:`litebert.data.read_manifest`).
    """
    from litebert.data import read_manifest

    manifest = read_manifest(p)
    counts, settings = manifest.get("counts", {}), manifest.get("settings", {})
    details: dict[str, Any] = {
        "instances": f"{counts.get('instances', 0):,} ({counts.get('tokens', 0):,} tokens) in "
        f"{len(manifest.get('shards', []))} shard(s)",
        "corpus": f"{counts.get('documents', 0):,} documents, {counts.get('sentences', 0):,} sentences, "
        f"{counts.get('corpus_tokens', 0):,} tokens"
        + (f", {counts['unknown_tokens']:,} of them unknown" if counts.get("unknown_tokens") else "")
        + f" from {', '.join(str(c.get('source')) for c in manifest.get('corpus', [])[:3]) or '?'}"
        + (" ..." if len(manifest.get("corpus", [])) > 3 else ""),
        "settings": ", ".join(
            f"{k} {settings[k]}"
            for k in ("max_seq_length", "inter_sentence_task", "masking", "max_predictions_per_seq", "dupe_factor")
            if k in settings
        ),
        "use": f"litebert pretrain --data {p} ...",
    }
    if "partition" in manifest:  # one part: pretrain refuses it
        part = manifest["partition"]
        details["partition"] = f"{part.get('index')} of {part.get('count')}"
        details["use"] = "merge the parts first: litebert merge-data PART_DIR ... --output DIR (pretrain reads DIR)"
    tok_dir = p / manifest.get("tokenizer", {}).get("path", "tokenizer")
    return PathInfo(str(p), "data_dir", None, {}, None, 0, _describe_tokenizer(tok_dir), details)


def _inspect_onnx_dir(p: Path, onnx_files: list[Path]) -> PathInfo:
    config_file = p / "config.json"
    config = read_json(config_file, what="config file", expect=dict) if config_file.is_file() else {}
    files = [describe_onnx(f) for f in onnx_files]
    count, weights = _count_weights_file(p)
    details: dict[str, Any] = {
        "model_type": config.get("model_type", "?"),
        "architectures": ", ".join(config.get("architectures") or []) or "?",
        "weights": weights or "none (ONNX only)",
    }
    if weights is None:
        first = files[0]
        count = first.get("elements", 0)
        details["parameters from"] = (
            f"{first['file']} initializer elements (constant folding folds, merges and adds tensors: close to the "
            "torch count, not equal to it)"
            if "elements" in first
            else "unknown without the onnx package"
        )
    details.update(_onnx_rows(files, config))
    return PathInfo(
        str(p),
        "onnx_dir",
        config.get("embedding_layout", "factorized") if config else None,
        config,
        str(config_file) if config else None,
        count,
        _describe_tokenizer(p),
        details,
        files,
    )


__all__ = ["PathInfo", "describe_onnx", "inspect_path"]
