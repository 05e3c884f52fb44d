"""One helper per file chore: atomic writes, atomic directory installs, sha256, read-JSON-or-explain.

Every file litebert writes goes through this module, so a kill at any moment leaves either the old file or the new
one, never half of one:

- :func:`atomic_write` (and the ``_bytes``/``_text``/``_json`` shorthands) writes to a temporary file in the same
  directory, flushes and fsyncs it, then ``os.replace``-s it over the target (atomic on POSIX within one file
  system) and fsyncs the directory so the rename itself survives a power cut.
- :func:`atomic_directory` builds a whole directory under a temporary name beside the target and installs it with
  :func:`install_directory` (rename the old one aside, rename the new one in, delete the old one). POSIX has no
  portable atomic exchange of two directories: between the two renames the target name is briefly absent, but the
  old complete copy still exists as ``.old-NAME`` and the new complete copy as the temporary name, so nothing is
  ever half written.
- :func:`sha256_file` streams a file through SHA-256; :func:`read_json` reads a JSON file or raises a
  :class:`~litebert.errors.LitebertError` that names the file and what is wrong with it.

Named ``fileio`` rather than ``io`` so that ``import io`` elsewhere in the package keeps meaning the standard library.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import shutil
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from litebert.errors import LitebertError

__all__ = [
    "atomic_directory",
    "atomic_write",
    "atomic_write_bytes",
    "atomic_write_json",
    "atomic_write_text",
    "check_output_target",
    "current_umask",
    "fsync_dir",
    "install_directory",
    "json_text",
    "read_json",
    "remove_stale_temporaries",
    "sha256_bytes",
    "sha256_file",
]


def fsync_dir(path: str | os.PathLike) -> None:
    """Flush a directory's entries (a rename in it) to disk; a no-op where the platform cannot open directories."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _tmp_name(path: Path, tag: str = "tmp") -> Path:
    # Hidden and pid-tagged: two processes writing the same target never share a temporary file, and directory
    # listings (checkpoints/, data shards) can skip names that start with a dot.
    return path.with_name(f".{path.name}.{tag}-{os.getpid()}")


