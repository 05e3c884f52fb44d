"""``litebert`` command line: a thin layer of argument parsing over library functions.

Each area registers its subcommands from its own module (``register(subparsers)``); every subcommand parses its
options and calls a library function that tests call too. A :class:`~litebert.errors.LitebertError` is printed as
one ``error:`` line with exit status 2, and so is an ``OSError`` (the file system refusing: permissions, a full
disk, a file where a directory goes); unknown options fail loudly (argparse).
"""

from __future__ import annotations

import argparse
import sys

from litebert.errors import LitebertError


def build_parser() -> argparse.ArgumentParser:
    from litebert.cli import data_cmds, finetune_cmds, model_cmds, pretrain_cmds

    parser = argparse.ArgumentParser(prog="litebert", description="ALBERT in PyTorch: tokenize, prepare, pretrain, fine-tune.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for module in (data_cmds, pretrain_cmds, finetune_cmds, model_cmds):
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        result = args.func(args)
    except LitebertError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # the file system refused (permissions, disk full, a file where a directory goes)
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return int(result) if isinstance(result, int) else 0
