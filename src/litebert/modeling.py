"""ALBERT (Lan et al. 2019, arXiv:1909.11942 §3.1) in one file, top-down: embeddings → attention → layer → layer
group → transformer → AlbertModel → heads.

Every parameter carries its Hugging Face transformers name (``model.state_dict()`` *is* an HF state dict), forward
keyword arguments and output field names follow transformers' ``modeling_albert.py``, and outputs agree with it to
1e-5 in fp32 (tests/test_modeling.py). Differences, all deliberate:

- **Masked positions only** (docs/algorithms.md §1, google-research ``run_pretraining.py`` gathers ``masked_lm_positions``): with
  ``labels``, :class:`AlbertForPreTraining`/:class:`AlbertForMaskedLM` compute vocabulary logits only where
  ``labels != -100``; ``prediction_logits``/``logits`` are then ``[P_total, V]``, rows in row-major (batch, position)
  order, aligned with ``labels[labels != -100]``. Without labels they are the full ``[B, S, V]``.
- One fused QKV matmul (the state dict still has separate ``query``/``key``/``value``), fused tanh-GELU, no
  dropout kernels when a probability is 0: the same function, fewer passes over memory.
- Dropout after the FFN output (google-research; transformers defines it but never applies it). With the released
  configs every dropout is 0, so outputs are identical.
- ``AlbertForPreTraining`` returns ``mlm_loss`` and ``sop_loss`` separately, and ``loss`` is their sum when both
  label kinds are given, or whichever one is given (transformers: only when both).
- litebert-only variants (saved with ``model_type: "litebert_albert"``): ``sharing`` "attention"/"ffn" (paper
  Table 4), ``embedding_layout: "albert_zh"`` and ``layer_norm_position: "pre"`` (brightmart/albert_zh, see
  docs/DESIGN.md "albert_zh layout").

Shape legend: B batch, S sequence, E embedding size, H hidden size, I intermediate size, nh heads, hd head size
(H / nh), V vocabulary, C choices, P_total predicted (masked) positions in the batch, L layers, G groups,
K layers per group. All float tensors are the parameters' dtype (fp32 unless the caller casts the model).
"""

from __future__ import annotations

import functools
import importlib
import itertools
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from litebert.config import AlbertConfig


def get_activation(name: str):
    """transformers' ``ACT2FN[name]`` as one fused kernel where torch has one.

    "gelu" is the exact erf GELU; "gelu_new", "gelu_fast" and "gelu_pytorch_tanh" the tanh approximation
    ``0.5x(1 + tanh(√(2/π)(x + 0.044715x³)))`` (TF ALBERT's "gelu"). Raises ValueError for other names.
    """
    if name == "gelu":
        return F.gelu
    if name in ("gelu_new", "gelu_fast", "gelu_pytorch_tanh"):
        return functools.partial(F.gelu, approximate="tanh")  # a partial, not a lambda: models stay picklable
    if name == "relu":
        return F.relu
    if name in ("silu", "swish"):
        return F.silu
    if name == "tanh":
        return torch.tanh
    if name == "quick_gelu":
        return _quick_gelu
    raise ValueError(f"unsupported activation {name!r}")


def _quick_gelu(x: torch.Tensor) -> torch.Tensor:
    return x * torch.sigmoid(1.702 * x)


def _dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    # Skips the kernel (and its mask allocation) when it would be the identity.
    return F.dropout(x, p, True) if training and p > 0 else x


# ====================================================================================================== outputs
class ModelOutput:
    """Base of the output dataclasses: attribute access, ``out["name"]``, and ``out[i]`` / ``to_tuple()`` over the
    fields that are not None (as transformers' ``ModelOutput``)."""

    def to_tuple(self) -> tuple:
        return tuple(getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None)

    def __getitem__(self, key):
        return getattr(self, key) if isinstance(key, str) else self.to_tuple()[key]

    def keys(self) -> list[str]:
        return [f.name for f in fields(self) if getattr(self, f.name) is not None]


@dataclass
class AlbertModelOutput(ModelOutput):
    """``last_hidden_state`` (B, S, H); ``pooler_output`` (B, H) or None without a pooler; ``hidden_states``: the
    mapped embeddings then every layer's output, L·K+1 tensors (B, S, H); ``attentions``: L·K tensors (B, nh, S, S)."""

    last_hidden_state: torch.Tensor | None = None
    pooler_output: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None


@dataclass
class AlbertForPreTrainingOutput(ModelOutput):
    """``loss`` = ``mlm_loss`` + ``sop_loss`` (scalars); ``prediction_logits`` (P_total, V) with labels, else
    (B, S, V); ``sop_logits`` (B, num_labels=2)."""

    loss: torch.Tensor | None = None
    prediction_logits: torch.Tensor | None = None
    sop_logits: torch.Tensor | None = None
    mlm_loss: torch.Tensor | None = None
    sop_loss: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None


@dataclass
class MaskedLMOutput(ModelOutput):
    """``loss`` scalar; ``logits`` (P_total, V) with labels, else (B, S, V)."""

    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None


@dataclass
class SequenceClassifierOutput(ModelOutput):
    """``logits`` (B, num_labels) — or (B, C) for multiple choice, (B, S, num_labels) for token classification."""

    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None


TokenClassifierOutput = SequenceClassifierOutput
MultipleChoiceModelOutput = SequenceClassifierOutput


@dataclass
class QuestionAnsweringModelOutput(ModelOutput):
    """``start_logits``, ``end_logits`` (B, S); ``loss`` the mean of the start and end cross-entropies."""

    loss: torch.Tensor | None = None
    start_logits: torch.Tensor | None = None
    end_logits: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None


