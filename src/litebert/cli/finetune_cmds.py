"""Subcommands of this area (placeholder: registers nothing yet)."""

from __future__ import annotations


def register(subparsers) -> None:  # noqa: ARG001 - filled in by the area's owner
    return None
