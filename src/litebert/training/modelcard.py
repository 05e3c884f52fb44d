"""The model card (``README.md``) of a model directory that a run installs (pretraining ``final/``, fine-tuning
``best/``): the Hub's YAML metadata block and a short body, built with huggingface_hub's ``ModelCard``,
``ModelCardData`` and ``EvalResult`` (which check the metadata, ``model-index`` included, as the Hub reads it).

Metadata: ``license`` (apache-2.0, ALBERT's and litebert's), ``language`` (``zh`` for a Chinese vocabulary, else
``en``), ``tags`` (``albert``, ``litebert``, the task), ``datasets`` (the Hub data set fine-tuned on; the Hub
corpora pretrained and evaluated on), ``base_model`` (the Hub model fine-tuned or pretrained from),
``library_name`` ``transformers`` (the directory loads there; not for a litebert-only layout), ``pipeline_tag``,
and a ``model-index`` with the task, the data set the metrics were measured on (pretraining: ``--eval-data``'s
corpus, not the training one) and the metrics. Body: what the model is and what it started from (a Hub model, a
local one named by its path, random weights), the key settings of its run (``run_settings.json``; pretraining's
sequence length from the data manifest), litebert's version, the results, and how to load it in transformers and
in litebert (as ``YOUR_ORG/YOUR_MODEL``, :data:`litebert.hub.REPO_PLACEHOLDER`, which ``litebert push`` replaces
with the repository id in the card it uploads, and from a local copy, ``path/to/DIRNAME``). The card holds no local
path: it is written to be uploaded.

Everything comes from files the run has written by then: the directory's ``config.json`` (architecture, sizes,
``finetuning_task``, ``litebert_hub_dataset``) and ``best_eval.json`` (fine-tuning: the metrics of this
checkpoint), the run's ``run_settings.json`` (settings, ``hub`` sources, ``data_sources``) and ``metrics.jsonl``
(pretraining: the last evaluation).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from litebert.corpus import HUB_PREFIX, parse_hub_id
from litebert.errors import LitebertError
from litebert.fileio import atomic_write_text
from litebert.hub import CARD_NAME, REPO_PLACEHOLDER, REPO_PLACEHOLDER_NOTE
from litebert.training.metrics import read_metrics

LICENSE = "apache-2.0"

#: head class → (the Hub's task type, its display name)
TASKS = {
    "AlbertForSequenceClassification": ("text-classification", "Text Classification"),
    "AlbertForTokenClassification": ("token-classification", "Token Classification"),
    "AlbertForQuestionAnswering": ("question-answering", "Question Answering"),
    "AlbertForMultipleChoice": ("multiple-choice", "Multiple Choice"),
    "AlbertForPreTraining": ("fill-mask", "Masked Language Modeling"),
    "AlbertForMaskedLM": ("fill-mask", "Masked Language Modeling"),
    "AlbertModel": ("feature-extraction", "Feature Extraction"),
}
#: the transformers Auto class that loads each task type
AUTO_CLASSES = {
    "text-classification": "AutoModelForSequenceClassification",
    "token-classification": "AutoModelForTokenClassification",
    "question-answering": "AutoModelForQuestionAnswering",
    "multiple-choice": "AutoModelForMultipleChoice",
    "fill-mask": "AutoModelForMaskedLM",
    "feature-extraction": "AutoModel",
}
#: run settings shown in the card, in this order (those the run has)
KEY_SETTINGS = (
    "task",
    "learning_rate",
    "batch_size",
    "global_batch_size",
    "gradient_accumulation_steps",
    "max_steps",
    "epochs",
    "warmup_ratio",
    "warmup_steps",
    "weight_decay",
    "optimizer",
    "max_seq_length",
    "seed",
    "precision",
    "world_size",
)


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _last_eval(run_dir: Path) -> dict[str, float]:
    """The last ``"split": "eval"`` record of ``run_dir/metrics.jsonl``."""
    evals = [r for r in read_metrics(run_dir) if r.get("split") == "eval"]
    return evals[-1] if evals else {}


def _metrics(model_dir: Path, run_dir: Path | None) -> dict[str, float]:
    found = _read(model_dir / "best_eval.json")
    if not isinstance(found, dict):
        found = _last_eval(run_dir) if run_dir is not None else {}
    return {
        k: float(v)
        for k, v in found.items()
        if k not in ("step", "split", "time", "epoch") and isinstance(v, int | float) and not isinstance(v, bool)
    }


def _language(model_dir: Path) -> str:
    """``"zh"`` for a Chinese vocabulary (a ``chinese`` tokenizer, or any vocabulary of 500+ single CJK
    characters: WordPiece ``vocab.txt``, SentencePiece, ``tokenizer.json``), else ``"en"``."""
    from litebert.tokenization import load_tokenizer, looks_chinese

    tokenizer_config = _read(model_dir / "tokenizer_config.json") or {}
    if tokenizer_config.get("litebert_kind") == "chinese":
        return "zh"
    try:
        vocab = load_tokenizer(model_dir).get_vocab()
    except LitebertError:  # no tokenizer: the card says English, as transformers' cards default to
        return "en"
    return "zh" if looks_chinese(vocab) else "en"


def _settings(settings: dict, manifest: dict | None = None) -> list[tuple[str, Any]]:
    """The run's key settings: ``(name, value)`` from ``<command>_config`` (and its ``data``), the record, and for
    pretraining the data manifest's ``settings`` (``max_seq_length``: prepare fixes it, not pretrain)."""
    command = settings.get("command", "")
    config = settings.get(f"{command}_config") or {}
    data = config.get("data")
    prepared = (manifest or {}).get("settings")
    prepared = {"max_seq_length": prepared.get("max_seq_length")} if isinstance(prepared, dict) else {}
    flat = {
        **prepared,
        **config,
        **(data if isinstance(data, dict) else {}),
        **settings,
    }
    rows = []
    for key in KEY_SETTINGS:
        value = flat.get(key)
        if isinstance(value, dict):  # precision's record
            value = value.get("precision") or value.get("requested")
        if key == "epochs" and flat.get("max_steps") is not None:  # max_steps overrides it
            continue
        if value is not None and not isinstance(value, dict | list):
            rows.append((key, value))
    return rows