# ====================================================================================================== embeddings
class AlbertEmbeddings(nn.Module):
    """Word + token-type + position embeddings, LayerNorm, dropout (docs/algorithms.md §1; HF ``AlbertEmbeddings``).

    "factorized" layout: E-wide tables and LayerNorm(E); output (B, S, E), mapped to H by the encoder.
    "albert_zh" layout: ``word_embeddings_2`` (Linear E→H, no bias) right after the lookup, H-wide position/type
    tables and LayerNorm(H); output (B, S, H) (brightmart ``embedding_lookup_factorized``).
    """

    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.zh = config.embedding_layout == "albert_zh"
        E, W = config.embedding_size, (config.hidden_size if self.zh else config.embedding_size)
        # transformers passes padding_idx (the pad row starts at 0 and gets no gradient); albert_zh (TF) has none
        self.word_embeddings = nn.Embedding(config.vocab_size, E, padding_idx=None if self.zh else config.pad_token_id)
        if self.zh:
            self.word_embeddings_2 = nn.Linear(E, W, bias=False)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, W)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, W)
        self.LayerNorm = nn.LayerNorm(W, eps=config.layer_norm_eps)
        self.dropout_prob = config.hidden_dropout_prob

    def forward(self, input_ids=None, token_type_ids=None, position_ids=None, inputs_embeds=None) -> torch.Tensor:
        """input_ids (B, S) int64 or inputs_embeds (B, S, E) → (B, S, E) factorized / (B, S, H) albert_zh."""
        if inputs_embeds is not None and inputs_embeds.shape[-1] != self.word_embeddings.embedding_dim:
            raise ValueError(
                f"inputs_embeds has shape {list(inputs_embeds.shape)}; it must be (B, S, embedding_size="
                f"{self.word_embeddings.embedding_dim}) wide: it stands for the word-embedding lookup, "
                f"which ALBERT projects to hidden_size only after the embeddings"
            )
        x = self.word_embeddings(input_ids) if inputs_embeds is None else inputs_embeds  # (B, S, E)
        S = x.shape[1]
        if self.position_embeddings.num_embeddings < S:
            raise ValueError(
                f"sequence length {S} exceeds max_position_embeddings {self.position_embeddings.num_embeddings}"
            )
        if self.zh:
            x = self.word_embeddings_2(x)  # (B, S, E) -> (B, S, H)
        # type then position, as TF and transformers; the defaults broadcast a table slice instead of a lookup
        if token_type_ids is None:
            x = x + self.token_type_embeddings.weight[0]
        else:
            x = x + self.token_type_embeddings(token_type_ids)
        if position_ids is None:
            x = x + self.position_embeddings.weight[:S]
        else:
            x = x + self.position_embeddings(position_ids)
        return _dropout(self.LayerNorm(x), self.dropout_prob, self.training)


# ====================================================================================================== unpadding
class Unpadded:
    """Where the T real tokens of a padded (B, S) batch are, so that every per-token op (QKV, output projection,
    FFN, LayerNorm, dropout) runs on (T, ·) rows and only attention sees the padded (B, S) layout (MosaicBERT's
    ``bert_padding``, Portes et al. 2023; docs/algorithms.md §1). ``index`` (T,) int64: the real positions in the
    flattened B·S, row-major (batch, position) order."""

    def __init__(self, index: torch.Tensor, batch: int, seq: int):
        self.index, self.batch, self.seq = index, batch, seq

    def unpad(self, t: torch.Tensor) -> torch.Tensor:
        """t (B, S, D) → (T, D)."""
        return t.reshape(-1, t.shape[-1]).index_select(0, self.index)

    def pad(self, t: torch.Tensor) -> torch.Tensor:
        """t (T, D) → (B, S, D), zeros at the padded positions (gradients flow to ``t`` only)."""
        out = t.new_zeros(self.batch * self.seq, t.shape[-1]).index_copy(0, self.index, t)  # (B·S, D)
        return out.view(self.batch, self.seq, -1)


