"""``litebert`` command line: a thin layer of argument parsing over library functions.

Each area registers its subcommands from its own module (``register(subparsers)``); every subcommand parses its
options and calls a library function that tests call too. A :class:`~litebert.errors.LitebertError` is printed as
one ``error:`` line with exit status 2, and so is an ``OSError`` (the file system refusing: permissions, a full
disk, a file where a directory goes); unknown options fail loudly (argparse), before any missing required
option is reported, with the closest valid option named (:func:`suggest_option`).
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from collections.abc import Callable

from litebert.errors import LitebertError

#: options of transformers' ``TrainingArguments``/example scripts and PyTorch habits → ours, in the spelling with
#: dashes (underscores are turned into dashes first); the first option of the command's parser is suggested
HABITS: dict[str, tuple[str, ...]] = {
    "--lr": ("--learning-rate",),
    "--num-train-epochs": ("--epochs", "--max-steps"),
    "--num-epochs": ("--epochs", "--max-steps"),
    "--per-device-train-batch-size": ("--batch-size",),
    "--per-gpu-train-batch-size": ("--batch-size",),
    "--train-batch-size": ("--batch-size",),
    "--per-device-eval-batch-size": ("--eval-batch-size", "--batch-size"),
    "--output-dir": ("--output",),
    "--model-name-or-path": ("--model", "--init-from"),
    "--tokenizer-name": ("--tokenizer",),
    "--train-file": ("--train",),
    "--validation-file": ("--dev", "--eval-data"),
    "--test-file": ("--test",),
    "--resume-from-checkpoint": ("--resume",),
    "--warmup": ("--warmup-steps", "--warmup-ratio"),
    "--fp16": ("--precision fp16",),
    "--bf16": ("--precision bf16",),
    "--no-cuda": ("--device cpu",),
}
#: options of every parser, which say nothing about a run: suggested only for a near miss (``--hlep``), never for
#: a real-looking option (``--lr`` is as close to ``--help`` as ``difflib`` measures)
GENERIC = ("--help", "--version")


def suggest_option(name: str, known: list[str]) -> str | None:
    """The option (of ``known``) meant by the unknown ``name``, or None: ``name`` with dashes for underscores
    (``--max_steps``), its :data:`HABITS` entry (``--lr`` → ``--learning-rate``), else the closest by ``difflib``
    (0.6 of the characters in common; 0.8 for the :data:`GENERIC` options)."""
    spelled = "--" + name.lstrip("-").replace("_", "-").lower()
    if spelled in known:
        return spelled
    for target in HABITS.get(spelled, ()):
        if target.split()[0] in known:
            return target
    specific = [k for k in known if k not in GENERIC]
    close = difflib.get_close_matches(spelled, specific, n=1, cutoff=0.6)
    close = close or difflib.get_close_matches(spelled, [k for k in known if k in GENERIC], n=1, cutoff=0.8)
    return close[0] if close else None


class Parser(argparse.ArgumentParser):
    """argparse with ``allow_abbrev=False`` (a typo such as ``--max-step`` must not pass as ``--max-steps``) and
    unknown options reported first, each with the option meant (:func:`suggest_option`): ``unrecognized
    arguments: --max-stepz (did you mean --max-steps?)``, ``--lr 1e-3 (--lr: did you mean --learning-rate?)``, also
    when a required option is missing too (argparse would only say that)."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        self._argv: list[str] = []
        self._deferred: list[Callable[[Parser], None]] = []

    def defer(self, add_options: Callable[[Parser], None]) -> None:
        """Call ``add_options(self)`` only when this parser first parses, prints help or is completed
        (:meth:`complete`): a command's options come from its settings class, whose module may import torch, and
        the command line of ``litebert prepare`` should not pay for ``pretrain``'s."""
        self._deferred.append(add_options)

    def complete(self) -> Parser:
        """Add the deferred options (once), then a ``default: X`` help line where an option has none."""
        while self._deferred:
            self._deferred.pop(0)(self)
        _show_defaults(self)
        return self

    def parse_known_args(self, args=None, namespace=None):
        self.complete()
        self._argv = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def format_help(self) -> str:
        self.complete()
        return super().format_help()

    def parse_args(self, args=None, namespace=None):
        ns, extras = self.parse_known_args(args, namespace)
        if extras:
            target = self._command_parser(ns) or self
            target.error(f"unrecognized arguments: {target.describe_unknown(extras)}")
        return ns

    def _command_parser(self, ns) -> Parser | None:
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                return action.choices.get(getattr(ns, action.dest, None))
        return None

    def _unknown(self, tokens: list[str]) -> list[str]:
        known = {s for a in self._actions for s in a.option_strings}
        out = []
        for tok in tokens:
            if tok == "--":
                break
            name = tok.split("=", 1)[0]
            if tok.startswith("-") and len(tok) > 1 and not _is_number(tok) and name not in known:
                out.append(name)
        return out

    def describe_unknown(self, tokens: list[str]) -> str:
        known = [s for a in self._actions for s in a.option_strings if s.startswith("--")]
        hints = []
        for name in self._unknown(tokens):
            close = suggest_option(name, known)
            if close:
                hints.append(f"{name}: did you mean {close}?")
        return " ".join(tokens) + (f" ({'; '.join(hints)})" if hints else "")

    def error(self, message: str):
        if message.startswith("the following arguments are required"):
            unknown = self._unknown(self._argv)
            if unknown:
                message = f"unrecognized arguments: {self.describe_unknown(unknown)}"
        super().error(message)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def build_parser(*, lazy: bool = False) -> argparse.ArgumentParser:
    """The ``litebert`` parser with every subcommand. ``lazy``: each subcommand's options are added when that
    subcommand parses (:meth:`Parser.defer`), so a command imports only its own settings class (``prepare``,
    ``train-tokenizer`` and ``plot`` then run without importing torch); else every subcommand is complete."""
    from litebert import __version__
    from litebert.cli import ablate_cmds, data_cmds, finetune_cmds, model_cmds, pretrain_cmds

    parser = Parser(prog="litebert", description="ALBERT in PyTorch: tokenize, prepare, pretrain, fine-tune.")
    parser.add_argument("--version", action="version", version=f"litebert {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True
    for module in (data_cmds, pretrain_cmds, finetune_cmds, model_cmds, ablate_cmds):
        module.register(sub)
    if not lazy:
        for command in sub.choices.values():
            command.complete()
    return parser


def _show_defaults(parser: argparse.ArgumentParser) -> None:
    """Give every option that has a default but no help text a ``default: X`` help line.

    ``ArgumentDefaultsHelpFormatter`` only appends defaults to options that have help text, so ``--help`` would
    otherwise hide e.g. the default ``--max-steps``.
    """
    for action in parser._actions:
        if action.help is None and action.option_strings and action.default not in (None, False, argparse.SUPPRESS):
            action.help = "default: %(default)s"


def main(argv: list[str] | None = None) -> int:
    """Run the command line ``argv`` (default: ``sys.argv[1:]``) and return its exit status.

    Called as the program (``argv`` None) in a process of a ``torchrun`` group (``WORLD_SIZE`` > 1), the process
    ends here with ``os._exit`` once its output is flushed: every file of the run is written and closed by then,
    and the process group destroyed, but the interpreter's teardown (C++ static destructors of the distributed
    backends' threads) has aborted a finished rank with SIGABRT ("terminate called without an active exception"),
    turning a complete run into a failed ``torchrun``.
    """
    code = _run(argv)
    if argv is None and int(os.environ.get("WORLD_SIZE", "1")) > 1:
        import contextlib
        import logging

        logging.shutdown()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):  # a closed pipe or stream: nothing can reach it anyway
                stream.flush()
        os._exit(code)
    return code


def _run(argv: list[str] | None) -> int:
    parser = build_parser(lazy=True)
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
    except SystemExit as exc:  # a training run stopped by SIGINT/SIGTERM after its checkpoint (training.loop's
        if getattr(exc, "signum", None) is None:  # TrainingInterrupted, not imported here: it needs torch)
            raise
        return int(exc.code)  # 128 + the signal, through main's torchrun exit as any other status
    return int(result) if isinstance(result, int) else 0
