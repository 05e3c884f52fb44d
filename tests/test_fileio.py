"""litebert.fileio: atomic writes and directory installs, sha256, read-JSON-or-explain."""

from __future__ import annotations

import hashlib
import os

import pytest

from litebert.errors import LitebertError
from litebert.fileio import (
    atomic_directory,
    atomic_write,
    atomic_write_json,
    current_umask,
    install_directory,
    read_json,
    sha256_file,
)


def test_atomic_write_json_round_trip_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "a.json"
    atomic_write_json(path, {"b": 1, "a": "é"})
    assert path.read_text(encoding="utf-8") == '{\n  "a": "é",\n  "b": 1\n}\n'  # sorted, UTF-8 kept, final newline
    atomic_write_json(path, {"b": 2, "a": 1}, sort_keys=False)
    assert read_json(path) == {"b": 2, "a": 1} and list(read_json(path)) == ["b", "a"]
    assert sorted(os.listdir(tmp_path)) == ["a.json"]


def test_atomic_write_failure_keeps_the_old_file(tmp_path):
    path = tmp_path / "weights.bin"
    path.write_bytes(b"old")

    def write(tmp):
        tmp.write_bytes(b"half")
        raise RuntimeError("killed")

    # torch.save and safetensors report a failed write (a full disk) as RuntimeError: it becomes an OSError that
    # names the file and the free space (the CLI prints an OSError as one `error:` line)
    with pytest.raises(OSError, match=r"writing .*weights\.bin failed \(killed\); .* free on its file system"):
        atomic_write(path, write)
    assert path.read_bytes() == b"old" and sorted(os.listdir(tmp_path)) == ["weights.bin"]

    def interrupted(tmp):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):  # anything else passes through unchanged
        atomic_write(path, interrupted)
    assert path.read_bytes() == b"old" and sorted(os.listdir(tmp_path)) == ["weights.bin"]


def test_atomic_directory_replaces_whole_or_not_at_all(tmp_path):
    dest = tmp_path / "best"
    with atomic_directory(dest) as tmp:
        (tmp / "x").write_text("1")
    assert (dest / "x").read_text() == "1"
    with pytest.raises(RuntimeError), atomic_directory(dest) as tmp:
        (tmp / "y").write_text("2")
        raise RuntimeError("killed while saving")
    assert sorted(os.listdir(dest)) == ["x"]  # the failed build left dest untouched
    with atomic_directory(dest) as tmp:
        (tmp / "y").write_text("2")
    assert sorted(os.listdir(dest)) == ["y"]  # replaced, not merged
    assert sorted(os.listdir(tmp_path)) == ["best"]  # no temporary or old copy left behind


@pytest.mark.parametrize("umask", [0o022, 0o027, 0o002])
def test_atomic_write_gives_the_file_the_umask_mode_not_the_writers(tmp_path, umask):
    # safetensors' save_file creates 0600 files: a model.safetensors deployed for a server running as another user
    # would be unreadable beside its 0644 config.json. The file gets the mode of any new file under the umask.
    import torch
    from safetensors.torch import load_file, save_file

    def private(tmp):
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, b"data")
        os.close(fd)

    old = os.umask(umask)
    try:
        assert current_umask() == umask
        atomic_write(tmp_path / "a.bin", private)
        atomic_write(tmp_path / "model.safetensors", lambda p: save_file({"w": torch.ones(2)}, str(p)))
        atomic_write_json(tmp_path / "b.json", {"a": 1})
    finally:
        os.umask(old)
    expected = 0o666 & ~umask  # 0644, 0640, 0664
    assert {f: oct(os.stat(tmp_path / f).st_mode & 0o777) for f in ("a.bin", "model.safetensors", "b.json")} == {
        "a.bin": oct(expected),
        "model.safetensors": oct(expected),
        "b.json": oct(expected),
    }
    assert (tmp_path / "a.bin").read_bytes() == b"data"
    assert load_file(str(tmp_path / "model.safetensors"))["w"].tolist() == [1.0, 1.0]


def test_current_umask_without_proc_sets_and_restores_it(monkeypatch):
    import builtins

    real_open = builtins.open

    def no_proc(file, *args, **kwargs):
        if str(file).startswith("/proc/"):
            raise FileNotFoundError(file)
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", no_proc)
    old = os.umask(0o027)
    try:
        assert current_umask() == 0o027 and current_umask() == 0o027  # read, and left as it was
    finally:
        os.umask(old)


def test_install_directory_recovers_from_a_stale_old_copy(tmp_path):
    dest, new = tmp_path / "final", tmp_path / "new"
    dest.mkdir()
    (tmp_path / ".old-final").mkdir()  # left by a kill between the two renames of an earlier install
    new.mkdir()
    (new / "f").write_text("new")
    install_directory(new, dest)
    assert (dest / "f").read_text() == "new" and sorted(os.listdir(tmp_path)) == ["final"]


def test_sha256_file_matches_hashlib(tmp_path):
    data = os.urandom(3 << 20)  # several 1 MiB blocks
    (tmp_path / "f").write_bytes(data)
    assert sha256_file(tmp_path / "f") == hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, r"x\.json: manifest not found"),
        (b'{"a": ', r"x\.json: not valid JSON \(Expecting value at line 1 column 7\)"),
        (b"\xff\xfe", r"x\.json: not a UTF-8 text file \(expected a manifest\)"),
        (b"[1]", r"x\.json: expected a JSON object, got list"),
    ],
)
def test_read_json_errors_name_the_file(tmp_path, content, message):
    path = tmp_path / "x.json"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(LitebertError, match=message):
        read_json(path, what="manifest", expect=dict)


def test_json_files_are_strict_json_a_non_finite_float_is_null(tmp_path):
    """An eval_loss of no scored rows is NaN: json.dumps wrote `NaN`, which JSON.parse and other strict readers
    reject. The oracle: Python's json with parse_constant raising on NaN/Infinity."""
    import json

    from litebert.fileio import atomic_write_json

    path = atomic_write_json(tmp_path / "r.json", {"eval_loss": float("nan"), "x": [1.5, float("-inf")], "n": {"y": 2}})

    def refuse(name):
        raise ValueError(name)

    assert json.loads(path.read_text(), parse_constant=refuse) == {"eval_loss": None, "n": {"y": 2}, "x": [1.5, None]}
