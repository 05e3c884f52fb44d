"""Convert TensorFlow ALBERT checkpoints (google-research/albert, brightmart/albert_zh) to litebert / HF format.

No TensorFlow needed: checkpoints are read by :mod:`litebert.tf.bundle`. Two layouts:

- ``"official"`` (google-research/albert ``modeling.py``, also TF-Hub modules with their ``module/`` prefix and
  albert_zh's "Google-format" releases): ``bert/embeddings/*`` E-wide, ``bert/encoder/embedding_hidden_mapping_in``
  (absent when E == H: an identity projection is used), ``bert/encoder/transformer/group_{g}/inner_group_{k}/*``,
  ``bert/pooler``, ``cls/predictions`` (MLM, H→E) and ``cls/seq_relationship`` (SOP). Every ``kernel`` is stored
  ``[in, out]`` and transposed to torch's ``[out, in]``; ``cls/seq_relationship/output_weights`` is already
  ``[2, H]``. The result loads in transformers.
- ``"albert_zh"`` (brightmart/albert_zh ``modeling.py``): ``bert/embeddings/word_embeddings_2`` (E→H, no bias),
  H-wide position/type tables, one ``bert/encoder/layer_shared/*`` layer for all layers, MLM transform H→H,
  ``ln_type`` post-LN or pre-LN. Maps to litebert's ``embedding_layout="albert_zh"`` variant (litebert-only).

Optimizer slots (``adam_m``, ``adam_v``, ``lamb_m``, ``lamb_v``, ``Adam``, ``AdamWeightDecayOptimizer*``, ...) and
bookkeeping (``global_step``, loss-scale counters) are skipped by name, never loaded: each model variable is matched
by its *whole* name, so ``.../kernel/lamb_m`` can never land on ``.../kernel``. Variables that are neither model
weights nor known bookkeeping are listed in an error (or skipped and reported with ``skip_unknown=True``); model
parameters that the checkpoint does not provide are named in an error.

Sources: google-research/albert ``modeling.py`` / ``run_pretraining.py`` (b772393); brightmart/albert_zh
``modeling.py`` / ``run_pretraining.py`` (52149e8); the name maps and forward formulas of
``../shared/fixtures/tf/README.md``; transformers' removed ``convert_albert_original_tf_checkpoint_to_pytorch.py``.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from litebert import modeling
from litebert.config import AlbertConfig
from litebert.errors import LitebertError
from litebert.fileio import read_json
from litebert.tf.bundle import BundleReader, CheckpointReader, open_checkpoint, read_bundle
from litebert.tokenization import load_tokenizer

LAYOUTS = ("official", "albert_zh")

#: last name components of optimizer slot variables (google-research/albert ``optimization.py`` /
#: ``lamb_optimizer.py``, BERT's ``AdamWeightDecayOptimizer``, albert_zh, TF's built-in optimizers).
SLOT_SUFFIXES = frozenset(
    {
        "adam_m",
        "adam_v",
        "lamb_m",
        "lamb_v",
        "Adam",
        "Adam_1",
        "LAMB",
        "LAMB_1",
        "Momentum",
        "Adagrad",
        "RMSProp",
        "RMSProp_1",
        "Adadelta",
        "Adadelta_1",
        "Ftrl",
        "Ftrl_1",
        "ExponentialMovingAverage",
    }
)
#: whole names (after stripping ``module/``) that are training bookkeeping, not weights.
BOOKKEEPING_NAMES = frozenset(
    {
        "global_step",
        "beta1_power",
        "beta2_power",
        "current_loss_scale",
        "good_steps",
        "loss_scale",
    }
)

# TF activation names (modeling.get_activation) -> transformers' names. TF's "gelu" is the tanh approximation.
_TF_ACTIVATIONS = {"gelu": "gelu_new", "relu": "relu", "tanh": "tanh", "gelu_new": "gelu_new", "swish": "swish"}

# albert_config.json keys that the TF code never reads for these models, or that must keep their default.
_IGNORED_CONFIG_KEYS = frozenset(
    {
        "directionality",
        "pooler_fc_size",
        "pooler_num_attention_heads",
        "pooler_num_fc_layers",
        "pooler_size_per_head",
        "pooler_type",
        "initializer_range_scale",
    }
)
_MUST_BE_DEFAULT = {"net_structure_type": 0, "gap_size": 0, "num_memory_blocks": 0, "down_scale_factor": 1}
_COPIED_KEYS = (
    "vocab_size",
    "embedding_size",
    "hidden_size",
    "num_hidden_layers",
    "num_hidden_groups",
    "num_attention_heads",
    "intermediate_size",
    "inner_group_num",
    "hidden_dropout_prob",
    "attention_probs_dropout_prob",
    "max_position_embeddings",
    "type_vocab_size",
    "initializer_range",
)


# --------------------------------------------------------------------------------------------------------------
# name maps
# --------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Rule:
    """One TF name template -> HF name template; ``{g}``/``{k}`` are group / inner-layer indices."""

    tf: str
    hf: str
    transpose: bool

    @property
    def tf_regex(self) -> re.Pattern:
        return _template_regex(self.tf)

    @property
    def hf_regex(self) -> re.Pattern:
        return _template_regex(self.hf)


def _template_regex(template: str) -> re.Pattern:
    pattern = re.escape(template).replace(r"\{g\}", r"(?P<g>\d+)").replace(r"\{k\}", r"(?P<k>\d+)")
    return re.compile(pattern)


def _dense(tf: str, hf: str) -> list[_Rule]:
    return [_Rule(f"{tf}/kernel", f"{hf}.weight", True), _Rule(f"{tf}/bias", f"{hf}.bias", False)]


def _norm(tf: str, hf: str) -> list[_Rule]:
    return [_Rule(f"{tf}/gamma", f"{hf}.weight", False), _Rule(f"{tf}/beta", f"{hf}.bias", False)]


def _heads() -> list[_Rule]:
    return [
        *_dense("bert/pooler/dense", "albert.pooler"),
        *_dense("cls/predictions/transform/dense", "predictions.dense"),
        *_norm("cls/predictions/transform/LayerNorm", "predictions.LayerNorm"),
        _Rule("cls/predictions/output_bias", "predictions.bias", False),
        _Rule("cls/seq_relationship/output_weights", "sop_classifier.classifier.weight", False),  # already [2, H]
        _Rule("cls/seq_relationship/output_bias", "sop_classifier.classifier.bias", False),
    ]


def _embeddings() -> list[_Rule]:
    return [
        _Rule("bert/embeddings/word_embeddings", "albert.embeddings.word_embeddings.weight", False),
        _Rule("bert/embeddings/token_type_embeddings", "albert.embeddings.token_type_embeddings.weight", False),
        _Rule("bert/embeddings/position_embeddings", "albert.embeddings.position_embeddings.weight", False),
        *_norm("bert/embeddings/LayerNorm", "albert.embeddings.LayerNorm"),
    ]


_OFF = "bert/encoder/transformer/group_{g}/inner_group_{k}"
_HFL = "albert.encoder.albert_layer_groups.{g}.albert_layers.{k}"
OFFICIAL_RULES: tuple[_Rule, ...] = (
    *_embeddings(),
    *_dense("bert/encoder/embedding_hidden_mapping_in", "albert.encoder.embedding_hidden_mapping_in"),
    *_dense(f"{_OFF}/attention_1/self/query", f"{_HFL}.attention.query"),
    *_dense(f"{_OFF}/attention_1/self/key", f"{_HFL}.attention.key"),
    *_dense(f"{_OFF}/attention_1/self/value", f"{_HFL}.attention.value"),
    *_dense(f"{_OFF}/attention_1/output/dense", f"{_HFL}.attention.dense"),
    *_norm(f"{_OFF}/LayerNorm", f"{_HFL}.attention.LayerNorm"),
    *_dense(f"{_OFF}/ffn_1/intermediate/dense", f"{_HFL}.ffn"),
    *_dense(f"{_OFF}/ffn_1/intermediate/output/dense", f"{_HFL}.ffn_output"),
    *_norm(f"{_OFF}/LayerNorm_1", f"{_HFL}.full_layer_layer_norm"),
    *_heads(),
)

_ZH = "bert/encoder/layer_shared"
_HF0 = "albert.encoder.albert_layer_groups.0.albert_layers.0"
ALBERT_ZH_RULES: tuple[_Rule, ...] = (
    *_embeddings(),
    _Rule("bert/embeddings/word_embeddings_2", "albert.embeddings.word_embeddings_2.weight", True),  # [E,H] -> [H,E]
    *_dense(f"{_ZH}/attention/self/query", f"{_HF0}.attention.query"),
    *_dense(f"{_ZH}/attention/self/key", f"{_HF0}.attention.key"),
    *_dense(f"{_ZH}/attention/self/value", f"{_HF0}.attention.value"),
    *_dense(f"{_ZH}/attention/output/dense", f"{_HF0}.attention.dense"),
    *_norm(f"{_ZH}/attention/output/LayerNorm", f"{_HF0}.attention.LayerNorm"),
    *_dense(f"{_ZH}/intermediate/dense", f"{_HF0}.ffn"),
    *_dense(f"{_ZH}/output/dense", f"{_HF0}.ffn_output"),
    *_norm(f"{_ZH}/output/LayerNorm", f"{_HF0}.full_layer_layer_norm"),
    *_heads(),
)

_RULES = {"official": OFFICIAL_RULES, "albert_zh": ALBERT_ZH_RULES}
_COMPILED: dict[str, list[tuple[re.Pattern, re.Pattern, _Rule]]] = {
    layout: [(r.tf_regex, r.hf_regex, r) for r in rules] for layout, rules in _RULES.items()
}


def strip_hub_prefix(name: str) -> str:
    """Drop TF-Hub's ``module/`` scope: ``module/bert/embeddings/...`` -> ``bert/embeddings/...``."""
    return name[len("module/") :] if name.startswith("module/") else name