def remove_stale_temporaries(dest: str | os.PathLike) -> list[Path]:
    """Remove the temporary directories ``.NAME.tmp-PID`` beside ``dest`` (:func:`atomic_directory`'s) whose process
    no longer runs on this machine: what a killed run left. Returns the paths removed.

    A PID is only meaningful on its own machine: do not share one output path between machines at the same time.
    """
    dest = Path(dest)
    removed = []
    for p in dest.parent.glob(f".{dest.name}.tmp-*"):
        pid = p.name.rsplit("-", 1)[-1]
        if pid.isdigit() and p.is_dir() and int(pid) != os.getpid() and not _pid_alive(int(pid)):
            shutil.rmtree(p, ignore_errors=True)
            removed.append(p)
    return removed


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def current_umask() -> int:
    """The process's file-mode creation mask, read without changing it where Linux shows it (``/proc/self/status``,
    Linux ≥ 4.7); elsewhere set and restored at once (``os.umask`` can only be read by setting it)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o077)  # briefly a strict mask, never a permissive one, should another thread create a file now
    os.umask(mask)
    return mask


def atomic_write(path: str | os.PathLike, write: Callable[[Path], Any]) -> Path:
    """Call ``write(tmp_path)`` to write the file, then fsync it and rename it to ``path``.

    For writers that want a path (``safetensors.torch.save_file``, ``torch.save``); the temporary file is removed if
    ``write`` raises. The file gets the mode of any new file, ``0o666 & ~umask`` (0644 under the usual umask),
    whatever mode the writer created it with: safetensors' ``save_file`` creates 0600 files, which a server running
    as another user could not read. Returns ``path``.

    Raises:
        OSError: the write failed. ``torch.save`` and safetensors report a failed write (a full disk, an I/O error)
            as ``RuntimeError`` ("enforce fail at inline_container.cc ... unexpected pos"); it is raised as an
            ``OSError`` naming ``path`` and the free space of its file system.
    """
    path = Path(path)
    tmp = _tmp_name(path)
    try:
        try:
            write(tmp)
        except RuntimeError as exc:
            reason = " ".join(str(exc).split())[:200]
            raise OSError(
                f"writing {path} failed ({reason}); {free_space(path.parent)} free on its file system"
            ) from None
        with open(tmp, "rb+") as f:
            os.fchmod(f.fileno(), 0o666 & ~current_umask())
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    fsync_dir(path.parent)
    return path


def free_space(directory: str | os.PathLike) -> str:
    """The free space of ``directory``'s file system, e.g. ``"1.4 GB"`` (``"unknown"`` if it cannot be read)."""
    try:
        free = shutil.disk_usage(directory).free
    except OSError:
        return "unknown"
    for unit in ("bytes", "kB", "MB", "GB"):
        if free < 1000 or unit == "GB":
            return f"{free:.0f} {unit}" if unit == "bytes" else f"{free:.1f} {unit}"
        free /= 1000
    return "unknown"  # not reached


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (temporary file in the same directory, fsync, rename). Returns ``path``."""

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as f:
            f.write(data)

    return atomic_write(path, write)


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` as UTF-8 to ``path`` atomically. Returns ``path``."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def json_text(obj: Any, *, sort_keys: bool = True, default: Callable[[Any], Any] | None = None) -> str:
    """litebert's JSON file format: 2-space indent, UTF-8 kept as is (not ``\\u`` escaped), a final newline, and
    strict JSON: a non-finite float (an ``eval_loss`` of no rows) is ``null`` (:func:`finite`), never ``NaN``."""
    return json.dumps(finite(obj), indent=2, sort_keys=sort_keys, ensure_ascii=False, default=default) + "\n"


def finite(obj: Any) -> Any:
    """``obj`` with every non-finite float (``nan``, ``inf``) in its dicts, lists and tuples replaced by ``None``:
    ``json.dumps`` would write them as ``NaN``/``Infinity``, which JSON (RFC 8259) and strict parsers reject."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    return obj


def atomic_write_json(
    path: str | os.PathLike, obj: Any, *, sort_keys: bool = True, default: Callable[[Any], Any] | None = None
) -> Path:
    """Write ``obj`` as JSON (see :func:`json_text`) to ``path`` atomically. Returns ``path``.

    ``sort_keys=False`` keeps the dict's order (for files people read, e.g. ``eval_results.json``); ``default`` is
    :func:`json.dumps`' hook for values JSON cannot represent.
    """
    return atomic_write_text(path, json_text(obj, sort_keys=sort_keys, default=default))


def install_directory(tmp: str | os.PathLike, dest: str | os.PathLike) -> Path:
    """Move the finished directory ``tmp`` to ``dest``, replacing what is there; both must be on one file system.

    The old ``dest`` is first renamed to ``.old-NAME`` and removed only after ``tmp`` is in place, so a kill at any
    moment leaves a complete copy under one of the two names. Returns ``dest``.
    """
    tmp, dest = Path(tmp), Path(dest)
    fsync_dir(tmp)
    old = dest.with_name(f".old-{dest.name}")
    if old.exists():
        shutil.rmtree(old)
    if dest.exists():
        os.replace(dest, old)
    os.replace(tmp, dest)
    fsync_dir(dest.parent)
    if old.exists():
        shutil.rmtree(old, ignore_errors=True)
    return dest


@contextlib.contextmanager
def atomic_directory(dest: str | os.PathLike) -> Iterator[Path]:
    """Build a directory under a temporary name beside ``dest``; install it as ``dest`` when the block succeeds.

    ``with atomic_directory(out / "best") as tmp: model.save_pretrained(tmp)``. A stale temporary directory of the
    same name is removed first; if the block raises, the temporary directory is removed and ``dest`` is untouched.
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = _tmp_name(dest)
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    install_directory(tmp, dest)


def listing(names: list[str], limit: int = 5) -> str:
    """``"a, b, c and 4 more"``: the first ``limit`` names of a directory's entries, for an error message."""
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