def build_model_card(model_dir: str | os.PathLike, run_dir: str | os.PathLike | None = None):
    """The :class:`huggingface_hub.ModelCard` of ``model_dir`` (see the module docstring); ``run_dir``: the run
    that wrote it (its ``run_settings.json``, ``metrics.jsonl``), None for a directory on its own.

    Raises ``ValueError`` (huggingface_hub's) if the metadata it builds is not valid for the Hub: a bug, not input.
    """
    from huggingface_hub import EvalResult, ModelCard, ModelCardData

    from litebert import __version__

    model_dir = Path(model_dir)
    run = Path(run_dir) if run_dir is not None else None
    config = _read(model_dir / "config.json") or {}
    settings = (_read(run / "run_settings.json") if run is not None else None) or {}
    command = settings.get("command")
    run_config = settings.get(f"{command}_config") or {}
    architecture = (config.get("architectures") or ["AlbertModel"])[0]
    task_type, task_name = TASKS.get(architecture, ("feature-extraction", "Feature Extraction"))
    data_options = run_config.get("data") if isinstance(run_config.get("data"), dict) else {}
    task = config.get("finetuning_task") or data_options.get("task")
    hub_data = config.get("litebert_hub_dataset") or {}
    start_field = {"finetune": "model", "pretrain": "init_from"}.get(command)
    base = ((settings.get("hub") or {}).get(start_field) or {}).get("repo_id") if start_field else None
    started = _started_from(command, run_config, base)
    data_dir, eval_dir = run_config.get("data"), run_config.get("eval_data")
    manifest = _read(Path(data_dir) / "manifest.json") if isinstance(data_dir, str) else None
    # pretraining's metrics are measured on --eval-data: the model-index names its corpus, not the training one
    eval_manifest = _read(Path(eval_dir) / "manifest.json") if isinstance(eval_dir, str) else None
    metrics = _metrics(model_dir, run)
    hf_compatible = config.get("model_type") == "albert"

    dev = ((settings.get("data_sources") or {}).get("dev")) or {}
    if hub_data.get("dataset"):
        dataset_type, dataset_config = hub_data["dataset"], hub_data.get("config")
        dataset_revision = hub_data.get("revision")
        dataset_name = f"{dataset_type}" + (f" ({dataset_config})" if dataset_config else "")
        split = dev.get("split", "validation")
    elif command == "finetune":
        dataset_type, dataset_config, dataset_revision = task or "custom", None, None
        dataset_name = f"{task or 'own data'}: {Path(dev['file']).name}" if dev.get("file") else (task or "own data")
        split = "dev"
    else:
        eval_corpus = _corpus(eval_manifest)
        dataset_type, dataset_config, split, dataset_revision = "pretraining-corpus", None, "held-out", None
        dataset_name = ", ".join(_source_name(c) for c in eval_corpus) or "pretraining corpus"
        hub_corpora = [c for c in eval_corpus if c["source"].startswith(HUB_PREFIX)]
        if len(hub_corpora) == len(eval_corpus) == 1:  # one Hub data set: the model-index names it as the Hub does
            source = parse_hub_id(hub_corpora[0]["source"])
            dataset_type, dataset_config, split = source.repo, source.config, source.split
            dataset_revision = hub_corpora[0].get("revision")
    name = (run.resolve().name if run is not None else model_dir.resolve().name) or "litebert-albert"
    eval_results = [
        EvalResult(
            task_type=task_type,
            task_name=task_name,
            dataset_type=dataset_type,
            dataset_name=dataset_name,
            dataset_config=dataset_config,
            dataset_split=split,
            dataset_revision=dataset_revision,
            metric_type=metric,
            metric_value=value,
        )
        for metric, value in metrics.items()
    ]
    data = ModelCardData(
        license=LICENSE,
        language=[_language(model_dir)],
        tags=["albert", "litebert", task_type, *([task] if task else [])],
        datasets=_hub_datasets(hub_data, manifest, eval_manifest),
        base_model=base,
        library_name="transformers" if hf_compatible else None,
        pipeline_tag=task_type,
        model_name=name,
        eval_results=eval_results or None,
    )
    # a placeholder, never the real path: the card goes to the Hub, where a local path means nothing (and leaks)
    where = "path/to/" + (
        ("best" if command == "finetune" else "final") if run is not None else model_dir.resolve().name
    )
    rows = _settings(settings, manifest)
    body = _body(name, config, architecture, task_type, task, started, command, rows, metrics, __version__)
    body += "\n" + _use(config, task_type, command, hf_compatible, where)
    return ModelCard(f"---\n{data.to_yaml()}\n---\n\n{body}")


