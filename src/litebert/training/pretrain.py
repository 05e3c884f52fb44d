"""ALBERT pretraining (MLM + SOP) on prepared shards: :class:`PretrainConfig` → :func:`pretrain` → :class:`PretrainResult`.

What :func:`pretrain` does, in order: start the process group (under ``torchrun``), read the data manifest, build
the model config (``vocab_size`` and special ids from the data's tokenizer), check data and model agree, write
``OUTPUT/config.json`` and ``OUTPUT/run_settings.json``, build model/optimizer/schedule, run the one training loop
(:func:`litebert.training.loop.train`) with the pretraining objective, and write ``OUTPUT/final/`` (HF model
directory + tokenizer files). Objective (docs/algorithms.md §1): ``loss = MLM CE averaged over every predicted token of the
optimizer step (all micro-batches, all ranks) + SOP CE averaged over every sequence of the step``.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from litebert.config import AlbertConfig
from litebert.data import check_same_vocabulary, tokenizer_vocabulary
from litebert.errors import LitebertError
from litebert.fileio import atomic_directory, read_json, run_command
from litebert.hub import HUB_METAVAR, revision_setting
from litebert.optim import OPTIMIZERS
from litebert.precision import PRECISIONS
from litebert.settings import check, fail, setting
from litebert.training import distributed as D
from litebert.training import run as R
from litebert.training.loop import LossOutput, TrainingArgs, make_batch_factory, train
from litebert.training.modelcard import write_model_card

#: the modes of ``torch.compile`` that ``--compile-mode`` offers
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


@dataclass
class PretrainConfig:
    """Settings of one pretraining run: the ``litebert pretrain`` options, one field each (derived from here).

    Raises :class:`~litebert.errors.LitebertError` ``"--option value: why"`` on construction for a bad value.
    """

    data: str = setting(help="prepared training data directory (litebert prepare output, with manifest.json)")
    output: str = setting(
        help="run directory: config.json, run_settings.json, metrics.jsonl, tb/, checkpoints/, final/"
    )
    model_config: str = setting(
        help="model preset name (e.g. albert-unittest, albert-base) or config.json path; "
        "vocab_size is taken from the data's tokenizer"
    )
    eval_data: str | None = setting(None, help="prepared evaluation data (MLM accuracy/perplexity, SOP accuracy)")
    optimizer: str = setting("lamb", choices=OPTIMIZERS, help="LAMB (the paper's) or AdamW")
    learning_rate: float = setting(1.76e-3, gt=0, help="peak learning rate (paper: 0.00176 at batch 4096)")
    warmup_steps: int = setting(0, ge=0, help="linear warmup from 0 to the peak lr")
    max_steps: int = setting(1000, gt=0, help="optimizer steps in the whole run")
    max_minutes: float | None = setting(
        None,
        gt=0,
        help="wall-clock limit of training in minutes: stop (evaluate, checkpoint) "
        "after the step that crosses it; the schedule still spans --max-steps; "
        "a resumed run gets the full limit again",
    )
    batch_size: int = setting(32, gt=0, help="sequences per process per micro-batch")
    gradient_accumulation_steps: int = setting(1, gt=0, help="micro-batches per optimizer step")
    max_grad_norm: float = setting(1.0, ge=0, help="global-norm clipping (0 = off)")
    weight_decay: float = setting(0.01, ge=0, help="decoupled weight decay (not on biases and LayerNorm)")
    adam_beta1: float = setting(0.9, ge=0, lt=1, help="beta1 of LAMB/AdamW")
    adam_beta2: float = setting(0.999, ge=0, lt=1, help="beta2 of LAMB/AdamW")
    adam_epsilon: float = setting(1e-6, gt=0, help="epsilon of LAMB/AdamW")
    bias_correction: bool = setting(False, help="LAMB with Adam bias correction (off in the paper)")
    lr_decay_power: float = setting(1.0, gt=0, help="polynomial decay power after warmup (1 = linear)")
    logging_steps: int = setting(50, gt=0, help="log train metrics every N steps")
    eval_steps: int = setting(0, ge=0, help="evaluate every N steps (0 = at the end)")
    max_eval_batches: int | None = setting(None, gt=0, help="cap on evaluation batches (default: all)")
    eval_batch_size: int | None = setting(
        None, gt=0, help="sequences per process per evaluation batch (default: --batch-size)"
    )
    save_steps: int = setting(0, ge=0, help="checkpoint every N steps (0 = at the end)")
    save_total_limit: int | None = setting(None, gt=0, help="keep the newest K checkpoints (default: all)")
    seed: int = setting(42, help="seed of init, data order and masking")
    resume: str | None = setting(
        None,
        metavar="{auto,PATH}",
        help="auto: newest complete checkpoint in OUTPUT (or start fresh); or a checkpoints/step-N path",
    )
    init_from: str | None = setting(
        None,
        metavar=HUB_METAVAR,
        help="start from the weights of this model directory or Hub id ORG/NAME (continued / domain-adaptive pretraining, Gururangan et "
        "al. 2020); pass its config.json as --model-config; a resumed run takes its weights from the "
        "checkpoint instead",
    )
    revision: str | None = revision_setting()  # of a Hub id given as --init-from
    precision: str = setting(
        "auto",
        choices=PRECISIONS,
        help="auto: bf16 autocast where the device computes bf16 natively, else fp32 (on resume: "
        "the checkpoint's); bf16/fp16: autocast (fp16 adds loss scaling); weights, optimizer "
        "state and checkpoints stay fp32",
    )
    num_workers: int = setting(0, ge=0, help="DataLoader workers per process")
    compile: bool = setting(False, help="torch.compile the model")
    compile_mode: str | None = setting(
        None,
        choices=COMPILE_MODES,
        help="torch.compile mode (implies --compile, recorded as compile: true); reduce-overhead replays CUDA "
        "graphs: use it with --static-shapes",
    )
    static_shapes: bool = setting(
        False,
        help="one batch shape for the whole run: sequences padded to the data's max_seq_length, masked "
        "positions to its max_predictions_per_seq (what CUDA graphs need); more padding to compute",
    )
    group_by_length: bool = setting(
        False,
        help="batches of similar length: each epoch's shuffled order is sorted by length within groups of 50 "
        "optimizer steps, the steps of a group in random order (transformers' group_by_length), so batches "
        "carry little padding; not with --static-shapes (padded to max_seq_length anyway)",
    )
    cuda_graphs: bool = setting(
        False,
        help="capture the whole optimizer step as one CUDA graph after 3 eager steps and replay it (implies "
        "--static-shapes): for small models, whose GPU steps wait on kernel launches; one process, bf16 or fp32, "
        "LAMB or AdamW, not with --compile",
    )
    unpad: str = setting(
        "auto",
        choices=("auto", "on", "off"),
        help="run the layers on the real tokens only (MosaicBERT unpadding); auto: on a GPU unless --static-shapes "
        "or --compile-mode reduce-overhead (CUDA graphs need one shape), off on the CPU",
    )
    fsdp: bool = setting(False, help="FSDP2 fully_shard instead of DDP (GPUs, under torchrun with 2 or more processes)")
    deterministic: bool = setting(
        False,
        help="deterministic kernels (torch.use_deterministic_algorithms; "
        "CUBLAS_WORKSPACE_CONFIG on GPU): needed for a bit-identical resume "
        "on a GPU; slower",
    )
    device: str | None = setting(None, choices=("cpu", "cuda"), help="default: cuda when available")
    max_bad_steps: int = setting(5, gt=0, help="this many non-finite steps in a row stop the run")
    progress_bar: bool = setting(
        True, option="--no-progress-bar", aliases=("--no-progress",), negate=True, help="log lines only, no tqdm bar"
    )

    def __post_init__(self) -> None:
        check(self)
        if self.compile_mode is not None:  # a mode implies --compile: run_settings.json records what runs
            self.compile = True
        if self.cuda_graphs:
            if self.compile:
                fail(self, "cuda_graphs", "captures the eager step: not with --compile/--compile-mode")
            if self.precision == "fp16":
                fail(self, "cuda_graphs", "takes --precision bf16 or fp32, not fp16 (loss scaling)")
            if self.device == "cpu":
                fail(self, "cuda_graphs", "needs a CUDA device, not --device cpu")
            self.static_shapes = True  # one batch shape: run_settings.json records what runs
        if self.warmup_steps > self.max_steps:
            fail(self, "warmup_steps", "must not exceed --max-steps")
        if self.bias_correction and self.optimizer != "lamb":  # an option that would change nothing: refused
            fail(self, "bias_correction", f"applies to --optimizer lamb only, not --optimizer {self.optimizer} "
                 "(AdamW always corrects its bias)")  # fmt: skip
        if self.group_by_length and self.static_shapes:
            fail(self, "group_by_length", "groups batches to pad them less: not with --static-shapes or --cuda-graphs, "
                 "which pad every batch to the data's max_seq_length")  # fmt: skip
        if not self.eval_data:  # options that would change nothing without evaluation data: refused
            for name, default in (("eval_steps", 0), ("max_eval_batches", None)):
                if getattr(self, name) != default:
                    fail(self, name, "evaluates on --eval-data, which is not given")
        if self.unpad == "on" and (self.static_shapes or self.compile_mode == "reduce-overhead"):
            fail(self, "unpad", "on gives every batch its own shape: not with --static-shapes or CUDA graphs")

    @property
    def unpad_on(self) -> bool:
        """``--unpad`` resolved: auto is on for a GPU run unless it wants one batch shape. On the CPU auto is off:
        there the gathers cost about what the padding does at the quick start's sizes (docs/gpu.md, unpadding)."""
        if self.unpad == "auto":
            device = self.device or ("cuda" if torch.cuda.is_available() else "cpu")
            return device == "cuda" and not (self.static_shapes or self.compile_mode == "reduce-overhead")
        return self.unpad == "on"


