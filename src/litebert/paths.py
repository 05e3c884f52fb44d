"""Where litebert finds the shared public data (``LITEBERT_DATA_DIR``, default ``../shared/data``)."""

from __future__ import annotations

import os
from pathlib import Path


def data_dir() -> Path:
    """Return the directory holding the public data sets (WikiText-2, GLUE, Chinese corpora).

    ``$LITEBERT_DATA_DIR`` when set, else ``../shared/data`` relative to the repository root (the directory that
    holds ``pyproject.toml``), else ``../shared/data`` relative to the current directory. The path may not exist.
    """
    env = os.environ.get("LITEBERT_DATA_DIR")
    if env:
        return Path(env)
    repo_root = Path(__file__).resolve().parents[2]
    if (repo_root / "pyproject.toml").exists():
        return (repo_root / ".." / "shared" / "data").resolve()
    return (Path.cwd() / ".." / "shared" / "data").resolve()


def fixtures_dir() -> Path:
    """Return the directory of test fixtures shipped beside the data (``<data_dir>/../fixtures``)."""
    env = os.environ.get("LITEBERT_FIXTURES_DIR")
    if env:
        return Path(env)
    return (data_dir() / ".." / "fixtures").resolve()
