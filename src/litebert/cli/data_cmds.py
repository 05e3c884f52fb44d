"""``litebert train-tokenizer`` and ``litebert prepare``: options derived from
:class:`~litebert.data.tokenizer_config.TrainTokenizerConfig` and :class:`~litebert.data.PrepareConfig`, over
:func:`litebert.tokenization.train_tokenizer` and :func:`litebert.data.prepare`; ``litebert merge-data`` over
:func:`litebert.data.merge.merge_data`."""

from __future__ import annotations

import argparse

from litebert.cli.options import add_config_settings, config_from_args


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "train-tokenizer",
        help="train a SentencePiece / WordPiece / Chinese tokenizer",
        description="Train a tokenizer on corpus files and write the Hugging Face files "
        "(spiece.model or vocab.txt, tokenizer.json, tokenizer_config.json, "
        "special_tokens_map.json) into --output.",
    )
    add_config_settings(p, "litebert.data.tokenizer_config:TrainTokenizerConfig")
    p.set_defaults(func=_train_tokenizer)

    q = subparsers.add_parser(
        "prepare",
        help="make SOP + n-gram-masking pretraining shards from a corpus",
        description="Tokenize a corpus and write pretraining instances (docs/algorithms.md §2, §3) "
        "as numpy shards plus manifest.json into --output.",
    )
    add_config_settings(q, "litebert.data.prepare:PrepareConfig")
    q.set_defaults(func=_prepare)

    m = subparsers.add_parser(
        "merge-data",
        help="join the parts of `prepare --num-partitions N` into one data directory",
        description="Check that PART_DIR... are the partitions 0..N-1 of one prepare (same corpus, tokenizer and "
        "settings; every file's sha256) and write one data directory whose manifest.json lists all their shards; "
        "the shard files are hard-linked (copied across file systems), not rewritten.",
    )
    m.add_argument("parts", nargs="+", metavar="PART_DIR", help="the output directories of the partitions")
    m.add_argument("--output", metavar="DIR", help="the merged directory (new or empty, or --overwrite)")
    m.add_argument("--overwrite", action="store_true", help="replace an earlier prepare/merge-data output")
    m.add_argument("--check", action="store_true", help="only check that the parts are complete and consistent")
    m.set_defaults(func=_merge_data)


def _train_tokenizer(args: argparse.Namespace) -> int:
    from litebert.corpus import CorpusStats, empty_files_note

    cfg = config_from_args(args)
    stats = CorpusStats()
    tok = cfg.train(stats)
    line = (
        f"trained {tok.kind} tokenizer: {tok.vocab_size} ids -> {cfg.output} "
        f"({stats.documents} documents, {stats.sentences} sentences)"
    )
    if tok.vocab_size < cfg.vocab_size:
        line += f"; note: the corpus gave fewer ids than --vocab-size {cfg.vocab_size}"
    if stats.skipped_lines:
        line += f"; skipped {stats.skipped_lines} invalid line(s) (first: {stats.first_skipped})"
    if stats.empty_files:
        line += f"; {empty_files_note(stats.empty_files)}"
    print(line)
    return 0


def _prepare(args: argparse.Namespace) -> int:
    from litebert.data import prepare

    result = prepare(config_from_args(args))
    print(result.summary)
    return 0


def _merge_data(args: argparse.Namespace) -> int:
    from litebert.data.merge import merge_data

    print(merge_data(args.parts, args.output, overwrite=args.overwrite, check=args.check).summary)
    return 0
