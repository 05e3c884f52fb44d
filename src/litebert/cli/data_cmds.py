"""``litebert train-tokenizer`` and ``litebert prepare``: options derived from
:class:`~litebert.data.tokenizer_config.TrainTokenizerConfig` and :class:`~litebert.data.PrepareConfig`, over
:func:`litebert.tokenization.train_tokenizer` and :func:`litebert.data.prepare`."""

from __future__ import annotations

import argparse

from litebert.cli.options import add_config_option, add_settings, config_from_args


def register(subparsers) -> None:
    from litebert.data.prepare import PrepareConfig
    from litebert.data.tokenizer_config import TrainTokenizerConfig

    p = subparsers.add_parser(
        "train-tokenizer",
        help="train a SentencePiece / WordPiece / Chinese tokenizer",
        description="Train a tokenizer on corpus files and write the Hugging Face files "
        "(spiece.model or vocab.txt, tokenizer.json, tokenizer_config.json, "
        "special_tokens_map.json) into --output.",
    )
    add_config_option(p)
    add_settings(p, TrainTokenizerConfig)
    p.set_defaults(func=_train_tokenizer)

    q = subparsers.add_parser(
        "prepare",
        help="make SOP + n-gram-masking pretraining shards from a corpus",
        description="Tokenize a corpus and write pretraining instances (docs/algorithms.md §2, §3) "
        "as numpy shards plus manifest.json into --output.",
    )
    add_config_option(q)
    add_settings(q, PrepareConfig)
    q.set_defaults(func=_prepare)


def _train_tokenizer(args: argparse.Namespace) -> int:
    from litebert.corpus import CorpusStats

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
    print(line)
    return 0


def _prepare(args: argparse.Namespace) -> int:
    from litebert.data import prepare

    result = prepare(config_from_args(args))
    print(result.summary)
    return 0