#: what a resumed run may set differently (:func:`litebert.training.run.check_resume_settings`): none of these
#: changes the weights it trains to; a larger --max-steps extends the run, anything else is refused
RESUME_MAY_CHANGE = (
    "output",
    "resume",
    "max_minutes",
    "logging_steps",
    "eval_steps",
    "eval_batch_size",
    "save_steps",
    "save_total_limit",
    "num_workers",
    "compile",
    "compile_mode",
    "static_shapes",
    "cuda_graphs",
    "unpad",
    "fsdp",
    "deterministic",
    "device",
    "max_bad_steps",
    "progress_bar",
)


@dataclass
class PretrainResult:
    output_dir: Path
    final_dir: Path
    step: int
    #: last "train" record (loss, mlm_loss, sop_loss, mlm_accuracy, sop_accuracy, ...)
    train_metrics: dict
    #: first "train" record of the run (to show how far the loss fell)
    first_train_metrics: dict
    #: final evaluation (mlm_accuracy, mlm_perplexity, sop_accuracy, losses) or {}
    eval_metrics: dict
    skipped_steps: int
    #: wall-clock seconds of this call
    seconds: float
    last_checkpoint: Path | None = None
    notes: list[str] = field(default_factory=list)
    #: wall-clock and CPU seconds of the training loop over the whole run: a resumed run adds what its checkpoint
    #: recorded of the calls before it (:class:`litebert.training.loop.TrainResult`)
    train_seconds: float = 0.0
    train_cpu_seconds: float = 0.0


