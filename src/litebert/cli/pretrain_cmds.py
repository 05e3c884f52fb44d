"""Subcommands of the pretraining area: ``litebert pretrain`` and ``litebert plot``.

``pretrain``'s options are derived from :class:`~litebert.training.pretrain.PretrainConfig`
(:mod:`litebert.cli.options`). Each parses its options and calls a library function
(:func:`litebert.training.pretrain.pretrain`, :func:`litebert.training.plot.plot_metrics`) that tests call too.
"""

from __future__ import annotations

import argparse

from litebert.cli.options import add_config_settings, config_from_args
from litebert.hub import REVISION_HELP


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "pretrain",
        help="pretrain ALBERT (MLM + SOP) on prepared data",
        description="Pretrain ALBERT (masked LM + sentence-order prediction) on shards written by `litebert prepare`. "
        "Under `torchrun --nproc_per_node=N -m litebert pretrain ...` it uses DDP (gloo on CPU, nccl on "
        "GPU); --batch-size is per process. Writes OUTPUT/config.json, run_settings.json, metrics.jsonl, "
        "tb/, checkpoints/step-N/ and final/ (an HF model directory with the tokenizer) into a new or empty OUTPUT "
        "(with --resume: a pretrain run's own directory).",
    )
    add_config_settings(p, "litebert.training.pretrain:PretrainConfig", section="pretrain_config")
    p.set_defaults(func=run_pretrain)

    q = subparsers.add_parser(
        "plot",
        help="draw loss and accuracy curves of a run to a PNG",
        description="Read OUTPUT/metrics.jsonl and draw the train/eval loss and accuracy "
        "curves to OUTPUT/curves.png (or --out).",
    )
    q.add_argument("output", help="run directory (with metrics.jsonl)")
    q.add_argument("--out", default=None, help="PNG path (default OUTPUT/curves.png)")
    q.set_defaults(func=run_plot)

    e = subparsers.add_parser(
        "export",
        help="write a model directory or training checkpoint as an HF or ONNX directory",
        description="--format hf (default): turn RUN/checkpoints/step-N (or a model directory) into a model directory "
        "with the tokenizer: what RUN/final/ would be had the run stopped at step N; it loads in "
        "transformers and in `litebert finetune`. --format onnx: DIR/model.onnx (every output of the "
        "model's head, dynamic batch and sequence axes, each shared layer stored once) + config.json + "
        "tokenizer files, runnable by `litebert predict --model DIR` (docs/deploy.md).",
    )
    e.add_argument(
        "checkpoint",
        metavar="SOURCE|ORG/NAME",
        help="a model directory, a Hub id ORG/NAME, or RUN/checkpoints/step-N of a `litebert pretrain` run",
    )
    e.add_argument("--revision", metavar="REV", help=REVISION_HELP)
    e.add_argument("--output", required=True, metavar="DIR", help="new directory (must not exist)")
    e.add_argument("--format", choices=("hf", "onnx"), default="hf")
    e.add_argument("--quantize", choices=("int8",), help="onnx only: dynamic int8 weights (onnxruntime's quantizer)")
    e.add_argument(
        "--head",
        metavar="NAME",
        help="head class to export (e.g. AlbertForMaskedLM or masked-lm); default config.json's architectures",
    )
    e.set_defaults(func=run_export)


def run_pretrain(args: argparse.Namespace) -> int:
    from litebert.training.pretrain import pretrain

    cfg = config_from_args(args)
    pretrain(cfg)
    return 0


def run_export(args: argparse.Namespace) -> int:
    from litebert.export import export_model
    from litebert.hub import resolve

    source = resolve(args.checkpoint, args.revision, option="export")
    result = export_model(source, args.output, format=args.format, quantize=args.quantize, head=args.head)
    size = f", model.onnx {result.onnx_bytes / 1e6:.1f} MB" if result.onnx_bytes is not None else ""
    print(f"wrote {result.output_dir} ({result.format}, {result.head}{size})")
    return 0


def run_plot(args: argparse.Namespace) -> int:
    from litebert.training.plot import plot_metrics

    path = plot_metrics(args.output, args.out)
    print(f"wrote {path}")
    return 0
