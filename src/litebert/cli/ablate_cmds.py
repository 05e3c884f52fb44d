"""``litebert ablate``: argument parsing over :func:`litebert.ablate.run.ablate` (options = AblateConfig fields)."""

from __future__ import annotations

import argparse

from litebert.cli._types import non_negative_int


def register(subparsers) -> None:
    from litebert.ablate.grid import STUDIES

    p = subparsers.add_parser(
        "ablate", help="rerun the ALBERT paper's ablations in miniature (a grid of small pretraining runs)",
        description="Pretrain every cell of a study from scratch with the same data and budget, evaluate each on "
                    "held-out SOP and NSP pairs (MLM loss/accuracy, SOP and NSP accuracy) and write "
                    "DIR/results.jsonl, DIR/<study>.md (beside the paper's numbers) and DIR/<study>.png. Each cell "
                    "is a `litebert pretrain` run in DIR/<study>/<cell>/; rerunning the command skips finished "
                    "cells and resumes an interrupted one.")
    p.add_argument("--study", required=True, choices=STUDIES)
    p.add_argument("--corpus", nargs="+", required=True, metavar="FILE", help="training corpus files")
    p.add_argument("--eval-corpus", nargs="+", default=None, metavar="FILE",
                   help="held-out corpus (default: the last --eval-fraction of every corpus file's lines)")
    p.add_argument("--output", required=True, metavar="DIR")
    p.add_argument("--steps", type=non_negative_int, default=None, help="optimizer steps per cell")
    p.add_argument("--budget-minutes", type=float, default=None,
                   help="wall-clock training minutes per cell (alone: the steps are estimated from a timed probe; "
                        "with --steps: a time limit on a schedule of --steps steps)")
    p.add_argument("--base-config", default=None, metavar="JSON",
                   help="base model config.json or preset (default: the quick-start model, E64 H128 L4)")
    p.add_argument("--cells", nargs="+", default=None, metavar="CELL", help="run only these cells of the grid")
    p.add_argument("--seeds", type=non_negative_int, default=1, help="runs per cell (seeds 42, 43, ...)")
    p.add_argument("--finetune-task", default=None, metavar="NAME",
                   help="fine-tune every cell briefly on this task (sst2, mrpc, chnsenticorp), record its dev metrics")
    p.add_argument("--finetune-steps", type=non_negative_int, default=300)
    p.add_argument("--finetune-data", default=None, metavar="DIR", help="train.tsv + dev.tsv of --finetune-task")
    p.add_argument("--tokenizer", default=None, metavar="DIR",
                   help="tokenizer directory (default: train SentencePiece on the corpus, once)")
    p.add_argument("--max-seq-length", type=int, default=64)
    p.add_argument("--batch-size", type=non_negative_int, default=64)
    p.add_argument("--optimizer", choices=("lamb", "adamw"), default="adamw")
    p.add_argument("--learning-rate", type=float, default=2e-3)
    p.add_argument("--warmup-ratio", type=float, default=0.1)
    p.add_argument("--masked-lm-prob", type=float, default=0.3)
    p.add_argument("--max-predictions-per-seq", type=non_negative_int, default=20)
    p.add_argument("--eval-fraction", type=float, default=0.05)
    p.add_argument("--max-eval-sequences", type=non_negative_int, default=None)
    p.add_argument("--save-steps", type=non_negative_int, default=500)
    p.add_argument("--workers", type=non_negative_int, default=1, help="processes of `prepare`")
    p.add_argument("--threads", type=non_negative_int, default=None, help="torch intra-op threads")
    p.add_argument("--progress-bar", action="store_true")
    p.set_defaults(func=run_ablate)


def run_ablate(args: argparse.Namespace) -> int:
    from litebert.ablate.run import AblateConfig, ablate

    cfg = AblateConfig(
        study=args.study, corpus=args.corpus, eval_corpus=args.eval_corpus, output=args.output, cells=args.cells,
        steps=args.steps, budget_minutes=args.budget_minutes, base_config=args.base_config, seeds=args.seeds,
        finetune_task=args.finetune_task, finetune_steps=args.finetune_steps, finetune_data=args.finetune_data,
        tokenizer=args.tokenizer, max_seq_length=args.max_seq_length, batch_size=args.batch_size,
        optimizer=args.optimizer, learning_rate=args.learning_rate, warmup_ratio=args.warmup_ratio,
        masked_lm_prob=args.masked_lm_prob, max_predictions_per_seq=args.max_predictions_per_seq,
        eval_fraction=args.eval_fraction, max_eval_sequences=args.max_eval_sequences, save_steps=args.save_steps,
        workers=args.workers, threads=args.threads, progress_bar=args.progress_bar)
    result = ablate(cfg)
    print(f"ablate: {cfg.study}: {len(result.records)} cell run(s) evaluated ({len(result.trained)} trained now); "
          f"{result.output}/results.jsonl, {result.table}" + (f", {result.plot}" if result.plot else ""))
    return 0