# ---------------------------------------------------------------------------------------------- the objective
def pretraining_count(batch: dict) -> dict[str, torch.Tensor | int]:
    """Units of each loss term in a micro-batch: predicted tokens (``labels != -100``; a 0-d tensor on the batch's
    device, never read by the host) and sequences."""
    return {"mlm_loss": (batch["labels"] != -100).sum(), "sop_loss": int(batch["input_ids"].shape[0])}


def _pretraining_sums(model: nn.Module, batch: dict, sop: bool = True) -> tuple[dict, dict]:
    """Summed MLM CE (and SOP CE when ``sop``) of one micro-batch, with accuracy ratios as 0-d tensors on the
    device (the training loop reads them at logging steps only). ``sop=False``: the model is an
    :class:`~litebert.modeling.AlbertForMaskedLM` (MLM-only data: no pooler, no SOP head)."""
    labels = batch["labels"]  # (B, S), -100 = not predicted
    positions = batch.get("masked_positions")  # (B, P) with static shapes, else None
    extra = {}
    if positions is not None and _takes(model, "masked_positions"):
        extra["masked_positions"] = positions
    if "unpad_indices" in batch and _takes(model, "unpad_indices"):  # (T,): unpadding with no nonzero on the device
        extra["unpad_indices"] = batch["unpad_indices"]
        torch._dynamo.maybe_mark_dynamic(extra["unpad_indices"], 0)  # T varies: one compiled graph for all
    out = model(
        input_ids=batch["input_ids"],
        attention_mask=batch.get("attention_mask"),
        token_type_ids=batch.get("token_type_ids"),
        # with masked_positions the model gathers the predicted rows by itself: no labels, so that it computes no
        # mean cross-entropy of its own, which this function would discard (it sums its own, below)
        labels=None if "masked_positions" in extra else labels,
        **extra,
    )
    logits = (out.prediction_logits if sop else out.logits).float()
    if "masked_positions" in extra:  # (B·P, V) at every slot, pads included: static shapes, no data-dependent size
        target = labels.gather(1, positions).reshape(-1)  # (B·P,), -100 at pad slots (position 0 is [CLS])
        mlm_sum = F.cross_entropy(logits, target, reduction="sum")  # ignore_index -100: pads add 0
        with torch.no_grad():
            predicted = target != -100
            mlm_correct = ((logits.argmax(-1) == target) & predicted).sum()
            mlm_count = predicted.sum()
    else:
        target = labels.reshape(-1)
        target = target[target != -100]  # (P_total,), aligned with the (P_total, V) logits
        mlm_sum = F.cross_entropy(logits, target, reduction="sum") if target.numel() else logits.sum() * 0.0
        with torch.no_grad():
            mlm_correct = (logits.argmax(-1) == target).sum()
            mlm_count = target.numel()
    sums = {"mlm_loss": mlm_sum}
    ratios = {"mlm_accuracy": (mlm_correct, mlm_count)}
    if sop:
        sop_logits = out.sop_logits.float()  # (B, 2)
        sop_label = batch["sentence_order_label"].reshape(-1)
        sums["sop_loss"] = F.cross_entropy(sop_logits, sop_label, reduction="sum")
        with torch.no_grad():
            ratios["sop_accuracy"] = ((sop_logits.argmax(-1) == sop_label).sum(), sop_label.numel())
    return sums, ratios


def _takes(model: nn.Module, name: str) -> bool:
    """Whether the (unwrapped) model's forward takes the argument ``name``: ``masked_positions`` (B, P) (the MLM
    head then gathers a fixed number of rows, with no data-dependent size: ``nonzero`` is a device sync, and no
    CUDA graph) or ``unpad_indices`` (T,) (unpadding without ``nonzero``)."""
    import inspect

    return name in inspect.signature(D.unwrap_model(model).forward).parameters


def pretraining_objective(model: nn.Module, batch: dict) -> LossOutput:
    """(model, micro-batch) → summed MLM CE over predicted tokens, summed SOP CE over sequences, accuracies."""
    sums, ratios = _pretraining_sums(model, batch)
    return LossOutput(sums=sums, ratios=ratios)


def mlm_only_objective(model: nn.Module, batch: dict) -> LossOutput:
    """For data prepared with ``--inter-sentence-task none`` (model: ``AlbertForMaskedLM``): the MLM term only."""
    sums, ratios = _pretraining_sums(model, batch, sop=False)
    return LossOutput(sums=sums, ratios=ratios)


def mlm_only_count(batch: dict) -> dict[str, torch.Tensor]:
    return {"mlm_loss": (batch["labels"] != -100).sum()}


def pretraining_model(config, sop: bool = True) -> nn.Module:
    """The model pretraining builds: ``AlbertForPreTraining`` (MLM + SOP heads), or for MLM-only data
    ``AlbertForMaskedLM`` (no pooler, no SOP head). Every parameter of the model then gets a gradient in every step,
    which DDP requires (it would otherwise wait for the pooler's and the SOP head's gradients and fail at step 2);
    a model whose parameters are all used is cheaper than ``find_unused_parameters`` (a graph traversal per step)
    and, unlike ``static_graph``, holds no weights that training never touches. ``final/`` is then an HF
    ``AlbertForMaskedLM`` directory; fine-tuning initialises a fresh pooler, which MLM-only pretraining never
    trains anyway."""
    from litebert.modeling import AlbertForMaskedLM, AlbertForPreTraining

    return AlbertForPreTraining(config) if sop else AlbertForMaskedLM(config)