def is_optimizer_variable(name: str) -> bool:
    """True for optimizer slots and training bookkeeping (never model weights).

    ``name`` may carry the TF-Hub ``module/`` prefix. Slots are recognised by their last component
    (``.../kernel/adam_m``, ``.../gamma/lamb_v``, ``.../kernel/Adam_1``) or a component starting with
    ``AdamWeightDecayOptimizer`` (BERT's optimizer scope); bookkeeping by whole name (``global_step`` ...).
    """
    name = strip_hub_prefix(name)
    parts = name.split("/")
    if name in BOOKKEEPING_NAMES or parts[-1] in SLOT_SUFFIXES:
        return True
    return any(p.startswith("AdamWeightDecayOptimizer") for p in parts)


def tf_to_hf_name(name: str, layout: str) -> tuple[str, bool] | None:
    """Map one TF variable name to ``(HF parameter name, transpose)``, or None if it is not a model weight.

    ``name`` may carry ``module/``; it must match a rule of ``layout`` as a *whole* (slots never match). HF names
    are those of ``AlbertForPreTraining`` (``albert.`` prefix).
    """
    name = strip_hub_prefix(name)
    for tf_re, _, rule in _COMPILED[layout]:
        m = tf_re.fullmatch(name)
        if m:
            return rule.hf.format(**m.groupdict()), rule.transpose
    return None


