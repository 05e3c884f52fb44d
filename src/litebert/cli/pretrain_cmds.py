"""Subcommands of the pretraining area: ``litebert pretrain`` and ``litebert plot``.

``pretrain``'s options are derived from :class:`~litebert.training.pretrain.PretrainConfig`
(:mod:`litebert.cli.options`). Each parses its options and calls a library function
(:func:`litebert.training.pretrain.pretrain`, :func:`litebert.training.plot.plot_metrics`) that tests call too.
"""

from __future__ import annotations

import argparse

from litebert.cli.options import add_config_option, add_settings, config_from_args


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "pretrain", help="pretrain ALBERT (MLM + SOP) on prepared data",
        description="Pretrain ALBERT (masked LM + sentence-order prediction) on shards written by `litebert prepare`. "
                    "Under `torchrun --nproc_per_node=N -m litebert pretrain ...` it uses DDP (gloo on CPU, nccl on "
                    "GPU); --batch-size is per process. Writes OUTPUT/config.json, run_settings.json, metrics.jsonl, "
                    "tb/, checkpoints/step-N/ and final/ (an HF model directory with the tokenizer).")
    from litebert.training.pretrain import PretrainConfig

    add_config_option(p)
    add_settings(p, PretrainConfig, section="pretrain_config")
    p.set_defaults(func=run_pretrain)

    q = subparsers.add_parser("plot", help="draw loss and accuracy curves of a run to a PNG",
                              description="Read OUTPUT/metrics.jsonl and draw the train/eval loss and accuracy "
                                          "curves to OUTPUT/curves.png (or --out).")
    q.add_argument("output", help="run directory (with metrics.jsonl)")
    q.add_argument("--out", default=None, help="PNG path (default OUTPUT/curves.png)")
    q.set_defaults(func=run_plot)

    e = subparsers.add_parser(
        "export", help="write a training checkpoint (checkpoints/step-N) as an HF model directory",
        description="Turn RUN/checkpoints/step-N into a model directory with the run's tokenizer: what RUN/final/ "
                    "would be had the run stopped at step N. It loads in transformers and in `litebert finetune`.")
    e.add_argument("checkpoint", help="RUN/checkpoints/step-N of a `litebert pretrain` run")
    e.add_argument("--output", required=True, metavar="DIR", help="new model directory (must not exist)")
    e.set_defaults(func=run_export)


def run_pretrain(args: argparse.Namespace) -> int:
    from litebert.training.pretrain import pretrain

    cfg = config_from_args(args)
    pretrain(cfg)
    return 0


def run_export(args: argparse.Namespace) -> int:
    from litebert.training.pretrain import export_checkpoint

    print(f"wrote {export_checkpoint(args.checkpoint, args.output)}")
    return 0


def run_plot(args: argparse.Namespace) -> int:
    from litebert.training.plot import plot_metrics

    path = plot_metrics(args.output, args.out)
    print(f"wrote {path}")
    return 0
