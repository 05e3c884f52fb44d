"""A small Hugging Face Hub that speaks HTTP, for tests: the real ``huggingface_hub`` and ``datasets`` code talks to
it through ``HF_ENDPOINT=http://127.0.0.1:PORT``; nothing in a test mocks the client.

Use the ``fake_hub`` fixture (tests/conftest.py)::

    def test_download(fake_hub):
        sha = fake_hub.add_repo("org/tiny", files={"config.json": b"{}", "model.safetensors": blob})
        sha_v1 = fake_hub.add_repo("org/tiny", files={...}, revision="v1")          # a second branch (or tag)
        fake_hub.add_repo("org/data", files={"train.jsonl": b"..."}, repo_type="dataset")
        fake_hub.add_repo("org/gated", files={...}, gated=True)                     # files need the token
        fake_hub.add_repo("org/secret", files={...}, private=True)                  # everything needs the token
        monkeypatch.setenv("HF_TOKEN", fake_hub.token)                               # ... which is this one
        fake_hub.go_offline()                                                        # HF_HUB_OFFLINE=1 from now on
        fake_hub.requests                                                            # [(method, path), ...] served
        fake_hub.repos["model", "org/tiny"].files("main")                            # {path: bytes} at a revision

``add_repo`` makes one commit holding exactly ``files`` (a 40-hex sha, returned) and points the branch ``revision``
at it; an earlier commit stays reachable by its sha. ``add_repo`` on an existing repo keeps its other branches.

The fixture starts one server per test on a random port, and points both libraries at it and at an empty cache
under ``tmp_path``: it sets ``HF_ENDPOINT``, ``HF_HOME``, ``HF_HUB_CACHE``, ``HF_DATASETS_CACHE`` and clears
``HF_TOKEN``/``HF_HUB_OFFLINE`` in the environment (for subprocesses), and, because ``huggingface_hub.constants``
and ``datasets.config`` read these variables once at import time, sets the same values on those modules' constants
(``ENDPOINT``, ``HUGGINGFACE_CO_URL_TEMPLATE``, ``HF_HOME``, ``HF_HUB_CACHE``, ``HF_TOKEN_PATH``, ``HF_HUB_OFFLINE``;
``datasets.config.HF_ENDPOINT``, ``HUB_DATASETS_URL``, ``HF_DATASETS_CACHE``, ``HF_HUB_OFFLINE`` ...) with
``monkeypatch``, so they are restored after the test.

What it speaks (read from huggingface_hub 2.4's hf_api.py, file_download.py, hf_file_system.py, _commit_api.py):

- ``GET /api/{models,datasets}/{repo}[/revision/{rev}]``: the repository info (``sha``, ``siblings``, ``gated``).
- ``GET /api/{type}s/{repo}/tree/{rev}[/{path}]?recursive=``: the tree listing (``type``, ``path``, ``oid``, ``size``),
  one page; ``POST .../paths-info/{rev}`` (form field ``paths``): the entries that exist.
- ``HEAD``/``GET /{repo}/resolve/{rev}/{path}`` and ``/datasets/{repo}/resolve/...``: the file, with ``ETag`` (the
  git blob sha1), ``X-Repo-Commit``, ``X-Linked-Etag``, ``X-Linked-Size``, ``Content-Length``; ``Range: bytes=a-b``
  answers 206 with ``Content-Range``.
- errors as the Hub sends them: 404 + ``X-Error-Code: RepoNotFound`` / ``RevisionNotFound`` / ``EntryNotFound``
  (with ``X-Repo-Commit``), a gated repository's files 401 (no token) / 403 (another token) + ``GatedRepo``, a private
  repository 401 + ``RepoNotFound`` without the token.
- writing (the token is required): ``POST /api/repos/create`` (409 when it exists), ``POST .../branch/{name}``,
  ``POST .../preupload/{rev}`` (every file "regular", so no LFS), ``POST .../commit/{rev}`` (ndjson ``header``,
  ``file`` base64, ``deletedFile``), ``POST /api/validate-yaml``.

Not spoken: LFS/Xet uploads, pull requests, the dataset viewer (``datasets`` asks
``datasets-server.127.0.0.1``, which does not resolve, and falls back to reading the files).
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

REPO_TYPES = {"models": "model", "datasets": "dataset", "spaces": "space"}
API_OPERATIONS = {"revision", "tree", "paths-info", "preupload", "commit", "branch"}


def git_blob_oid(content: bytes) -> str:
    """The git blob sha1 of ``content`` (what the Hub sends as a regular file's ``oid`` and ``ETag``)."""
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


@dataclass
class FakeRepo:
    """One repository: commits (sha -> {path: bytes}) and refs (branch or tag name -> sha)."""

    repo_id: str
    repo_type: str
    gated: bool = False
    private: bool = False
    commits: dict[str, dict[str, bytes]] = field(default_factory=dict)
    refs: dict[str, str] = field(default_factory=dict)

    def commit(self, files: dict[str, bytes], revision: str = "main") -> str:
        """Record a commit holding exactly ``files`` and point ``revision`` at it; returns its 40-hex sha."""
        files = {path.lstrip("/"): bytes(content) for path, content in files.items()}
        digest = hashlib.sha1(f"{self.repo_type}/{self.repo_id}/{revision}/{len(self.commits)}".encode())
        for path in sorted(files):
            digest.update(path.encode() + b"\0" + git_blob_oid(files[path]).encode())
        sha = digest.hexdigest()
        self.commits[sha] = files
        self.refs[revision] = sha
        return sha

    def resolve(self, revision: str) -> str | None:
        """The commit sha of a branch, tag or sha; None when there is none."""
        if revision in self.refs:
            return self.refs[revision]
        return revision if revision in self.commits else None

    def files(self, revision: str = "main") -> dict[str, bytes]:
        """{path: bytes} at ``revision``."""
        return self.commits[self.resolve(revision)]


class HubError(Exception):
    """An error answer: HTTP status, the Hub's X-Error-Code, and headers to add."""

    def __init__(
        self, status: int, code: str | None, message: str, headers: dict | None = None, body: dict | None = None
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.headers = status, code, message, headers or {}
        self.body = {"error": message, **(body or {})}


class FakeHub:
    """The server's state and thread; see the module docstring."""

    token = "hf_fake_hub_token"

    def __init__(self) -> None:
        self.repos: dict[tuple[str, str], FakeRepo] = {}
        self.requests: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        hub = self

        class Handler(_Handler):
            fake = hub

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-hub", daemon=True)
        self._monkeypatch: pytest.MonkeyPatch | None = None

    # --- building repositories -----------------------------------------------------------------------------------
    def add_repo(
        self,
        repo_id: str,
        files: dict[str, bytes | str],
        *,
        repo_type: str = "model",
        revision: str = "main",
        gated: bool = False,
        private: bool = False,
    ) -> str:
        """Create (or add a commit to) a repository holding ``files`` at branch/tag ``revision``; returns the
        commit sha. ``str`` contents are UTF-8 encoded. ``gated``: files need ``Authorization: Bearer <token>``;
        ``private``: everything does."""
        with self._lock:
            repo = self.repos.get((repo_type, repo_id))
            if repo is None:
                repo = self.repos[repo_type, repo_id] = FakeRepo(repo_id, repo_type, gated=gated, private=private)
            encoded = {p: c.encode() if isinstance(c, str) else c for p, c in files.items()}
            return repo.commit(encoded, revision)

    def add_dir(self, repo_id: str, directory: Path, **kwargs) -> str:
        """:meth:`add_repo` with every file under ``directory`` (paths relative to it)."""
        directory = Path(directory)
        files = {
            p.relative_to(directory).as_posix(): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()
        }
        return self.add_repo(repo_id, files, **kwargs)

    # --- lifecycle -----------------------------------------------------------------------------------------------
    def start(self) -> FakeHub:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving (a test may call it to make the Hub unreachable; the fixture calls it at the end)."""
        self._server.shutdown()
        self._server.server_close()

    def install(self, monkeypatch: pytest.MonkeyPatch, hf_home: Path) -> None:
        """Point huggingface_hub and datasets (environment and import-time constants) at this server and at an
        empty cache under ``hf_home``; ``monkeypatch`` undoes it after the test."""
        import huggingface_hub.constants as hc

        self._monkeypatch = monkeypatch
        hub_cache = hf_home / "hub"
        env = {"HF_ENDPOINT": self.endpoint, "HF_HOME": str(hf_home), "HF_HUB_CACHE": str(hub_cache)}
        env["HF_DATASETS_CACHE"] = str(hf_home / "datasets")
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        for name in (
            "HF_TOKEN",
            "HUGGING_FACE_HUB_TOKEN",
            "HF_HUB_OFFLINE",
            "TRANSFORMERS_OFFLINE",
            "HF_DATASETS_OFFLINE",
        ):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setattr(hc, "ENDPOINT", self.endpoint)
        monkeypatch.setattr(
            hc, "HUGGINGFACE_CO_URL_TEMPLATE", self.endpoint + "/{repo_id}/resolve/{revision}/{filename}"
        )
        monkeypatch.setattr(hc, "HF_HOME", str(hf_home))
        monkeypatch.setattr(hc, "HF_HUB_CACHE", str(hub_cache))
        monkeypatch.setattr(hc, "HUGGINGFACE_HUB_CACHE", str(hub_cache))
        monkeypatch.setattr(hc, "HF_ASSETS_CACHE", str(hf_home / "assets"))
        monkeypatch.setattr(hc, "HF_TOKEN_PATH", str(hf_home / "token"))
        monkeypatch.setattr(hc, "HF_STORED_TOKENS_PATH", str(hf_home / "stored_tokens"))
        monkeypatch.setattr(hc, "HF_HUB_OFFLINE", False)
        try:
            import datasets.config as dc
        except ImportError:  # datasets is an optional extra
            return
        monkeypatch.setattr(dc, "HF_ENDPOINT", self.endpoint)
        monkeypatch.setattr(dc, "HUB_DATASETS_URL", self.endpoint + "/datasets/{repo_id}/resolve/{revision}/{path}")
        monkeypatch.setattr(dc, "HF_CACHE_HOME", str(hf_home))
        datasets_cache = hf_home / "datasets"
        monkeypatch.setattr(dc, "HF_DATASETS_CACHE", datasets_cache)
        monkeypatch.setattr(dc, "HF_MODULES_CACHE", hf_home / "modules")
        monkeypatch.setattr(dc, "DOWNLOADED_DATASETS_PATH", datasets_cache / dc.DOWNLOADED_DATASETS_DIR)
        monkeypatch.setattr(
            dc, "EXTRACTED_DATASETS_PATH", datasets_cache / dc.DOWNLOADED_DATASETS_DIR / dc.EXTRACTED_DATASETS_DIR
        )
        monkeypatch.setattr(dc, "HF_HUB_OFFLINE", False)
        monkeypatch.setattr(dc, "HF_DATASETS_OFFLINE", False)
        _clear_hf_filesystem_instances()

    def go_offline(self) -> None:
        """``HF_HUB_OFFLINE=1`` from now on, in the environment and in both libraries' constants."""
        import huggingface_hub.constants as hc

        mp = self._monkeypatch
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setattr(hc, "HF_HUB_OFFLINE", True)
        try:
            import datasets.config as dc
        except ImportError:
            return
        mp.setattr(dc, "HF_HUB_OFFLINE", True)
        mp.setattr(dc, "HF_DATASETS_OFFLINE", True)
        _clear_hf_filesystem_instances()

    # --- serving -------------------------------------------------------------------------------------------------
    def repo(self, repo_type: str, repo_id: str, auth: str | None, *, files: bool) -> FakeRepo:
        """The repository, or the Hub's error for a missing one or a missing/wrong token."""
        repo = self.repos.get((repo_type, repo_id))
        if repo is None:
            raise HubError(404, "RepoNotFound", f"Repository not found: {repo_type} {repo_id}")
        authorized = auth == f"Bearer {self.token}"
        if repo.private and not authorized:
            raise HubError(401, "RepoNotFound", "Repository not found")
        if repo.gated and files and not authorized:
            status = 403 if auth else 401
            raise HubError(status, "GatedRepo", f"Access to {repo_type} {repo_id} is restricted.")
        return repo

    @staticmethod
    def commit_of(repo: FakeRepo, revision: str) -> str:
        sha = repo.resolve(revision)
        if sha is None:
            raise HubError(404, "RevisionNotFound", f"Invalid rev id: {revision}")
        return sha


def _clear_hf_filesystem_instances() -> None:
    """fsspec caches HfFileSystem instances (and their directory listings) across tests; start each one clean."""
    from huggingface_hub import HfFileSystem

    HfFileSystem.clear_instance_cache()


def _tree_entries(files: dict[str, bytes], prefix: str, recursive: bool) -> list[dict]:
    """The Hub's tree listing of ``files`` under ``prefix`` (folders first when not recursive, like the Hub)."""
    prefix = prefix.strip("/")
    base = prefix + "/" if prefix else ""
    entries: dict[str, dict] = {}
    for path in sorted(files):
        if not path.startswith(base):
            continue
        rest = path[len(base) :].split("/")
        depth = len(rest) if recursive else 1
        for i in range(1, min(depth, len(rest)) + 1):
            sub = base + "/".join(rest[:i])
            if i == len(rest):
                entries[sub] = _file_entry(sub, files[sub])
            elif sub not in entries:
                entries[sub] = {"type": "directory", "path": sub, "oid": hashlib.sha1(sub.encode()).hexdigest()}
    return list(entries.values())


def _file_entry(path: str, content: bytes) -> dict:
    return {"type": "file", "path": path, "oid": git_blob_oid(content), "size": len(content)}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    fake: FakeHub

    def log_message(self, format, *args) -> None:  # quiet: pytest shows failures, not access logs
        pass

    # --- plumbing ------------------------------------------------------------------------------------------------
    def _send(
        self, status: int, body: bytes = b"", headers: dict | None = None, content_type: str = "application/json"
    ):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        for name, value in (headers or {}).items():
            self.send_header(name, str(value))
        self.send_header("Content-Length", str(len(body)))
        # one request per connection: a stopped server then really is gone (no pooled connection still answering)
        self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, value, status: int = 200, headers: dict | None = None) -> None:
        self._send(status, json.dumps(value).encode(), headers)

    def _body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _dispatch(self) -> None:
        url = urlsplit(self.path)
        self.fake.requests.append((self.command, url.path))
        self.query = parse_qs(url.query)
        segments = url.path.strip("/").split("/")
        try:
            if segments[0] == "api":
                self._api(segments[1:])
            else:
                self._resolve(segments)
        except HubError as e:
            headers = {"X-Error-Code": e.code, "X-Error-Message": e.message, **e.headers} if e.code else e.headers
            self._json(e.body, e.status, headers)

    do_GET = do_HEAD = do_POST = _dispatch

    @staticmethod
    def _split_repo(segments: list[str]) -> tuple[str, list[str]]:
        """Repo id (``org/name`` or ``name``) and the segments after it, given the known next keywords."""
        for n in (2, 1):
            if len(segments) > n and segments[n] in API_OPERATIONS | {"resolve"}:
                return "/".join(segments[:n]), segments[n:]
        return "/".join(segments[:2]), []

    # --- /api ----------------------------------------------------------------------------------------------------
    def _api(self, segments: list[str]) -> None:
        auth = self.headers.get("Authorization")
        if segments == ["validate-yaml"]:
            self._body()
            return self._json({"errors": [], "warnings": []})
        if segments == ["repos", "create"]:
            return self._create_repo(json.loads(self._body() or b"{}"), auth)
        if not segments or segments[0] not in REPO_TYPES:
            raise HubError(404, None, f"unknown endpoint /api/{'/'.join(segments)}")
        repo_type = REPO_TYPES[segments[0]]
        repo_id, rest = self._split_repo(segments[1:])
        op, args = (rest[0], [unquote(s) for s in rest[1:]]) if rest else ("revision", ["main"])
        writing = op in ("preupload", "commit", "branch")
        if writing and auth != f"Bearer {self.fake.token}":
            raise HubError(401, None, "Invalid credentials in Authorization header")
        repo = self.fake.repo(repo_type, repo_id, auth, files=False)
        if op == "branch":
            return self._create_branch(repo, args[0])
        sha = self.fake.commit_of(repo, args[0] if args else "main")
        files = repo.commits[sha]
        if op == "revision":
            return self._json(self._info(repo, sha))
        if op == "tree":
            prefix = "/".join(args[1:])
            if prefix and not any(p == prefix or p.startswith(prefix + "/") for p in files):
                raise HubError(404, "EntryNotFound", f"{prefix} does not exist at {sha}")
            recursive = self.query.get("recursive", ["false"])[0].lower() == "true"
            return self._json(_tree_entries(files, prefix, recursive))
        if op == "paths-info":
            paths = parse_qs(self._body().decode()).get("paths", [])
            found = []
            for path in paths:
                path = path.strip("/")
                if path in files:
                    found.append(_file_entry(path, files[path]))
                elif any(p.startswith(path + "/") for p in files):
                    found.append({"type": "directory", "path": path, "oid": hashlib.sha1(path.encode()).hexdigest()})
            return self._json(found)
        if op == "preupload":
            payload = json.loads(self._body())
            modes = [
                {"path": f["path"], "uploadMode": "regular", "shouldIgnore": False, "oid": None}
                for f in payload["files"]
            ]
            return self._json({"files": modes, "commitOid": sha})
        if op == "commit":
            return self._commit(repo, args[0])
        raise HubError(404, None, f"unknown endpoint {op}")

    def _info(self, repo: FakeRepo, sha: str) -> dict:
        files = repo.commits[sha]
        return {
            "_id": hashlib.sha1(repo.repo_id.encode()).hexdigest()[:24],
            "id": repo.repo_id,
            "author": repo.repo_id.split("/")[0],
            "sha": sha,
            "lastModified": "2026-01-01T00:00:00.000Z",
            "private": repo.private,
            "gated": "manual" if repo.gated else False,
            "disabled": False,
            "downloads": 0,
            "likes": 0,
            "tags": [],
            "siblings": [{"rfilename": path} for path in sorted(files)],
        }

    def _create_repo(self, payload: dict, auth: str | None) -> None:
        if auth != f"Bearer {self.fake.token}":
            raise HubError(401, None, "Invalid credentials in Authorization header")
        name, org = payload["name"], payload.get("organization")
        repo_id = f"{org}/{name}" if org else name
        repo_type = payload.get("type") or "model"
        prefix = "" if repo_type == "model" else f"{repo_type}s/"
        url = f"{self.fake.endpoint}/{prefix}{repo_id}"
        if (repo_type, repo_id) in self.fake.repos:  # the Hub's 409 carries the url too (create_repo reads it)
            raise HubError(409, None, f"You already created this {repo_type} repo", body={"url": url})
        private = payload.get("visibility") == "private" or bool(payload.get("private"))
        self.fake.add_repo(
            repo_id, {".gitattributes": b"*.safetensors filter=lfs\n"}, repo_type=repo_type, private=private
        )
        self._json({"url": url, "name": repo_id})

    def _create_branch(self, repo: FakeRepo, branch: str) -> None:
        body = self._body()
        start = (json.loads(body) if body else {}).get("startingPoint") or "main"
        if branch in repo.refs:
            raise HubError(409, None, f"Branch {branch} already exists")
        repo.refs[branch] = self.fake.commit_of(repo, start)
        self._json({})

    def _commit(self, repo: FakeRepo, revision: str) -> None:
        parent = self.fake.commit_of(repo, revision)
        files = dict(repo.commits[parent])
        for line in self._body().splitlines():
            if not line.strip():
                continue
            item = json.loads(line)
            key, value = item["key"], item["value"]
            if key == "file":
                files[value["path"]] = base64.b64decode(value["content"])
            elif key == "deletedFile":
                files.pop(value["path"], None)
            elif key == "deletedFolder":
                files = {p: c for p, c in files.items() if not p.startswith(value["path"].rstrip("/") + "/")}
            elif key != "header":
                raise HubError(400, None, f"the fake Hub does not speak commit operation {key!r}")
        with self.fake._lock:
            sha = repo.commit(files, revision)
        prefix = "" if repo.repo_type == "model" else f"{repo.repo_type}s/"
        url = f"{self.fake.endpoint}/{prefix}{repo.repo_id}/commit/{sha}"
        self._json({"commitUrl": url, "commitOid": sha, "pullRequestUrl": None, "success": True})

    # --- /{repo}/resolve/{rev}/{path} ----------------------------------------------------------------------------
    def _resolve(self, segments: list[str]) -> None:
        repo_type = "model"
        if segments[0] in ("datasets", "spaces"):
            repo_type, segments = REPO_TYPES[segments[0]], segments[1:]
        repo_id, rest = self._split_repo(segments)
        if len(rest) < 3 or rest[0] != "resolve":
            raise HubError(404, None, f"unknown endpoint {self.path}")
        repo = self.fake.repo(repo_type, repo_id, self.headers.get("Authorization"), files=True)
        sha = self.fake.commit_of(repo, unquote(rest[1]))
        path = unquote("/".join(rest[2:]))
        files = repo.commits[sha]
        if path not in files:
            raise HubError(404, "EntryNotFound", f"{path} does not exist at {sha}", {"X-Repo-Commit": sha})
        content = files[path]
        oid = git_blob_oid(content)
        headers = {
            "ETag": f'"{oid}"',
            "X-Repo-Commit": sha,
            "X-Linked-Etag": f'"{oid}"',
            "X-Linked-Size": len(content),
            "Accept-Ranges": "bytes",
        }
        ranged = self.headers.get("Range")
        if ranged and self.command == "GET":
            start_text, _, end_text = ranged.removeprefix("bytes=").partition("-")
            start = int(start_text)
            end = min(int(end_text), len(content) - 1) if end_text else len(content) - 1
            if start >= len(content):
                raise HubError(416, None, "Range Not Satisfiable", {"Content-Range": f"bytes */{len(content)}"})
            headers["Content-Range"] = f"bytes {start}-{end}/{len(content)}"
            return self._send(206, content[start : end + 1], headers, "application/octet-stream")
        self._send(200, content, headers, "application/octet-stream")


@pytest.fixture
def fake_hub(monkeypatch, tmp_path):
    """A :class:`FakeHub` serving on 127.0.0.1 for this test, with huggingface_hub and datasets pointed at it and at
    an empty cache ``tmp_path / "hf_home"`` (see the module docstring)."""
    hub = FakeHub().start()
    hub.install(monkeypatch, tmp_path / "hf_home")
    yield hub
    hub.stop()