def hf_to_tf_name(hf_name: str, layout: str) -> str | None:
    """Inverse of :func:`tf_to_hf_name` (for messages): the TF name that provides ``hf_name``, or None."""
    for _, hf_re, rule in _COMPILED[layout]:
        m = hf_re.fullmatch(hf_name)
        if m:
            return rule.tf.format(**m.groupdict())
    return None


def detect_layout(names: list[str] | Mapping[str, Any]) -> str:
    """``"albert_zh"`` if the checkpoint has ``word_embeddings_2`` or ``bert/encoder/layer_shared/``, ``"official"``
    if it has ``bert/encoder/transformer/`` or ``embedding_hidden_mapping_in``; else LitebertError."""
    stripped = [strip_hub_prefix(n) for n in names]
    if any(n == "bert/embeddings/word_embeddings_2" or n.startswith(f"{_ZH}/") for n in stripped):
        return "albert_zh"
    if any(
        n.startswith("bert/encoder/transformer/") or n.startswith("bert/encoder/embedding_hidden_mapping_in")
        for n in stripped
    ):
        return "official"
    sample = ", ".join(sorted(stripped)[:5])
    raise LitebertError(
        f"cannot tell the checkpoint layout: no 'bert/encoder/transformer/' (google-research/albert) nor "
        f"'bert/encoder/layer_shared/' (albert_zh) variables (first names: {sample})"
    )