def make_pretraining_eval(batches, device: torch.device, max_batches: int | None = None, sop: bool = True):
    """An eval function over ``batches`` (this rank's share): sums reduced over ranks.

    Returns ``{"loss", "mlm_loss", "mlm_accuracy", "mlm_perplexity"}`` and, with ``sop``, ``"sop_loss",
    "sop_accuracy"``; the MLM figures are averaged over every predicted token, the SOP ones over every sequence;
    perplexity = exp(mlm_loss). Under FSDP every forward is a collective, so ranks with fewer batches run extra
    forwards (on a batch they already have, or on rank 0's first) whose results are not counted: every batch is
    evaluated once, none dropped.
    """

    @torch.no_grad()  # an evaluation builds no graph, whoever calls it
    def eval_fn(model: nn.Module) -> dict[str, float]:
        # the plain module: a DDP forward may broadcast buffers (a collective), and ranks may hold different
        # numbers of eval batches. FSDP needs its wrapper and the same number of forwards on every rank.
        fsdp = D.is_fsdp(model)
        model = model if fsdp else D.unwrap_model(model)
        loader = batches(0, 0)
        n_local = len(loader) if max_batches is None else min(len(loader), max_batches)
        counts = D.all_gather_object(n_local) if fsdp else [n_local]
        filler = None
        if fsdp and min(counts) == 0:  # some rank holds no batch at all: every rank pads with rank 0's first
            filler = D.broadcast_object(next(iter(loader)) if D.is_main_rank() else None)
        acc = torch.zeros(
            6, dtype=torch.float64, device=device
        )  # mlm_sum, n_mlm, mlm_correct, sop_sum, n_sop, sop_correct

        def f64(*values):
            return torch.stack([torch.as_tensor(v, dtype=torch.float64, device=device).reshape(()) for v in values])

        it = iter(loader)
        for i in range(max(counts)):
            batch = next(it) if i < n_local else filler
            if i == 0 and filler is None:
                filler = batch
            batch = {k: v.to(device) for k, v in batch.items()}
            sums, ratios = _pretraining_sums(model, batch, sop)
            if i >= n_local:  # padding forward for FSDP's collectives: not counted
                continue
            acc[:3] += f64(sums["mlm_loss"].detach(), ratios["mlm_accuracy"][1], ratios["mlm_accuracy"][0])
            if sop:
                acc[3:] += f64(sums["sop_loss"].detach(), ratios["sop_accuracy"][1], ratios["sop_accuracy"][0])
        acc = D.all_reduce_sum(acc).cpu().tolist()
        mlm = acc[0] / max(acc[1], 1.0)
        res = {
            "loss": mlm,
            "mlm_loss": mlm,
            "mlm_accuracy": acc[2] / max(acc[1], 1.0),
            "mlm_perplexity": math.exp(mlm) if mlm < 700 else float("inf"),
        }
        if sop:
            res["loss"] = mlm + acc[3] / max(acc[4], 1.0)
            res["sop_loss"] = acc[3] / max(acc[4], 1.0)
            res["sop_accuracy"] = acc[5] / max(acc[4], 1.0)
        return res

    return eval_fn


# ---------------------------------------------------------------------------------------------- data glue
def _read_data(path: str, what: str):
    """(manifest, dataset) of a prepared directory, or a LitebertError saying it is not litebert's."""
    from litebert import data as litebert_data

    p = Path(path)
    if p.is_file():
        raise LitebertError(
            f"{what} {p} is a file: pretrain reads the directory `litebert prepare` writes from a corpus"
        )
    if not p.is_dir():
        raise LitebertError(
            f"{what} {p}: no such directory (run `litebert prepare` first; a relative path is read from the "
            f"working directory, {Path.cwd()})"
        )
    if not (p / "manifest.json").is_file():
        raise LitebertError(f"{what} {p} is not a litebert data directory (no manifest.json; run `litebert prepare`)")
    manifest = litebert_data.read_manifest(p)
    if "partition" in manifest:  # one part of a corpus prepared on several machines: the rest would be left out
        part = manifest["partition"]
        raise LitebertError(
            f"{what} {p} is partition {part.get('index')} of {part.get('count')} of a prepared corpus: merge the "
            f"parts first (litebert merge-data PART_DIR ... --output DIR) and pass the merged directory"
        )
    dataset = litebert_data.PretrainingDataset(p, epoch=0)
    return manifest, dataset


def _check_data(manifest: dict, config, what: str) -> None:
    """``check_data_matches_model`` with the data set named: every data set is checked before the first step."""
    from litebert import data as litebert_data

    try:
        litebert_data.check_data_matches_model(manifest, config)
    except LitebertError as exc:
        raise LitebertError(f"{what}: {exc}") from None


def _tokenizer_info(manifest: dict) -> dict:
    info = manifest.get("tokenizer") or {}
    if not isinstance(info, dict):
        raise LitebertError("data manifest has no tokenizer section; re-run `litebert prepare`")
    return info


