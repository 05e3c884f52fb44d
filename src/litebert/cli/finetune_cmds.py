"""``litebert finetune``, ``litebert evaluate``, ``litebert predict``: argument parsing over
:mod:`litebert.finetune.run`."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys

from litebert.cli._types import positive_int
from litebert.precision import PRECISIONS

_PRECISION_HELP = ("auto: bf16 autocast where the device computes bf16 natively, else fp32; bf16/fp16: autocast "
                   "(weights stay fp32)")


def _add_data_options(p: argparse.ArgumentParser) -> None:
    from litebert.finetune.kinds import TASK_TYPES
    from litebert.finetune.tasks import TASKS

    g = p.add_argument_group("data layout")
    g.add_argument("--task", choices=sorted(TASKS), metavar="NAME",
                   help=f"known task: fills in columns, labels and metrics ({', '.join(TASKS)})")
    g.add_argument("--text-column", metavar="C", help="text column: header name or 0-based index")
    g.add_argument("--text-pair-column", metavar="C", help="second text column of sentence-pair tasks")
    g.add_argument("--label-column", metavar="C", help="label column: header name or 0-based index")
    g.add_argument("--no-header", action="store_true", help="the files have no header row (columns by index)")
    g.add_argument("--delimiter", metavar="D", help="field separator: \\t (default for .tsv), ',' (.csv), ';' ...")
    g.add_argument("--label-separator", default=",", metavar="S",
                   help="separator between the labels of a multi-label field (default ',')")
    g.add_argument("--task-type", choices=TASK_TYPES,
                   help="kind of task for files of one's own (default: the --task preset's, else classification)")
    g.add_argument("--word-column", type=int, metavar="I",
                   help="token classification: 0-based word column of a CoNLL-style file (default 0)")
    g.add_argument("--tag-column", type=int, metavar="I",
                   help="token classification: 0-based tag column of a CoNLL-style file (default: the last)")
    g.add_argument("--max-seq-length", type=int, default=128, help="tokens per example; longer rows are truncated")
    g.add_argument("--tokenizer", metavar="DIR", help="tokenizer directory (default: the model directory)")
    g.add_argument("--device", choices=("cpu", "cuda"), help="default: cuda when available")


def _data_options(args: argparse.Namespace, required: bool = True):
    from litebert.finetune.run import DataOptions

    given = args.task or args.text_column is not None or args.label_column is not None or args.task_type
    if not given and not required:
        return None
    return DataOptions(task=args.task, text_column=args.text_column, text_pair_column=args.text_pair_column,
                       label_column=args.label_column, header=False if args.no_header else None,
                       delimiter=args.delimiter, label_separator=args.label_separator, task_type=args.task_type,
                       word_column=args.word_column, tag_column=args.tag_column)


def _setup_logging() -> None:
    root = logging.getLogger("litebert")
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        root.addHandler(handler)
        # under torchrun only rank 0 reports (the other ranks read the same files and would repeat every line)
        root.setLevel(logging.INFO if os.environ.get("RANK", "0") == "0" else logging.ERROR)


def cmd_finetune(args: argparse.Namespace) -> int:
    from litebert.finetune.run import FinetuneConfig, finetune

    _setup_logging()
    cfg = FinetuneConfig(
        model=args.model, train_file=args.train, dev_file=args.dev, test_file=args.test, output_dir=args.output,
        data=_data_options(args), metrics=tuple(args.metric) if args.metric else None,
        problem_type=args.problem_type, epochs=args.epochs, max_steps=args.max_steps, batch_size=args.batch_size,
        eval_batch_size=args.eval_batch_size, learning_rate=args.learning_rate, warmup_ratio=args.warmup_ratio,
        weight_decay=args.weight_decay, max_grad_norm=args.max_grad_norm, optimizer=args.optimizer,
        max_seq_length=args.max_seq_length, seed=args.seed, data_seed=args.data_seed, eval_steps=args.eval_steps,
        logging_steps=args.logging_steps, early_stopping_patience=args.early_stopping_patience,
        max_train_examples=args.max_train_examples, max_eval_examples=args.max_eval_examples, init=args.init,
        tokenizer=args.tokenizer, classifier_dropout=args.classifier_dropout, hidden_dropout=args.hidden_dropout,
        precision=args.precision, device=args.device, progress_bar=not args.no_progress,
        keep_checkpoints=not args.no_checkpoints, resume=args.resume)
    result = finetune(cfg)
    if os.environ.get("RANK", "0") != "0":  # under torchrun: rank 0 prints the summary
        return 0
    print(json.dumps({"best_dir": str(result.best_dir), "metric": result.metric, "best_step": result.best_step,
                      "eval_results": result.eval_results, "test_results": result.test_results,
                      "steps": result.steps, "truncated": result.truncated}, indent=2))
    return 0


def _eval_config(args: argparse.Namespace):
    from litebert.finetune.run import EvaluateConfig

    return EvaluateConfig(model=args.model, data_file=args.data, output_dir=args.output,
                          data=_data_options(args, required=False),
                          metrics=tuple(args.metric) if getattr(args, "metric", None) else None,
                          batch_size=args.batch_size, max_seq_length=args.max_seq_length, tokenizer=args.tokenizer,
                          device=args.device, max_examples=args.max_examples,
                          precision=args.precision)


def cmd_evaluate(args: argparse.Namespace) -> int:
    from litebert.finetune.run import evaluate

    _setup_logging()
    result = evaluate(_eval_config(args))
    if os.environ.get("RANK", "0") != "0":  # under torchrun: rank 0 prints
        return 0
    print(json.dumps({**result.metrics, "num_examples": result.num_examples, "truncated": result.truncated}, indent=2))
    return 0


def cmd_predict(args: argparse.Namespace) -> int:
    from litebert.finetune.run import predict

    _setup_logging()
    result = predict(_eval_config(args))
    if os.environ.get("RANK", "0") != "0":  # under torchrun: rank 0 prints
        return 0
    if result.predictions_file is None:  # no --output: predictions to stdout
        for i, pred in enumerate(result.predictions):
            print(f"{i}\t{pred}")
    else:
        print(f"wrote {result.num_examples} predictions to {result.predictions_file}", file=sys.stderr)
    return 0


def register(subparsers) -> None:
    from litebert.finetune.metrics import METRICS
    from litebert.finetune.run import INITS, OPTIMIZERS
    from litebert.finetune.tasks import PROBLEM_TYPES

    p = subparsers.add_parser(
        "finetune", help="fine-tune a model directory on labelled files (classification, regression, NER, "
                         "multiple choice, QA)",
        description="Fine-tune ALBERT on TSV/CSV/JSONL files with the pretraining loop; keeps OUTPUT/best (HF dir + "
                    "tokenizer), OUTPUT/eval_results.json, OUTPUT/predictions.tsv, metrics.jsonl, tb/.")
    p.add_argument("--model", required=True, metavar="DIR", help="model directory (HF format, e.g. pretraining final/)")
    p.add_argument("--train", required=True, metavar="FILE")
    p.add_argument("--dev", required=True, metavar="FILE")
    p.add_argument("--test", metavar="FILE", help="also predict this file (OUTPUT/test_predictions.tsv)")
    p.add_argument("--output", required=True, metavar="DIR")
    _add_data_options(p)
    p.add_argument("--metric", nargs="+", choices=METRICS, help="metrics; the first picks the best checkpoint")
    p.add_argument("--problem-type", choices=PROBLEM_TYPES)
    p.add_argument("--epochs", type=float, default=3.0)
    p.add_argument("--max-steps", type=positive_int, help="optimizer steps (overrides --epochs)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--eval-batch-size", type=int, default=64)
    p.add_argument("--learning-rate", type=float, default=2e-5)
    p.add_argument("--warmup-ratio", type=float, default=0.1)
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--max-grad-norm", type=float, default=1.0, help="global-norm clip; 0 = off")
    p.add_argument("--optimizer", choices=OPTIMIZERS, default="adamw")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--data-seed", type=int, default=0, help="seed of the --max-*-examples subsample")
    p.add_argument("--eval-steps", type=int, default=0, help="evaluate every N steps (0 = once per epoch)")
    p.add_argument("--logging-steps", type=int, default=50)
    p.add_argument("--early-stopping-patience", type=positive_int, metavar="N",
                   help="stop after N evaluations without improvement")
    p.add_argument("--max-train-examples", type=positive_int, metavar="N", help="random subsample of train")
    p.add_argument("--max-eval-examples", type=positive_int, metavar="N", help="random subsample of dev")
    p.add_argument("--init", choices=INITS, default="pretrained",
                   help="'random': same architecture, fresh weights (the baseline of scripts/compare_pretraining.py)")
    p.add_argument("--classifier-dropout", type=float, help="override classifier_dropout_prob")
    p.add_argument("--hidden-dropout", type=float, help="override hidden/attention dropout")
    p.add_argument("--precision", choices=PRECISIONS, default="auto", help=_PRECISION_HELP)
    p.add_argument("--no-progress", "--no-progress-bar", dest="no_progress", action="store_true",
                   help="no progress bar")
    p.add_argument("--no-checkpoints", action="store_true",
                   help="delete the training-state checkpoints/ at the end (best/ is kept)")
    p.add_argument("--resume", metavar="auto|PATH",
                   help="continue from the newest complete checkpoint in OUTPUT/checkpoints (auto) or from PATH")
    p.set_defaults(func=cmd_finetune)

    for name, func, helptext in (
            ("evaluate", cmd_evaluate, "metrics of a fine-tuned model on a labelled file"),
            ("predict", cmd_predict, "predictions of a fine-tuned model for every row of a file")):
        q = subparsers.add_parser(name, help=helptext, description=helptext + ". Columns default to the task "
                                  "saved in the model's config.json (finetuning_task).")
        q.add_argument("--model", required=True, metavar="DIR", help="fine-tuned model directory (e.g. OUTPUT/best)")
        q.add_argument("--data", required=True, metavar="FILE")
        q.add_argument("--output", metavar="DIR",
                       help="write eval_results.json / predictions.tsv here" +
                            (" (default: print predictions)" if name == "predict" else ""))
        _add_data_options(q)
        if name == "evaluate":
            q.add_argument("--metric", nargs="+", choices=METRICS)
        q.add_argument("--batch-size", type=int, default=64)
        q.add_argument("--max-examples", type=positive_int, metavar="N", help="only the first N rows")
        q.add_argument("--precision", choices=PRECISIONS, default="auto", help=_PRECISION_HELP)
        q.set_defaults(func=func)

