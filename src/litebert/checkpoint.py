"""Model directories: ``config.json`` + ``model.safetensors`` with transformers' parameter names (docs/algorithms.md §5).

Writing (:func:`save_model_dir`): the state dict with each tensor once — the tied ``predictions.decoder.weight``
(= ``albert.embeddings.word_embeddings.weight``) and ``predictions.decoder.bias`` (= ``predictions.bias``) are left
out as transformers ≥ 5 does, and so is every alias of a shared module (sharing "attention"/"ffn"). Each file is
written to a temporary name and renamed, weights first, ``config.json`` last. A model transformers can represent
gets ``model_type: "albert"``; any other (sharing "attention"/"ffn", albert_zh layout, pre-LN) gets
``model_type: "litebert_albert"``, and an explicit ``hf=True`` export of it raises :class:`LitebertError`.

Reading (:func:`load_model_dir`): directories written by litebert or transformers (``model.safetensors``, a sharded
``model.safetensors.index.json``, or ``pytorch_model.bin``), with transformers' key variants: with or without the
``albert.`` prefix (a base-model directory into a head class and back), with or without the tied decoder keys,
``predictions.decoder.bias`` standing in for ``predictions.bias``. Missing weights keep their fresh init and are
logged as a warning, as transformers does.

Every user-caused failure is a :class:`LitebertError` naming the file, and the parameter where there is one.
"""

from __future__ import annotations

import json
import logging
import os
import struct
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from litebert.config import AlbertConfig
from litebert.errors import LitebertError
from litebert.fileio import atomic_write, atomic_write_text, read_json, run_command
from litebert.modeling import register_model_dir_io

logger = logging.getLogger(__name__)

CONFIG_NAME = "config.json"
SAFETENSORS_NAME = "model.safetensors"
SAFETENSORS_INDEX_NAME = "model.safetensors.index.json"
PYTORCH_NAME = "pytorch_model.bin"
#: Keys that only alias another tensor (transformers' ``_tied_weights_keys``): never written, optional on read.
TIED_ALIASES = {
    "predictions.decoder.weight": "albert.embeddings.word_embeddings.weight",
    "predictions.decoder.bias": "predictions.bias",
}


