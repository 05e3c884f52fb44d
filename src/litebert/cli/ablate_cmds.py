"""``litebert ablate``: options derived from :class:`~litebert.ablate.run.AblateConfig` (:mod:`litebert.cli.options`)
over :func:`litebert.ablate.run.ablate`."""

from __future__ import annotations

import argparse

from litebert.cli.options import add_config_settings, config_from_args


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "ablate",
        help="rerun the ALBERT paper's ablations in miniature (a grid of small pretraining runs)",
        description="Pretrain every cell of a study from scratch with the same data and budget, evaluate each on "
        "held-out SOP and NSP pairs (MLM loss/accuracy, SOP and NSP accuracy) and write "
        "DIR/results.jsonl, DIR/<study>.md (beside the paper's numbers) and DIR/<study>.png. Each cell "
        "is a `litebert pretrain` run in DIR/<study>/<cell>/; rerunning the command skips finished "
        "cells and resumes an interrupted one, and refuses a cell planned with other training settings. Give "
        "--steps N, --budget-minutes M, or both.",
    )
    add_config_settings(p, "litebert.ablate.run:AblateConfig", section="ablate_config")
    p.set_defaults(func=run_ablate)


def run_ablate(args: argparse.Namespace) -> int:
    from litebert.ablate.run import ablate

    cfg = config_from_args(args)
    result = ablate(cfg)
    print(
        f"ablate: {cfg.study}: {len(result.records)} cell run(s) evaluated ({len(result.trained)} trained now); "
        f"{result.output}/results.jsonl, {result.table}" + (f", {result.plot}" if result.plot else "")
    )
    return 0
