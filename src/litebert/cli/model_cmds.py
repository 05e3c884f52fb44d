"""Model subcommands: ``convert-tf`` (TensorFlow ALBERT checkpoint -> model directory), ``info`` and ``push``.

Each parses its options and calls a library function (:mod:`litebert.tf.convert`, :mod:`litebert.info`,
:mod:`litebert.hub`); input problems surface as :class:`~litebert.errors.LitebertError` (one ``error:`` line, exit 2).
"""

from __future__ import annotations

import argparse

from litebert.hub import REVISION_HELP


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "convert-tf",
        help="convert a TensorFlow ALBERT checkpoint (google-research/albert or albert_zh) to a model directory",
        description=(
            "Read a TensorFlow V2 checkpoint (PREFIX.index + PREFIX.data-*; no TensorFlow needed), map its "
            "variables to litebert/Hugging Face names (optimizer slots and global_step skipped) and write a model "
            "directory with the tokenizer files. Official-layout checkpoints give a directory transformers loads; "
            "albert_zh's own layout gives a litebert-only one (model_type litebert_albert)."
        ),
    )
    p.add_argument(
        "--checkpoint",
        required=True,
        metavar="PREFIX",
        help="checkpoint prefix, e.g. albert_base/model.ckpt-best (its .index/.data file or directory also work)",
    )
    p.add_argument(
        "--config", required=True, metavar="JSON", help="the albert_config.json released with the checkpoint"
    )
    tok = p.add_mutually_exclusive_group()
    tok.add_argument("--vocab", metavar="VOCAB_TXT", help="WordPiece vocab.txt (Chinese/albert_zh models)")
    tok.add_argument("--spm-model", metavar="MODEL", help="SentencePiece model (English models: 30k-clean.model)")
    p.add_argument("--output", required=True, metavar="DIR", help="model directory to write")
    p.add_argument(
        "--layout",
        choices=("auto", "official", "albert_zh"),
        default="auto",
        help="checkpoint layout (default: detected from the variable names)",
    )
    p.add_argument(
        "--heads",
        choices=("auto", "pretraining", "none"),
        default="auto",
        help="auto: AlbertForPreTraining when the checkpoint has cls/ heads, else AlbertModel",
    )
    p.add_argument(
        "--skip-unknown",
        action="store_true",
        help="convert even if the checkpoint has variables that are not ALBERT weights (they are listed)",
    )
    p.set_defaults(func=run_convert_tf)

    q = subparsers.add_parser(
        "info",
        help="describe a model directory or a TensorFlow checkpoint",
        description="Print the layout, config, parameter count and tokenizer of a model directory or TF checkpoint.",
    )
    q.add_argument(
        "path",
        metavar="DIR|CHECKPOINT|ORG/NAME",
        help="a model or run directory, a TF checkpoint, or a Hub id ORG/NAME",
    )
    q.add_argument("--revision", metavar="REV", help=REVISION_HELP)
    q.set_defaults(func=run_info)

    u = subparsers.add_parser(
        "push",
        help="upload a model directory (final/, best/, an export) to the Hugging Face Hub",
        description="Upload DIR (config.json, weights, tokenizer files, the model card README.md) to the Hub "
        "repository ORG/NAME in one commit, creating the repository if needed. Refused before anything is sent: a "
        "training checkpoint (push a fine-tuning run's best/, or `litebert export` a pretraining checkpoint), a directory without a model or without a tokenizer. The token is "
        "huggingface_hub's (HF_TOKEN or `hf auth login`).",
    )
    u.add_argument("directory", metavar="DIR", help="the model directory (e.g. RUN/best or RUN/final)")
    u.add_argument("--repo-id", required=True, metavar="ORG/NAME", help="the Hub repository (created if absent)")
    u.add_argument("--private", action="store_true", help="create the repository private")
    u.add_argument("--revision", metavar="BRANCH", help="the branch to commit to (created if absent; default main)")
    u.set_defaults(func=run_push)


def run_convert_tf(args: argparse.Namespace) -> int:
    from litebert.tf.convert import convert_tf_checkpoint  # here, not at the top: keeps `litebert --help` fast

    result = convert_tf_checkpoint(
        args.checkpoint,
        args.config,
        args.output,
        vocab=args.vocab,
        spm_model=args.spm_model,
        layout=args.layout,
        skip_unknown=args.skip_unknown,
        heads=args.heads,
    )
    cfg = result.config
    rep = result.report
    print(f"layout: {result.layout} ({cfg.embedding_layout} embeddings, {cfg.layer_norm_position}-LN)")
    print(
        f"loaded {len(rep.loaded)} tensors; skipped {len(rep.skipped_optimizer)} optimizer slot/bookkeeping "
        f"variables" + (f"; global_step {result.global_step}" if result.global_step is not None else "")
    )
    if rep.identity_projection:
        print("embedding_hidden_mapping_in absent (E == H): identity projection")
    if rep.skipped_unknown:
        print(
            f"skipped {len(rep.skipped_unknown)} variables that are not ALBERT weights: "
            + ", ".join(rep.skipped_unknown)
        )
    if result.ignored_config_keys:
        print("config keys ignored: " + ", ".join(result.ignored_config_keys))
    if not cfg.hf_compatible:
        print(f"note: litebert-only model ({cfg.hf_incompatibility}); transformers cannot load it")
    print(f"parameters: {result.model.num_parameters():,}")
    print(
        f"wrote {result.output_dir}"
        + (f" (tokenizer: {', '.join(result.tokenizer_files)})" if result.tokenizer_files else " (no tokenizer given)")
    )
    return 0


def run_info(args: argparse.Namespace) -> int:
    from litebert.hub import resolve
    from litebert.info import inspect_path  # here, not at the top: keeps `litebert --help` fast

    info = inspect_path(resolve(args.path, args.revision, option="info"))
    print(info.to_text())
    return 0


def run_push(args: argparse.Namespace) -> int:
    from litebert.hub import push_model

    result = push_model(args.directory, args.repo_id, private=args.private, revision=args.revision)
    print(f"pushed {len(result.files)} files to {result.repo_id}@{result.revision}: {result.commit_url}")
    return 0


__all__ = ["register", "run_convert_tf", "run_info", "run_push"]