def _unknown_hint(names: list[str]) -> str:
    hints = []
    if any("layer_normalization" in n or n.startswith("albert/") or "/_" in n for n in names):
        hints.append(
            "names like 'layer_normalization' come from TF2/Keras model code (e.g. the TF Model Garden), "
            "not from google-research/albert's modeling.py; convert the original TF1 checkpoint instead"
        )
    if any(
        n.startswith(("output_weights", "output_bias", "classifier", "cls/squad", "finetune_mrc"))
        or n.split("/")[0] in ("loss", "output", "classifier")
        for n in names
    ):
        hints.append(
            "variables outside bert/ and cls/ look like a fine-tuned task head, which this converter does not map"
        )
    return ("Note: " + "; ".join(hints) + ". ") if hints else ""


# --------------------------------------------------------------------------------------------------------------
# config
# --------------------------------------------------------------------------------------------------------------


def read_tf_config(path: str | os.PathLike) -> dict[str, Any]:
    """Read an ``albert_config.json`` (official or albert_zh key set) as a dict; LitebertError naming the file."""
    path = Path(path)
    if not path.is_file():
        raise LitebertError(f"{path}: config file not found (pass the albert_config.json shipped with the checkpoint)")
    return read_json(path, what="albert_config.json", expect=dict)


def tf_config_to_hf(
    raw: Mapping[str, Any], layout: str, source: str = "albert_config.json"
) -> tuple[dict[str, Any], list[str]]:
    """Map a TF ``albert_config.json`` dict to :class:`~litebert.config.AlbertConfig` keyword arguments.

    Returns ``(kwargs, ignored_keys)``. TF ``"gelu"`` (tanh approximation) becomes ``"gelu_new"``;
    ``layer_norm_eps`` is TF's 1e-12. ``layout="albert_zh"`` sets ``embedding_layout="albert_zh"``, one shared layer
    (G = K = 1) and ``layer_norm_position`` from ``ln_type`` (``"postln"``/absent -> "post", ``"preln"`` -> "pre").
    Keys the TF code ignores (``directionality``, ``pooler_*``, and ``net_structure_type``/``gap_size``/
    ``num_memory_blocks``/``down_scale_factor`` at their defaults) are dropped; other unknown keys are returned in
    ``ignored_keys``. Raises LitebertError naming ``source`` and the key for a missing required key, an unknown
    activation, a non-default value of an unsupported option, or an ``ln_type`` the layout cannot have.
    """
    if layout not in LAYOUTS:
        raise LitebertError(f"unknown layout {layout!r}; expected one of {LAYOUTS}")
    kwargs: dict[str, Any] = {}
    for key in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size"):
        if key not in raw:
            raise LitebertError(f"{source}: required key {key!r} is missing")
    for key in _COPIED_KEYS:
        if key in raw:
            kwargs[key] = raw[key]
    kwargs.setdefault("embedding_size", raw.get("embedding_size", raw["hidden_size"]))
    act = raw.get("hidden_act", "gelu")
    if act not in _TF_ACTIVATIONS:
        raise LitebertError(
            f"{source}: hidden_act {act!r} is not an activation of ALBERT's TF code "
            f"(expected one of {sorted(_TF_ACTIVATIONS)})"
        )
    kwargs["hidden_act"] = _TF_ACTIVATIONS[act]
    kwargs["layer_norm_eps"] = 1e-12  # tf.contrib.layers.layer_norm's epsilon
    for key, default in _MUST_BE_DEFAULT.items():
        if key in raw and raw[key] != default:
            raise LitebertError(
                f"{source}: {key}={raw[key]!r} selects an ALBERT variant that litebert does not "
                f"implement (only {key}={default} is supported)"
            )
    layers_to_keep = raw.get("layers_to_keep")
    if layers_to_keep:
        raise LitebertError(f"{source}: layers_to_keep={layers_to_keep!r} is not supported (use all layers)")
    ln_type = raw.get("ln_type")
    if layout == "albert_zh":
        for key in ("num_hidden_groups", "inner_group_num"):
            if raw.get(key, 1) != 1:
                raise LitebertError(
                    f"{source}: {key}={raw[key]} but albert_zh checkpoints share one layer (layer_shared); expected 1"
                )
        kwargs["num_hidden_groups"] = 1
        kwargs["inner_group_num"] = 1
        positions = {None: "post", "postln": "post", "preln": "pre"}
        if ln_type not in positions:
            raise LitebertError(f"{source}: ln_type {ln_type!r} is not one of 'postln', 'preln'")
        kwargs["embedding_layout"] = "albert_zh"
        kwargs["layer_norm_position"] = positions[ln_type]
    elif ln_type not in (None, "postln"):
        raise LitebertError(
            f"{source}: ln_type {ln_type!r} but the checkpoint has the official layout, whose code "
            "is post-LN only (is this an albert_zh checkpoint? try --layout albert_zh)"
        )
    known = (
        set(_COPIED_KEYS)
        | set(_MUST_BE_DEFAULT)
        | _IGNORED_CONFIG_KEYS
        | {"hidden_act", "ln_type", "layers_to_keep", "embedding_size"}
    )
    ignored = sorted(k for k in raw if k not in known)
    return kwargs, ignored