def _started_from(command: str | None, run_config: dict, base: str | None) -> str:
    """What the run started from, for the card's body: the Hub model ``base`` (a link), a local model directory
    (``finetune --model``, ``pretrain --init-from``) by its name only (``run/final`` for a run's ``final``/``best``),
    never its path, or random weights."""
    local = run_config.get("model") if command == "finetune" else run_config.get("init_from")
    if local:
        path = Path(local)
        local = f"`{path.parent.name}/{path.name}`" if path.name in ("final", "best") else f"`{path.name}`"
    if command == "finetune" and run_config.get("init") == "random":
        return f" from random weights (the architecture of {base or local})"
    if base:
        return f" from [{base}](https://huggingface.co/{base})"
    if local:
        return f" from a local model ({local})"
    return " from random weights" if command == "pretrain" else ""


def _body(name, config, architecture, task_type, task, started, command, rows, metrics, version) -> str:
    """The card's text down to its results: what the model is and what it started from, its settings, metrics."""
    sizes = ", ".join(
        f"{label} {config[key]}"
        for key, label in (
            ("num_hidden_layers", "layers"),
            ("hidden_size", "hidden"),
            ("embedding_size", "embedding"),
            ("num_attention_heads", "heads"),
            ("vocab_size", "vocabulary"),
        )
        if key in config
    )
    if command == "finetune":
        what = f" fine-tuned for {task or task_type}{started}"
    elif command == "pretrain":
        objective = "masked LM + sentence-order prediction" if architecture == "AlbertForPreTraining" else "masked LM"
        what = f" pretrained ({objective}){started}"
    else:
        what = ""
    lines = [f"# {name}", "", f"An ALBERT model ({architecture}: {sizes}){what}, trained with litebert {version}.", ""]
    if rows:
        lines += ["## Training", "", f"`litebert {command}` with:", "", "| setting | value |", "|---|---|"]
        lines += [f"| {k} | {v} |" for k, v in rows] + [""]
    if metrics:
        split = "the dev set" if command == "finetune" else "held-out pretraining data"
        lines += ["## Results", "", f"On {split}:", "", "| metric | value |", "|---|---|"]
        lines += [f"| {k} | {v:.4f} |" for k, v in metrics.items()] + [""]
    return "\n".join(lines)


