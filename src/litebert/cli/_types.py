"""argparse ``type=`` converters shared by the subcommands: a bad value is one clear usage error."""

from __future__ import annotations

import argparse


def _int_at_least(text: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """An integer ≥ 1 (counts: epochs, batch sizes)."""
    return _int_at_least(text, 1)


def non_negative_int(text: str) -> int:
    """An integer ≥ 0 (step intervals where 0 means "never")."""
    return _int_at_least(text, 0)
