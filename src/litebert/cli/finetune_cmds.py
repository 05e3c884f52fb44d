"""``litebert finetune``, ``litebert evaluate``, ``litebert predict``: options derived from
:class:`~litebert.finetune.run.FinetuneConfig` / :class:`~litebert.finetune.run.EvaluateConfig`, over
:mod:`litebert.finetune.run`."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys

from litebert.cli.options import add_config_settings, config_from_args
from litebert.fileio import finite


def _eval_data_rule(values: dict) -> dict:
    """evaluate/predict: QA options alone (no task, column or task type) ask for a QA model, so that a model of another
    kind is refused rather than given options it ignores. Other layout options alone (``--delimiter``,
    ``--no-header`` …) go through: :func:`litebert.finetune.run.evaluate` lays them over the layout saved with the
    model."""
    data = values.get("data")
    qa = ("doc_stride", "max_query_length", "n_best_size", "max_answer_length")
    alone = isinstance(data, dict) and not any(
        data.get(k) is not None for k in ("task", "text_column", "label_column", "task_type")
    )
    if alone and any(data.get(k) is not None for k in qa):  # QA options alone: a QA model, the rest as saved with it
        return {**values, "data": {"task_type": "qa", **{k: data[k] for k in qa if data.get(k) is not None}}}
    return values


class _StderrHandler(logging.StreamHandler):
    """A StreamHandler on whatever ``sys.stderr`` is when a record is written, as logging's own last-resort handler:
    one set up by an earlier command in the same process (a notebook, a test, a script calling ``cli.main`` twice)
    then writes where stderr is now, not into a stream that was replaced and closed since."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


def _setup_logging() -> None:
    root = logging.getLogger("litebert")
    if not root.handlers:
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter("%(message)s"))
        root.addHandler(handler)
        # under torchrun only rank 0 reports (the other ranks read the same files and would repeat every line)
        root.setLevel(logging.INFO if os.environ.get("RANK", "0") == "0" else logging.ERROR)


def cmd_finetune(args: argparse.Namespace) -> int:
    from litebert.finetune.run import finetune

    _setup_logging()
    cfg = config_from_args(args)
    result = finetune(cfg)
    if os.environ.get("RANK", "0") != "0":  # under torchrun: rank 0 prints the summary
        return 0
    print(
        json.dumps(
            finite(
                {
                    "best_dir": str(result.best_dir),
                    "metric": result.metric,
                    "best_step": result.best_step,
                    "eval_results": result.eval_results,
                    "test_results": result.test_results,
                    "steps": result.steps,
                    "truncated": result.truncated,
                }
            ),
            indent=2,
        )
    )
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    from litebert.finetune.run import evaluate

    _setup_logging()
    result = evaluate(config_from_args(args, _eval_data_rule))
    if os.environ.get("RANK", "0") != "0":  # under torchrun: rank 0 prints
        return 0
    summary = {**result.metrics, "num_examples": result.num_examples, "truncated": result.truncated}
    print(json.dumps(finite(summary), indent=2))  # strict JSON, as eval_results.json
    return 0


def cmd_predict(args: argparse.Namespace) -> int:
    from litebert.finetune.run import predict

    _setup_logging()
    result = predict(config_from_args(args, _eval_data_rule))
    if os.environ.get("RANK", "0") != "0":  # under torchrun: rank 0 prints
        return 0
    if result.predictions_file is None:  # no --output: predictions to stdout
        for i, pred in zip(result.indices, result.predictions, strict=True):  # i: the row in the file
            print(f"{i}\t{' '.join(pred) if isinstance(pred, list) else pred}")  # NER: the tags of a sentence
    else:
        print(f"wrote {result.num_examples} predictions to {result.predictions_file}", file=sys.stderr)
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "finetune",
        help="fine-tune a model directory on labelled files (classification, regression, NER, multiple choice, QA)",
        description="Fine-tune ALBERT on TSV/CSV/JSONL files with the pretraining loop. Writes into a new or empty "
        "OUTPUT: best/ (HF dir + tokenizer), eval_results.json, the dev predictions of best/ (classification and "
        "multiple choice: predictions.tsv; NER: predictions.txt, or predictions.jsonl for JSON-lines input; QA: "
        "predictions.json and nbest_predictions.json, + null_odds.json for squad_v2), test_predictions.* with "
        "--test, finetune_config.json, run_settings.json, metrics.jsonl, tb/ and checkpoints/ (one at every "
        "evaluation by default; --resume auto continues an interrupted run from the newest).",
    )
    add_config_settings(p, "litebert.finetune.run:FinetuneConfig", section="finetune_config")
    p.set_defaults(func=cmd_finetune)

    for name, func, helptext in (
        ("evaluate", cmd_evaluate, "metrics of a fine-tuned model on a labelled file"),
        ("predict", cmd_predict, "predictions of a fine-tuned model for every row of a file"),
    ):
        others = [f"{o}_config" for o in ("evaluate", "predict") if o != name]  # the same settings
        q = subparsers.add_parser(
            name,
            help=helptext,
            description=helptext + ". Columns default to the task saved in the model's config.json (finetuning_task), "
            "--max-seq-length to the length the model was fine-tuned with. --output DIR gets run_settings.json"
            + (", eval_results.json" if name == "evaluate" else "")
            + " and the predictions (file names as finetune's); a DIR that already holds one of them is refused.",
        )
        add_config_settings(q, "litebert.finetune.run:EvaluateConfig", section=(f"{name}_config", *others))
        q.set_defaults(func=func)
