"""Shard files and the manifest of a prepared-data directory.

Layout of ``OUTPUT/``::

    manifest.json                       format, version, tokenizer info, settings, counts, files + sha256
    random_ids.npy                      int64 [K]: ids the 10% random replacement may use (dynamic masking)
    shard-00000.input_ids.npy           uint16|int32 [T]: laid-out instances concatenated ([CLS] A [SEP] B [SEP])
    shard-00000.word_start.npy          uint8 [T]: 1 where a token starts a word (0 on [CLS]/[SEP])
    shard-00000.offsets.npy             int64 [n+1]: instance i is tokens[offsets[i]:offsets[i+1]]
    shard-00000.meta.npy                int64 [n, F]: instances.META_FIELDS (positions, label, len_a, ...)
    shard-00000.labels.npy              int32 [T]: static masking only; -100 where not predicted
    tokenizer/                          the tokenizer files (HF format)

Every file is written under a temporary name and renamed; the whole directory is built beside ``OUTPUT`` and
renamed into place at the end (see ``prepare``).
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np

from litebert.errors import LitebertError
from litebert.fileio import atomic_write_bytes, read_json, sha256_bytes, sha256_file

FORMAT_NAME = "litebert-pretraining-data"
FORMAT_VERSION = 1
SHARD_ARRAYS = ("input_ids", "word_start", "offsets", "meta", "labels")


def save_npy(path: Path, array: np.ndarray) -> dict:
    """Write ``array`` as ``.npy`` atomically; returns its manifest entry (name, dtype, shape, sha256)."""
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(array), allow_pickle=False)
    data = buf.getvalue()
    atomic_write_bytes(path, data)
    return {"path": path.name, "dtype": str(array.dtype), "shape": list(array.shape), "sha256": sha256_bytes(data)}


def write_shard(directory: Path, index: int, arrays: dict[str, np.ndarray]) -> dict:
    """Write one shard's arrays (keys of :data:`SHARD_ARRAYS` present in ``arrays``); returns its manifest entry."""
    name = f"shard-{index:05d}"
    files = {}
    for key in SHARD_ARRAYS:
        if key in arrays:
            files[key] = save_npy(directory / f"{name}.{key}.npy", arrays[key])
    n = int(len(arrays["offsets"]) - 1)
    return {"name": name, "instances": n, "tokens": int(arrays["offsets"][-1]), "files": files}


def read_manifest(directory: str | os.PathLike) -> dict:
    """Read ``manifest.json`` of a prepared-data directory.

    Raises:
        LitebertError: the directory or manifest is missing, not JSON, or not this format/version.
    """
    d = Path(directory)
    path = d / "manifest.json"
    if not path.is_file():
        raise LitebertError(f"{d} is not a prepared-data directory (no manifest.json); run `litebert prepare`")
    manifest = read_json(path, what="prepared-data manifest", expect=dict)
    if manifest.get("format") != FORMAT_NAME:
        raise LitebertError(f"{path}: format is {manifest.get('format')!r}, expected {FORMAT_NAME!r}")
    if manifest.get("version") != FORMAT_VERSION:
        raise LitebertError(f"{path}: version {manifest.get('version')} is not supported (expected {FORMAT_VERSION})")
    return manifest


def verify_checksums(directory: str | os.PathLike) -> None:
    """Recompute every file's sha256 and compare with the manifest; raises LitebertError naming the first bad file."""
    d = Path(directory)
    manifest = read_manifest(d)
    entries = [manifest["random_ids"]] + [f for s in manifest["shards"] for f in s["files"].values()]
    for entry in entries:
        p = d / entry["path"]
        if not p.is_file():
            raise LitebertError(f"{p}: missing (listed in manifest.json)")
        if sha256_file(p) != entry["sha256"]:
            raise LitebertError(f"{p}: sha256 differs from manifest.json (corrupted or modified)")
