"""Task data from the Hugging Face Hub: a task's data set (:class:`~litebert.finetune.tasks.HubSource`) read with
``datasets`` and turned into the rows each task kind's JSON-lines reader takes.

``finetune``, ``evaluate`` and ``predict --task NAME`` read the task's Hub data set for every split that has no data
file (a file given wins). :func:`load_split` downloads the data set once into the ``datasets`` cache (``HF_HOME``,
``HF_DATASETS_CACHE``) and reads it from there afterwards, also offline (``HF_HUB_OFFLINE=1``); the revision read
(a branch, tag or commit; default the table's, else ``main``) is resolved to the commit it stands for
(:attr:`HubSplit.revision`, recorded in ``run_settings.json`` and in ``best/config.json`` so that evaluate/predict
read the same data again).

Rows (:func:`hub_rows`), one adapter for every kind, driven by the table: each field of the kind's rows
(``HubSource.columns``) takes its Hub column; a ``ClassLabel`` id (also inside a list: NER tags) becomes its class
name from the dataset's ``features``, then the task's label through ``HubSource.label_map`` (SST-2's
``negative``/``positive`` → the GLUE files' ``0``/``1``), so the examples equal the file reader's for the same rows.
A label that is -1, ``None`` or ``""`` (GLUE/CLUE test splits; QA: no answer text, except SQuAD v2 where that
means unanswerable) is no label: a split without any is read unlabelled (predicted, never scored); a labelled split's
rows without one are dropped and counted (classification: as rows labelled ``-1``, so the others keep their row
numbers). The rows then go through the kind's own row reader (:meth:`TaskKind.read_rows`), the code that reads its
JSON-lines files, so a Hub split and a file of the same rows give the same examples (only ``line`` differs: a Hub
row's is its 1-based row number).
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from litebert.errors import LitebertError
from litebert.finetune.tasks import HUB_NOTES, HubSource, TaskSpec
from litebert.hub import is_connection_error

log = logging.getLogger("litebert.finetune")

#: libraries whose exceptions :func:`load_split` reports as one line naming the data set (any other is a bug: raised)
_HUB_LIBRARIES = {"datasets", "huggingface_hub", "httpx", "httpcore", "fsspec", "requests", "pyarrow"}
#: the label a labelled split's rows without one get in classification: its row reader drops and counts them
SKIPPED_LABEL = "-1"


@dataclass
class HubSplit:
    """One split of a task's Hub data set, as rows of the task kind's reader.

    Attributes:
        source: the table's entry. task: the task's name. split: the Hub split name.
        revision: the commit read (``datasets``' resolved hash; offline: the cached one).
        rows: one dict per Hub row, keyed by the kind's fields (``HubSource.columns``), labels as the task's.
        has_labels: whether any row has a label. dropped: rows of a labelled split without one (not classification).
    """

    source: HubSource
    task: str
    split: str
    revision: str
    rows: list[dict[str, Any]]
    has_labels: bool
    dropped: int = 0

    @property
    def name(self) -> str:
        """What messages and ``ReadResult.path`` call it: ``nyu-mll/glue[sst2]/validation``."""
        return f"{self.source.dataset}{f'[{self.source.config}]' if self.source.config else ''}/{self.split}"

    def record(self) -> dict[str, Any]:
        """What ``run_settings.json`` records of it (and evaluate/predict read back)."""
        return {
            "dataset": self.source.dataset,
            "config": self.source.config,
            "split": self.split,
            "revision": self.revision,
            "rows": len(self.rows),
        }


def hub_source(task: TaskSpec | None, option: str) -> HubSource:
    """The Hub data set of ``task``, read when the data file ``option`` (``--train``) is not given.

    Raises:
        LitebertError: no task, or a task whose table entry names no Hub data set (the message says why, from
            :data:`~litebert.finetune.tasks.HUB_NOTES`).
    """
    if task is None:
        raise LitebertError(f"give {option} FILE (only a --task with a Hub data set reads its data without files)")
    if task.hub is None:
        why = HUB_NOTES.get(task.name, "the task table names no Hub data set for it")
        raise LitebertError(f"give {option} FILE: --task {task.name} has no Hub data set ({why})")
    return task.hub


def load_split(task: TaskSpec, split: str, revision: str | None = None, *, kind: str | None = None) -> HubSplit:
    """Read one split of ``task``'s Hub data set (:func:`hub_source`) with ``datasets``, through its cache.

    Args:
        task: the task preset. split: ``train``, ``dev``, ``test`` (the table's split of that role) or a Hub split
            name. revision: branch, tag or commit (default the table's, else ``main``).
        kind: the task type whose rows to build (default the task's).

    Raises:
        LitebertError (naming the data set, config, split and revision): ``datasets`` not installed; an unknown
            data set, config, revision or split; the Hub unreachable (or ``HF_HUB_OFFLINE``) with nothing cached; a
            commit asked for offline that is not the cached one; a column the table reads that the data set lacks;
            class names the table cannot map to the task's labels.
    """
    source = hub_source(task, "--train/--dev")
    name = source.split_name(split)
    revision = revision or source.revision
    where = f"{source.name}, split {name!r}" + (f", revision {revision!r}" if revision else "")
    try:
        import datasets
        from datasets.exceptions import DatasetsError
    except ImportError:
        raise LitebertError(
            f"--task {task.name} without data files reads {source.dataset} from the Hub, which needs the datasets "
            "package: pip install 'litebert[hub]' (or give --train/--dev files)"
        ) from None
    from huggingface_hub import constants

    # the Hub unreachable: datasets would retry each request for ~20 s (logging every retry) before using its cache;
    # one quick request tells, and then the cache is read offline, or the error comes at once
    offline = constants.is_offline_mode() or datasets.config.HF_HUB_OFFLINE  # HF_DATASETS_OFFLINE sets the latter
    unreachable = not offline and not _reachable(source.dataset, revision)
    try:
        with _offline(unreachable):
            builder = datasets.load_dataset_builder(source.dataset, source.config, revision=revision)
            builder.download_and_prepare()
            ds = builder.as_dataset(split=name)
    except ConnectionError as exc:
        why = f"({constants.ENDPOINT}, HF_ENDPOINT) could not be reached" if unreachable else "could not be reached"
        raise LitebertError(
            f"{where}: the Hub {why} and the data set is not in the cache"
            + ("" if unreachable else f" ({_reason(exc)})")
            + "; run once with a network (HF_HUB_OFFLINE unset), or give data files"
        ) from None
    except (DatasetsError, ValueError, FileNotFoundError, RuntimeError, OSError) as exc:
        raise LitebertError(f"{where}: {_reason(exc)}") from None
    except Exception as exc:  # the HTTP and file-system layers under datasets (httpx, fsspec, huggingface_hub)
        if type(exc).__module__.split(".")[0] not in _HUB_LIBRARIES:
            raise
        raise LitebertError(f"{where}: {_reason(exc)}") from None
    if unreachable:
        log.warning(
            "data: the Hub (%s) could not be reached: %s read from the datasets cache", constants.ENDPOINT, where
        )
    resolved = str(builder.hash or revision or "main")
    if revision and len(revision) == 40 and resolved != revision:
        raise LitebertError(
            f"{where}: the cache holds revision {resolved} and the Hub cannot be asked for {revision} "
            "(offline?); run once online to cache it"
        )
    rows, has_labels, dropped = hub_rows(ds, task, source, kind or task.kind, where)
    out = HubSplit(source, task.name, name, resolved, rows, has_labels, dropped)
    log.info(
        "data: %s at %s: %d rows%s",
        out.name,
        resolved[:12],
        len(rows),
        "" if has_labels else " without labels (predicted, not scored)",
    )
    return out


def _reachable(dataset: str, revision: str | None) -> bool:
    """Whether the Hub answers a request for ``dataset`` (one ``dataset_info``, no retries): False only for a
    connection error (:func:`litebert.hub.is_connection_error`); any other answer (a missing data set or
    revision, no access) is left for ``datasets`` to report."""
    from huggingface_hub import HfApi, constants

    try:  # a bounded wait: a network that drops packets must not hang the command (the client has no timeout)
        HfApi().dataset_info(dataset, revision=revision, timeout=constants.HF_HUB_ETAG_TIMEOUT)
    except Exception as exc:
        if is_connection_error(exc):
            return False
    return True


@contextlib.contextmanager
def _offline(on: bool) -> Iterator[None]:
    """``datasets`` and huggingface_hub in offline mode (``HF_HUB_OFFLINE``, their import-time constants) while
    ``on``: the cache only, no requests, so no retries."""
    if not on:
        yield
        return
    import datasets.config as dc
    from huggingface_hub import constants

    saved = dc.HF_HUB_OFFLINE, constants.HF_HUB_OFFLINE
    dc.HF_HUB_OFFLINE = constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        dc.HF_HUB_OFFLINE, constants.HF_HUB_OFFLINE = saved


def _reason(exc: BaseException) -> str:
    """``datasets``' message of ``exc`` on one line (its first line, which names what is missing)."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


def _class_names(feature) -> list[str] | None:
    """The class names of a ``ClassLabel`` feature, or of one inside a list (NER tags); else None."""
    for f in (feature, getattr(feature, "feature", None)):
        names = getattr(f, "names", None)
        if names is not None and type(f).__name__ == "ClassLabel":
            return list(names)
    return None


def _absent(value, task: TaskSpec) -> bool:
    """Whether ``value`` is no label: -1, None, ``""``, or QA answers without a text (except SQuAD v2, where an
    empty answer list marks an unanswerable question)."""
    if value is None or (isinstance(value, str) and value == ""):
        return True
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value == -1 or (isinstance(value, float) and math.isnan(value))
    if task.kind == "qa" and task.option("qa_metric") != "squad_v2":
        texts = value.get("text") if isinstance(value, dict) else value
        return isinstance(texts, list) and not texts
    return False


def hub_rows(ds, task: TaskSpec, source: HubSource, kind: str, where: str) -> tuple[list[dict], bool, int]:
    """The rows of ``ds`` (a ``datasets.Dataset``) as the ``kind`` reader takes them (see the module docstring).

    Returns:
        ``(rows, has_labels, dropped)``.

    Raises:
        LitebertError: a column of ``source.columns`` that ``ds`` lacks; class names neither mapped by
            ``source.label_map`` nor among the task's fixed labels.
    """
    columns = dict(source.columns)
    missing = [c for c in columns.values() if c not in ds.column_names]
    if missing:
        raise LitebertError(
            f"{where}: the data set has no column {', '.join(repr(c) for c in missing)}, which --task {task.name} "
            f"reads (its columns: {ds.column_names})"
        )
    label_map = dict(source.label_map)
    names = {f: _class_names(ds.features[c]) for f, c in columns.items()}
    known = set(task.labels or ())
    for f, classes in names.items():
        if classes and f == source.label and known:
            unknown = [c for c in classes if label_map.get(c, c) not in known]
            if unknown:
                raise LitebertError(
                    f"{where}: class names {unknown} of column {columns[f]!r} are not {task.name} labels "
                    f"{sorted(known)} and the task table maps none of them"
                )
    table = ds.select_columns(list(dict.fromkeys(columns.values()))).to_dict()

    def value(f: str, v):
        classes = names[f]
        if classes is None or v is None:
            return v
        if isinstance(v, list):  # NER tags: a list of class ids
            return [label_map.get(classes[i], classes[i]) for i in v]
        return v if v == -1 else label_map.get(classes[v], classes[v])

    n = len(ds)
    rows = [{f: value(f, table[c][i]) for f, c in columns.items()} for i in range(n)]
    absent = [_absent(r.get(source.label), task) for r in rows]
    has_labels = not all(absent)
    dropped = 0
    if not has_labels:
        for r in rows:
            r.pop(source.label, None)
    elif any(absent):
        if kind == "classification":  # the reader drops and counts rows of this label, keeping the row numbers
            for r, a in zip(rows, absent, strict=True):
                if a:
                    r[source.label] = SKIPPED_LABEL
        else:
            dropped = sum(absent)
            rows = [r for r, a in zip(rows, absent, strict=True) if not a]
    return rows, has_labels, dropped


def read_split(kind, split: HubSplit, *, require_labels: bool):
    """The kind's ``ReadResult`` of a Hub split (:meth:`TaskKind.read_rows` over :attr:`HubSplit.rows`).

    Raises:
        LitebertError: labels required (training, dev, ``evaluate``) and the split has none; the kind reader's
            errors, naming the split and the 1-based row.
    """
    if require_labels and not split.has_labels:
        raise LitebertError(
            f"{split.name}: no row has a label (-1 or empty in every row, as in GLUE/CLUE test splits): it can be "
            "predicted (litebert predict, finetune --test-split), not scored or trained on"
        )
    read = kind.read_rows(enumerate(split.rows, start=1), Path(split.name), require_labels=require_labels)
    if split.dropped:
        read.skipped = getattr(read, "skipped", 0) + split.dropped
        read.skip_reason = "rows without a label"
    return read