# --------------------------------------------------------------------------------------------------------------
# conversion
# --------------------------------------------------------------------------------------------------------------


class _ArrayReader:
    """A dict of arrays behind the reader interface (tests, or arrays already in memory)."""

    def __init__(self, arrays: Mapping[str, np.ndarray], prefix: str = "<arrays>"):
        self._arrays = arrays
        self.prefix = prefix

    def variables(self) -> dict[str, tuple[tuple[int, ...], str]]:
        return {n: (tuple(np.shape(a)), np.asarray(a).dtype.name) for n, a in sorted(self._arrays.items())}

    def get_tensor(self, name: str) -> np.ndarray:
        return np.array(self._arrays[name])


@dataclass
class TFCheckpointSummary:
    """What a TF checkpoint holds, by kind of variable (see :func:`summarize_tf_checkpoint`)."""

    prefix: str
    layout: str | None
    model_variables: dict[str, tuple[int, ...]]
    """TF name -> shape of every model weight (the names the chosen layout maps)."""
    optimizer_variables: list[str]
    """slots and bookkeeping, skipped."""
    unknown_variables: dict[str, tuple[int, ...]]
    """neither model weights nor known bookkeeping."""
    model_parameter_count: int
    """elements of the model weights as stored (the tied word table counted once)."""
    global_step: int | None = None


def summarize_tf_checkpoint(
    reader: CheckpointReader | Mapping[str, np.ndarray], layout: str = "auto"
) -> TFCheckpointSummary:
    """Sort a checkpoint's variables into model weights, optimizer/bookkeeping and unknown, without loading them
    (except ``global_step``). ``layout`` ``"auto"`` detects it (None in the result when undetectable)."""
    if isinstance(reader, Mapping):
        reader = _ArrayReader(reader)
    variables = reader.variables()
    if layout == "auto":
        try:
            layout = detect_layout(list(variables))
        except LitebertError:
            layout = None
    model, optim, unknown = {}, [], {}
    for name, (shape, _dtype) in variables.items():
        if is_optimizer_variable(name):
            optim.append(name)
        elif layout is not None and tf_to_hf_name(name, layout) is not None:
            model[name] = tuple(shape)
        else:
            unknown[name] = tuple(shape)
    step = None
    for name in ("global_step", "module/global_step"):
        if name in variables:
            try:
                step = int(np.asarray(reader.get_tensor(name)).reshape(()))
            except (LitebertError, ValueError, TypeError):
                step = None
    count = sum(int(np.prod(s, dtype=np.int64)) for s in model.values())
    return TFCheckpointSummary(reader.prefix, layout, model, optim, unknown, count, step)


@dataclass
class ConversionReport:
    """How each parameter of the converted model was filled."""

    layout: str
    loaded: dict[str, str] = field(default_factory=dict)
    """HF parameter name -> TF variable it came from."""
    skipped_optimizer: list[str] = field(default_factory=list)
    """optimizer slots and bookkeeping that were skipped."""
    skipped_unknown: list[str] = field(default_factory=list)
    """unknown variables skipped because ``skip_unknown`` was set."""
    tied: dict[str, str] = field(default_factory=dict)
    """HF parameter -> the loaded parameter it shares storage with (decoder tied to the word table)."""
    identity_projection: bool = False
    """True when ``embedding_hidden_mapping_in`` was absent (E == H) and set to identity weight and zero bias."""


