"""Subcommands of the pretraining area: ``litebert pretrain`` and ``litebert plot``.

Each parses its options and calls a library function (:func:`litebert.training.pretrain.pretrain`,
:func:`litebert.training.plot.plot_metrics`) that tests call too.
"""

from __future__ import annotations

import argparse

from litebert.cli._types import non_negative_int
from litebert.precision import PRECISIONS


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "pretrain", help="pretrain ALBERT (MLM + SOP) on prepared data",
        description="Pretrain ALBERT (masked LM + sentence-order prediction) on shards written by `litebert prepare`. "
                    "Under `torchrun --nproc_per_node=N -m litebert pretrain ...` it uses DDP (gloo on CPU, nccl on "
                    "GPU); --batch-size is per process. Writes OUTPUT/config.json, run_settings.json, metrics.jsonl, "
                    "tb/, checkpoints/step-N/ and final/ (an HF model directory with the tokenizer).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--data", required=True, help="prepared training data directory (litebert prepare output)")
    p.add_argument("--eval-data", default=None, help="prepared evaluation data (MLM accuracy/perplexity, SOP accuracy)")
    p.add_argument("--model-config", required=True, help="model preset name (e.g. albert-unittest, albert-base) or config.json path")
    p.add_argument("--output", required=True, help="run directory")
    p.add_argument("--optimizer", choices=("lamb", "adamw"), default="lamb", help="LAMB (the paper's) or AdamW")
    p.add_argument("--learning-rate", type=float, default=1.76e-3, help="peak learning rate")
    p.add_argument("--warmup-steps", type=non_negative_int, default=0, help="linear warmup from 0 to the peak lr")
    p.add_argument("--max-steps", type=non_negative_int, default=1000, help="optimizer steps in the whole run")
    p.add_argument("--batch-size", type=non_negative_int, default=32, help="sequences per process per micro-batch")
    p.add_argument("--gradient-accumulation-steps", type=non_negative_int, default=1,
                   help="micro-batches per optimizer step")
    p.add_argument("--max-grad-norm", type=float, default=1.0, help="global-norm clipping (0 = off)")
    p.add_argument("--weight-decay", type=float, default=0.01,
                   help="decoupled weight decay (not on biases and LayerNorm)")
    p.add_argument("--adam-epsilon", type=float, default=1e-6, help="epsilon of LAMB/AdamW")
    p.add_argument("--bias-correction", action="store_true", help="LAMB with Adam bias correction (off in the paper)")
    p.add_argument("--lr-decay-power", type=float, default=1.0, help="polynomial decay power after warmup")
    p.add_argument("--logging-steps", type=non_negative_int, default=50, help="log train metrics every N steps")
    p.add_argument("--eval-steps", type=non_negative_int, default=0, help="evaluate every N steps (0 = at the end)")
    p.add_argument("--max-eval-batches", type=non_negative_int, default=None,
                   help="cap on evaluation batches (default: all)")
    p.add_argument("--save-steps", type=non_negative_int, default=0, help="checkpoint every N steps (0 = at the end)")
    p.add_argument("--save-total-limit", type=non_negative_int, default=None, help="keep the newest K checkpoints")
    p.add_argument("--seed", type=int, default=42, help="seed of init, data order and masking")
    p.add_argument("--init-from", default=None, metavar="DIR",
                   help="start from this model directory's weights (continued / domain-adaptive pretraining); "
                        "pass its config.json as --model-config")
    p.add_argument("--resume", default=None, metavar="{auto,PATH}",
                   help="auto: newest complete checkpoint in OUTPUT (or start fresh); or a checkpoints/step-N path")
    p.add_argument("--precision", choices=PRECISIONS, default="auto",
                   help="auto: bf16 autocast where the device computes bf16 natively, else fp32 (on resume: the "
                        "checkpoint's); bf16/fp16: autocast (fp16 adds loss scaling); weights stay fp32")
    p.add_argument("--num-workers", type=non_negative_int, default=0, help="DataLoader workers per process")
    p.add_argument("--compile", action="store_true", help="torch.compile the model")
    p.add_argument("--fsdp", action="store_true", help="FSDP2 fully_shard instead of DDP (GPUs, under torchrun)")
    p.add_argument("--device", choices=("cpu", "cuda"), default=None, help="default: cuda when available")
    p.add_argument("--no-progress-bar", "--no-progress", dest="no_progress_bar", action="store_true",
                   help="log lines only, no tqdm bar")
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
    from litebert.training.pretrain import PretrainConfig, pretrain

    cfg = PretrainConfig(
        data=args.data, output=args.output, model_config=args.model_config, eval_data=args.eval_data,
        optimizer=args.optimizer, learning_rate=args.learning_rate, warmup_steps=args.warmup_steps,
        max_steps=args.max_steps, batch_size=args.batch_size,
        gradient_accumulation_steps=args.gradient_accumulation_steps, max_grad_norm=args.max_grad_norm,
        weight_decay=args.weight_decay, adam_epsilon=args.adam_epsilon, bias_correction=args.bias_correction,
        lr_decay_power=args.lr_decay_power, logging_steps=args.logging_steps, eval_steps=args.eval_steps,
        max_eval_batches=args.max_eval_batches, save_steps=args.save_steps, save_total_limit=args.save_total_limit,
        seed=args.seed, resume=args.resume, init_from=args.init_from, precision=args.precision,
        num_workers=args.num_workers,
        compile=args.compile, fsdp=args.fsdp, device=args.device, progress_bar=not args.no_progress_bar)
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
