"""Readers for labelled text files: TSV, CSV and JSON lines, columns by name or 0-based index.

A file is read into a list of :class:`Example` (``text``, optional ``text_pair``, optional ``label``, the 1-based
``line`` it came from). What the readers handle, because GLUE/CLUE files do it:

* a UTF-8 byte-order mark (GLUE MRPC starts with one) — files are opened as ``utf-8-sig``;
* a missing final newline, ``\\r\\n`` line ends, blank lines (skipped, not counted as rows); a row ends at a line
  end and nowhere else (:func:`data_lines`): ``\\f``, ``\\v``, ``\\x1c``-``\\x1e``, U+0085, U+2028 and U+2029 are
  text inside a field, as for ``csv``, ``wc`` and JSON-lines tools;
* TSV without quoting (GLUE text contains bare ``"``), CSV with standard quoting, JSON lines (one object or array
  per line);
* headers: ``header=True`` (first row names the columns), ``False`` (no header; columns by index only).

Every problem the user can cause raises :class:`~litebert.errors.LitebertError` naming the file and, where there is
one, the line: an empty file, a column name not in the header, a column index out of range, a row with too few
fields, a line that is not JSON.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from litebert.corpus import check_no_lone_surrogate, data_suffix, json_array_rows, json_shown, read_text_file
from litebert.errors import LitebertError

Column = str | int
"""A column: a header name (``"sentence"``) or a 0-based field index (``0``)."""

FORMATS = ("tsv", "csv", "jsonl")


@dataclass(frozen=True)
class Example:
    """One input row.

    Attributes:
        index: 0-based position among the data rows of the file (blank lines and the header excluded; rows dropped
            by a filter or a skipped label keep their numbers, so later rows are not renumbered); this is
            the ``index`` column of ``predictions.tsv``.
        text: the first text field.
        text_pair: the second text field of sentence-pair tasks, else ``None``.
        label: the raw label string as written in the file (``None`` when the file has no label column);
            for ``multi_label`` it is the whole field, split later; a JSON list is shown joined with ``,``.
        line: 1-based line number in the file (for error messages).
        labels: the items of a JSON-lines label that is a list (a multi-label field, docs/finetune.md), else
            ``None``; they are used as they are, never split on the label separator.
    """

    index: int
    text: str
    text_pair: str | None
    label: str | None
    line: int
    labels: tuple[str, ...] | None = None


@dataclass
class ReadResult:
    """What :func:`read_examples` read from one file.

    Attributes:
        path: the file.
        examples: the rows, in file order.
        header: the header fields when the file has a header, else ``None``.
        has_labels: whether a label column was found (``False`` for unlabelled test files).
        format: ``"tsv"``, ``"csv"`` or ``"jsonl"``.
        skipped: rows dropped by a layout's row filter (e.g. XNLI rows of other languages) or label
            (``ColumnSpec.skip_labels``: OCNLI/CMNLI ``-``); the run layer logs and records the count.
        label_column: the label column as the spec named it (for messages), ``None`` without labels.
        skip_reason: which rows the layout drops, in words (``"rows labelled '-'"``), for the log; ``""`` when it
            drops none.
    """

    path: Path
    examples: list[Example]
    header: list[str] | None
    has_labels: bool
    format: str
    skipped: int = 0
    label_column: Column | None = None
    skip_reason: str = ""

    @property
    def list_labels(self) -> list[Example]:
        """The examples whose label field is a JSON list (multi-label by its type)."""
        return [ex for ex in self.examples if ex.labels is not None]


@dataclass(frozen=True)
class ColumnSpec:
    """Where to find the fields in a file.

    Attributes:
        text: the text column (name or 0-based index).
        text_pair: the second text column for sentence pairs, or ``None``.
        label: the label column, or ``None`` for unlabelled data.
        header: whether the first row is a header. ``None`` lets :func:`read_examples` decide: a header when any
            column is given by name (JSON lines never have one).
        label_optional: when the header lacks the label column's name (or, by index, the file has too few
            columns for it), read the file as unlabelled instead of failing (test files of GLUE tasks have no label
            column).
        filter_column / filter_value: keep only rows whose ``filter_column`` equals ``filter_value``.
        label_map: raw label → canonical label (e.g. XNLI-MT's ``contradictory`` → ``contradiction``).
        skip_labels: rows with one of these labels are dropped and counted in ``ReadResult.skipped`` (OCNLI/CMNLI
            ``"-"``: no annotator majority).
    """

    text: Column
    text_pair: Column | None = None
    label: Column | None = None
    header: bool | None = None
    label_optional: bool = False
    filter_column: Column | None = None
    filter_value: str | None = None
    label_map: tuple[tuple[str, str], ...] = field(default=())
    skip_labels: tuple[str, ...] = ()

    def skip_reason(self, has_labels: bool) -> str:
        """The rows this spec drops, in words (``"rows whose 'language' is not 'zh'"``, ``"rows labelled '-'"``),
        ``""`` when it drops none (labels are only read, and skipped, when ``has_labels``)."""
        reasons = []
        if self.filter_column is not None:
            reasons.append(f"rows whose {self.filter_column!r} is not {self.filter_value!r}")
        if has_labels and self.skip_labels:
            reasons.append(f"rows labelled {' or '.join(repr(x) for x in self.skip_labels)}")
        return ", ".join(reasons)

    def wants_header(self) -> bool:
        if self.header is not None:
            return self.header
        return any(isinstance(c, str) for c in (self.text, self.text_pair, self.label, self.filter_column))


def parse_column(value: str | int | None) -> Column | None:
    """Turn a command-line column value into a :data:`Column`: ``"3"`` → ``3``, ``"sentence"`` → ``"sentence"``.

    A purely numeric name is an index; a header that really names a column ``"3"`` is still matched by name
    (see :func:`resolve_column`).
    """
    if value is None or isinstance(value, int):
        return value
    value = value.strip()
    if value.isdigit():
        return int(value)
    if value.startswith("-") and value[1:].isdigit():
        raise LitebertError(f"column index must be 0 or more, got {value}")
    return value


def detect_format(path: Path, delimiter: str | None = None) -> str:
    """``"jsonl"`` for ``.jsonl``/``.json``/``.ndjson``; ``"csv"`` for ``.csv`` or a ``,`` delimiter; else ``"tsv"``."""
    suffix = data_suffix(path)  # past a compression suffix: dev.csv.gz is CSV
    if suffix in (".jsonl", ".json", ".ndjson"):
        return "jsonl"
    if delimiter is not None:
        return "tsv" if delimiter == "\t" else "csv"
    if suffix == ".csv":
        return "csv"
    return "tsv"


def _decode_delimiter(delimiter: str | None) -> str | None:
    if delimiter is None:
        return None
    named = {"\\t": "\t", "tab": "\t", "comma": ",", "space": " ", "semicolon": ";", "pipe": "|"}
    delimiter = named.get(delimiter, delimiter)
    if len(delimiter) != 1:
        raise LitebertError(f"--delimiter must be one character (or \\t, tab, comma, ...), got {delimiter!r}")
    return delimiter


def _read_text(path: Path) -> str:
    """The file's text (:func:`litebert.corpus.read_text_file`: gzip, bzip2, xz and zstd-compressed files too)."""
    return read_text_file(path)


def data_lines(text: str) -> list[str]:
    """The lines of a data file's text, for every reader of this package (classification, token, choice, QA).

    A line ends at ``\\n`` (``\\r\\n``, and a lone ``\\r`` as universal newlines decode it, since files are read in
    text mode); a final newline adds no empty line. Unlike ``str.splitlines``, the other characters Unicode calls
    line breaks (``\\v``, ``\\f``, ``\\x1c``-``\\x1e``, U+0085, U+2028, U+2029) stay inside the line: they are
    legal raw in a JSON string, occur in scraped text, and ``csv``, ``wc`` and ``jq`` do not end a row at them.
    Line ``i`` of the result is physical line ``i + 1`` of the file, as error messages count.
    """
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def json_rows(path: Path, text: str) -> Iterator[tuple[int, object]]:
    """The rows of a JSON file, each with the 1-based line it starts on: JSON lines (one value per line, blank lines
    skipped), or one JSON array of rows (``[{...}, {...}]``, as ``datasets``' JSON loader reads and pandas'
    ``to_json(orient="records")`` writes; a file whose whole text is an array of objects or arrays).

    Raises:
        LitebertError: a line that is not JSON (``file:line``); a file holding one JSON object over several lines
            (not JSON lines); a value with an unpaired surrogate escape (``file:line``).
    """
    array = _json_array(path, text)
    if array is not None:
        yield from array
        return
    for lineno, line in enumerate(data_lines(text), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            if line.lstrip().startswith("{"):
                try:
                    whole = json.loads(text)
                except json.JSONDecodeError:
                    whole = None
                if isinstance(whole, dict):
                    raise LitebertError(
                        f"{path}: the file is one JSON object over several lines, not JSON lines; write one object "
                        "per line (or one JSON array of objects)"
                    ) from None
            raise LitebertError(f"{path}:{lineno}: not a JSON line ({exc.msg})") from exc
        check_no_lone_surrogate(line, obj, f"{path}:{lineno}")
        yield lineno, obj


def _json_array(path: Path, text: str) -> list[tuple[int, object]] | None:
    """The rows of a file that is one JSON array of objects (or of arrays), each with the line it starts on;
    ``None`` for any other text (JSON lines, whose first line may itself be an array row such as ``["a", 1]``).

    Raises:
        LitebertError: a file that starts with ``[`` over several lines but is valid neither as JSON lines nor as one
            array (the array's own error, ``file:line``).
    """
    if not text.lstrip().startswith("["):
        return None
    try:
        whole = json.loads(text)
    except json.JSONDecodeError as exc:
        first = next(line for line in data_lines(text) if line.strip())
        try:
            json.loads(first)
        except json.JSONDecodeError:  # the first line is no row of its own: a broken array over several lines
            raise LitebertError(
                f"{path}:{exc.lineno}: not valid JSON ({exc.msg}, column {exc.colno}); expected JSON lines or one "
                "JSON array of rows"
            ) from None
        return None
    if not isinstance(whole, list) or not all(isinstance(row, (dict, list)) for row in whole):
        return None
    check_no_lone_surrogate(text, whole, str(path))
    return json_array_rows(text, whole)


def iter_rows(path: Path, fmt: str, delimiter: str | None = None) -> Iterator[tuple[int, list[str] | dict]]:
    """Yield ``(line_number, fields)`` for every non-blank row; ``fields`` is a list (TSV/CSV/JSON arrays) or a dict
    (JSON objects). Line numbers are 1-based physical lines (a quoted CSV field spanning lines reports its first).
    JSON is JSON lines or one JSON array of rows (:func:`json_rows`)."""
    text = _read_text(path)
    if fmt == "jsonl":
        for lineno, obj in json_rows(path, text):
            if not isinstance(obj, (dict, list)):
                raise LitebertError(f"{path}:{lineno}: expected a JSON object or array, got {type(obj).__name__}")
            yield lineno, obj
    elif fmt == "tsv":
        sep = delimiter or "\t"
        # GLUE TSVs are unquoted: a field may contain a bare '"'; only the separator splits.
        for lineno, line in enumerate(data_lines(text), start=1):
            if not line.strip():
                continue
            yield lineno, line.split(sep)
    elif fmt == "csv":
        reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter or ",")
        try:
            for fields in reader:
                lineno = reader.line_num
                if not fields or all(not f.strip() for f in fields):
                    continue
                yield lineno, fields
        except csv.Error as exc:
            raise LitebertError(f"{path}:{reader.line_num}: bad CSV ({exc})") from exc
    else:
        raise LitebertError(f"unknown data format {fmt!r}; expected one of {', '.join(FORMATS)}")


def resolve_column(column: Column, header: Sequence[str] | None, path: Path, what: str) -> int:
    """Return the 0-based field index of ``column`` in a delimited file.

    Raises:
        LitebertError: a name without a header, or a name not in the header (the message lists the header).
    """
    if isinstance(column, str):
        if header is None:
            raise LitebertError(
                f"{path}: {what} column {column!r} is a name but the file is read without a header; "
                f"give a 0-based index or drop --no-header"
            )
        if column in header:
            return list(header).index(column)
        stripped = [h.strip() for h in header]
        if column.strip() in stripped:
            return stripped.index(column.strip())
        raise LitebertError(f"{path}: {what} column {column!r} is not in the header {list(header)}")
    if header is not None and str(column) in header:
        return list(header).index(str(column))
    return column


def read_examples(
    path: str | Path,
    spec: ColumnSpec,
    *,
    delimiter: str | None = None,
    fmt: str | None = None,
    require_label: bool = False,
) -> ReadResult:
    """Read ``path`` into examples according to ``spec``.

    Args:
        path: a TSV, CSV or JSON-lines file (UTF-8, BOM allowed).
        spec: the columns (see :class:`ColumnSpec`).
        delimiter: field separator override (``"\\t"``, ``","``, ``"tab"``, ``"comma"``...); implies TSV-style
            splitting for a tab and CSV parsing otherwise, unless ``fmt`` says ``jsonl``.
        fmt: ``"tsv"``, ``"csv"``, ``"jsonl"``; default from the extension (``.csv``, ``.jsonl``/``.json``, else TSV).
        require_label: fail when the file has no label column (training and dev files).

    Returns:
        a :class:`ReadResult`.

    Raises:
        LitebertError: empty file; column name not in header; column index out of range (checked on the first
            row); a row with too few fields (``file:line``); a JSON line missing a key; a label required but absent.
    """
    path = Path(path)
    delimiter = _decode_delimiter(delimiter)
    fmt = fmt or detect_format(path, delimiter)
    if fmt not in FORMATS:
        raise LitebertError(f"unknown data format {fmt!r}; expected one of {', '.join(FORMATS)}")
    rows = iter_rows(path, fmt, delimiter)
    first = next(rows, None)
    if first is None:
        raise LitebertError(f"{path}: the file is empty (no rows)")

    if fmt == "jsonl":
        return _read_json_rows(path, spec, first, rows, require_label)

    header: list[str] | None = None
    if spec.wants_header():
        header = [h.strip() for h in first[1]]
        first = next(rows, None)
        if first is None:
            raise LitebertError(f"{path}: the file has a header but no data rows")

    columns = {"text": spec.text, "text pair": spec.text_pair, "label": spec.label, "filter": spec.filter_column}
    index: dict[str, int | None] = {}
    for what, col in columns.items():
        if col is None:
            index[what] = None
        elif (
            what == "label"
            and spec.label_optional
            and isinstance(col, str)
            and header is not None
            and col not in header
            and col.strip() not in [h.strip() for h in header]
        ):
            index[what] = None  # an unlabelled file of a labelled layout (GLUE test.tsv)
        else:
            index[what] = resolve_column(col, header, path, what)
    if require_label and index["label"] is None:
        raise LitebertError(f"{path}: a label column is required here (got {spec.label!r}; header {header})")

    ncols = len(header) if header is not None else len(first[1])
    if spec.label_optional and index["label"] is not None and index["label"] >= ncols:
        index["label"] = None  # an unlabelled file of a layout whose label column is given by index
    for what, i in index.items():
        if i is not None and i >= ncols:
            raise LitebertError(
                f"{path}: {what} column index {i} is out of range: the "
                f"{'header' if header is not None else 'first row'} has {ncols} fields "
                f"(valid indexes 0..{ncols - 1})"
            )
    needed = max(i for i in index.values() if i is not None) + 1
    label_map = dict(spec.label_map)

    examples: list[Example] = []
    skipped = 0
    shown = delimiter or ("," if fmt == "csv" else chr(92) + "t")
    for lineno, fields in _chain(first, rows):
        if len(fields) < needed:
            raise LitebertError(
                f"{path}:{lineno}: row has {len(fields)} field(s), expected at least {needed} (delimiter {shown!r})"
            )
        if len(fields) > ncols and any(f.strip() for f in fields[ncols:]):
            # a field holding the delimiter unquoted: reading on would take the label (or text) from the wrong field
            raise LitebertError(
                f"{path}:{lineno}: row has {len(fields)} fields, the {'header' if header is not None else 'first row'}"
                f" has {ncols}: a field holds the delimiter {shown!r} unquoted"
                + (' (quote it as CSV does: "a, b")' if fmt == "csv" else "; use another --delimiter or CSV")
            )
        if index["filter"] is not None and fields[index["filter"]].strip() != spec.filter_value:
            skipped += 1
            continue
        label = None
        if index["label"] is not None:
            label = fields[index["label"]].strip()
            label = label_map.get(label, label)
            if label in spec.skip_labels:
                skipped += 1
                continue
        examples.append(
            Example(
                index=len(examples) + skipped,  # the data row in the file: dropped rows keep their numbers
                text=fields[index["text"]].strip(),
                text_pair=fields[index["text pair"]].strip() if index["text pair"] is not None else None,
                label=label,
                line=lineno,
            )
        )
    if not examples:
        raise LitebertError(
            f"{path}: no data rows"
            + (f" ({skipped} rows filtered out by {spec.filter_column}={spec.filter_value!r})" if skipped else "")
        )
    has_labels = index["label"] is not None
    return ReadResult(
        path=path,
        examples=examples,
        header=header,
        has_labels=has_labels,
        format=fmt,
        skipped=skipped,
        label_column=spec.label if has_labels else None,
        skip_reason=spec.skip_reason(has_labels),
    )


def read_rows(source: str | Path, spec: ColumnSpec, rows, *, require_label: bool = False) -> ReadResult:
    """Read rows given as ``(number, dict)`` pairs (a Hub split's rows, :mod:`litebert.finetune.hub_data`) as
    :func:`read_examples` reads the lines of a JSON-lines file: ``number`` is the example's ``line``.

    Raises:
        LitebertError: no rows; the JSON-lines reader's errors, named ``source:number``.
    """
    rows = iter(rows)
    first = next(rows, None)
    if first is None:
        raise LitebertError(f"{source}: no rows")
    return _read_json_rows(Path(source), spec, first, rows, require_label)


def _chain(first, rest):
    yield first
    yield from rest


def _json_field(obj: dict | list, col: Column, path: Path, lineno: int, what: str, optional: bool = False):
    if isinstance(obj, dict):
        if isinstance(col, int):
            keys = list(obj)
            if col >= len(keys):
                raise LitebertError(
                    f"{path}:{lineno}: {what} column index {col} is out of range: the object has "
                    f"{len(keys)} keys {keys}"
                )
            return obj[keys[col]]
        if col not in obj:
            if optional:
                return None
            raise LitebertError(f"{path}:{lineno}: {what} key {col!r} missing (keys: {list(obj)})")
        return obj[col]
    if isinstance(col, str):
        raise LitebertError(f"{path}:{lineno}: {what} column {col!r} is a name but the line is a JSON array")
    if col >= len(obj):
        raise LitebertError(f"{path}:{lineno}: row has {len(obj)} field(s), {what} column index {col} is out of range")
    return obj[col]


def _as_text(value, where: str, what: str) -> str:
    """A JSON text field as a string: a string stripped, ``null`` as ``""`` (an empty field, as in a CSV file).

    Raises:
        LitebertError: a number, boolean, list or object (``where`` is ``file:line``): its text would be the JSON
            spelling, not words of the row.
    """
    if isinstance(value, str):
        return value.strip()
    if value is None:
        return ""
    raise LitebertError(f"{where}: {what} is {_json_kind(value)}, expected a string")


def _as_label(value, where: str, what: str = "the label") -> str:
    """A JSON label as its name: a string stripped, a number as Python writes it (``1``, ``0.5``), a boolean as JSON
    does (``true``; BoolQ), ``null`` as ``""`` (no label: refused in training and evaluation files, unscored by
    ``predict``).

    Raises:
        LitebertError: an object, or a list inside a list (``where`` is ``file:line``).
    """
    if isinstance(value, str):
        return value.strip()
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    raise LitebertError(f"{where}: {what} is {_json_kind(value)}, expected a string or number")


def _json_kind(value) -> str:
    kind = {bool: "a boolean", int: "a number", float: "a number", list: "a JSON list", dict: "a JSON object"}
    return f"{kind.get(type(value), type(value).__name__)} ({json_shown(value)})"


def _read_json_rows(path: Path, spec: ColumnSpec, first, rows, require_label: bool) -> ReadResult:
    label_map = dict(spec.label_map)
    examples: list[Example] = []
    skipped = 0
    has_labels = spec.label is not None
    if has_labels and spec.label_optional:  # an unlabelled file: its first row lacks the label key or index
        row = first[1]
        if isinstance(spec.label, int):
            has_labels = spec.label < len(row)
        elif isinstance(row, dict):
            has_labels = spec.label in row
    if require_label and not has_labels:
        raise LitebertError(f"{path}: a label column is required here (got {spec.label!r})")
    for lineno, obj in _chain(first, rows):
        where = f"{path}:{lineno}"
        if spec.filter_column is not None:
            value = _json_field(obj, spec.filter_column, path, lineno, "filter")
            if _as_label(value, where, f"the filter field {spec.filter_column!r}") != spec.filter_value:
                skipped += 1
                continue
        text = _as_text(_json_field(obj, spec.text, path, lineno, "text"), where, f"the text field {spec.text!r}")
        pair = None
        if spec.text_pair is not None:
            raw = _json_field(obj, spec.text_pair, path, lineno, "text pair")
            pair = _as_text(raw, where, f"the text pair field {spec.text_pair!r}")
        label, labels = None, None
        if has_labels:
            raw = _json_field(obj, spec.label, path, lineno, "label")
            what = f"the label field {spec.label!r}"
            if isinstance(raw, list):  # a multi-label field: its items, mapped one by one
                labels = tuple(
                    label_map.get(v, v) for v in (_as_label(item, where, f"an item of {what}") for item in raw)
                )
                label = ",".join(labels)
            else:
                label = _as_label(raw, where, what)
                label = label_map.get(label, label)
            if label in spec.skip_labels:
                skipped += 1
                continue
        examples.append(
            Example(index=len(examples) + skipped, text=text, text_pair=pair, label=label, line=lineno, labels=labels)
        )
    if not examples:
        raise LitebertError(f"{path}: no data rows")
    return ReadResult(
        path=path,
        examples=examples,
        header=None,
        has_labels=has_labels,
        format="jsonl",
        skipped=skipped,
        label_column=spec.label if has_labels else None,
        skip_reason=spec.skip_reason(has_labels),
    )