# ====================================================================================================== attention
class AlbertAttention(nn.Module):
    """Multi-head self-attention with its output projection, residual and LayerNorm (HF ``AlbertAttention``).

    post-LN: ``LayerNorm(x + dropout(dense(attn(x))))``; pre-LN: ``x + dropout(dense(attn(LayerNorm(x))))``.
    The padding mask applies to keys only (padded queries still compute; their outputs are ignored).
    """

    def __init__(self, config: AlbertConfig):
        super().__init__()
        H = config.hidden_size
        self.num_heads, self.head_size = config.num_attention_heads, config.head_size
        self.query, self.key, self.value = nn.Linear(H, H), nn.Linear(H, H), nn.Linear(H, H)
        self.dense = nn.Linear(H, H)
        self.LayerNorm = nn.LayerNorm(H, eps=config.layer_norm_eps)
        self.pre_ln = config.layer_norm_position == "pre"
        self.attn_dropout, self.dropout_prob = config.attention_probs_dropout_prob, config.hidden_dropout_prob
        self.qkv: nn.Linear | None = None  # set by fuse_qkv() for inference

    def fuse_qkv(self) -> None:
        """Inference only: replace ``query``/``key``/``value`` by one ``qkv`` Linear(H, 3H) holding their stacked
        weights, so that Linear-level tools (``torch.ao.quantization.quantize_dynamic``) see one layer and no
        concatenation runs per forward. The state dict then no longer has transformers' names; training must not
        follow."""
        if self.qkv is not None:
            return
        w, b = self.fused_qkv()
        H = self.query.in_features
        self.qkv = nn.Linear(H, 3 * H).to(device=w.device, dtype=w.dtype)
        with torch.no_grad():
            self.qkv.weight.copy_(w)
            self.qkv.bias.copy_(b)
        self.query = self.key = self.value = None

    def fused_qkv(self, cache: dict | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(W (3H, H), b (3H,)): query, key and value stacked for one matmul. They are concatenated at forward time
        so that the gradients reach the three HF-named parameters; ``cache`` (one dict per model forward) makes a
        layer shared across L applications concatenate once instead of L times."""
        if cache is not None and id(self) in cache:
            return cache[id(self)]
        w = torch.cat((self.query.weight, self.key.weight, self.value.weight))  # 3 × (H, H) -> (3H, H)
        b = torch.cat((self.query.bias, self.key.bias, self.value.bias))  # (3H,)
        if cache is not None:
            cache[id(self)] = (w, b)
        return w, b

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        output_attentions: bool = False,
        cache: dict | None = None,
        first_only: bool = False,
        unpadded: Unpadded | None = None,
    ):
        """x (B, S, H); mask None or additive (B, 1, 1, S) float → ((B, S, H), probs (B, nh, S, S) or None).

        ``first_only`` (inference): only position 0 ([CLS]) queries, attending to every key → ((B, 1, H),
        probs (B, nh, 1, S) or None): the pooler's input, the output projection (and the layer's FFN) run for one
        position; the QKV projection still runs for all S (keys and values).

        ``unpadded``: x is (T, H), the real tokens only (:class:`Unpadded`); the projections run on (T, ·) and
        q, k, v are re-padded to (B, nh, S, hd) for attention only → ((T, H), probs). With ``first_only`` x is
        re-padded first and the result is (B, 1, H)."""
        if unpadded is not None and first_only:
            x, unpadded = unpadded.pad(x), None  # (T, H) -> (B, S, H)
        H = x.shape[-1]
        h = self.LayerNorm(x) if self.pre_ln else x
        if self.qkv is not None:
            qkv = self.qkv(h)
        else:
            w, b = self.fused_qkv(cache)
            qkv = F.linear(h, w, b)
        if unpadded is not None:
            qkv = unpadded.pad(qkv)  # (T, 3H) -> (B, S, 3H)
        B, S = qkv.shape[:2]
        qkv = qkv.view(B, S, 3, self.num_heads, self.head_size)  # (B, S, 3H) -> (B, S, 3, nh, hd)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)  # 3 × (B, nh, S, hd)
        if first_only:
            x, q, S = x[:, :1], q[:, :, :1], 1  # queries (B, nh, 1, hd); keys and values keep all S positions
        p_drop = self.attn_dropout if self.training else 0.0
        if output_attentions:  # explicit softmax so the probabilities can be returned
            scores = (q @ k.transpose(-1, -2)) / math.sqrt(self.head_size)  # (B, nh, S, S)
            # fp32 probabilities under bf16/fp16 autocast (SDPA's fused kernels accumulate in fp32 too)
            probs = torch.softmax(scores if mask is None else scores + mask, dim=-1, dtype=torch.float32)
            ctx = _dropout(probs, p_drop, self.training).to(v.dtype) @ v
        else:
            probs = None
            ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p_drop)  # (B, nh, S, hd)
        ctx = ctx.transpose(1, 2).reshape(B, S, H)  # (B, nh, S, hd) -> (B, S, H)
        if unpadded is not None:
            ctx = unpadded.unpad(ctx)  # (B, S, H) -> (T, H)
        out = _dropout(self.dense(ctx), self.dropout_prob, self.training)
        return (x + out if self.pre_ln else self.LayerNorm(x + out)), probs


# ====================================================================================================== layer
class AlbertLayer(nn.Module):
    """Attention block then FFN block (HF ``AlbertLayer``; docs/algorithms.md §1).

    post-LN: ``a = attention(x)``; ``y = full_layer_layer_norm(a + dropout(ffn_output(act(ffn(a)))))``.
    pre-LN: ``y = a + dropout(ffn_output(act(ffn(full_layer_layer_norm(a)))))``.
    """

    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.full_layer_layer_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.attention = AlbertAttention(config)
        self.ffn = nn.Linear(config.hidden_size, config.intermediate_size)
        self.ffn_output = nn.Linear(config.intermediate_size, config.hidden_size)
        self.activation = get_activation(config.hidden_act)
        self.pre_ln = config.layer_norm_position == "pre"
        self.dropout_prob = config.hidden_dropout_prob

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        output_attentions: bool = False,
        cache: dict | None = None,
        first_only: bool = False,
        unpadded: Unpadded | None = None,
    ):
        """x (B, S, H) → ((B, S, H), attention probs or None); ``first_only``: position 0 only, (B, 1, H);
        ``unpadded``: x and the result are (T, H) (:meth:`AlbertAttention.forward`)."""
        a, probs = self.attention(x, mask, output_attentions, cache, first_only, unpadded)
        h = self.full_layer_layer_norm(a) if self.pre_ln else a
        f = self.ffn_output(self.activation(self.ffn(h)))  # (B, S, H) -> (B, S, I) -> (B, S, H)
        f = _dropout(f, self.dropout_prob, self.training)
        return (a + f if self.pre_ln else self.full_layer_layer_norm(a + f)), probs


class AlbertLayerGroup(nn.Module):
    """K = ``inner_group_num`` layers applied in order at every use of the group (HF ``AlbertLayerGroup``)."""

    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.albert_layers = nn.ModuleList([AlbertLayer(config) for _ in range(config.inner_group_num)])

    def forward(
        self,
        x,
        mask=None,
        all_hidden: list | None = None,
        all_attn: list | None = None,
        cache: dict | None = None,
        repeats: int = 1,
        first_only_last: bool = False,
        unpadded: Unpadded | None = None,
    ):
        """x (B, S, H) → (B, S, H): the K layers, ``repeats`` times over (the consecutive layer uses of a shared
        group run in one call, so a sharded group is gathered once per forward); appends each layer's output /
        attention probs to the lists when given. ``first_only_last``: the last layer computes position 0 only
        → (B, 1, H). ``unpadded``: x is (T, H) (:class:`Unpadded`), and so is the result (unless
        ``first_only_last``); the hidden states appended are re-padded to (B, S, H)."""
        n = repeats * len(self.albert_layers)
        for r in range(repeats):
            for k, layer in enumerate(self.albert_layers):
                last = first_only_last and r * len(self.albert_layers) + k == n - 1
                x, probs = layer(x, mask, all_attn is not None, cache, last, unpadded)
                if all_hidden is not None:
                    all_hidden.append(unpadded.pad(x) if unpadded is not None and x.dim() == 2 else x)
                if all_attn is not None:
                    all_attn.append(probs)
        return x


# ====================================================================================================== transformer
class AlbertTransformer(nn.Module):
    """``embedding_hidden_mapping_in`` (E→H, factorized layout only), then L layer applications over the groups.

    sharing "all"/"none": G groups; layer l runs group ``int(l / (L / G))`` (HF's formula, float division).
    sharing "attention"/"ffn": L physical groups (one per layer) whose attention (resp. FFN: ``ffn``,
    ``ffn_output``, ``full_layer_layer_norm``) modules are *the same objects* across the layers of each of the G
    sharing groups; the state dict then lists a shared tensor under every layer's name, and the saved file once.
    """

    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.config = config
        if config.embedding_layout == "factorized":
            self.embedding_hidden_mapping_in = nn.Linear(config.embedding_size, config.hidden_size)
        L, G = config.num_hidden_layers, config.num_hidden_groups
        self.sharing_group = [int(l / (L / G)) for l in range(L)]  # layer -> sharing group
        partial = config.sharing in ("attention", "ffn")
        self.albert_layer_groups = nn.ModuleList([AlbertLayerGroup(config) for _ in range(L if partial else G)])
        self.physical_group = list(range(L)) if partial else self.sharing_group  # layer -> module index
        # (module index, consecutive layers it runs): HF's formula gives each group a run of L / G layers
        self.group_runs = [(g, len(list(run))) for g, run in itertools.groupby(self.physical_group)]
        if partial:
            shared = ("attention",) if config.sharing == "attention" else ("ffn", "ffn_output", "full_layer_layer_norm")
            first_layer_of: dict[int, int] = {}
            for l, g in enumerate(self.sharing_group):
                first_layer_of.setdefault(g, l)
                src = self.albert_layer_groups[first_layer_of[g]].albert_layers
                for k, layer in enumerate(self.albert_layer_groups[l].albert_layers):
                    for name in shared:
                        setattr(layer, name, getattr(src[k], name))

    def forward(
        self, x, mask=None, output_hidden_states=False, output_attentions=False, pooled_only=False, unpadded=None
    ):
        """x (B, S, E) factorized / (B, S, H) albert_zh → (last (B, S, H), hidden_states | None, attentions | None).

        ``pooled_only`` (inference): the last layer computes position 0 only, so ``last`` is (B, 1, H).
        ``unpadded`` (:class:`Unpadded`): x is (T, E) / (T, H), the real tokens only; every layer runs on them
        and ``last`` is re-padded to (B, S, H) with zeros at the padded positions."""
        if hasattr(self, "embedding_hidden_mapping_in"):
            x = self.embedding_hidden_mapping_in(x)  # (B, S, E) -> (B, S, H)  [unpadded: (T, E) -> (T, H)]
        all_hidden = None
        if output_hidden_states:
            all_hidden = [unpadded.pad(x) if unpadded is not None else x]
        all_attn = [] if output_attentions else None
        cache: dict = {}  # fused QKV weights, built once per forward for each distinct attention module
        for i, (g, repeats) in enumerate(self.group_runs):  # = for layer l: group physical_group[l]
            last_run = pooled_only and i == len(self.group_runs) - 1
            x = self.albert_layer_groups[g](x, mask, all_hidden, all_attn, cache, repeats, last_run, unpadded)
        if unpadded is not None and x.dim() == 2:
            x = all_hidden[-1] if all_hidden is not None else unpadded.pad(x)  # (T, H) -> (B, S, H)
        return (
            x,
            tuple(all_hidden) if all_hidden is not None else None,
            tuple(all_attn) if all_attn is not None else None,
        )


# ====================================================================================================== base class
# Model directories (config.json + safetensors) are read and written by litebert.checkpoint, which sits above this
# module: it imports the model's config and installs its two functions here when it is imported. The model file thus
# imports no file-format code, and the arrow stays checkpoint -> modeling; the first from_pretrained/save_pretrained
# loads litebert.checkpoint by name if nothing has imported it yet (`import litebert` no longer does: it imports no
# torch, see litebert/lazy.py). The methods below keep transformers' `Cls.from_pretrained` / `model.save_pretrained`.
_MODEL_DIR_IO: dict[str, Callable[..., Any]] = {}


def register_model_dir_io(load: Callable[..., Any], save: Callable[..., Any]) -> None:
    """Install the functions behind :meth:`AlbertPreTrainedModel.from_pretrained` (``load(cls, path, config=...,
    ignore_mismatched_sizes=..., **overrides)``) and :meth:`~AlbertPreTrainedModel.save_pretrained`
    (``save(model, directory, hf=...)``); :mod:`litebert.checkpoint` calls it on import."""
    _MODEL_DIR_IO.update(load=load, save=save)


def _model_dir_io(name: str) -> Callable[..., Any]:
    if name not in _MODEL_DIR_IO:
        importlib.import_module("litebert.checkpoint")  # installs them (register_model_dir_io) as it is imported
    return _MODEL_DIR_IO[name]


class AlbertPreTrainedModel(nn.Module):
    """Base of every ALBERT model: ``config``, transformers' init, ``from_pretrained``/``save_pretrained``,
    ``num_parameters``."""

    base_model_prefix = "albert"

    def __init__(self, config: AlbertConfig):
        super().__init__()
        if not isinstance(config, AlbertConfig):
            raise TypeError(
                f"config must be an AlbertConfig, got {type(config).__name__} (use AlbertConfig.load(preset_or_path))"
            )
        self.config = config

    def post_init(self) -> None:
        """Initialise every weight as transformers does (normal(0, initializer_range) for Linear and Embedding
        weights, zero biases and padding row, LayerNorm 1/0, MLM bias 0), then tie the decoder."""
        self.apply(self._init_weights)
        self.tie_weights()

    def _init_weights(self, module: nn.Module) -> None:
        std = self.config.initializer_range
        with torch.no_grad():
            if isinstance(module, nn.Linear):
                module.weight.normal_(0.0, std)
                if module.bias is not None:
                    module.bias.zero_()
            elif isinstance(module, nn.Embedding):
                module.weight.normal_(0.0, std)
                if module.padding_idx is not None:
                    module.weight[module.padding_idx].zero_()
            elif isinstance(module, nn.LayerNorm):
                module.weight.fill_(1.0)
                module.bias.zero_()
            elif isinstance(module, AlbertMLMHead):
                module.bias.zero_()

    def tie_weights(self) -> None:
        """Make ``predictions.decoder`` use the word-embedding table and ``predictions.bias`` (HF's tying)."""
        head = getattr(self, "predictions", None)
        if head is not None:
            head.decoder.weight = self.albert.embeddings.word_embeddings.weight
            head.decoder.bias = head.bias

    def num_parameters(self, only_trainable: bool = False) -> int:
        """Number of distinct parameter elements (tied and shared tensors counted once)."""
        return sum(p.numel() for p in self.parameters() if p.requires_grad or not only_trainable)

    @classmethod
    def from_pretrained(
        cls,
        path: str | os.PathLike,
        config: AlbertConfig | str | None = None,
        ignore_mismatched_sizes: bool = False,
        **config_overrides: Any,
    ):
        """Load a model directory (``config.json`` + ``model.safetensors`` or ``pytorch_model.bin``), written by
        litebert or transformers, into this class. Weights missing from the directory (a new task head, say) keep
        their fresh init and are logged as a warning; keys of other heads are ignored. ``config_overrides``
        (``num_labels=3``, ``problem_type=...``) replace config fields.

        Raises LitebertError naming the file (and the parameter) for a missing/invalid config, missing/corrupt
        weights, or a shape mismatch (unless ``ignore_mismatched_sizes``: then those weights are re-initialised).
        """
        return _model_dir_io("load")(
            cls, path, config=config, ignore_mismatched_sizes=ignore_mismatched_sizes, **config_overrides
        )

    def save_pretrained(self, directory: str | os.PathLike, hf: bool | None = None):
        """Write ``config.json`` and ``model.safetensors`` (tied/shared tensors once) atomically; returns the path.

        ``hf`` None: transformers' format when it can represent the model, else ``model_type: "litebert_albert"``.
        ``hf=True`` raises LitebertError for a litebert-only architecture, saying why.
        """
        return _model_dir_io("save")(self, directory, hf=hf)

    def _run_albert(
        self,
        input_ids,
        attention_mask,
        token_type_ids,
        position_ids,
        inputs_embeds,
        output_hidden_states,
        output_attentions,
        pooled_only=False,
        unpad_indices=None,
    ) -> AlbertModelOutput:
        return self.albert(
            input_ids=input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            output_hidden_states=output_hidden_states,
            output_attentions=output_attentions,
            pooled_only=pooled_only,
            unpad_indices=unpad_indices,
        )


# ====================================================================================================== AlbertModel
class AlbertModel(AlbertPreTrainedModel):
    """Embeddings → transformer → pooler ``tanh(Linear(H, H)(h[:, 0]))`` (HF ``AlbertModel``; docs/algorithms.md §1)."""

    def __init__(self, config: AlbertConfig, add_pooling_layer: bool = True):
        super().__init__(config)
        self.embeddings = AlbertEmbeddings(config)
        self.encoder = AlbertTransformer(config)
        if add_pooling_layer:
            self.pooler = nn.Linear(config.hidden_size, config.hidden_size)
            self.pooler_activation = nn.Tanh()
        else:
            self.pooler = None
            self.pooler_activation = None
        #: run the layers on the real tokens only when an attention_mask is given (:meth:`unpadding`); off by
        #: default, see :func:`set_unpad`
        self.unpad = False
        self.post_init()

    def get_input_embeddings(self) -> nn.Embedding:
        return self.embeddings.word_embeddings

    @staticmethod
    def additive_mask(attention_mask: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
        """attention_mask (B, S), 1 = token, 0 = padding → additive key mask (B, 1, 1, S) (0 or dtype's minimum),
        or None when nothing is padded (lets SDPA take its unmasked path). That check is made on CPU in eager mode
        only: on a GPU it would be a host-device sync in every forward, under ``torch.compile`` a graph break, and
        under tracing or export the graph must not depend on whether the example batch had padding."""
        if attention_mask is None:
            return None
        if (
            attention_mask.device.type == "cpu"
            and not (torch.jit.is_tracing() or torch.compiler.is_compiling())
            and bool(attention_mask.bool().all())
        ):
            return None
        keep = attention_mask.bool()[:, None, None, :]  # (B, S) -> (B, 1, 1, S)
        return torch.zeros(keep.shape, dtype=dtype, device=keep.device).masked_fill_(~keep, torch.finfo(dtype).min)

    def unpadding(
        self, attention_mask: torch.Tensor | None, unpad_indices: torch.Tensor | None = None
    ) -> Unpadded | None:
        """The :class:`Unpadded` of ``attention_mask`` (B, S) when :attr:`unpad` is on, else None.

        ``unpad_indices`` (T,) int64: the flat positions of the real tokens, ``attention_mask.reshape(-1)
        .nonzero()`` computed by whoever made the batch (the pretraining collator, on the host); without them
        they are computed here, and ``nonzero`` has a data-dependent size: on a GPU it waits for the mask to be
        on the device (a sync per forward). In eager mode a batch without padding (T = B·S) gets None: nothing
        to skip. Under ``torch.compile`` T is a dynamic size (``capture_dynamic_output_shape_ops``, set by
        ``training.distributed.compile_model``), so one graph serves every T; CUDA graphs need static shapes,
        so unpadding must stay off there."""
        if not self.unpad or attention_mask is None:
            return None
        B, S = attention_mask.shape
        if unpad_indices is not None:
            index = unpad_indices  # (T,) given: no data-dependent op on the device
        else:
            index = attention_mask.reshape(-1).nonzero().squeeze(1)  # (T,) real positions of the flat (B·S)
        if not torch.compiler.is_compiling() and index.shape[0] == B * S:
            return None
        return Unpadded(index, B, S)

    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        token_type_ids=None,
        position_ids=None,
        inputs_embeds=None,
        output_hidden_states=False,
        output_attentions=False,
        return_dict=True,
        pooled_only=False,
        unpad_indices=None,
    ):
        """input_ids (B, S) int64 (or inputs_embeds (B, S, E)); attention_mask (B, S) 1/0; token_type_ids (B, S);
        position_ids (B, S) (default 0..S−1) → :class:`AlbertModelOutput` (or its tuple if not return_dict).
        ``unpad_indices`` (T,) int64 or None: the real tokens' flat positions when unpadding (:meth:`unpadding`).

        ``pooled_only`` (inference for heads that read only ``pooler_output``, litebert.inference): the last layer
        computes position 0 only (the one the pooler reads): about three quarters of one layer's matmuls less, all
        but the QKV projection; ``last_hidden_state``
        (and the last of ``hidden_states``) is then (B, 1, H). ``pooler_output`` is unchanged up to float rounding.

        With :attr:`unpad` on (:func:`set_unpad`) and an ``attention_mask``, the layers run on the T real tokens
        only (:class:`Unpadded`): the same function at the real positions (to float rounding; with dropout, other
        random draws), ``last_hidden_state`` and ``hidden_states`` are 0 at the padded positions (the padded path
        leaves values there that nothing reads).

        Raises ValueError unless exactly one of input_ids / inputs_embeds is given, when inputs_embeds is not
        ``embedding_size`` (E) wide, or when S exceeds ``max_position_embeddings``.
        """
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("give exactly one of input_ids or inputs_embeds")
        x = self.embeddings(input_ids, token_type_ids, position_ids, inputs_embeds)
        mask = self.additive_mask(attention_mask, x.dtype)
        unpadded = self.unpadding(attention_mask, unpad_indices)
        if unpadded is not None:
            x = unpadded.unpad(x)  # (B, S, E) -> (T, E)
        h, hidden, attn = self.encoder(x, mask, output_hidden_states, output_attentions, pooled_only, unpadded)
        pooled = self.pooler_activation(self.pooler(h[:, 0])) if self.pooler is not None else None  # (B, H)
        out = AlbertModelOutput(last_hidden_state=h, pooler_output=pooled, hidden_states=hidden, attentions=attn)
        return out if return_dict else out.to_tuple()


def set_unpad(model: nn.Module, enabled: bool) -> int:
    """Turn unpadding (:meth:`AlbertModel.unpadding`) on or off in every :class:`AlbertModel` inside ``model``
    (a wrapper, a compiled or DDP module included); returns how many were set. Parameters and the state dict do
    not change."""
    n = 0
    for m in model.modules():
        if isinstance(m, AlbertModel):
            m.unpad = bool(enabled)
            n += 1
    return n


# ====================================================================================================== heads
class AlbertMLMHead(nn.Module):
    """MLM head (``predictions``): ``dense`` H→E, act, ``LayerNorm(E)``, ``decoder`` E→V tied to the word
    embeddings, plus ``bias`` [V] (= ``decoder.bias``). albert_zh layout: ``dense`` H→H, LayerNorm(H), then ×W2ᵀ
    (H→E, ``word_embeddings_2`` transposed) before the decoder (brightmart ``get_masked_lm_output``)."""

    def __init__(self, config: AlbertConfig):
        super().__init__()
        W = config.hidden_size if config.embedding_layout == "albert_zh" else config.embedding_size
        self.LayerNorm = nn.LayerNorm(W, eps=config.layer_norm_eps)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))
        self.dense = nn.Linear(config.hidden_size, W)
        self.decoder = nn.Linear(config.embedding_size, config.vocab_size)  # weight and bias tied by tie_weights()
        self.activation = get_activation(config.hidden_act)

    def forward(self, h: torch.Tensor, projection: torch.Tensor | None = None) -> torch.Tensor:
        """h (..., H) → logits (..., V); ``projection`` = ``word_embeddings_2.weight`` (H, E) for albert_zh."""
        h = self.LayerNorm(self.activation(self.dense(h)))  # (..., H) -> (..., E) [albert_zh: (..., H)]
        if projection is not None:
            h = h @ projection  # (..., H) @ (H, E) -> (..., E)
        return F.linear(h, self.decoder.weight, self.bias)  # (..., E) -> (..., V)