def check_output_target(
    output: str | os.PathLike,
    *,
    sources: Mapping[str, str | os.PathLike | list | None] | None = None,
    replaceable: Callable[[Path], bool] | None = None,
    earlier: str = "",
    overwrite: bool = False,
) -> None:
    """Refuse an ``--output`` directory that a command must not write into; reads only.

    ``sources`` maps an option to the file(s) or directory the command reads (``{"--corpus": [...]}``): the output
    may not be, contain or lie inside any of them. An absent or empty output is accepted. A non-empty one is
    accepted only when ``replaceable(out)`` says it holds an earlier output of the same command (``earlier`` names
    it in the message, e.g. ``"an earlier `litebert prepare` output (manifest.json)"``) and, for a command that
    replaces the whole directory, ``overwrite`` is true (pass ``overwrite=True`` for one that adds to it).

    Raises:
        LitebertError: one line naming the output and why; nothing has been written or deleted.
    """
    out = Path(output)
    here = out.resolve()
    for option, paths in (sources or {}).items():
        for src in paths if isinstance(paths, list) else [paths]:
            if src is None:
                continue
            there = Path(src).resolve()
            how = (
                "is"
                if here == there
                else "is inside"
                if there in here.parents
                else "contains"
                if here in there.parents
                else None
            )
            if how:
                raise LitebertError(
                    f"--output {out} {how} the {option} {src}, which the command reads: choose another --output "
                    "(nothing was written or deleted)"
                )
    if not out.exists():
        return
    if not out.is_dir():
        raise LitebertError(f"--output {out} is a file, not a directory: choose another --output (nothing was written)")
    names = sorted(p.name for p in out.iterdir())
    if not names:
        return
    if replaceable is not None and replaceable(out):
        if overwrite:
            return
        raise LitebertError(f"--output {out} holds {earlier}: pass --overwrite to replace it (nothing was written)")
    shown = listing(names)
    only = f" and is not {earlier}" if earlier else ""
    raise LitebertError(
        f"--output {out} is not empty (holds {shown}){only}: choose a new or empty --output "
        "(nothing was written or deleted)"
    )


def sha256_bytes(data: bytes) -> str:
    """Hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | os.PathLike) -> str:
    """Hex SHA-256 of a file's bytes, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def read_json(path: str | os.PathLike, *, what: str = "JSON file", expect: type | None = None) -> Any:
    """Read a UTF-8 JSON file.

    ``what`` names the file's role in messages (``"config file"``, ``"checkpoint marker"``); ``expect`` (``dict`` or
    ``list``) checks the top-level type.

    Raises:
        LitebertError: ``"{path}: {what} not found"``, ``"{path}: not valid JSON (msg at line L column C)"``,
            ``"{path}: not a UTF-8 text file ..."`` or ``"{path}: expected a JSON object, got list"``.
    """
    path = Path(path)
    if not path.is_file():
        raise LitebertError(f"{path}: {what} not found")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise LitebertError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except UnicodeDecodeError:
        raise LitebertError(f"{path}: not a UTF-8 text file (expected a {what})") from None
    if expect is not None and not isinstance(data, expect):
        kind = {dict: "a JSON object", list: "a JSON array"}.get(expect, expect.__name__)
        raise LitebertError(f"{path}: expected {kind}, got {type(data).__name__}")
    return data


#: the resolved settings every run writes into its output directory (``litebert.training.run.write_run_settings``)
RUN_SETTINGS_NAME = "run_settings.json"


def run_command(directory: str | os.PathLike) -> str | None:
    """The command whose run ``directory`` holds (``run_settings.json``'s ``"command"``: ``"pretrain"``,
    ``"finetune"``, ``"evaluate"`` ...), or None when it holds no readable ``run_settings.json`` naming one."""
    path = Path(directory) / RUN_SETTINGS_NAME
    if not path.is_file():
        return None
    try:
        command = read_json(path, what="run settings", expect=dict).get("command")
    except LitebertError:
        return None
    return command if isinstance(command, str) and command else None