def _use(config: dict, task_type: str, command: str | None, hf_compatible: bool, where: str) -> str:
    """The card's "Use" section: load snippets with the placeholder :data:`litebert.hub.REPO_PLACEHOLDER` and its
    note :data:`litebert.hub.REPO_PLACEHOLDER_NOTE` (``litebert push`` writes the repository id in their place), and
    a local copy at the placeholder path ``where``."""
    auto = AUTO_CLASSES[task_type]
    lines = ["## Use", "", f"{REPO_PLACEHOLDER_NOTE}; `{where}` is the path of a local copy of this directory.", ""]
    if hf_compatible:
        lines += [
            "In transformers:",
            "",
            "```python",
            f"from transformers import AutoTokenizer, {auto}",
            "",
            f'tokenizer = AutoTokenizer.from_pretrained("{REPO_PLACEHOLDER}")',
            f'model = {auto}.from_pretrained("{REPO_PLACEHOLDER}")',
            f'# or from a local copy: {auto}.from_pretrained("{where}")',
            "```",
            "",
        ]
    else:
        lines += [f"A litebert-only layout ({config.get('model_type')}): transformers cannot load it.", ""]
    use = (
        "predict --model {} --data FILE.tsv"
        if command == "finetune"
        else "finetune --model {} --task sst2 --output runs/sst2"
    )
    lines += [
        "In litebert:",
        "",
        "```bash",
        f"litebert {use.format(REPO_PLACEHOLDER)}",
        f"litebert {use.format(where)}  # a local copy",
        "```",
        "",
    ]
    return "\n".join(lines)


def write_model_card(model_dir: str | os.PathLike, run_dir: str | os.PathLike | None = None) -> Path:
    """Write ``model_dir/README.md`` (:func:`build_model_card`) atomically; returns its path."""
    card = build_model_card(model_dir, run_dir)
    return atomic_write_text(Path(model_dir) / CARD_NAME, str(card))


__all__ = ["CARD_NAME", "build_model_card", "write_model_card"]


def _corpus(manifest: dict | None) -> list[dict]:
    """A data manifest's ``corpus`` entries, each with its ``source`` (manifests before compressed/Hub inputs said
    ``file``, later ones ``source``)."""
    entries = (manifest or {}).get("corpus") or []
    return [
        {**e, "source": e.get("source") or e.get("file")}
        for e in entries
        if isinstance(e, dict) and isinstance(e.get("source") or e.get("file"), str)
    ]


def _source_name(entry: dict) -> str:
    """A manifest ``corpus`` entry's name for the card: a Hub dataset as its ``hf://`` id, a file by its name."""
    source = entry["source"]
    return source if source.startswith(HUB_PREFIX) else Path(source).name


def _hub_datasets(hub_data: dict, *manifests: dict | None) -> list[str] | None:
    """The card's ``datasets``: the Hub data set fine-tuned on, and the Hub corpora (``hf://``) of the pretraining
    data and evaluation data, by repository id, in order, once each; None when none came from the Hub."""
    ids = [hub_data["dataset"]] if hub_data.get("dataset") else []
    for manifest in manifests:
        ids += [parse_hub_id(c["source"]).repo for c in _corpus(manifest) if c["source"].startswith(HUB_PREFIX)]
    return list(dict.fromkeys(ids)) or None