class AlbertSOPHead(nn.Module):
    """Sentence-order head (``sop_classifier``): dropout then Linear(H, num_labels) on the pooled output."""

    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.dropout_prob = _classifier_dropout(config)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)

    def forward(self, pooled: torch.Tensor) -> torch.Tensor:
        """pooled (B, H) → logits (B, num_labels)."""
        return self.classifier(_dropout(pooled, self.dropout_prob, self.training))


def _classifier_dropout(config: AlbertConfig) -> float:
    p = config.classifier_dropout_prob
    return config.hidden_dropout_prob if p is None else p


class _MaskedLMMixin:
    """Shared by the two MLM models: vocabulary logits at the predicted positions only when labels (or
    ``masked_positions``) are given."""

    def _mlm(self, h: torch.Tensor, labels: torch.Tensor | None, masked_positions: torch.Tensor | None = None):
        """h (B, S, H), labels (B, S) or None → (logits (P_total, V) or (B, S, V), mean CE loss or None).

        ``masked_positions`` (B, P) int64 (static shapes, e.g. CUDA graphs): the positions to predict, padded
        with slots whose label (``labels.gather(1, masked_positions)``) is −100 (position 0, [CLS], serves); the
        logits are then (B·P, V) in row-major (b, p) order, pad slots included, and the loss is the mean CE over
        the slots whose label is not −100 — the same value as without it, with no data-dependent size. Without
        labels: the logits only (a caller that computes its own loss, as pretraining its summed CE, then pays for
        no cross-entropy here).

        With no predicted position in the batch the loss is 0 (with a graph), not NaN. The number of predicted
        positions is data-dependent (``nonzero``): under ``torch.compile`` it needs
        ``torch._dynamo.config.capture_dynamic_output_shape_ops`` (set by ``training.distributed.compile_model``),
        which keeps it in the graph as a dynamic size instead of a graph break and a recompile per count.
        """
        projection = self.albert.embeddings.word_embeddings_2.weight if self.albert.embeddings.zh else None
        if masked_positions is not None:
            B, S = h.shape[:2]
            if masked_positions.dim() != 2 or masked_positions.shape[0] != B:
                raise ValueError(f"masked_positions has shape {list(masked_positions.shape)}, expected ({B}, P)")
            flat = (masked_positions + torch.arange(B, device=h.device)[:, None] * S).reshape(-1)  # (B·P,)
            rows = h.reshape(-1, h.shape[-1]).index_select(0, flat)  # (B·S, H) -> (B·P, H)
            logits = self.predictions(rows, projection)  # (B·P, V)
            if labels is None:
                return logits, None
            target = labels.gather(1, masked_positions).reshape(-1)  # (B·P,), -100 at pad slots
            loss = F.cross_entropy(logits, target, ignore_index=-100, reduction="sum") / (target != -100).sum().clamp(
                min=1
            )
            return logits, loss
        if labels is None:
            return self.predictions(h, projection), None
        if labels.shape != h.shape[:-1]:  # a flat gather would silently pair labels with the wrong positions
            raise ValueError(
                f"labels have shape {list(labels.shape)}, expected {list(h.shape[:-1])} (B, S) like input_ids"
            )
        flat = labels.reshape(-1)
        keep = flat != -100  # (B·S,)
        idx = keep.nonzero().squeeze(1)  # (P_total,), row-major (batch, position) order
        rows = h.reshape(-1, h.shape[-1]).index_select(0, idx)  # (B·S, H) -> (P_total, H)
        logits = self.predictions(rows, projection)  # (P_total, V)
        # mean CE over P_total without a Python branch on P_total (0 positions: 0 / 1 = 0)
        loss = F.cross_entropy(logits, flat.index_select(0, idx), reduction="sum") / keep.sum().clamp(min=1)
        return logits, loss