def _collator(manifest: dict, dataset, static_shapes: bool = False, unpad: bool = False):
    """The data package's collator for this data set: pads to the longest item with the tokenizer's pad id (with
    ``static_shapes`` to the data's max_seq_length), with ``masked_positions``, so the MLM gather has no
    data-dependent size (a device sync per micro-batch on a GPU), and with ``unpad`` the ``unpad_indices`` of the
    real tokens, so unpadding needs no ``nonzero`` on the device either."""
    from litebert import data as litebert_data

    if hasattr(dataset, "collator"):
        return dataset.collator(static_shapes=static_shapes, masked_positions=True, unpad_indices=unpad)
    return litebert_data.PretrainingCollator.from_manifest(manifest)


def model_config_for_data(model_config: str, manifest: dict, log=print):
    """The AlbertConfig of ``model_config`` with ``vocab_size`` and special ids from the data's tokenizer.

    Logs each override. Raises LitebertError for an unknown preset/bad file, or (via the data package's
    ``check_data_matches_model``) a mismatch that cannot be fixed (sequence length over max_position_embeddings).
    """
    from litebert import data as litebert_data
    from litebert.config import AlbertConfig

    config = AlbertConfig.load(model_config)
    tok = _tokenizer_info(manifest)
    overrides = {}
    if tok.get("vocab_size") and tok["vocab_size"] != config.vocab_size:
        overrides["vocab_size"] = int(tok["vocab_size"])
    # HF's AlbertConfig calls [CLS]/[SEP] bos/eos; keep the model's special ids those of its tokenizer
    for field_name, tok_name in (
        ("pad_token_id", "pad_token_id"),
        ("bos_token_id", "cls_token_id"),
        ("eos_token_id", "sep_token_id"),
    ):
        tid = tok.get(tok_name)
        if tid is not None and hasattr(config, field_name) and int(tid) != getattr(config, field_name):
            overrides[field_name] = int(tid)
    for name, value in overrides.items():
        log(f"model config: {name} {getattr(config, name)} -> {value} (from the data's tokenizer)")
    if overrides:
        config = config.replace(**overrides)
    litebert_data.check_data_matches_model(manifest, config)
    # The longest sequence the position table has been trained on (max over continued runs, --init-from): the
    # rows of P[seq:] never get a gradient, so fine-tuning longer than this reads untrained position vectors.
    # Saved in config.json (an extra key; transformers keeps it as an attribute), checked by `litebert finetune`.
    seq = int(manifest["settings"]["max_seq_length"])
    config.extra["pretraining_max_seq_length"] = max(seq, int(config.extra.get("pretraining_max_seq_length", 0)))
    if config.type_vocab_size < 2:
        raise LitebertError(
            f"model config {model_config}: type_vocab_size={config.type_vocab_size}, but pretraining "
            "pairs use token types 0 and 1 (set type_vocab_size to 2)"
        )
    for name in ("cls_token_id", "sep_token_id", "mask_token_id", "pad_token_id"):
        tid = tok.get(name)
        if tid is not None and not 0 <= int(tid) < config.vocab_size:
            raise LitebertError(
                f"the data's tokenizer has {name}={tid}, outside the model's vocabulary "
                f"(vocab_size {config.vocab_size})"
            )
    return config


def _copy_tokenizer(data_dir: Path, dest: Path) -> bool:
    src = data_dir / "tokenizer"
    if not src.is_dir():
        return False
    for f in src.iterdir():
        if f.is_file():
            shutil.copy2(f, dest / f.name)
    return True


def _write_model_dir(
    model: nn.Module, data_dir: Path | None, dest: Path, missing: str | None = None, run_dir: Path | None = None
) -> Path:
    """``dest``: the HF model directory + the data's tokenizer files (+ with ``run_dir``, the run's model card
    ``README.md``), written to a temp dir and renamed over it.

    Without ``data_dir/tokenizer`` the weights are still written, with a warning on stderr: ``missing`` when given,
    else one naming ``data_dir`` and ``dest``."""
    with atomic_directory(dest) as tmp:
        model.save_pretrained(tmp)
        if data_dir is None or not _copy_tokenizer(data_dir, tmp):
            missing = missing or f"{data_dir}/tokenizer not found; {dest} has no tokenizer files"
            print(f"warning: {missing}", file=sys.stderr)
        if run_dir is not None:
            write_model_card(tmp, run_dir)
    return dest


def _write_final(model: nn.Module, data_dir: Path, output: Path) -> Path:
    """OUTPUT/final/: the HF model directory + the tokenizer files + the model card."""
    return _write_model_dir(model, data_dir, output / "final", run_dir=output)


def dropout_note(config, world_size: int, sop: bool = True) -> str | None:
    """The line a run of several processes logs when the model has dropout on, else None.

    Each process draws its own dropout masks (:func:`litebert.training.loop._own_rng_stream`), so with dropout the
    processes train like one process in distribution, not weight for weight: the equality of N processes × batch B
    with 1 × N·B holds with every dropout at 0. ``classifier_dropout_prob`` (0.1 unless set; None = the hidden
    dropout) acts on the SOP head, so it counts with ``sop``.
    """
    from litebert.modeling import _classifier_dropout

    if world_size < 2:
        return None
    probs = {
        "hidden_dropout_prob": config.hidden_dropout_prob,
        "attention_probs_dropout_prob": config.attention_probs_dropout_prob,
    }
    if sop:
        probs["classifier_dropout_prob"] = _classifier_dropout(config)
    on = [f"{name} {p:g}" for name, p in probs.items() if p]
    if not on:
        return None
    return (
        f"pretrain: dropout is on ({', '.join(on)}): each of the {world_size} processes draws its own dropout "
        "masks, so the run equals one process on the same global batch in distribution, not weight for weight "
        "(set every dropout to 0 in the model config for that)"
    )