def load_tf_weights(
    model,
    reader: CheckpointReader | Mapping[str, np.ndarray],
    layout: str,
    skip_unknown: bool = False,
    config_source: str = "the config",
) -> ConversionReport:
    """Fill every parameter of ``model`` (litebert ``AlbertForPreTraining`` or ``AlbertModel``) from ``reader``.

    ``reader``: an opened checkpoint or a dict TF name -> array. ``layout``: "official" or "albert_zh". For an
    ``AlbertModel`` the ``albert.`` prefix and the ``cls/`` heads are dropped. Only whole-name matches are loaded
    (slots are skipped by name); kernels are transposed. Raises :class:`LitebertError`:
    unknown variables (unless ``skip_unknown``), a variable whose shape disagrees with the model built from the
    config (naming the variable and both shapes, in TF's ``[in, out]`` orientation), a variable the config has
    no place for (e.g. ``group_1`` with ``num_hidden_groups=1``), or model parameters the checkpoint does not
    provide (naming the TF variables expected).
    """
    if isinstance(reader, Mapping):
        reader = _ArrayReader(reader)
    variables = reader.variables()
    report = ConversionReport(layout=layout)
    prefix = "" if hasattr(model, "albert") else "albert."
    params = dict(model.named_parameters(remove_duplicate=False))

    plan: dict[str, tuple[str, bool]] = {}  # HF name (in this model) -> (TF name, transpose)
    unknown, no_place = [], []
    for name in variables:
        if is_optimizer_variable(name):
            report.skipped_optimizer.append(name)
            continue
        mapped = tf_to_hf_name(name, layout)
        if mapped is None:
            unknown.append(name)
            continue
        hf_name, transpose = mapped
        if prefix:
            if not hf_name.startswith(prefix):
                report.skipped_unknown.append(name)  # a head variable; this model has no heads
                continue
            hf_name = hf_name[len(prefix) :]
        if hf_name not in params:
            no_place.append(f"{name} (-> {hf_name})")
            continue
        if hf_name in plan:
            raise LitebertError(
                f"variables {plan[hf_name][0]!r} and {name!r} both map to {hf_name} "
                "(a checkpoint with and without TF-Hub's 'module/' prefix?)"
            )
        plan[hf_name] = (name, transpose)

    if unknown and not skip_unknown:
        listing = "\n  ".join(f"{n} {list(variables[n][0])}" for n in unknown)
        raise LitebertError(
            f"{reader.prefix}: {len(unknown)} variable(s) are neither {layout}-layout ALBERT weights nor optimizer "
            f"slots:\n  {listing}\n{_unknown_hint(unknown)}Pass --skip-unknown (skip_unknown=True) to convert "
            "without them."
        )
    report.skipped_unknown.extend(unknown)
    if no_place:
        cfg = model.config
        raise LitebertError(
            f"{config_source} disagrees with the checkpoint: the model it describes (num_hidden_groups="
            f"{cfg.num_hidden_groups}, inner_group_num={cfg.inner_group_num}) has no parameter for: "
            + "; ".join(no_place[:20])
            + (f" ... and {len(no_place) - 20} more" if len(no_place) > 20 else "")
        )

    # shapes first, all of them, so one message names every disagreement
    bad = []
    for hf_name, (tf_name, transpose) in plan.items():
        ckpt_shape = list(variables[tf_name][0])
        want = list(params[hf_name].shape)
        want_tf = want[::-1] if transpose else want
        if ckpt_shape != want_tf:
            bad.append(f"{tf_name}: checkpoint shape {ckpt_shape}, {config_source} implies {want_tf}")
    if bad:
        raise LitebertError("the config disagrees with the checkpoint's shapes:\n  " + "\n  ".join(bad))

    # which parameters are still unfilled, modulo storage sharing (the decoder is tied to the word table)
    by_storage: dict[int, list[str]] = {}
    for n, p in params.items():
        by_storage.setdefault(p.data_ptr(), []).append(n)
    mapping_in = "encoder.embedding_hidden_mapping_in."
    missing = []
    for n, p in params.items():
        if n in plan:
            continue
        sharers = [s for s in by_storage[p.data_ptr()] if s in plan]
        if sharers:
            report.tied[n] = sharers[0]
            continue
        if n.removeprefix("albert.").startswith(mapping_in) and model.config.embedding_size == model.config.hidden_size:
            report.identity_projection = True
            continue
        missing.append(n)
    if missing:
        names = [hf_to_tf_name(prefix + m, layout) or m for m in missing]
        listing = ", ".join(names[:20]) + (f" ... and {len(names) - 20} more" if len(names) > 20 else "")
        raise LitebertError(
            f"{reader.prefix}: the checkpoint has no value for {len(missing)} model parameter(s): {listing}"
        )

    with torch.no_grad():
        for hf_name, (tf_name, transpose) in plan.items():
            array = np.asarray(reader.get_tensor(tf_name))
            if transpose:
                array = array.T
            param = params[hf_name]
            param.copy_(torch.from_numpy(np.ascontiguousarray(array)).to(param.dtype))
            report.loaded[hf_name] = tf_name
        if report.identity_projection:
            proj = (model.albert if prefix == "" else model).encoder.embedding_hidden_mapping_in
            proj.weight.copy_(torch.eye(proj.weight.shape[0], proj.weight.shape[1], dtype=proj.weight.dtype))
            proj.bias.zero_()
    return report


