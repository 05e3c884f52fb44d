"""``litebert train-tokenizer`` and ``litebert prepare``: argument parsing over
:func:`litebert.tokenization.train_tokenizer` and :func:`litebert.data.prepare`."""

from __future__ import annotations

import argparse


def register(subparsers) -> None:
    p = subparsers.add_parser("train-tokenizer", help="train a SentencePiece / WordPiece / Chinese tokenizer",
                              description="Train a tokenizer on corpus files and write the Hugging Face files "
                                          "(spiece.model or vocab.txt, tokenizer.json, tokenizer_config.json, "
                                          "special_tokens_map.json) into --output.")
    p.add_argument("--corpus", nargs="+", required=True, metavar="FILE", help="corpus files or directories")
    p.add_argument("--kind", choices=("sentencepiece", "wordpiece", "chinese"), default="sentencepiece")
    p.add_argument("--vocab-size", type=int, default=30000)
    p.add_argument("--output", required=True, metavar="DIR")
    p.add_argument("--lowercase", action=argparse.BooleanOptionalAction, default=True,
                   help="lowercase text (default: yes)")
    p.add_argument("--keep-accents", action="store_true", help="keep accents (default: strip them)")
    p.add_argument("--format", default="auto",
                   choices=("auto", "bert", "wikitext", "wikiextractor", "jsonl", "plain"))
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=_train_tokenizer)

    q = subparsers.add_parser("prepare", help="make SOP + n-gram-masking pretraining shards from a corpus",
                              description="Tokenize a corpus and write pretraining instances (docs/algorithms.md §2, §3) "
                                          "as numpy shards plus manifest.json into --output.")
    q.add_argument("--corpus", nargs="+", required=True, metavar="FILE", help="corpus files or directories")
    q.add_argument("--tokenizer", required=True, metavar="DIR")
    q.add_argument("--output", required=True, metavar="DIR")
    q.add_argument("--max-seq-length", type=int, default=128)
    q.add_argument("--max-predictions-per-seq", type=int, default=20)
    q.add_argument("--masked-lm-prob", type=float, default=0.15)
    q.add_argument("--max-ngram", type=int, default=3)
    q.add_argument("--short-seq-prob", type=float, default=0.1)
    q.add_argument("--inter-sentence-task", choices=("sop", "nsp", "none"), default="sop")
    q.add_argument("--seed", type=int, default=12345)
    q.add_argument("--workers", type=int, default=1)
    q.add_argument("--static-masking", action="store_true", help="write masks into the shards")
    q.add_argument("--dupe-factor", type=int, default=None,
                   help="passes over the corpus with --static-masking (default 10 with it, 1 without)")
    q.add_argument("--whole-word-mask-zh", action="store_true", help="Chinese whole words from jieba")
    q.add_argument("--format", default="auto",
                   choices=("auto", "bert", "wikitext", "wikiextractor", "jsonl", "plain"))
    q.add_argument("--max-position-embeddings", type=int, default=512)
    q.add_argument("--shard-size", type=int, default=100_000, help="instances per shard")
    q.add_argument("--on-invalid-utf8", choices=("skip", "error"), default="skip")
    q.add_argument("--overwrite", action="store_true")
    q.add_argument("--no-progress", "--no-progress-bar", dest="no_progress", action="store_true",
                   help="no progress bar")
    q.set_defaults(func=_prepare)


def _train_tokenizer(args: argparse.Namespace) -> int:
    from litebert.corpus import CorpusStats
    from litebert.tokenization import train_tokenizer

    stats = CorpusStats()
    tok = train_tokenizer(args.corpus, args.kind, args.vocab_size, args.output, lowercase=args.lowercase,
                          keep_accents=args.keep_accents, format=args.format, seed=args.seed, stats=stats)
    line = (f"trained {tok.kind} tokenizer: {tok.vocab_size} ids -> {args.output} "
            f"({stats.documents} documents, {stats.sentences} sentences)")
    if tok.vocab_size < args.vocab_size:
        line += f"; note: the corpus gave fewer ids than --vocab-size {args.vocab_size}"
    if stats.skipped_lines:
        line += f"; skipped {stats.skipped_lines} invalid line(s) (first: {stats.first_skipped})"
    print(line)
    return 0


def _prepare(args: argparse.Namespace) -> int:
    from litebert.data import PrepareConfig, prepare

    dupe = args.dupe_factor if args.dupe_factor is not None else (10 if args.static_masking else 1)
    cfg = PrepareConfig(
        corpus=args.corpus, tokenizer=args.tokenizer, output=args.output, max_seq_length=args.max_seq_length,
        max_predictions_per_seq=args.max_predictions_per_seq, masked_lm_prob=args.masked_lm_prob,
        max_ngram=args.max_ngram, short_seq_prob=args.short_seq_prob,
        inter_sentence_task=args.inter_sentence_task, seed=args.seed, workers=args.workers,
        static_masking=args.static_masking, dupe_factor=dupe, whole_word_mask_zh=args.whole_word_mask_zh,
        format=args.format, max_position_embeddings=args.max_position_embeddings, shard_size=args.shard_size,
        on_invalid=args.on_invalid_utf8, overwrite=args.overwrite, progress=not args.no_progress)
    result = prepare(cfg)
    print(result.summary)
    return 0