def settings_gbs(cfg: PretrainConfig, dist: D.DistInfo) -> int:
    """Sequences per optimizer step over all processes."""
    return cfg.batch_size * cfg.gradient_accumulation_steps * dist.world_size


def _run_settings(cfg: PretrainConfig, dist: D.DistInfo, config, manifest: dict, n_params: int, precision=None) -> dict:
    return R.run_settings(
        "pretrain",
        cfg,
        {
            "precision": precision.to_dict() if precision is not None else None,
            "world_size": dist.world_size,
            "device": str(dist.device),
            "global_batch_size": settings_gbs(cfg, dist),
            "unpad": cfg.unpad_on,
            "model_config": config.to_dict(),
            "num_parameters": n_params,
            "data_manifest": {
                k: manifest.get(k) for k in ("format", "version", "settings", "counts", "tokenizer") if k in manifest
            },
        },
    )


# ---------------------------------------------------------------------------------------------- main entry
def pretrain(cfg: PretrainConfig, *, caller_files: Collection[str] = ()) -> PretrainResult:
    """Run pretraining as configured; see the module docstring. Call it on every rank under ``torchrun``.

    ``caller_files``: names the calling code put into ``cfg.output`` itself before the run (``litebert ablate``'s
    plan and cell config); the output-directory check (:func:`litebert.training.run.check_output_dir`) lets them be.

    Raises :class:`LitebertError` for a bad setting, an output directory a run must not write into (another run, a
    model, the data), a directory that is not litebert data, an unknown preset, a data/model mismatch, an unusable
    checkpoint (incomplete, or of another command or model: refused before anything is written), or a run stopped
    by non-finite losses.
    """
    t0 = time.perf_counter()
    dist = R.start(cfg.device)  # more processes on a node than GPUs: refused here, before anything is written
    try:
        R.check_output_dir(  # rank 0 decides for every rank, before any rank writes
            cfg.output,
            "pretrain",
            cfg.resume,
            finished="final",
            sources={"--data": cfg.data, "--eval-data": cfg.eval_data, "--init-from": cfg.init_from},
            caller_files=caller_files,
        )
        if cfg.fsdp and dist.world_size < 2:  # before anything is written
            raise LitebertError(
                "--fsdp needs 2 or more processes: launch with torchrun --nproc-per-node N (N >= 2), or drop --fsdp"
            )
        if cfg.cuda_graphs:
            from litebert.training.cuda_graph import check_run

            check_run(dist.world_size, dist.device)
        if cfg.deterministic:
            D.set_deterministic(dist.device)
        out = Path(cfg.output)
        log = print if dist.is_main else (lambda *a, **k: None)
        manifest, dataset = _read_data(cfg.data, "--data")
        config = model_config_for_data(cfg.model_config, manifest, log)
        eval_manifest = eval_dataset = None
        if cfg.eval_data:
            eval_manifest, eval_dataset = _read_data(cfg.eval_data, "--eval-data")
            _tokenizer_info(eval_manifest)
            check_same_vocabulary(eval_manifest, manifest, f"--eval-data {cfg.eval_data}", f"--data {cfg.data}")
            _check_data(eval_manifest, config, f"--eval-data {cfg.eval_data}")  # not at the final evaluation
        if cfg.init_from is not None:  # its tokenizer files (final/ has them) must be the data's tokenizer
            check_same_vocabulary(
                manifest, tokenizer_vocabulary(cfg.init_from), f"--data {cfg.data}", f"--init-from {cfg.init_from}"
            )
        # check the checkpoint before anything is written, so a bad one harms nothing already saved
        resume_from = R.resolve_resume(out, cfg.resume, dist, verify=True, log=log)
        precision = R.resolve_run_precision(cfg.precision, dist.device, resume_from)
        log(f"pretrain: {precision}")

        use_sop = (manifest.get("settings") or {}).get("inter_sentence_task", "sop") != "none"
        torch.manual_seed(cfg.seed)  # same seed on every rank -> the same initial weights
        model = pretraining_model(config, use_sop)
        if cfg.init_from is not None and resume_from is None:
            from litebert.checkpoint import load_state_dict_file, load_weights

            state, source = load_state_dict_file(cfg.init_from)
            loaded = load_weights(model, state, source)  # LitebertError naming the parameter on a shape mismatch
            if dist.is_main:
                log(
                    f"pretrain: weights from {source}"
                    + (f"; newly initialised: {', '.join(loaded['missing'])}" if loaded["missing"] else "")
                )
        # a checkpoint of another command (a finetune run's) or of another model is refused now, not at its load
        R.check_checkpoint_fits(resume_from, "pretrain", model)
        n_params = model.num_parameters()
        settings = _run_settings(cfg, dist, config, manifest, n_params, precision)
        # every rank refuses a resume that would change the run's trajectory, before anything is written
        R.check_resume_settings(
            resume_from,
            settings,
            cfg,
            steps=cfg.max_steps,
            may_change=RESUME_MAY_CHANGE,
            may_extend=True,
            records={"data_manifest.settings": "--data"},
        )
        if dist.is_main:
            out.mkdir(parents=True, exist_ok=True)
            # run_settings.json first: it marks the directory as a pretrain run (check_output_dir) from the start
            # a run resumed into a new --output writes run_settings.json too; a later segment adds its own file
            R.write_run_settings(out, settings, resume_from)
            if resume_from is None or not (out / "config.json").exists():
                config.save(out)
            log(
                f"pretrain: {cfg.model_config} ({n_params:,} parameters), {len(dataset):,} training sequences, "
                f"{dist.world_size} process(es) x batch {cfg.batch_size} x {cfg.gradient_accumulation_steps} "
                f"accumulation = {settings['global_batch_size']} sequences/step, {cfg.max_steps} steps, "
                f"{cfg.optimizer} peak lr {cfg.learning_rate} warmup {cfg.warmup_steps}, device {dist.device}"
            )
            log(f"run settings: {json.dumps(settings['pretrain_config'], default=str)}")
            note = dropout_note(config, dist.world_size, use_sop)
            if note:
                log(note)

        from litebert.modeling import set_unpad
        from litebert.optim import build_optimizer, build_scheduler

        set_unpad(model, cfg.unpad_on)
        if cfg.compile:
            mode = cfg.compile_mode or "default"
            log(f"pretrain: compiling the model (torch.compile mode={mode}): the first steps are slow")
        wrapped = D.wrap_model(
            model,
            dist,
            fsdp=cfg.fsdp,
            compile=cfg.compile,
            compile_mode=cfg.compile_mode,
            precision=precision.precision,
        )
        optimizer = build_optimizer(
            wrapped,
            cfg.optimizer,
            lr=cfg.learning_rate,
            weight_decay=cfg.weight_decay,
            betas=(cfg.adam_beta1, cfg.adam_beta2),
            eps=cfg.adam_epsilon,
            bias_correction=cfg.bias_correction,
        )
        scheduler = build_scheduler(optimizer, cfg.warmup_steps, cfg.max_steps, power=cfg.lr_decay_power)
        batches = make_batch_factory(
            dataset,
            cfg.batch_size,
            _collator(manifest, dataset, cfg.static_shapes, cfg.unpad_on),
            seed=cfg.seed,
            num_workers=cfg.num_workers,
            rank=dist.rank,
            world_size=dist.world_size,
            pin_memory=dist.device.type == "cuda",
            group_lengths=dataset.lengths if cfg.group_by_length else None,
            group_step=cfg.batch_size * cfg.gradient_accumulation_steps * dist.world_size,
        )
        eval_fn = None
        if eval_dataset is not None:
            eval_batches = make_batch_factory(
                eval_dataset,
                cfg.eval_batch_size or cfg.batch_size,
                _collator(eval_manifest, eval_dataset, unpad=cfg.unpad_on),
                seed=cfg.seed,
                shuffle=False,
                drop_last=False,
                num_workers=cfg.num_workers,
                rank=dist.rank,
                world_size=dist.world_size,
                equal_per_rank=False,
            )
            eval_fn = make_pretraining_eval(eval_batches, dist.device, cfg.max_eval_batches, sop=use_sop)

        args = TrainingArgs(
            output_dir=out,
            max_steps=cfg.max_steps,
            gradient_accumulation_steps=cfg.gradient_accumulation_steps,
            max_grad_norm=cfg.max_grad_norm or None,
            logging_steps=cfg.logging_steps,
            eval_steps=cfg.eval_steps,
            save_steps=cfg.save_steps,
            save_total_limit=cfg.save_total_limit,
            resume=str(resume_from) if resume_from is not None else None,
            precision=precision.precision,
            max_bad_steps=cfg.max_bad_steps,
            progress_bar=cfg.progress_bar,
            log_prefix="pretrain",
            max_minutes=cfg.max_minutes,
            cuda_graphs=cfg.cuda_graphs,
        )
        objective, count = (
            (pretraining_objective, pretraining_count) if use_sop else (mlm_only_objective, mlm_only_count)
        )
        result = train(
            wrapped,
            optimizer,
            scheduler,
            batches,
            objective,
            count,
            args,
            eval_fn=eval_fn,
            extra_state={
                "model_config": cfg.model_config,
                "seed": cfg.seed,
                "global_batch_size": settings_gbs(cfg, dist),
                "precision": precision.precision,
            },
            dist=dist,
        )
        eval_metrics = {k: v for k, v in result.last_eval.items() if k not in ("step", "split")}
        if eval_fn is not None and not eval_metrics:  # resumed at the very end: evaluate once more
            wrapped.eval()
            with torch.no_grad(), precision.autocast(dist.device):
                eval_metrics = eval_fn(wrapped)
        final = out / "final"
        if D.is_fsdp(wrapped):  # gather the sharded weights (a collective), rank 0 writes them from a CPU copy
            from litebert.training.loop import _model_state

            full_state = _model_state(wrapped)
            if dist.is_main:
                cpu_model = pretraining_model(config, use_sop)
                cpu_model.load_state_dict(full_state)
                final = _write_final(cpu_model, Path(cfg.data), out)
        elif dist.is_main:
            final = _write_final(D.unwrap_model(wrapped), Path(cfg.data), out)
        D.barrier()
        from litebert.training.metrics import read_metrics

        train_records = [r for r in read_metrics(out) if r.get("split") == "train"] if dist.is_main else []
        first = train_records[0] if train_records else {}
        last = train_records[-1] if train_records else dict(result.last_train)
        seconds = time.perf_counter() - t0
        if dist.is_main:
            summary = f"pretrain: done, {result.step} steps in {seconds:.0f} s"
            if first and last and first.get("step") != last.get("step"):
                summary += (
                    f"; train mlm_loss {first.get('mlm_loss', float('nan')):.3f} (step {first.get('step')}) -> "
                    f"{last.get('mlm_loss', float('nan')):.3f} (step {last.get('step')})"
                )
            elif last:  # one logging window (a run shorter than --logging-steps): its mean, no trend to show
                summary += (
                    f"; train mlm_loss {last.get('mlm_loss', float('nan')):.3f} (mean of steps 1-{last.get('step')})"
                )
            if eval_metrics:
                summary += (
                    f"; eval mlm_accuracy {eval_metrics['mlm_accuracy']:.4f}, mlm_perplexity "
                    f"{eval_metrics['mlm_perplexity']:.1f}"
                )
                if "sop_accuracy" in eval_metrics:
                    summary += f", sop_accuracy {eval_metrics['sop_accuracy']:.4f}"
            log(summary + f"; model in {final}")
        return PretrainResult(
            output_dir=out,
            final_dir=final,
            step=result.step,
            train_metrics=last,
            first_train_metrics=first,
            eval_metrics=eval_metrics,
            skipped_steps=result.skipped_steps,
            seconds=seconds,
            last_checkpoint=result.last_checkpoint,
            train_seconds=result.train_seconds,
            train_cpu_seconds=result.train_cpu_seconds,
        )
    finally:
        R.teardown()


