"""``litebert merge-data``: join the parts of a partitioned ``prepare`` into one prepared-data directory.

``prepare --num-partitions N --partition I`` writes part I of N (units of documents ``u`` with ``u % N == I``; every
document keeps its global index and seed, so the N parts together hold exactly the instances of a one-machine run).
:func:`merge_data` checks that the parts belong together and are complete, then builds ``OUTPUT`` with one
``manifest.json`` whose shards are the parts' shard files, renumbered in partition order, **hard-linked** (copied
when the parts are on another file system): no shard is rewritten, and ``OUTPUT`` is self-contained (deleting the
parts afterwards does not affect it). :class:`~litebert.data.dataset.PretrainingDataset` reads it like any other
prepared directory.

Checks, before anything is written: every part is a prepare output of the same format, settings, tokenizer and
corpus (same corpus-wide counts); partitions ``0..N-1`` each appear exactly once; every file's sha256 matches its
part's manifest. ``check=True`` (``--check``) runs the checks only.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from litebert.data.prepare import differences, is_prepared_dir
from litebert.data.shards import read_manifest, verify_checksums
from litebert.errors import LitebertError
from litebert.fileio import atomic_directory, atomic_write_json, check_output_target

# counts that are sums over the parts; the other counts describe the whole corpus (every part reads all of it)
PER_PART_COUNTS = (
    "documents",
    "sentences",
    "corpus_tokens",
    "unknown_tokens",
    "instances",
    "tokens",
    "dropped_documents",
)


@dataclass
class MergeResult:
    """What ``merge_data`` made (or, with ``check``, would make): counts and the one-line summary."""

    output: Path | None
    partitions: int
    instances: int
    shards: int
    linked: int = 0
    copied: int = 0
    summary: str = ""
    manifest: dict = field(default_factory=dict)


def merge_data(
    parts: list[str | os.PathLike], output: str | os.PathLike | None, overwrite: bool = False, check: bool = False
) -> MergeResult:
    """Join partition directories into ``output`` (see the module docstring); ``check``: verify only, write nothing.

    Raises:
        LitebertError: a part that is not a prepare output or is damaged (naming the file); parts of different
            settings, tokenizers or corpora (naming the parts and the differing keys); missing or duplicate
            partitions (listing which of ``0..N-1``); an ``output`` that is one of the parts or not replaceable
            (see :func:`litebert.fileio.check_output_target`).
    """
    if not parts:
        raise LitebertError("merge-data: no part directory given")
    if output is None and not check:
        raise LitebertError("merge-data: give --output DIR for the merged data (or --check to verify the parts only)")
    dirs = [Path(p) for p in parts]
    manifests = [read_manifest(d) for d in dirs]
    n = _check_partitions(dirs, manifests)
    first, m0 = dirs[0], manifests[0]
    for d, m in zip(dirs[1:], manifests[1:]):
        diffs = differences(_shared(m0), _shared(m))
        if diffs:
            # each value in the order the parts are named: this part's, then the first part's
            shown = "; ".join(f"{k}: {b!r} vs {a!r}" for k, a, b in diffs[:4])
            raise LitebertError(
                f"merge-data: {d} and {first} were not prepared alike ({shown}): every part needs the same corpus, "
                "tokenizer and settings, only --partition differs (nothing was written)"
            )
    for d in dirs:
        verify_checksums(d)
    order = sorted(range(len(dirs)), key=lambda k: _partition(manifests[k])[0])
    counts = dict(m0["counts"])
    for key in PER_PART_COUNTS:
        counts[key] = sum(int(manifests[k]["counts"].get(key, 0)) for k in order)  # (older parts: no unknown_tokens)
    result = MergeResult(
        output=None if check else Path(output),
        partitions=n,
        instances=counts["instances"],
        shards=sum(len(m["shards"]) for m in manifests),
    )
    if check:
        result.summary = (
            f"{n} partition(s) complete and consistent: {result.instances} instances in {result.shards} shard(s)"
        )
        return result
    out = Path(output)
    check_output_target(
        out,
        sources={"PART_DIR": [str(d) for d in dirs]},
        replaceable=is_prepared_dir,
        earlier="an earlier `litebert prepare` / `merge-data` output (manifest.json)",
        overwrite=overwrite,
    )
    with atomic_directory(out) as tmp:
        shards, merged_from, linked = [], [], 0
        for k in order:
            d, m = dirs[k], manifests[k]
            for shard in m["shards"]:
                name = f"shard-{len(shards):05d}"
                files = {}
                for key, entry in shard["files"].items():
                    new = entry["path"].replace(shard["name"], name, 1)
                    linked += _link_or_copy(d / entry["path"], tmp / new)
                    files[key] = {**entry, "path": new}
                shards.append({**shard, "name": name, "files": files})
            merged_from.append(
                {
                    "partition": _partition(m)[0],
                    "path": str(d),
                    "instances": m["counts"]["instances"],
                    "shards": len(m["shards"]),
                }
            )
        shutil.copytree(first / m0["tokenizer"]["path"], tmp / m0["tokenizer"]["path"])
        linked += _link_or_copy(first / m0["random_ids"]["path"], tmp / m0["random_ids"]["path"])
        manifest = {k: v for k, v in m0.items() if k != "partition"}
        manifest.update(counts=counts, shards=shards, merged_from=merged_from)
        atomic_write_json(tmp / "manifest.json", manifest)
    result.manifest = manifest
    result.linked = linked
    result.copied = 1 + sum(len(s["files"]) for s in shards) - linked
    how = f"{result.linked} file(s) hard-linked" + (f", {result.copied} copied" if result.copied else "")
    result.summary = (
        f"merged {n} partition(s) -> {out}: {result.instances} instances in {result.shards} shard(s) ({how})"
    )
    return result


def _partition(manifest: dict) -> tuple[int, int]:
    """(index, count) of a part; a prepare without partitions is part 0 of 1."""
    p = manifest.get("partition") or {"index": 0, "count": 1}
    return int(p["index"]), int(p["count"])


def _check_partitions(dirs: list[Path], manifests: list[dict]) -> int:
    counts = {_partition(m)[1] for m in manifests}
    if len(counts) > 1:
        shown = ", ".join(f"{d} of {_partition(m)[1]}" for d, m in zip(dirs, manifests))
        raise LitebertError(f"merge-data: the parts were prepared with different --num-partitions ({shown})")
    n = counts.pop()
    seen: dict[int, list[str]] = {}
    for d, m in zip(dirs, manifests):
        seen.setdefault(_partition(m)[0], []).append(str(d))
    dupes = {i: ds for i, ds in seen.items() if len(ds) > 1}
    if dupes:
        shown = "; ".join(f"partition {i}: {', '.join(ds)}" for i, ds in sorted(dupes.items()))
        raise LitebertError(f"merge-data: a partition is given twice ({shown}); give each of 0..{n - 1} once")
    missing = [i for i in range(n) if i not in seen]
    if missing:
        raise LitebertError(
            f"merge-data: partition{'s' if len(missing) > 1 else ''} {', '.join(map(str, missing))} of 0..{n - 1} "
            f"{'are' if len(missing) > 1 else 'is'} missing "
            f"({len(seen)} of {n} given); run prepare --num-partitions {n} --partition I for each, then merge again"
        )
    return n


def _shared(manifest: dict) -> dict:
    """What every part of one prepare has in common: format, tokenizer, settings, corpus, corpus-wide counts."""
    corpus = [
        {**e, "source": e["source"] if str(e["source"]).startswith("hf://") else Path(e["source"]).name}
        for e in manifest.get("corpus", [])
    ]  # the same corpus may be mounted at other paths on other machines
    return {
        "format": manifest["format"],
        "version": manifest["version"],
        "tokenizer": {**manifest["tokenizer"], "random_ids": manifest["random_ids"]["sha256"]},
        "settings": manifest["settings"],
        "corpus": corpus,
        "counts": {k: v for k, v in manifest["counts"].items() if k not in PER_PART_COUNTS},
    }


def _link_or_copy(src: Path, dst: Path) -> bool:
    """Hard-link ``src`` as ``dst``, or copy it where a link is impossible (another file system); True if linked."""
    try:
        os.link(src, dst)
        return True
    except OSError:
        shutil.copyfile(src, dst)
        return False