# ====================================================================================================== writing
def model_state_for_saving(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The state dict with every tensor once: tied decoder keys dropped, shared aliases kept at their first name."""
    out: dict[str, torch.Tensor] = {}
    seen: set[tuple[int, tuple[int, ...], tuple[int, ...]]] = set()
    for name, tensor in model.state_dict().items():
        if name in TIED_ALIASES:
            continue
        key = (tensor.data_ptr(), tuple(tensor.shape), tuple(tensor.stride()))
        if key in seen:
            continue
        seen.add(key)
        out[name] = tensor.detach().contiguous()
    return out


def save_model_dir(model: torch.nn.Module, directory: str | os.PathLike, hf: bool | None = None) -> Path:
    """Write ``directory/model.safetensors`` and ``directory/config.json`` (other files there are left alone).

    ``hf`` None: transformers' format if the architecture allows it, else ``model_type: "litebert_albert"``;
    ``hf=True``: raises LitebertError when transformers cannot represent the model, with the reason.
    Returns the directory.
    """
    config: AlbertConfig = model.config
    reason = config.hf_incompatibility
    if hf and reason:
        raise LitebertError(
            f"cannot save {type(model).__name__} in transformers' format: {reason}. "
            f"Save without hf=True to write litebert's own format (model_type 'litebert_albert')."
        )
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise LitebertError(f"{directory}: exists and is not a directory (a model directory is written there)")
    directory.mkdir(parents=True, exist_ok=True)
    config.architectures = [type(model).__name__]
    state = model_state_for_saving(model)
    atomic_write(directory / SAFETENSORS_NAME, lambda p: save_file(state, str(p), metadata={"format": "pt"}))
    atomic_write_text(directory / CONFIG_NAME, config.to_json_string())
    return directory


# ====================================================================================================== reading
def read_safetensors_header(path: str | os.PathLike) -> dict[str, dict[str, Any]]:
    """The tensor entries of a safetensors file's header, name -> ``{"dtype", "shape", "data_offsets"}``, read
    without the data; also checks that the file holds every tensor's bytes (safetensors' own error on a truncated
    file names no tensor).

    Raises LitebertError naming the file, and the first parameter a truncated file lacks.
    """
    path = Path(path)
    size = path.stat().st_size
    with open(path, "rb") as fh:
        head = fh.read(8)
        if len(head) < 8:
            raise LitebertError(f"{path}: truncated safetensors file ({size} bytes, no header)")
        (n,) = struct.unpack("<Q", head)
        if n > size - 8:
            raise LitebertError(f"{path}: truncated safetensors file (header of {n} bytes, file of {size} bytes)")
        try:
            header = json.loads(fh.read(n))
        except (json.JSONDecodeError, UnicodeDecodeError):
            header = None
    if not isinstance(header, dict):
        raise LitebertError(f"{path}: not a safetensors file (unreadable header)")
    available = size - 8 - n
    entries: dict[str, dict[str, Any]] = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        try:
            shape, end = [int(d) for d in entry["shape"]], int(entry["data_offsets"][1])
        except (TypeError, KeyError, ValueError):
            raise LitebertError(f"{path}: not a safetensors file (bad header entry for {name!r})") from None
        if end > available:
            raise LitebertError(
                f"{path}: truncated safetensors file: parameter {name!r} needs bytes up to {end} "
                f"of the data section, the file has {available}"
            )
        entries[name] = {**entry, "shape": shape}
    return entries


def _read_safetensors(path: Path) -> dict[str, torch.Tensor]:
    read_safetensors_header(path)
    try:
        return load_file(str(path))
    except Exception as exc:  # safetensors raises its own error type for every corruption
        raise LitebertError(f"{path}: cannot read safetensors file ({exc})") from None


def find_weight_files(directory: str | os.PathLike) -> tuple[list[Path], Path | None]:
    """The weight files of a model directory, in the order :func:`load_state_dict_file` prefers them:
    ``([model.safetensors], that file)``, else ``(shards, model.safetensors.index.json)``, else
    ``([pytorch_model.bin], that file)``; ``([], None)`` when there are none.

    Raises LitebertError naming the file when the index is invalid or lists a missing shard.
    """
    directory = Path(directory)
    path = directory / SAFETENSORS_NAME
    if path.is_file():
        return [path], path
    index = directory / SAFETENSORS_INDEX_NAME
    if index.is_file():
        try:
            shards = sorted(set(read_json(index, what="safetensors index")["weight_map"].values()))
        except (KeyError, AttributeError, TypeError) as exc:
            raise LitebertError(f"{index}: not a valid safetensors index (no weight_map: {exc})") from None
        for shard in shards:
            if not (directory / shard).is_file():
                raise LitebertError(f"{directory / shard}: shard listed in {index.name} is missing")
        return [directory / shard for shard in shards], index
    path = directory / PYTORCH_NAME
    if path.is_file():
        return [path], path
    return [], None


def read_pytorch_bin(path: str | os.PathLike) -> dict[str, torch.Tensor]:
    """A ``pytorch_model.bin`` state dict, loaded with ``weights_only=True``. LitebertError naming the file."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many types (pickle, zip, RuntimeError) for a damaged file
        detail = " ".join(str(exc).split())  # one line: torch's messages run over several
        detail = detail if len(detail) <= 200 else detail[:200] + "..."
        raise LitebertError(f"{path}: cannot read PyTorch weights ({type(exc).__name__}: {detail})") from None
    if not isinstance(state, dict):
        raise LitebertError(f"{path}: expected a state dict, got {type(state).__name__}")
    return state


#: the model directories a run leaves in its run directory, by the run's command (``run_settings.json``), the one
#: to use first; ``litebert info`` names the first, :func:`check_not_run_dir` those that exist
RUN_MODEL_DIRS = {"pretrain": ("final",), "finetune": ("best", "final")}


