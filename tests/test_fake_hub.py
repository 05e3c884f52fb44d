"""The local Hub of tests/_fake_hub.py, checked through the real huggingface_hub and datasets clients: what they
download is byte for byte what the repository holds, a second run offline reads the cache, and a wrong id, a wrong
revision, a gated and a private repository raise the errors the client raises against the real Hub."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from huggingface_hub import HfApi, hf_hub_download, snapshot_download
from huggingface_hub.errors import (
    GatedRepoError,
    LocalEntryNotFoundError,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)

FILES = {"config.json": b'{"model_type": "albert"}', "model.safetensors": bytes(range(256)) * 40, "sub/notes.txt": b"x"}


def test_hf_hub_download_and_revisions(fake_hub):
    main = fake_hub.add_repo("org/tiny", FILES)
    v1 = fake_hub.add_repo("org/tiny", {**FILES, "config.json": b'{"v": 1}'}, revision="v1")
    assert Path(hf_hub_download("org/tiny", "model.safetensors")).read_bytes() == FILES["model.safetensors"]
    assert Path(hf_hub_download("org/tiny", "config.json", revision="v1")).read_bytes() == b'{"v": 1}'
    # by commit sha: the older main commit stays reachable after main moves on
    fake_hub.add_repo("org/tiny", {"config.json": b"{}"})
    assert Path(hf_hub_download("org/tiny", "config.json", revision=main)).read_bytes() == FILES["config.json"]
    assert HfApi().model_info("org/tiny", revision="v1").sha == v1
    with pytest.raises(RevisionNotFoundError):
        hf_hub_download("org/tiny", "config.json", revision="no-such-branch")
    with pytest.raises(RemoteEntryNotFoundError):
        hf_hub_download("org/tiny", "missing.bin")
    with pytest.raises(RepositoryNotFoundError):
        hf_hub_download("org/nothing", "config.json")


def test_snapshot_download_filters_then_works_offline(fake_hub):
    sha = fake_hub.add_repo("org/tiny", FILES)
    path = Path(snapshot_download("org/tiny", allow_patterns=["*.json", "*.safetensors"]))
    assert path.name == sha
    assert sorted(p.relative_to(path).as_posix() for p in path.rglob("*") if p.is_file()) == [
        "config.json",
        "model.safetensors",
    ]
    assert ("GET", "/org/tiny/resolve/" + sha + "/sub/notes.txt") not in fake_hub.requests

    served = len(fake_hub.requests)
    fake_hub.go_offline()
    again = snapshot_download("org/tiny", allow_patterns=["*.json", "*.safetensors"])
    assert Path(again) == path and len(fake_hub.requests) == served  # nothing asked of the server
    with pytest.raises(LocalEntryNotFoundError):
        snapshot_download("org/never-downloaded")


def test_tree_and_paths_info(fake_hub):
    fake_hub.add_repo("org/tiny", FILES)
    api = HfApi()
    top = {(e.path, type(e).__name__) for e in api.list_repo_tree("org/tiny")}
    assert top == {("config.json", "RepoFile"), ("model.safetensors", "RepoFile"), ("sub", "RepoFolder")}
    every = {e.path: e.size for e in api.list_repo_tree("org/tiny", recursive=True) if hasattr(e, "size")}
    assert every == {path: len(content) for path, content in FILES.items()}
    info = api.get_paths_info("org/tiny", ["config.json", "sub", "absent"])
    assert [(e.path, type(e).__name__) for e in info] == [("config.json", "RepoFile"), ("sub", "RepoFolder")]


def test_gated_and_private_repositories_need_the_token(fake_hub, monkeypatch):
    fake_hub.add_repo("org/gated", FILES, gated=True)
    fake_hub.add_repo("org/private", FILES, private=True)
    with pytest.raises(GatedRepoError) as no_token:
        hf_hub_download("org/gated", "config.json")
    assert no_token.value.response.status_code == 401
    with pytest.raises(GatedRepoError) as wrong_token:
        hf_hub_download("org/gated", "config.json", token="hf_someone_else")
    assert wrong_token.value.response.status_code == 403
    with pytest.raises(RepositoryNotFoundError):
        snapshot_download("org/private")

    monkeypatch.setenv("HF_TOKEN", fake_hub.token)  # huggingface_hub reads HF_TOKEN at each call
    assert Path(hf_hub_download("org/gated", "config.json")).read_bytes() == FILES["config.json"]
    assert (Path(snapshot_download("org/private")) / "sub" / "notes.txt").read_bytes() == b"x"


def test_hf_file_system_reads_ranges(fake_hub):
    from huggingface_hub import HfFileSystem

    fake_hub.add_repo("org/data", {"data/train.bin": bytes(range(200))}, repo_type="dataset")
    fs = HfFileSystem()
    assert fs.ls("datasets/org/data/data", detail=False) == ["datasets/org/data/data/train.bin"]
    with fs.open("datasets/org/data/data/train.bin", "rb", block_size=16) as f:
        f.seek(100)
        assert f.read(10) == bytes(range(100, 110))


def _jsonl(rows: list[dict]) -> bytes:
    return "".join(json.dumps(row) + "\n" for row in rows).encode()


def test_datasets_loads_jsonl_and_parquet_and_then_offline(fake_hub):
    datasets = pytest.importorskip("datasets")
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    import io

    train = [{"sentence": f"s{i}", "label": i % 2} for i in range(7)]
    fake_hub.add_repo(
        "org/glue-like", {"train.jsonl": _jsonl(train), "validation.jsonl": _jsonl(train[:3])}, repo_type="dataset"
    )
    loaded = datasets.load_dataset("org/glue-like")
    assert loaded["train"].to_list() == train and loaded["validation"].num_rows == 3

    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(train), buffer)
    fake_hub.add_repo("org/corpus", {"data/train-00000.parquet": buffer.getvalue()}, repo_type="dataset")
    streamed = datasets.load_dataset("org/corpus", split="train", streaming=True)
    assert list(streamed) == train
    jsonl_streamed = datasets.load_dataset("org/glue-like", split="validation", streaming=True)
    assert list(jsonl_streamed) == train[:3]

    fake_hub.go_offline()
    served = len(fake_hub.requests)
    assert datasets.load_dataset("org/glue-like")["train"].to_list() == train
    assert len(fake_hub.requests) == served
    with pytest.raises(ConnectionError):
        datasets.load_dataset("org/never-downloaded")


def test_datasets_errors(fake_hub, monkeypatch):
    datasets = pytest.importorskip("datasets")
    from datasets.exceptions import DatasetNotFoundError

    fake_hub.add_repo("org/gated-data", {"train.jsonl": _jsonl([{"a": 1}])}, repo_type="dataset", gated=True)
    with pytest.raises(DatasetNotFoundError):
        datasets.load_dataset("org/no-such-data")
    with pytest.raises(DatasetNotFoundError, match="gated"):
        datasets.load_dataset("org/gated-data")
    with pytest.raises(DatasetNotFoundError, match="Revision 'nope'"):
        datasets.load_dataset("org/gated-data", revision="nope", token=fake_hub.token)
    monkeypatch.setenv("HF_TOKEN", fake_hub.token)
    assert datasets.load_dataset("org/gated-data", split="train").to_list() == [{"a": 1}]


def test_commit_api_upload_folder_round_trip(fake_hub, tmp_path):
    source = tmp_path / "model"
    (source / "sub").mkdir(parents=True)
    for path, content in FILES.items():
        (source / path).write_bytes(content)
    api = HfApi(token=fake_hub.token)
    url = api.create_repo("me/pushed", exist_ok=True)
    assert url.repo_id == "me/pushed"
    api.create_repo("me/pushed", exist_ok=True)  # 409 -> fine
    info = api.upload_folder(repo_id="me/pushed", folder_path=source)
    pushed = fake_hub.repos["model", "me/pushed"].files(info.oid)
    assert {path: pushed[path] for path in FILES} == FILES and set(pushed) == {".gitattributes", *FILES}
    api.create_branch("me/pushed", branch="dev")
    api.upload_file(path_or_fileobj=b"dev only", path_in_repo="dev.txt", repo_id="me/pushed", revision="dev")
    assert Path(hf_hub_download("me/pushed", "dev.txt", revision="dev")).read_bytes() == b"dev only"
    assert "dev.txt" not in fake_hub.repos["model", "me/pushed"].files("main")
    with pytest.raises(Exception, match="401"):
        HfApi(token=False).upload_file(path_or_fileobj=b"x", path_in_repo="x", repo_id="me/pushed")