class AlbertForPreTraining(_MaskedLMMixin, AlbertPreTrainedModel):
    """AlbertModel + MLM head (``predictions``) + SOP head (``sop_classifier``) (paper §3.2; HF
    ``AlbertForPreTraining``)."""

    def __init__(self, config: AlbertConfig):
        super().__init__(config)
        self.albert = AlbertModel(config)
        self.predictions = AlbertMLMHead(config)
        self.sop_classifier = AlbertSOPHead(config)
        self.post_init()

    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        token_type_ids=None,
        position_ids=None,
        inputs_embeds=None,
        labels=None,
        sentence_order_label=None,
        output_hidden_states=False,
        output_attentions=False,
        return_dict=True,
        masked_positions=None,
        unpad_indices=None,
    ):
        """Inputs as :meth:`AlbertModel.forward` (``unpad_indices`` too); labels (B, S) int64 with −100 = not predicted;
        sentence_order_label (B,) 0 = in order, 1 = swapped; masked_positions (B, P) int64 or None: static-shape
        gather of the predicted positions (:meth:`_MaskedLMMixin._mlm`; ``prediction_logits`` then (B·P, V), with
        no ``mlm_loss`` when labels are not given).

        Returns :class:`AlbertForPreTrainingOutput`: ``prediction_logits`` (P_total, V) at ``labels != -100`` in
        row-major (batch, position) order (aligned with ``labels[labels != -100]``) when labels are given, else
        (B, S, V); ``sop_logits`` (B, 2); ``mlm_loss`` = mean CE over predicted tokens; ``sop_loss`` = mean CE over
        the batch; ``loss`` = their sum (or the one available).
        """
        out = self._run_albert(
            input_ids,
            attention_mask,
            token_type_ids,
            position_ids,
            inputs_embeds,
            output_hidden_states,
            output_attentions,
            unpad_indices=unpad_indices,
        )
        prediction_logits, mlm_loss = self._mlm(out.last_hidden_state, labels, masked_positions)
        sop_logits = self.sop_classifier(out.pooler_output)
        sop_loss = None
        if sentence_order_label is not None:
            sop_loss = F.cross_entropy(sop_logits.view(-1, sop_logits.shape[-1]), sentence_order_label.view(-1))
        losses = [x for x in (mlm_loss, sop_loss) if x is not None]
        loss = (losses[0] + losses[1] if len(losses) == 2 else losses[0]) if losses else None
        res = AlbertForPreTrainingOutput(
            loss, prediction_logits, sop_logits, mlm_loss, sop_loss, out.hidden_states, out.attentions
        )
        return res if return_dict else res.to_tuple()