def check_not_run_dir(directory: str | os.PathLike) -> None:
    """Refuse a ``litebert pretrain``/``finetune`` run directory (its ``run_settings.json`` names the command) where
    a model directory is read, naming the model directory inside it to pass instead (``RUN/final``, ``RUN/best``).
    Every reader of a model directory calls it first (:func:`load_config`, :func:`load_state_dict_file`), so each
    command (``finetune``, ``evaluate``, ``predict``, ``export``, ``pretrain --init-from``) gives this one line
    rather than a missing file's.

    A training checkpoint (``RUN/checkpoints/step-N``) is refused too (:func:`training_checkpoint_message`).

    Raises:
        LitebertError: ``"RUN is a `litebert pretrain` run directory, not a model directory: pass RUN/final"``;
            for a run that has not written its model yet, what to pass once it has (or how to export a checkpoint).
    """
    directory = Path(directory)
    if is_training_checkpoint(directory):
        raise LitebertError(training_checkpoint_message(directory))
    command = run_command(directory)
    names = RUN_MODEL_DIRS.get(command or "")
    if not names:
        return
    found = [str(directory / name) for name in names if (directory / name / CONFIG_NAME).is_file()]
    if found:
        use = f"pass {' or '.join(found)}"
    elif command == "pretrain":
        use = (
            f"pass {directory / names[0]} once the run has written it, or export a checkpoint as a model "
            f"(litebert export {directory}/checkpoints/step-N --output DIR)"
        )
    else:
        use = f"pass {directory / names[0]} once the run has written it"
    raise LitebertError(f"{directory} is a `litebert {command}` run directory, not a model directory: {use}")


def is_training_checkpoint(directory: Path) -> bool:
    """Whether ``directory`` is a training checkpoint (``RUN/checkpoints/step-N``: ``model.pt`` and the trainer's
    state), not a model directory."""
    return (directory / "model.pt").is_file() and (directory / "trainer_state.json").is_file()


def training_checkpoint_message(directory: Path) -> str:
    """What to do with a training checkpoint given where a model directory is read: export it (pretrain), or use
    the run's model directory (finetune: ``RUN/best``)."""
    run = directory.parent.parent
    if run_command(run) == "finetune":
        return (
            f"{directory} is a `litebert finetune` training checkpoint (model.pt, optimizer state), not a model "
            f"directory: the run's model is {run / 'best'}"
        )
    return (
        f"{directory} is a `litebert pretrain` training checkpoint (model.pt, optimizer state), not a model "
        f"directory; write one with `litebert export {directory} --output DIR`, or resume training from it with "
        f"`litebert pretrain ... --resume {directory}`"
    )


def load_state_dict_file(directory: str | os.PathLike) -> tuple[dict[str, torch.Tensor], Path]:
    """The weights of a model directory and the file they came from: ``model.safetensors``, else the shards of
    ``model.safetensors.index.json``, else ``pytorch_model.bin`` (loaded with ``weights_only=True``).

    Raises LitebertError naming the path when the directory or the weights are missing or unreadable, or when it is
    a run directory (:func:`check_not_run_dir`).
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise LitebertError(f"{directory}: model directory not found")
    check_not_run_dir(directory)
    files, source = find_weight_files(directory)
    if source is None:
        onnx = sorted(f.name for f in directory.glob("*.onnx"))
        raise LitebertError(
            f"{directory}: no weights found (expected {SAFETENSORS_NAME}, {SAFETENSORS_INDEX_NAME} or {PYTORCH_NAME})"
            + (
                f": it is an ONNX export ({', '.join(onnx)}), which evaluate/predict read with --backend onnxruntime; "
                "give the model directory it was exported from"
                if onnx
                else ""
            )
        )
    if files[0].name == PYTORCH_NAME:
        return read_pytorch_bin(files[0]), source
    state: dict[str, torch.Tensor] = {}
    for f in files:
        state.update(_read_safetensors(f))
    return state, source


def load_config(directory: str | os.PathLike) -> AlbertConfig:
    """``directory/config.json`` as an AlbertConfig. Raises LitebertError naming the file if missing/invalid (a
    missing directory whose name is not of the form ``ORG/NAME`` is also said not to be a Hub id), or naming the
    model directory to pass for a run directory (:func:`check_not_run_dir`; a run's own ``config.json`` is read with
    ``AlbertConfig.from_json_file``)."""
    from litebert.hub import is_hub_id

    directory = Path(directory)
    if not directory.is_dir():
        hint = "" if is_hub_id(str(directory)) else " (and not a Hub id ORG/NAME)"
        raise LitebertError(f"{directory}: model directory not found{hint}")
    check_not_run_dir(directory)
    path = directory / CONFIG_NAME
    if not path.is_file():
        raise LitebertError(f"{path}: missing config.json in the model directory")
    return AlbertConfig.from_json_file(path)


def _adapt_keys(state: dict[str, torch.Tensor], model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Map transformers' key variants onto the model's names (prefix, legacy decoder bias)."""
    expected = set(model.state_dict())
    prefix = getattr(model, "base_model_prefix", "albert") + "."
    has_prefix = any(k.startswith(prefix) for k in expected)
    out: dict[str, torch.Tensor] = {}
    for key, value in state.items():
        if has_prefix and not key.startswith(prefix) and prefix + key in expected:
            key = prefix + key  # base-model directory (AlbertModel) into a head class
        elif not has_prefix and key.startswith(prefix):
            key = key[len(prefix) :]  # head-class directory into AlbertModel
        out[key] = value
    if "predictions.bias" in expected and "predictions.bias" not in out and "predictions.decoder.bias" in out:
        out["predictions.bias"] = out["predictions.decoder.bias"]
    return out