def run_data_dirs(run: Path) -> list[Path]:
    """Where a pretraining run's training data may be (``run_settings.json`` → ``pretrain_config.data``), most
    likely first: an absolute path as recorded; a relative one against the run's recorded working directory
    (``"cwd"``: what its relative paths were given relative to), then against the current one. ``[]`` when the run
    records no data (no ``run_settings.json``, or no ``data`` in it)."""
    settings = run / "run_settings.json"
    if not settings.is_file():
        return []
    recorded = read_json(settings, what="run settings", expect=dict)
    data = (recorded.get("pretrain_config") or {}).get("data")
    if not data or not isinstance(data, str):
        return []
    if Path(data).is_absolute():
        return [Path(data)]
    bases = [Path(recorded["cwd"])] if isinstance(recorded.get("cwd"), str) and recorded["cwd"] else []
    bases.append(Path.cwd())
    found: list[Path] = []
    for base in bases:
        if (base / data) not in found:
            found.append(base / data)
    return found


def checkpoint_run(checkpoint: str | os.PathLike) -> Path:
    """The run directory of a training checkpoint ``RUN/checkpoints/step-N``, after checking the checkpoint against
    its ``COMPLETE`` marker (:func:`~litebert.training.state.verify_checkpoint`) and that ``RUN/config.json`` exists.

    Raises :class:`LitebertError` naming the incomplete or corrupt file, or the missing ``config.json``; for a
    checkpoint of a ``litebert finetune`` run, naming its model directory (``RUN/best``) to export instead.
    """
    from litebert.training.state import verify_checkpoint

    ckpt = Path(checkpoint)
    run = ckpt.parent.parent
    if run_command(run) == "finetune":  # its models are best/ and final/; its checkpoints hold no config of a head
        best = run / "best"
        raise LitebertError(
            f"{ckpt} is a checkpoint of a `litebert finetune` run: export its model directory "
            f"({best if (best / 'config.json').is_file() else str(best) + ' once the run has written it'}) instead"
        )
    verify_checkpoint(ckpt)  # raises with the reason when incomplete or corrupt
    if not (run / "config.json").is_file():
        raise LitebertError(
            f"{run}/config.json not found: {ckpt} is not inside a `litebert pretrain` run directory "
            f"(expected RUN/checkpoints/step-N)"
        )
    return run


