"""The ALBERT model configuration: a typed dataclass with transformers' field names, presets and ``config.json`` I/O.

Field names and defaults follow Hugging Face ``transformers.AlbertConfig`` (its defaults are the xxlarge model), so a
``config.json`` written by transformers reads here and ours reads there. litebert adds three fields that
transformers cannot represent (``sharing`` "attention"/"ffn", ``embedding_layout`` "albert_zh",
``layer_norm_position`` "pre"); a model that uses any non-default value of them is saved with
``model_type: "litebert_albert"`` (see :mod:`litebert.checkpoint`). Keys of a ``config.json`` that this class does not
know (``transformers_version``, ``position_embedding_type``, ...) are kept in :attr:`AlbertConfig.extra` and written
back unchanged.

Sources: docs/algorithms.md §1; transformers ``models/albert/configuration_albert.py``; the released google-research/albert v2
configs; brightmart/albert_zh ``albert_config/*.json``.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from litebert.errors import LitebertError
from litebert.fileio import atomic_write_text, read_json

#: activations accepted in ``hidden_act`` (transformers' ``ACT2FN`` names that the model implements).
SUPPORTED_ACTIVATIONS = (
    "gelu",
    "gelu_new",
    "gelu_pytorch_tanh",
    "gelu_fast",
    "relu",
    "silu",
    "swish",
    "tanh",
    "quick_gelu",
)
SHARING_MODES = ("all", "attention", "ffn", "none")
EMBEDDING_LAYOUTS = ("factorized", "albert_zh")
LAYER_NORM_POSITIONS = ("post", "pre")
PROBLEM_TYPES = ("regression", "single_label_classification", "multi_label_classification")

HF_MODEL_TYPE = "albert"
LITEBERT_MODEL_TYPE = "litebert_albert"


@dataclass
class AlbertConfig:
    """ALBERT architecture hyper-parameters (docs/algorithms.md §1). Shape letters: V, E, H, I, N, L, G, K.

    Raises :class:`~litebert.errors.LitebertError` on construction when a value is invalid; the message names the field.
    """

    vocab_size: int = 30000
    """V: rows of the word-embedding table (and columns of the MLM logits)."""
    embedding_size: int = 128
    """E: width of the factorized embeddings (paper §3.1, "factorized embedding parameterization")."""
    hidden_size: int = 4096
    """H: width of the transformer layers."""
    num_hidden_layers: int = 12
    """L: number of layer applications (with sharing, fewer distinct parameter sets)."""
    num_hidden_groups: int = 1
    """G: number of distinct layer groups; layer l uses group ``int(l / (L / G))``. 1 = ALBERT's full sharing."""
    num_attention_heads: int = 64
    """N: attention heads; must divide H."""
    intermediate_size: int = 16384
    """I: FFN inner width."""
    inner_group_num: int = 1
    """K: distinct layers inside each group, applied in order at every use of the group."""
    hidden_act: str = "gelu_new"
    """Activation of the FFN and the MLM transform (transformers' name; "gelu_new" = tanh approximation = TF "gelu")."""
    hidden_dropout_prob: float = 0.0
    """Dropout on embeddings and on each residual branch."""
    attention_probs_dropout_prob: float = 0.0
    """Dropout on attention probabilities."""
    max_position_embeddings: int = 512
    """Rows of the position table: the longest sequence S the model accepts."""
    type_vocab_size: int = 2
    """Rows of the token-type (segment) table."""
    initializer_range: float = 0.02
    """Std of the normal init of every Linear/Embedding weight (biases 0, LayerNorm 1/0)."""
    layer_norm_eps: float = 1e-12
    """Epsilon of every LayerNorm."""
    classifier_dropout_prob: float | None = 0.1
    """Dropout before every classifier, the SOP head included (None: ``hidden_dropout_prob``, as transformers)."""
    pad_token_id: int | None = 0
    """Padding id (the word-embedding row initialised to 0 and never updated, as transformers' ``padding_idx``)."""
    bos_token_id: int | None = 2
    """[CLS] id in the released vocabularies (kept for transformers compatibility)."""
    eos_token_id: int | None = 3
    """[SEP] id in the released vocabularies (kept for transformers compatibility)."""
    num_labels: int = 2
    """Outputs of the classification heads (and of the SOP head, as transformers); set from ``id2label`` if given."""
    id2label: dict[int, str] | None = None
    """Label names by class index; default ``LABEL_0 ...``."""
    label2id: dict[str, int] | None = None
    """Inverse of ``id2label``."""
    problem_type: str | None = None
    """Sequence classification loss: "regression", "single_label_classification", "multi_label_classification" or
    None (inferred from ``num_labels`` and the label dtype at the first forward, as transformers)."""
    tie_word_embeddings: bool = True
    """The MLM decoder reuses the word-embedding table (always true for ALBERT)."""
    sharing: str | None = None
    """Cross-layer sharing (paper §3.1, Table 4): "all" (every layer of a group shares everything: the HF scheme),
    "attention" (attention shared along the groups, FFN per layer), "ffn" (FFN shared, attention per layer),
    "none" (every layer its own parameters; forces ``num_hidden_groups = num_hidden_layers``).
    None: "all" when G < L, else "none". "attention" and "ffn" are litebert-only."""
    embedding_layout: str = "factorized"
    """"factorized" (HF/official: E-wide tables, LayerNorm(E), ``embedding_hidden_mapping_in`` E→H) or "albert_zh"
    (brightmart: E→H projection ``word_embeddings_2`` right after the lookup, H-wide tables; litebert-only)."""
    layer_norm_position: str = "post"
    """"post" (ALBERT/BERT) or "pre" (albert_zh ``ln_type: preln``; litebert-only)."""
    architectures: list[str] | None = None
    """Model class names, written into ``config.json`` by ``save_pretrained``."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Keys of a read ``config.json`` that this class does not know; written back unchanged."""

    # ------------------------------------------------------------------ validation
    def __post_init__(self) -> None:
        def fail(name: str, why: str) -> None:
            raise LitebertError(f"AlbertConfig.{name}: {why} (got {getattr(self, name)!r})")

        for name in (
            "vocab_size",
            "embedding_size",
            "hidden_size",
            "num_hidden_layers",
            "num_hidden_groups",
            "num_attention_heads",
            "intermediate_size",
            "inner_group_num",
            "max_position_embeddings",
            "type_vocab_size",
            "num_labels",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                fail(name, "must be a positive integer")
        if self.hidden_size % self.num_attention_heads != 0:
            raise LitebertError(
                f"AlbertConfig.hidden_size: {self.hidden_size} is not divisible by "
                f"num_attention_heads={self.num_attention_heads}"
            )
        if self.sharing is None:
            # docs/algorithms.md §1: the default follows G (G = L > 1 is BERT-style no sharing)
            self.sharing = "none" if 1 < self.num_hidden_layers == self.num_hidden_groups else "all"
        if self.sharing not in SHARING_MODES:
            fail("sharing", f"must be one of {SHARING_MODES}")
        if self.sharing == "none":
            self.num_hidden_groups = (
                self.num_hidden_layers
            )  # "none" means one group per layer (docs/algorithms.md §1: G = L)
        if self.num_hidden_groups > self.num_hidden_layers:
            raise LitebertError(
                f"AlbertConfig.num_hidden_groups: {self.num_hidden_groups} groups for only "
                f"num_hidden_layers={self.num_hidden_layers} layers (groups beyond L would never run)"
            )
        if self.hidden_act not in SUPPORTED_ACTIVATIONS:
            fail("hidden_act", f"must be one of {SUPPORTED_ACTIVATIONS}")
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout_prob"):
            value = getattr(self, name)
            if value is None and name == "classifier_dropout_prob":
                continue
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0.0 <= value < 1.0:
                fail(name, "must be a probability in [0, 1)")
        if not isinstance(self.initializer_range, (int, float)) or self.initializer_range <= 0:
            fail("initializer_range", "must be a positive number")
        if not isinstance(self.layer_norm_eps, (int, float)) or self.layer_norm_eps <= 0:
            fail("layer_norm_eps", "must be a positive number")
        if self.embedding_layout not in EMBEDDING_LAYOUTS:
            fail("embedding_layout", f"must be one of {EMBEDDING_LAYOUTS}")
        if self.layer_norm_position not in LAYER_NORM_POSITIONS:
            fail("layer_norm_position", f"must be one of {LAYER_NORM_POSITIONS}")
        if self.problem_type is not None and self.problem_type not in PROBLEM_TYPES:
            fail("problem_type", f"must be None or one of {PROBLEM_TYPES}")
        if self.pad_token_id is not None and not 0 <= self.pad_token_id < self.vocab_size:
            fail("pad_token_id", f"must be None or in [0, vocab_size={self.vocab_size})")
        if not self.tie_word_embeddings:
            fail("tie_word_embeddings", "litebert's ALBERT always ties the MLM decoder to the word embeddings")
        pos_type = self.extra.get("position_embedding_type", "absolute")
        if pos_type not in (None, "absolute"):
            raise LitebertError(
                f"AlbertConfig.position_embedding_type: only 'absolute' is supported (got {pos_type!r})"
            )
        # labels: id2label wins (transformers' rule), keys as int
        if self.id2label is not None:
            try:
                self.id2label = {int(k): str(v) for k, v in self.id2label.items()}
            except (TypeError, ValueError, AttributeError):
                fail("id2label", "must map class indices to names")
            self.num_labels = len(self.id2label)
        else:
            self.id2label = {i: f"LABEL_{i}" for i in range(self.num_labels)}
        if self.label2id is None or len(self.label2id) != self.num_labels:
            self.label2id = {v: k for k, v in self.id2label.items()}
        else:
            self.label2id = {str(k): int(v) for k, v in self.label2id.items()}

    # ------------------------------------------------------------------ derived properties
    @property
    def head_size(self) -> int:
        """hd = H / N."""
        return self.hidden_size // self.num_attention_heads

    @property
    def hf_compatible(self) -> bool:
        """True when transformers' ``AlbertModel`` can represent this architecture (then ``model_type`` "albert")."""
        return (
            self.sharing in ("all", "none")
            and self.embedding_layout == "factorized"
            and self.layer_norm_position == "post"
        )

    @property
    def hf_incompatibility(self) -> str | None:
        """Why transformers cannot represent this architecture, or None."""
        reasons = []
        if self.sharing not in ("all", "none"):
            reasons.append(f"sharing={self.sharing!r} (transformers shares whole layers only)")
        if self.embedding_layout != "factorized":
            reasons.append(
                f"embedding_layout={self.embedding_layout!r} (H-wide position/type tables and "
                "word_embeddings_2 have no transformers counterpart)"
            )
        if self.layer_norm_position != "post":
            reasons.append(f"layer_norm_position={self.layer_norm_position!r} (transformers' ALBERT is post-LN)")
        return "; ".join(reasons) or None

    # ------------------------------------------------------------------ dict / JSON
    def to_dict(self) -> dict[str, Any]:
        """The ``config.json`` content: transformers' keys (id2label with string keys), litebert's, then ``extra``.

        ``model_type`` is "albert" when :attr:`hf_compatible`, else "litebert_albert".
        """
        out: dict[str, Any] = dict(self.extra)
        for f in dataclasses.fields(self):
            if f.name == "extra":
                continue
            value = getattr(self, f.name)
            if f.name == "id2label":
                value = {str(k): v for k, v in value.items()}
            elif f.name == "architectures" and value is None:
                continue
            out[f.name] = value
        out["model_type"] = HF_MODEL_TYPE if self.hf_compatible else LITEBERT_MODEL_TYPE
        return dict(sorted(out.items()))

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "<dict>") -> AlbertConfig:
        """Build from a ``config.json``-style dict; unknown keys go to :attr:`extra`.

        Raises LitebertError naming ``source`` when ``model_type`` is neither "albert" nor "litebert_albert".
        """
        if not isinstance(data, dict):
            raise LitebertError(f"{source}: expected a JSON object, got {type(data).__name__}")
        model_type = data.get("model_type", HF_MODEL_TYPE)
        if model_type not in (HF_MODEL_TYPE, LITEBERT_MODEL_TYPE):
            raise LitebertError(
                f"{source}: model_type {model_type!r} is not an ALBERT model "
                f"(expected {HF_MODEL_TYPE!r} or {LITEBERT_MODEL_TYPE!r})"
            )
        names = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        known = {k: v for k, v in data.items() if k in names}
        extra = {k: v for k, v in data.items() if k not in names and k != "model_type"}
        for key in extra:  # a misspelt field would otherwise be kept silently and its default used
            close = difflib.get_close_matches(key, names, n=1, cutoff=0.8)
            if close:
                raise LitebertError(f"{source}: unknown key {key!r}; did you mean {close[0]!r}?")
        extra.update(data.get("extra", {}) if isinstance(data.get("extra"), dict) else {})
        extra.pop("extra", None)
        if "num_labels" in data and "id2label" not in data:
            known.pop("label2id", None)
        try:
            return cls(**known, extra=extra)
        except LitebertError as exc:
            raise LitebertError(f"{source}: {exc}") from None
        except TypeError as exc:
            raise LitebertError(f"{source}: {exc}") from None

    def to_json_string(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json_file(cls, path: str | os.PathLike) -> AlbertConfig:
        """Read a ``config.json``. Raises LitebertError naming the file if it is missing or not valid JSON."""
        path = Path(path)
        if path.is_dir():
            path = path / "config.json"
        data = read_json(path, what="config file", expect=dict)
        return cls.from_dict(data, source=str(path))

    def to_json_file(self, path: str | os.PathLike) -> Path:
        """Write ``config.json`` (atomically: temporary file, then rename). Returns the path."""
        return atomic_write_text(path, self.to_json_string())

    def save(self, directory: str | os.PathLike) -> Path:
        """Write ``directory/config.json`` (creating the directory). Returns the file path."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        return self.to_json_file(directory / "config.json")

    # ------------------------------------------------------------------ presets
    @classmethod
    def from_preset(cls, name: str, **overrides: Any) -> AlbertConfig:
        """A named configuration from :data:`PRESETS`, with optional field overrides.

        Raises LitebertError listing the known names when ``name`` is unknown.
        """
        if name not in PRESETS:
            raise LitebertError(f"unknown model preset {name!r}; known presets: {', '.join(PRESETS)}")
        values = dict(PRESETS[name])
        values.update(overrides)
        return cls(**values)

    @classmethod
    def load(cls, preset_or_path: str | os.PathLike | AlbertConfig, **overrides: Any) -> AlbertConfig:
        """A preset name, a JSON file, a model directory (its ``config.json``) or an AlbertConfig (copied)."""
        if isinstance(preset_or_path, AlbertConfig):
            return preset_or_path.replace(**overrides)
        key = str(preset_or_path)
        if key in PRESETS:
            return cls.from_preset(key, **overrides)
        path = Path(key)
        if not path.exists() and not key.endswith(".json") and os.sep not in key and "/" not in key:
            raise LitebertError(f"{key!r} is neither a model preset ({', '.join(PRESETS)}) nor an existing file")
        config = cls.from_json_file(path)
        return config.replace(**overrides) if overrides else config

    def replace(self, **overrides: Any) -> AlbertConfig:
        """A validated copy with some fields changed. ``num_labels`` alone resets the label names."""
        if "num_labels" in overrides and "id2label" not in overrides:
            overrides.setdefault("id2label", None)
            overrides.setdefault("label2id", None)
        return dataclasses.replace(self, extra=dict(self.extra), **overrides)


def _v2(hidden: int, layers: int, heads: int, inter: int) -> dict[str, Any]:
    # google-research/albert v2 released configs (= transformers albert-*-v2 hub configs), all dropout 0.
    return dict(
        vocab_size=30000,
        embedding_size=128,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=inter,
        hidden_act="gelu_new",
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        classifier_dropout_prob=0.0,
        max_position_embeddings=512,
        type_vocab_size=2,
    )


def _zh(hidden: int, layers: int, heads: int, inter: int) -> dict[str, Any]:
    # brightmart/albert_zh albert_config/*.json: vocab 21128, E 128, dropout 0, TF "gelu" (= tanh approximation,
    # i.e. transformers' "gelu_new"), shared layers, post-LN; in the HF (factorized) layout of the converted models.
    return dict(
        vocab_size=21128,
        embedding_size=128,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=inter,
        hidden_act="gelu_new",
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        classifier_dropout_prob=0.0,
        max_position_embeddings=512,
        type_vocab_size=2,
    )


#: Named configurations; ``AlbertConfig.from_preset(name)``. Parameter counts are in docs/algorithms.md §1 and tests.
PRESETS: dict[str, dict[str, Any]] = {
    # tiny model for fast tests
    "albert-debug": dict(
        vocab_size=1000,
        embedding_size=32,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=128,
        max_position_embeddings=128,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        classifier_dropout_prob=0.0,
    ),
    # the seed's unit-test size (E24 H64 L6 N1 I256), full 30000 vocabulary
    "albert-unittest": dict(
        vocab_size=30000,
        embedding_size=24,
        hidden_size=64,
        num_hidden_layers=6,
        num_attention_heads=1,
        intermediate_size=256,
        max_position_embeddings=512,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        classifier_dropout_prob=0.0,
    ),
    "albert-base": _v2(768, 12, 12, 3072),
    "albert-large": _v2(1024, 24, 16, 4096),
    "albert-xlarge": _v2(2048, 24, 16, 8192),
    "albert-xxlarge": _v2(4096, 12, 64, 16384),
    "albert-zh-tiny": _zh(312, 4, 12, 1248),
    "albert-zh-small": _zh(384, 6, 12, 1536),
    "albert-zh-base": _zh(768, 12, 12, 3072),
    "albert-zh-large": _zh(1024, 24, 16, 4096),
    "albert-zh-xlarge": _zh(2048, 24, 32, 8192),
    "albert-zh-xxlarge": _zh(4096, 12, 64, 16384),
}