def load_weights(
    model: torch.nn.Module,
    state: dict[str, torch.Tensor],
    source: str | os.PathLike = "<state dict>",
    ignore_mismatched_sizes: bool = False,
) -> dict[str, list[str]]:
    """Copy ``state`` into ``model`` (casting to the model's dtype), tolerating transformers' key variants.

    Returns ``{"missing": [...], "unexpected": [...], "mismatched": [...]}``; missing weights (left at their init)
    are logged as a warning, unexpected ones at info level. Raises LitebertError naming ``source`` and the parameter
    on a shape mismatch, unless ``ignore_mismatched_sizes`` (then the model keeps its init for it).
    """
    state = _adapt_keys(state, model)
    own = model.state_dict()
    # aliases of the same tensor (tied decoder, shared modules) count as loaded when any of their names is
    groups: dict[tuple, list[str]] = {}
    for name, tensor in own.items():
        groups.setdefault((tensor.data_ptr(), tuple(tensor.shape), tuple(tensor.stride())), []).append(name)
    loaded: dict[str, torch.Tensor] = {}
    mismatched: list[str] = []
    for name in own:  # the model's order, so that the first mismatch reported is the first in the model
        if name not in state:
            continue
        value = state[name]
        if tuple(value.shape) != tuple(own[name].shape):
            if ignore_mismatched_sizes:
                mismatched.append(name)
                continue
            raise LitebertError(
                f"{source}: parameter {name!r} has shape {list(value.shape)} in the file but "
                f"{list(own[name].shape)} in the model built from the config (check config.json, or the "
                "--model-config given with --init-from: its sizes must be the weights'; in Python, "
                "ignore_mismatched_sizes=True re-initialises such a tensor, e.g. a new task head)"
            )
        loaded[name] = value
    missing: list[str] = []
    with torch.no_grad():
        for names in groups.values():
            present = [n for n in names if n in loaded]
            if not present:
                missing.extend(n for n in names if n not in TIED_ALIASES)
                continue
            own[names[0]].copy_(loaded[present[0]])
    unexpected = [k for k in state if k not in own]
    if missing:
        logger.warning(
            "%s: %d weights of %s were not in the file and are newly initialised: %s",
            source,
            len(missing),
            type(model).__name__,
            ", ".join(missing),
        )
    if mismatched:
        logger.warning(
            "%s: %d weights had other shapes and are newly initialised: %s",
            source,
            len(mismatched),
            ", ".join(mismatched),
        )
    if unexpected:
        logger.info(
            "%s: %d weights in the file are not used by %s: %s",
            source,
            len(unexpected),
            type(model).__name__,
            ", ".join(unexpected),
        )
    return {"missing": missing, "unexpected": unexpected, "mismatched": mismatched}


def load_model_dir(
    cls,
    directory: str | os.PathLike,
    config: AlbertConfig | str | None = None,
    ignore_mismatched_sizes: bool = False,
    **config_overrides: Any,
):
    """Build ``cls`` from ``directory/config.json`` (or ``config``: an AlbertConfig, preset name or JSON path),
    apply ``config_overrides``, load the weights, return the model in eval mode (as transformers)."""
    directory = Path(directory)
    if config is None:
        config = load_config(directory)
    config = AlbertConfig.load(config, **config_overrides)
    state, source = load_state_dict_file(directory)
    model = cls(config)
    report = load_weights(model, state, source, ignore_mismatched_sizes=ignore_mismatched_sizes)
    model.loading_info = report
    return model.eval()


register_model_dir_io(load_model_dir, save_model_dir)  # behind from_pretrained/save_pretrained (see modeling)