def export_checkpoint(
    checkpoint: str | os.PathLike,
    output: str | os.PathLike,
    shown_as: str | os.PathLike | None = None,
    *,
    checked: bool = False,
) -> Path:
    """Write a training checkpoint (``RUN/checkpoints/step-N``) as an HF model directory with the tokenizer.

    The model config is ``RUN/config.json`` and the tokenizer is the one of the run's training data
    (``run_settings.json`` → ``pretrain_config.data``/tokenizer, a relative path resolved by :func:`run_data_dirs`),
    so the result is what ``RUN/final/`` would have been had the run stopped at step N. ``output`` is written to a
    temp directory and renamed; it must not exist. Without the tokenizer the weights are still written, with a
    warning that names ``shown_as`` (the directory the user asked for, when ``output`` is a staging directory; by
    default ``output``) and how to add one.

    Raises :class:`LitebertError` when ``checkpoint`` is not a complete checkpoint (missing ``COMPLETE`` marker or
    a sha256 mismatch), when the run directory lacks ``config.json`` (:func:`checkpoint_run`; ``checked=True``:
    the caller has just run those checks), or when ``output`` exists.
    """
    ckpt = Path(checkpoint)
    out = Path(output)
    run = ckpt.parent.parent if checked else checkpoint_run(ckpt)
    if out.exists():
        raise LitebertError(f"{out} exists; choose a new output directory")
    state = torch.load(ckpt / "model.pt", map_location="cpu", weights_only=True)
    model = pretraining_model(
        AlbertConfig.from_json_file(run / "config.json"), sop="sop_classifier.classifier.weight" in state
    )
    model.load_state_dict(state)
    candidates = run_data_dirs(run)
    data_dir = next((d for d in candidates if (d / "tokenizer").is_dir()), None)
    shown = Path(shown_as) if shown_as is not None else out
    if candidates:
        where = " nor ".join(str(d / "tokenizer") for d in candidates)
        why = f"the run's training data has no tokenizer at {where}"
    else:
        why = f"{run}/run_settings.json records no training data"
    missing = (
        f"{shown} has no tokenizer files ({why}): copy the tokenizer files of the run's data (DATA/tokenizer/*) "
        "into it, or pass --tokenizer DIR to finetune/evaluate/predict"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    return _write_model_dir(model, data_dir, out, missing=missing)
