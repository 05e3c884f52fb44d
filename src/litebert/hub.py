"""Models and tokenizers from the Hugging Face Hub: a Hub id ``ORG/NAME`` (+ a revision) → a local directory.

Every option that reads a model or a tokenizer (``--model``, ``--tokenizer``, ``--init-from``, the model argument
of ``info`` and ``export``) takes a local directory or a Hub id; :func:`resolve` turns it into a directory:

- an existing local path wins (also a TensorFlow checkpoint prefix, ``PREFIX.index``);
- a Hub id is downloaded with ``huggingface_hub.snapshot_download`` into the Hub cache, only the files litebert
  reads: ``config.json``, the weights (``model.safetensors``, else the shards of ``model.safetensors.index.json``,
  else ``pytorch_model.bin``: transformers' order; else an ONNX export's ``model.onnx``) and the tokenizer files (:data:`TOKENIZER_FILES`); a tokenizer
  option downloads the tokenizer files only. ``HF_HOME``/``HF_HUB_CACHE``, ``HF_HUB_OFFLINE``, ``HF_TOKEN`` and
  ``HF_ENDPOINT`` are huggingface_hub's own: offline (or with the Hub unreachable) the cached snapshot is used;
- a path inside a Hub cache (``.../models--ORG--NAME/snapshots/SHA``, as a ``run_settings.json`` records it)
  that does not exist here is downloaded again at that commit, so a recorded run is reproducible elsewhere.

Anything else raises one :class:`~litebert.errors.LitebertError` naming the option, before any work: a name that is
neither a path nor a Hub id, a repository that does not exist (or is private without a token), a gated repository
without access, a revision that does not exist, offline with nothing cached, a repository without a model
(``config.json`` + weights) or without a tokenizer.

:func:`snapshot_source` reads a resolved directory back as ``{"repo_id", "commit"}`` (what ``run_settings.json``
records, :func:`sources`). The command line calls :func:`resolve_config` once per command (litebert.cli.options).
:func:`push_model` (``litebert push``) uploads a model directory.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fnmatch
import logging
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from litebert.errors import LitebertError
from litebert.settings import option_name, setting

#: the tokenizer files litebert (and transformers) read: SentencePiece, WordPiece, tokenizers' JSON, and settings
TOKENIZER_FILES = (
    "spiece.model",
    "vocab.txt",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
)
CONFIG_FILE = "config.json"
#: weight files in transformers' order of preference; the first present is downloaded (with its shards); last, a
#: litebert ONNX export's model.onnx (what `litebert export --format onnx` writes and `predict` runs)
WEIGHTS = (
    ("model.safetensors",),
    ("model.safetensors.index.json", "model-*.safetensors"),
    ("pytorch_model.bin",),
    ("model.onnx",),
)
#: config fields that name a model (config + weights + tokenizer) or a tokenizer, per kind
HUB_FIELDS = {"model": "model", "init_from": "model", "tokenizer": "tokenizer"}

logger = logging.getLogger("litebert.hub")

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]*[A-Za-z0-9_]$")
_SNAPSHOT = re.compile(r"(?:^|/)(models|datasets)--([\w.-]+?)--([\w.-]+)/snapshots/([0-9a-f]{40})/?$")


#: the metavar of every option that reads a model or a tokenizer (its help says "... or Hub id ORG/NAME")
HUB_METAVAR = "DIR|ORG/NAME"

REVISION_HELP = (
    "branch, tag or commit of the Hub id ORG/NAME given as model or tokenizer (default: main); downloads go to the "
    "Hub cache and honour HF_HOME, HF_HUB_OFFLINE and HF_TOKEN"
)


def revision_setting() -> Any:
    """The ``revision`` field (``--revision``) of a config whose options read a model or a tokenizer."""
    return setting(None, metavar="REV", help=REVISION_HELP)


def is_hub_id(name: str) -> bool:
    """Whether ``name`` has the form of a Hub repository id ``ORG/NAME`` (no ``--`` or ``..``, as the Hub)."""
    return bool(_HUB_ID.match(name)) and "--" not in name and ".." not in name


def _is_local(name: str) -> bool:
    return Path(name).expanduser().exists() or Path(name + ".index").exists()


def snapshot_source(path: str | os.PathLike) -> dict[str, str] | None:
    """``{"repo_id", "commit"}`` of a directory inside a Hub cache (``models--ORG--NAME/snapshots/SHA``), else None."""
    m = _SNAPSHOT.search(Path(path).as_posix())
    if m is None or m.group(1) != "models":
        return None
    return {"repo_id": f"{m.group(2)}/{m.group(3)}", "commit": m.group(4)}


def sources(settings: dict[str, Any]) -> dict[str, dict[str, str]]:
    """``{field: {"repo_id", "commit", "revision"}}`` for the settings (a config's ``to_dict``) that name a Hub
    snapshot; ``revision``: the one asked for (``main`` by default), ``commit``: what it was when downloaded."""
    out = {}
    for name in HUB_FIELDS:
        value = settings.get(name)
        if isinstance(value, str) and (source := snapshot_source(value)) is not None:
            out[name] = {**source, "revision": settings.get("revision") or "main"}
    return out


def select_weights(files: Iterable[str]) -> list[str]:
    """The weight files to download of a repository listing ``files`` (transformers' preference); [] if none."""
    files = list(files)
    for group in WEIGHTS:
        if group[0] in files:
            return [f for f in files if any(fnmatch.fnmatchcase(f, pattern) for pattern in group)]
    return []


def resolve(name: str, revision: str | None = None, *, kind: str = "model", option: str = "--model") -> Path:
    """A local directory for ``name``: the path itself when it exists, else the Hub snapshot of ``name``.

    Args:
        name: a local path, a Hub id ``ORG/NAME``, or a Hub-cache snapshot path (``.../snapshots/SHA``).
        revision: branch, tag or commit sha of a Hub id (default ``main``); ignored (with a warning) for a local
            path.
        kind: ``"model"`` (config + weights + tokenizer files) or ``"tokenizer"`` (the tokenizer files).
        option: the option named in errors.

    Returns: the directory (for a Hub id, ``HF_HUB_CACHE/models--ORG--NAME/snapshots/<commit sha>``).

    Raises:
        LitebertError: see the module docstring; the message names ``option``, the id and the revision.
    """
    if _is_local(name):
        if revision is not None and snapshot_source(name) is None:
            logger.warning("--revision %s ignored for %s %s: a local path, not a Hub id", revision, option, name)
        return Path(name).expanduser()
    recorded = snapshot_source(name)
    if recorded is not None:  # a snapshot path from another machine's cache: that repository at that commit
        name, revision = recorded["repo_id"], recorded["commit"]
    elif not is_hub_id(name):
        raise LitebertError(f"{option} {name}: no such file or directory (and not a Hub id ORG/NAME)")
    where = f"{option} {name}" + (f" --revision {revision}" if revision else "")
    directory = _download(name, revision, kind, where)
    present = [p.name for p in directory.iterdir()] if directory.is_dir() else []
    if kind == "model" and CONFIG_FILE not in present:
        raise LitebertError(f"{where}: the Hub repository holds no {CONFIG_FILE}: not a model")
    if kind == "model" and not select_weights(present):
        raise LitebertError(
            f"{where}: the Hub repository holds no weights (model.safetensors, model.safetensors.index.json, "
            "pytorch_model.bin or model.onnx)"
        )
    if kind == "tokenizer" and not {"spiece.model", "vocab.txt", "tokenizer.json"} & set(present):
        raise LitebertError(
            f"{where}: the Hub repository holds no tokenizer (spiece.model, vocab.txt or tokenizer.json)"
        )
    return directory


def _download(repo_id: str, revision: str | None, kind: str, where: str) -> Path:
    """snapshot_download of the files :func:`resolve` needs, huggingface_hub's errors as one LitebertError.

    Two passes: the small files first (which also caches the repository's file listing, offline included), then
    the weights that listing names, so that a repository with both safetensors and ``pytorch_model.bin`` costs one
    download, not two."""
    from huggingface_hub import errors as E
    from huggingface_hub import get_cached_repo_tree, snapshot_download

    with hub_errors(where, repo_id, revision, local=True):
        small = [CONFIG_FILE, *TOKENIZER_FILES] if kind == "model" else list(TOKENIZER_FILES)
        directory = Path(snapshot_download(repo_id, revision=revision, allow_patterns=small))
        if kind == "model":
            commit = directory.name
            try:
                listing = [f.path for f in get_cached_repo_tree(repo_id, revision=commit)]
            except E.CachedRepoTreeNotFoundError:  # a cache written without listings: what the snapshot holds
                listing = [p.name for p in directory.iterdir()] if directory.is_dir() else []
            weights = select_weights(listing)
            if weights:
                directory = Path(snapshot_download(repo_id, revision=commit, allow_patterns=weights))
    return directory


def is_connection_error(exc: BaseException) -> bool:
    """Whether ``exc`` says the Hub could not be reached: a ``ConnectionError``/``TimeoutError`` (huggingface_hub's
    ``OfflineModeIsEnabled`` is one) or a transport error of the HTTP client under huggingface_hub (``httpx2``'s
    ``ConnectError``, ``TimeoutException``: ``TransportError``)."""
    if isinstance(exc, ConnectionError | TimeoutError):
        return True
    root = type(exc).__module__.split(".")[0]
    return root in {"httpx", "httpx2", "httpcore"} and any(c.__name__ == "TransportError" for c in type(exc).__mro__)


@contextlib.contextmanager
def hub_errors(where: str, repo_id: str, revision: str | None = None, *, local: bool = False) -> Iterator[None]:
    """Run a huggingface_hub call, its errors turned into one :class:`~litebert.errors.LitebertError` that starts
    with ``where`` (the option or command) and names ``repo_id``: the one place that maps the Hub's errors, for
    downloads (:func:`resolve`) and uploads (:func:`push_model`); a task's Hub data set
    (:mod:`litebert.finetune.hub_data`) maps the errors of ``datasets`` itself, sharing :func:`is_connection_error`.

    Mapped: a gated or missing repository, a missing revision, 401 (no or an invalid token), 403 (no right to
    write), 409 (a conflicting change), any other HTTP error (the Hub's answer, on one line), ``HF_HUB_OFFLINE``,
    the Hub unreachable (naming ``HF_ENDPOINT``), and files not in the cache. ``local``: ``repo_id`` was also tried
    as a local path (the messages say so).
    """
    from huggingface_hub import constants
    from huggingface_hub import errors as E

    endpoint = constants.ENDPOINT
    path = f"no local directory {repo_id}; as a Hub id: " if local else ""
    try:
        yield
    except E.GatedRepoError:  # before RepositoryNotFoundError: it is one
        raise LitebertError(
            f"{where}: gated repository; ask for access on its Hub page, then set HF_TOKEN (or `hf auth login`)"
        ) from None
    except E.RepositoryNotFoundError:
        raise LitebertError(
            f"{where}: {'no local directory ' + repo_id + ', and ' if local else ''}no Hub repository {repo_id} "
            "(a private one needs HF_TOKEN)"
        ) from None
    except E.RevisionNotFoundError:
        raise LitebertError(
            f"{where}: the Hub repository {repo_id} has no branch, tag or commit {revision!r}"
        ) from None
    except (E.LocalEntryNotFoundError, E.IncompleteSnapshotError) as exc:
        why = "HF_HUB_OFFLINE is set" if constants.is_offline_mode() else "the Hub could not be reached"
        raise LitebertError(
            f"{where}: {path}{why} and the files are not in the Hub cache ({constants.HF_HUB_CACHE}); run once "
            f"with network access to {endpoint} to download them ({type(exc).__name__})"
        ) from None
    except E.OfflineModeIsEnabled:
        raise LitebertError(
            f"{where}: {path}HF_HUB_OFFLINE is set, so the Hub repository {repo_id} cannot be reached; unset it "
            "(with network access) to talk to the Hub"
        ) from None
    except E.HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else None
        why = {
            401: "not logged in or the token is invalid: set HF_TOKEN (a write token) or run `hf auth login`",
            403: "the token may not do this: a read-only token, or no right on this namespace or repository",
            409: "the Hub refused a conflicting change (another commit or branch came first); retry",
        }.get(status)
        answer = " ".join(str(exc).split())[:300]
        raise LitebertError(f"{where}: {why} ({answer})" if why else f"{where}: the Hub answered {answer}") from None
    except Exception as exc:
        if not is_connection_error(exc):
            raise
        raise LitebertError(
            f"{where}: {path}the Hub ({endpoint}, HF_ENDPOINT) could not be reached for {repo_id}: "
            f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
        ) from None


def resolve_config(cfg: Any) -> Any:
    """``cfg`` (a config dataclass) with each model/tokenizer field (:data:`HUB_FIELDS`) that names a Hub id replaced
    by its downloaded directory (:func:`resolve`, at the config's ``revision``); ``cfg`` itself when none does.

    A name that is neither a path nor a Hub id is left for the command to report (a missing directory, "and not a
    Hub id ORG/NAME": litebert.checkpoint.load_config); finetune/evaluate/predict check the model and tokenizer
    before they read a task's Hub data set. Raises LitebertError as :func:`resolve`."""
    fields = {f.name for f in dataclasses.fields(cfg)}
    revision = getattr(cfg, "revision", None)
    changed = {}
    for name, kind in HUB_FIELDS.items():
        value = getattr(cfg, name, None) if name in fields else None
        if value is None:
            continue
        option = option_name(cfg, name)
        value = os.fspath(value)
        if snapshot_source(value) is None and not _is_local(value) and not is_hub_id(value):
            continue  # neither a path nor a Hub id: the command reports the missing directory
        resolved = os.fspath(resolve(value, revision, kind=kind, option=option))
        if resolved != value:
            changed[name] = resolved
    return dataclasses.replace(cfg, **changed) if changed else cfg


# ------------------------------------------------------------------------------------------------------- push
#: files of a training checkpoint (litebert.training.state): a directory holding one is not a model to share
CHECKPOINT_FILES = ("COMPLETE", "trainer_state.json", "optimizer.pt")
#: the Hub id in a model card's load snippets (litebert.training.modelcard) until push writes the real one
REPO_PLACEHOLDER = "YOUR_ORG/YOUR_MODEL"
#: the card's sentence about the placeholder; push uploads ``REPO_NOTE`` in its place
REPO_PLACEHOLDER_NOTE = (
    f"`{REPO_PLACEHOLDER}` stands for the Hub repository this model is uploaded to (`litebert push` writes it in)"
)
REPO_NOTE = "`{}` is this model's repository on the Hub"
CARD_NAME = "README.md"
TOKENIZER_MODELS = ("spiece.model", "vocab.txt", "tokenizer.json")


@dataclasses.dataclass(frozen=True)
class PushResult:
    """What :func:`push_model` uploaded: the repository, the branch, the commit made, its URL, the files sent."""

    repo_id: str
    revision: str
    commit: str
    commit_url: str
    files: tuple[str, ...]


def check_pushable(directory: str | os.PathLike) -> list[str]:
    """The files of ``directory`` to upload, after checking that it is a model directory to share.

    Raises:
        LitebertError: ``directory`` is missing, is a training checkpoint (``RUN/checkpoints/step-N``; the message
            says what to push instead, by the run's command), has no model (``config.json`` and weights) or no tokenizer.
    """
    d = Path(directory)
    if not d.is_dir():
        raise LitebertError(f"push {d}: no such directory")
    names = sorted(p.name for p in d.iterdir() if p.is_file() and not p.name.startswith("."))
    if any(n in names for n in CHECKPOINT_FILES):
        raise LitebertError(f"push {d}: a training checkpoint (optimizer and trainer state), not a model; {_advice(d)}")
    inner = [f"{d / sub}" for sub in ("best", "final") if (d / sub / CONFIG_FILE).is_file()]
    hint = f" (did you mean {' or '.join(inner)}?)" if inner else ""
    if CONFIG_FILE not in names or not select_weights(names):
        raise LitebertError(
            f"push {d}: not a model directory (needs {CONFIG_FILE} and model.safetensors, pytorch_model.bin or model.onnx){hint}"
        )
    if not any(n in names for n in TOKENIZER_MODELS):
        raise LitebertError(
            f"push {d}: no tokenizer ({', '.join(TOKENIZER_MODELS)}); copy the tokenizer files in first, so the "
            "model can be used from the Hub"
        )
    return names


def _advice(checkpoint: Path) -> str:
    """What to push instead of the training checkpoint ``RUN/checkpoints/step-N``, by the command of its run
    (``RUN/run_settings.json``): a fine-tuning run's ``RUN/best`` (``litebert export`` takes pretraining checkpoints
    only), a pretraining checkpoint exported with ``litebert export`` (or the run's ``final/``)."""
    import json

    run = checkpoint.parent.parent
    try:
        command = json.loads((run / "run_settings.json").read_text(encoding="utf-8")).get("command")
    except (OSError, ValueError, AttributeError):
        command = None
    export = f"write it as a model with `litebert export {checkpoint} --output DIR` and push DIR"
    if command == "finetune":
        best = run / "best"
        return (
            f"push the fine-tuning run's best model, {best}"
            + ("" if (best / CONFIG_FILE).is_file() else " (once the run has written it)")
            + " (`litebert export` takes pretraining checkpoints only)"
        )
    if command == "pretrain":
        final = run / "final"
        return export + (f", or push the run's {final}" if (final / CONFIG_FILE).is_file() else "")
    return f"push the run's best/ (fine-tuning) or final/ (pretraining); a pretraining checkpoint: {export}"


def _upload(path: Path, repo_id: str):
    """The commit operation that uploads ``path``; the model card (``README.md``) with ``repo_id`` written in place
    of :data:`REPO_PLACEHOLDER` (and its note), so its load snippets name the repository; the card is uploaded from
    memory, the local file is left as it is."""
    from huggingface_hub import CommitOperationAdd

    if path.name == CARD_NAME:
        text = path.read_text(encoding="utf-8", errors="replace")
        if REPO_PLACEHOLDER in text:
            text = text.replace(REPO_PLACEHOLDER_NOTE, REPO_NOTE.format(repo_id)).replace(REPO_PLACEHOLDER, repo_id)
            return CommitOperationAdd(CARD_NAME, text.encode("utf-8"))
    return CommitOperationAdd(path.name, str(path))


def push_model(
    directory: str | os.PathLike,
    repo_id: str,
    *,
    private: bool = False,
    revision: str | None = None,
    commit_message: str | None = None,
) -> PushResult:
    """Upload a model directory to the Hub repository ``repo_id`` with huggingface_hub (``create_repo`` with
    ``exist_ok``, ``create_branch`` for a ``revision`` other than main, ``create_commit``), in one commit; the model
    card's placeholder id (:data:`REPO_PLACEHOLDER`) is uploaded as ``repo_id``.

    The directory is checked first (:func:`check_pushable`), before anything is sent. The token is
    huggingface_hub's (``HF_TOKEN`` or ``hf auth login``); ``private`` applies to a repository created here.

    Raises:
        LitebertError: what :func:`check_pushable` refuses, an invalid ``repo_id``, or the Hub's refusal (no or a
            read-only token, no right on the namespace), naming the repository.
    """
    from huggingface_hub import HfApi

    names = check_pushable(directory)
    if not is_hub_id(repo_id):
        raise LitebertError(f"--repo-id {repo_id}: expected a Hub id ORG/NAME")
    branch = revision or "main"
    api = HfApi()
    where = f"push to {repo_id}" + (f" --revision {branch}" if revision else "")
    with hub_errors(where, repo_id, branch):
        api.create_repo(repo_id, private=private, exist_ok=True)
        if branch != "main":
            api.create_branch(repo_id, branch=branch, exist_ok=True)
        info = api.create_commit(
            repo_id,
            [_upload(Path(directory) / name, repo_id) for name in names],
            commit_message=commit_message or f"Upload {Path(directory).name} with litebert push",
            revision=branch,
        )
    return PushResult(repo_id, branch, info.oid, info.commit_url, tuple(names))


__all__ = [
    "HUB_FIELDS",
    "HUB_METAVAR",
    "REPO_PLACEHOLDER",
    "TOKENIZER_FILES",
    "PushResult",
    "check_pushable",
    "hub_errors",
    "is_connection_error",
    "is_hub_id",
    "push_model",
    "resolve",
    "resolve_config",
    "revision_setting",
    "select_weights",
    "snapshot_source",
    "sources",
]