class AlbertForMaskedLM(_MaskedLMMixin, AlbertPreTrainedModel):
    """AlbertModel without pooler + MLM head (HF ``AlbertForMaskedLM``)."""

    def __init__(self, config: AlbertConfig):
        super().__init__(config)
        self.albert = AlbertModel(config, add_pooling_layer=False)
        self.predictions = AlbertMLMHead(config)
        self.post_init()

    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        token_type_ids=None,
        position_ids=None,
        inputs_embeds=None,
        labels=None,
        output_hidden_states=False,
        output_attentions=False,
        return_dict=True,
        masked_positions=None,
        unpad_indices=None,
    ):
        """→ :class:`MaskedLMOutput`: ``logits`` (P_total, V) at ``labels != -100`` (row-major order) when labels
        are given, else (B, S, V); ``loss`` mean CE over predicted tokens. ``masked_positions`` (B, P): as
        :meth:`AlbertForPreTraining.forward` (``logits`` (B·P, V); no ``loss`` without labels); ``unpad_indices`` (T,): as
        :meth:`AlbertModel.forward`."""
        out = self._run_albert(
            input_ids,
            attention_mask,
            token_type_ids,
            position_ids,
            inputs_embeds,
            output_hidden_states,
            output_attentions,
            unpad_indices=unpad_indices,
        )
        logits, loss = self._mlm(out.last_hidden_state, labels, masked_positions)
        res = MaskedLMOutput(loss, logits, out.hidden_states, out.attentions)
        return res if return_dict else res.to_tuple()