@dataclass
class ConvertResult:
    """What :func:`convert_tf_checkpoint` produced."""

    model: Any
    """the litebert model, weights loaded, in eval mode."""
    config: Any
    """its :class:`~litebert.config.AlbertConfig`."""
    layout: str
    report: ConversionReport
    ignored_config_keys: list[str]
    output_dir: Path | None = None
    tokenizer_files: list[str] = field(default_factory=list)
    global_step: int | None = None


def convert_tf_checkpoint(
    checkpoint: str | os.PathLike | Mapping[str, np.ndarray],
    config: str | os.PathLike | Mapping[str, Any],
    output_dir: str | os.PathLike | None = None,
    *,
    vocab: str | os.PathLike | None = None,
    spm_model: str | os.PathLike | None = None,
    layout: str = "auto",
    skip_unknown: bool = False,
    heads: str = "auto",
    backend: str = "auto",
) -> ConvertResult:
    """Convert a TF ALBERT checkpoint to a litebert model and, with ``output_dir``, write it as a model directory.

    ``checkpoint``: a prefix (``PREFIX.index`` + ``PREFIX.data-*``), its index/data file, a directory, or a dict
    TF name -> array. ``config``: ``albert_config.json`` path or its dict. ``layout``: "auto" (from the variable
    names), "official" or "albert_zh". ``heads``: "auto" (``AlbertForPreTraining`` when the checkpoint has
    ``cls/`` variables, else ``AlbertModel``), "pretraining" or "none". ``vocab``/``spm_model``: tokenizer file
    copied into ``output_dir`` (WordPiece ``vocab.txt`` for the Chinese and albert_zh models, SentencePiece
    ``spiece.model``/``30k-clean.model`` for the English ones). ``backend``: checkpoint reader (see
    :func:`litebert.tf.bundle.open_checkpoint`).

    The output directory is written by the model's ``save_pretrained`` (``config.json`` + ``model.safetensors``:
    ``model_type "albert"`` for the official layout, which transformers loads; ``"litebert_albert"`` for
    albert_zh) plus the tokenizer files. Raises :class:`LitebertError` for every input problem (see
    :func:`load_tf_weights`, :func:`tf_config_to_hf`, :func:`litebert.tf.bundle.open_checkpoint`).
    """
    if vocab is not None and spm_model is not None:
        raise LitebertError("pass either a WordPiece vocab (--vocab) or a SentencePiece model (--spm-model), not both")
    for path, what in ((vocab, "vocab"), (spm_model, "SentencePiece model")):
        if path is not None and not Path(path).is_file():
            raise LitebertError(f"{path}: {what} file not found")
    tokenizer = _load_tokenizer_file(vocab, spm_model)
    reader: Any = _ArrayReader(checkpoint) if isinstance(checkpoint, Mapping) else open_checkpoint(checkpoint, backend)
    names = list(reader.variables())
    found = detect_layout(names)
    if layout == "auto":
        layout = found
    elif layout not in LAYOUTS:
        raise LitebertError(f"unknown layout {layout!r}; expected auto, official or albert_zh")
    elif layout != found:
        raise LitebertError(
            f"{reader.prefix}: --layout {layout} but the variable names are those of the {found} "
            "layout (use --layout auto)"
        )

    source = "albert_config.json"
    if isinstance(config, Mapping):
        raw = dict(config)
    else:
        source = str(config)
        raw = read_tf_config(config)
    kwargs, ignored = tf_config_to_hf(raw, layout, source)
    has_heads = any(strip_hub_prefix(n).startswith("cls/") for n in names)
    if heads == "auto":
        heads = "pretraining" if has_heads else "none"
    if heads not in ("pretraining", "none"):
        raise LitebertError(f"unknown heads {heads!r}; expected auto, pretraining or none")
    kwargs["architectures"] = ["AlbertForPreTraining" if heads == "pretraining" else "AlbertModel"]
    try:
        cfg = AlbertConfig(**kwargs)
    except LitebertError as exc:
        raise LitebertError(f"{source}: {exc}") from None
    if tokenizer is not None and tokenizer.vocab_size > cfg.vocab_size:
        raise LitebertError(
            f"{vocab or spm_model}: the tokenizer has {tokenizer.vocab_size} tokens but {source} "
            f"says vocab_size {cfg.vocab_size} (wrong vocabulary for this checkpoint?)"
        )
    model = modeling.AlbertForPreTraining(cfg) if heads == "pretraining" else modeling.AlbertModel(cfg)
    report = load_tf_weights(model, reader, layout, skip_unknown=skip_unknown, config_source=source)
    model.eval()
    summary_step = None
    for n in ("global_step", "module/global_step"):
        if n in names:
            # a corrupt global_step is still a corrupt checkpoint: LitebertError propagates
            with contextlib.suppress(ValueError, TypeError):
                summary_step = int(np.asarray(reader.get_tensor(n)).reshape(()))
    result = ConvertResult(
        model=model, config=cfg, layout=layout, report=report, ignored_config_keys=ignored, global_step=summary_step
    )
    if output_dir is not None:
        out = Path(output_dir)
        model.save_pretrained(out)
        result.output_dir = out
        if tokenizer is not None:
            result.tokenizer_files = sorted(p.name for p in tokenizer.save(out))
    return result


