"""``litebert`` command line: a thin layer of argument parsing over library functions.

Each area registers its subcommands from its own module (``register(subparsers)``); every subcommand parses its
options and calls a library function that tests call too. A :class:`~litebert.errors.LitebertError` is printed as
one ``error:`` line with exit status 2, and so is an ``OSError`` (the file system refusing: permissions, a full
disk, a file where a directory goes); unknown options fail loudly (argparse).
"""

from __future__ import annotations

import argparse
import functools
import os
import sys

from litebert.errors import LitebertError


def build_parser() -> argparse.ArgumentParser:
    from litebert.cli import ablate_cmds, data_cmds, finetune_cmds, model_cmds, pretrain_cmds

    from litebert import __version__

    parser = argparse.ArgumentParser(prog="litebert", allow_abbrev=False,
                                     description="ALBERT in PyTorch: tokenize, prepare, pretrain, fine-tune.")
    parser.add_argument("--version", action="version", version=f"litebert {__version__}")
    # Subcommands reject abbreviated options too: a typo such as --max-step must not pass as --max-steps.
    sub = parser.add_subparsers(dest="command", metavar="COMMAND",
                                parser_class=functools.partial(argparse.ArgumentParser, allow_abbrev=False))
    sub.required = True
    for module in (data_cmds, pretrain_cmds, finetune_cmds, model_cmds, ablate_cmds):
        module.register(sub)
    for command in sub.choices.values():
        _show_defaults(command)
    return parser


def _show_defaults(parser: argparse.ArgumentParser) -> None:
    """Give every option that has a default but no help text a ``default: X`` help line.

    ``ArgumentDefaultsHelpFormatter`` only appends defaults to options that have help text, so ``--help`` would
    otherwise hide e.g. the default ``--max-steps``.
    """
    for action in parser._actions:
        if (action.help is None and action.option_strings
                and action.default not in (None, False, argparse.SUPPRESS)):
            action.help = "default: %(default)s"


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        result = args.func(args)
    except LitebertError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `litebert info DIR | head`: the reader left; not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error when Python flushes stdout
        return 0
    except OSError as exc:  # the file system refused (permissions, disk full, a file where a directory goes)
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return int(result) if isinstance(result, int) else 0