class AlbertForSequenceClassification(AlbertPreTrainedModel):
    """Pooled output → dropout → ``classifier`` Linear(H, num_labels) (HF ``AlbertForSequenceClassification``).

    Loss by ``config.problem_type`` (inferred at the first call with labels as transformers does, and stored in the
    config): "regression" MSE (num_labels 1: on squeezed logits), "single_label_classification" cross-entropy
    (int labels), "multi_label_classification" BCE-with-logits (float multi-hot labels (B, num_labels)).
    """

    def __init__(self, config: AlbertConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.albert = AlbertModel(config)
        self.dropout_prob = _classifier_dropout(config)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        token_type_ids=None,
        position_ids=None,
        inputs_embeds=None,
        labels=None,
        output_hidden_states=False,
        output_attentions=False,
        return_dict=True,
        pooled_only=False,
    ):
        """→ :class:`SequenceClassifierOutput` with ``logits`` (B, num_labels); ``pooled_only``: see
        :meth:`AlbertModel.forward` (the logits do not change). Under autocast a regression head (``problem_type``
        "regression", or num_labels 1) runs in fp32, so its logits are fp32."""
        out = self._run_albert(
            input_ids,
            attention_mask,
            token_type_ids,
            position_ids,
            inputs_embeds,
            output_hidden_states,
            output_attentions,
            pooled_only,
        )
        pooled = _dropout(out.pooler_output, self.dropout_prob, self.training)  # (B, H)
        regression = self.config.problem_type == "regression" or (
            self.config.problem_type is None and self.num_labels == 1
        )
        if regression and torch.is_autocast_enabled(pooled.device.type):
            # a regression head's output is the prediction itself: bf16 autocast would round it to 3 significant
            # digits (an STS-B score in [4, 5] to 0.03; Pearson/Spearman then see ties), so it runs in fp32
            with torch.autocast(pooled.device.type, enabled=False):
                logits = self.classifier(pooled.float())  # (B, num_labels) fp32
        else:
            logits = self.classifier(pooled)  # (B, num_labels)
        loss = None
        if labels is not None:
            if self.config.problem_type is None:
                if self.num_labels == 1:
                    self.config.problem_type = "regression"
                elif labels.dtype in (torch.long, torch.int):
                    self.config.problem_type = "single_label_classification"
                else:
                    self.config.problem_type = "multi_label_classification"
            if self.config.problem_type == "regression":
                if self.num_labels == 1:
                    loss = F.mse_loss(logits.squeeze(), labels.squeeze().to(logits.dtype))
                else:
                    loss = F.mse_loss(logits, labels.to(logits.dtype))
            elif self.config.problem_type == "single_label_classification":
                loss = F.cross_entropy(logits.view(-1, self.num_labels), labels.view(-1))
            else:
                loss = F.binary_cross_entropy_with_logits(logits, labels.to(logits.dtype))
        res = SequenceClassifierOutput(loss, logits, out.hidden_states, out.attentions)
        return res if return_dict else res.to_tuple()