def _load_tokenizer_file(vocab, spm_model):
    """Load a ``vocab.txt`` or SentencePiece model with :func:`litebert.tokenization.load_tokenizer`; None if
    neither is given. Raises LitebertError naming the file when it cannot be read as a tokenizer."""
    if vocab is None and spm_model is None:
        return None
    src = Path(vocab if vocab is not None else spm_model)
    with tempfile.TemporaryDirectory() as staging:
        shutil.copyfile(src, Path(staging) / ("vocab.txt" if vocab is not None else "spiece.model"))
        try:
            return load_tokenizer(staging)
        except LitebertError as exc:
            raise LitebertError(f"{src}: cannot be read as a tokenizer ({exc})") from None


def read_tf_checkpoint(prefix: str | os.PathLike, backend: str = "auto") -> dict[str, np.ndarray]:
    """Every tensor of a TF V2 checkpoint, name -> numpy array (slots and ``global_step`` included).

    Same as :func:`litebert.tf.bundle.read_bundle`; the converter itself reads only the tensors it maps.
    """
    return read_bundle(prefix, backend=backend)


__all__ = [
    "ALBERT_ZH_RULES",
    "BOOKKEEPING_NAMES",
    "LAYOUTS",
    "OFFICIAL_RULES",
    "SLOT_SUFFIXES",
    "BundleReader",
    "ConversionReport",
    "ConvertResult",
    "TFCheckpointSummary",
    "convert_tf_checkpoint",
    "detect_layout",
    "hf_to_tf_name",
    "is_optimizer_variable",
    "load_tf_weights",
    "read_tf_checkpoint",
    "read_tf_config",
    "strip_hub_prefix",
    "summarize_tf_checkpoint",
    "tf_config_to_hf",
    "tf_to_hf_name",
]