class AlbertForTokenClassification(AlbertPreTrainedModel):
    """Every position → dropout → ``classifier`` Linear(H, num_labels) (HF ``AlbertForTokenClassification``);
    loss cross-entropy ignoring −100."""

    def __init__(self, config: AlbertConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.albert = AlbertModel(config, add_pooling_layer=False)
        self.dropout_prob = _classifier_dropout(config)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        token_type_ids=None,
        position_ids=None,
        inputs_embeds=None,
        labels=None,
        output_hidden_states=False,
        output_attentions=False,
        return_dict=True,
    ):
        """→ :class:`TokenClassifierOutput` with ``logits`` (B, S, num_labels); labels (B, S)."""
        out = self._run_albert(
            input_ids,
            attention_mask,
            token_type_ids,
            position_ids,
            inputs_embeds,
            output_hidden_states,
            output_attentions,
        )
        logits = self.classifier(_dropout(out.last_hidden_state, self.dropout_prob, self.training))
        loss = None if labels is None else F.cross_entropy(logits.view(-1, self.num_labels), labels.view(-1))
        res = TokenClassifierOutput(loss, logits, out.hidden_states, out.attentions)
        return res if return_dict else res.to_tuple()


class AlbertForQuestionAnswering(AlbertPreTrainedModel):
    """Span extraction: ``qa_outputs`` Linear(H, num_labels=2) → start/end logits (HF
    ``AlbertForQuestionAnswering``). Positions outside [0, S) are clamped to S and ignored in the loss."""

    def __init__(self, config: AlbertConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.albert = AlbertModel(config, add_pooling_layer=False)
        self.qa_outputs = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        token_type_ids=None,
        position_ids=None,
        inputs_embeds=None,
        start_positions=None,
        end_positions=None,
        output_hidden_states=False,
        output_attentions=False,
        return_dict=True,
    ):
        """→ :class:`QuestionAnsweringModelOutput`: ``start_logits``, ``end_logits`` (B, S); positions (B,)."""
        out = self._run_albert(
            input_ids,
            attention_mask,
            token_type_ids,
            position_ids,
            inputs_embeds,
            output_hidden_states,
            output_attentions,
        )
        logits = self.qa_outputs(out.last_hidden_state)  # (B, S, 2)
        start_logits, end_logits = (t.squeeze(-1).contiguous() for t in logits.split(1, dim=-1))
        loss = None
        if start_positions is not None and end_positions is not None:
            ignored = start_logits.size(1)
            start = start_positions.reshape(-1).clamp(0, ignored)
            end = end_positions.reshape(-1).clamp(0, ignored)
            loss = (
                F.cross_entropy(start_logits, start, ignore_index=ignored)
                + F.cross_entropy(end_logits, end, ignore_index=ignored)
            ) / 2
        res = QuestionAnsweringModelOutput(loss, start_logits, end_logits, out.hidden_states, out.attentions)
        return res if return_dict else res.to_tuple()


class AlbertForMultipleChoice(AlbertPreTrainedModel):
    """Each (example, choice) pair encoded separately; pooled → dropout → ``classifier`` Linear(H, 1) → logits
    (B, C) (HF ``AlbertForMultipleChoice``); loss cross-entropy over choices."""

    def __init__(self, config: AlbertConfig):
        super().__init__(config)
        self.albert = AlbertModel(config)
        self.dropout_prob = _classifier_dropout(config)
        self.classifier = nn.Linear(config.hidden_size, 1)
        self.post_init()

    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        token_type_ids=None,
        position_ids=None,
        inputs_embeds=None,
        labels=None,
        output_hidden_states=False,
        output_attentions=False,
        return_dict=True,
        pooled_only=False,
    ):
        """input_ids etc. (B, C, S) → :class:`MultipleChoiceModelOutput` with ``logits`` (B, C); labels (B,);
        ``pooled_only``: see :meth:`AlbertModel.forward` (the logits do not change)."""
        C = input_ids.shape[1] if input_ids is not None else inputs_embeds.shape[1]

        def flat(t):  # (B, C, S[, E]) -> (B·C, S[, E])
            return None if t is None else t.reshape(-1, *t.shape[2:])

        out = self._run_albert(
            flat(input_ids),
            flat(attention_mask),
            flat(token_type_ids),
            flat(position_ids),
            flat(inputs_embeds),
            output_hidden_states,
            output_attentions,
            pooled_only,
        )
        logits = self.classifier(_dropout(out.pooler_output, self.dropout_prob, self.training)).view(-1, C)
        loss = None if labels is None else F.cross_entropy(logits, labels)
        res = MultipleChoiceModelOutput(loss, logits, out.hidden_states, out.attentions)
        return res if return_dict else res.to_tuple()


MODEL_CLASSES = {
    cls.__name__: cls
    for cls in (
        AlbertModel,
        AlbertForPreTraining,
        AlbertForMaskedLM,
        AlbertForSequenceClassification,
        AlbertForTokenClassification,
        AlbertForQuestionAnswering,
        AlbertForMultipleChoice,
    )
}
