"""Corpus readers: files, directories and Hub datasets → documents, each a list of sentence strings
(docs/algorithms.md §2 "Input"; docs/pretraining.md "Inputs").

Text formats, chosen by content (:func:`detect_format`) unless forced:

``bert``            one sentence per line, a blank line between documents (google-research's input format).
``wikitext``        WikiText: an article starts at a ``' = Title = '`` line; ``' = = Section = = '`` headings are
                    dropped; each paragraph line is split into sentences.
``wikiextractor``   ``<doc ...>`` … ``</doc>``; the title line after ``<doc>`` is dropped; paragraphs split.
``jsonl``           one JSON object per line with a text field (``text_column``, default ``text``); each object is a
                    document, split at newlines into paragraphs and then into sentences.
``plain``           paragraphs, one per line, a blank line between documents; each line split into sentences.
``json``            one JSON array of objects with a text field (``[{"text": ...}, ...]``, as pandas'
                    ``to_json(orient="records")`` writes), each object a document as in ``jsonl``; the file is read
                    whole (JSON lines stream: use them for corpora near the memory's size). A JSON document of
                    another shape over several lines (SQuAD's ``{"data": ...}``) is an error, never read as prose.

Every text file may be gzip, bzip2, xz or zstd-compressed: the compression is told by the file's first bytes
(:func:`detect_compression`), not its name, and the file is decompressed as a stream (never to disk); the format is
detected inside the decompressed text. Columnar files, also told by content: Parquet (``PAR1``) and Arrow IPC
(file ``ARROW1`` or stream; Feather v2 is the IPC file) are read one record batch at a time (memory bounded by a
batch, not the file), and ``hf://ORG/NAME[:CONFIG][@REVISION][#SPLIT]`` streams a Hub dataset with
``datasets.load_dataset(..., streaming=True)`` (split ``train`` unless ``#SPLIT``). A columnar or Hub row is one
document: its ``text_column`` is split at newlines into paragraphs and each paragraph into sentences, as ``jsonl``.

Sentence splitting (:func:`split_sentences`) is a documented rule, not a model: a sentence ends after ``.``, ``!``
or ``?`` (with any closing quotes/brackets) that is followed by whitespace and then an upper-case letter, a digit,
an opening quote/bracket, a CJK character or ``<`` (WikiText's ``<unk>``); and after Chinese ``。！？`` (with
closing quotes),
whether or not a space follows. Abbreviations such as "Mr. Smith" are split too; that costs a sentence boundary,
not text.

Identity: :func:`iter_documents` numbers documents 0, 1, … over all sources in order (the ``doc`` column of the
instances) and gives each its source and row (the line a text document starts on, from 1; the row of a columnar or
Hub document, from 0); :attr:`CorpusStats.sources` lists each source's first document index and document count.

Bad input raises :class:`~litebert.errors.LitebertError` naming the file or dataset: a missing path, a named file
with no text (an empty file found in a directory is skipped instead), a corrupt or truncated compressed stream (with
the last line read), a zip or tar archive, a Parquet/Arrow file that is not one or has no such text column (its
columns listed) or whose text column is not text (its type named), a JSON line whose text field is not a string or
null (the line and the type named), a Hub dataset, config or split that cannot be loaded. A directory stands for
every regular, non-hidden file below it (sorted). A line that is not valid UTF-8 is skipped and counted
(``on_invalid="skip"``, the default; the first one is named in the summary) or raises an error naming the file and
line (``on_invalid="error"``); so is a JSON line without its text field, a null row, or a text with an unpaired
``\\ud800``-``\\udfff`` escape (not valid Unicode: the tokenizers refuse it).
"""

from __future__ import annotations

import bz2
import contextlib
import gzip
import io
import json
import lzma
import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, NamedTuple

from litebert.errors import LitebertError

FORMATS = ("auto", "bert", "wikitext", "wikiextractor", "jsonl", "json", "plain")
# the help of the --corpus and --text-column options of the commands that read a corpus (prepare, train-tokenizer)
CORPUS_HELP = (
    "corpus files (text, compressed or not; Parquet; Arrow), directories, or Hub datasets "
    "hf://ORG/NAME[:CONFIG][@REVISION][#SPLIT]"
)
TEXT_COLUMN_HELP = "the text field of JSON lines, the text column of Parquet/Arrow files and Hub rows"

_EN_BOUNDARY = re.compile(r"([.!?]+[\"'”’)\]]*)\s+(?=[\"'“‘(\[<]?[A-Z0-9<À-ÖØ-Þ\u3400-\u4dbf\u4e00-\u9fff])")
_ZH_BOUNDARY = re.compile(r"([。！？]+[”’」』）)]*)\s*")
_WIKITEXT_TITLE = re.compile(r"^ = [^=].* = $")
_WIKITEXT_HEADING = re.compile(r"^ (= )+.*( =)+ $")


def split_sentences(paragraph: str) -> list[str]:
    """Split one paragraph into sentences by the rule in the module docstring; drops empty pieces.

    >>> split_sentences("It rained . Then it stopped ! 下雨了。停了！")
    ['It rained .', 'Then it stopped !', '下雨了。', '停了！']
    """
    text = _EN_BOUNDARY.sub("\\1\n", paragraph)
    if "。" in text or "！" in text or "？" in text:
        text = _ZH_BOUNDARY.sub("\\1\n", text)
    return [s.strip() for s in text.split("\n") if s.strip()]


class Unsplit(str):
    """A paragraph whose sentence splitting was deferred (``read_documents(defer_split=True)``): the consumer
    calls :func:`expand_document` (so that ``prepare``'s workers, not the reader, run the splitter)."""

    __slots__ = ()


def expand_document(doc: list[str]) -> list[str]:
    """Split the :class:`Unsplit` paragraphs of a document into sentences; other entries are sentences already."""
    if not any(type(s) is Unsplit for s in doc):
        return doc
    out: list[str] = []
    for s in doc:
        if type(s) is Unsplit:
            out.extend(split_sentences(s))
        else:
            out.append(s)
    return out


@dataclass
class CorpusStats:
    """Counts gathered while reading: files, bytes of text (decompressed), ``input_bytes`` (bytes of the files
    consumed so far, compressed or not: the progress against their sizes), lines, skipped lines (invalid UTF-8,
    bad JSON, null rows), documents and sentences yielded; ``sources``: one entry per source in order,
    ``{"source", "format", "compression", "revision", "bytes", "first_document", "documents"}`` (document
    ``first_document + i`` is the source's i-th; ``revision``: the commit sha a Hub dataset was read at; format
    ``"empty"``: an empty file of a directory, skipped); ``empty_files``: the names of those files."""

    files: int = 0
    bytes: int = 0
    input_bytes: int = 0
    lines: int = 0
    skipped_lines: int = 0
    first_skipped: str | None = None
    documents: int = 0
    sentences: int = 0
    formats: dict = field(default_factory=dict)
    sources: list = field(default_factory=list)
    empty_files: list = field(default_factory=list)

    def skip(self, where: str) -> None:
        self.skipped_lines += 1
        if self.first_skipped is None:
            self.first_skipped = where


# ------------------------------------------------------------------------------------------------------------
# Sources: files, directories, hf:// datasets
# ------------------------------------------------------------------------------------------------------------
HUB_PREFIX = "hf://"
_HUB_ID = re.compile(
    r"^hf://(?P<repo>[^:@#\s]+)(?::(?P<config>[^@#\s]+))?(?:@(?P<revision>[^#\s]+))?(?:#(?P<split>\S+))?$"
)


@dataclass(frozen=True)
class CorpusSource:
    """One input: a file (``path``, ``size`` in bytes on disk) or a Hub dataset (``repo``, ``config``,
    ``revision``, ``split``; ``path`` and ``size`` None). ``name`` is how errors and the manifest call it;
    ``empty``: a file of a directory that holds no document (see :func:`resolve_corpus_sources`)."""

    name: str
    path: Path | None = None
    size: int | None = None
    repo: str | None = None
    config: str | None = None
    revision: str | None = None
    split: str = "train"
    empty: bool = False

    def describe(self) -> dict:
        """``{"source": name, "bytes": size on disk or None}``: how the manifest records the source."""
        return {"source": self.name, "bytes": self.size}


def name_list(names: Sequence[str], shown: int = 5) -> str:
    """``"a, b, c, d, e and K more"``: source names in a message, the first ``shown`` of them."""
    return ", ".join(names[:shown]) + (f" and {len(names) - shown} more" if len(names) > shown else "")


def empty_files_note(names: Sequence[str]) -> str:
    """``"skipped N empty file(s): a, b"``: how a command's summary names the empty files it skipped."""
    return f"skipped {len(names)} empty file{'s' if len(names) != 1 else ''}: {name_list(names)}"


def corpus_bytes(sources: Sequence[CorpusSource]) -> int | None:
    """The sources' total size on disk in bytes; None when one is a Hub dataset (size unknown)."""
    return None if any(s.size is None for s in sources) else sum(s.size for s in sources)


def parse_hub_id(spec: str) -> CorpusSource:
    """``hf://ORG/NAME[:CONFIG][@REVISION][#SPLIT]`` → a Hub :class:`CorpusSource` (split ``train`` by default).

    Raises:
        LitebertError: not of that form.
    """
    m = _HUB_ID.match(spec)
    if not m or m["repo"].count("/") > 1 or m["repo"].startswith("/") or m["repo"].endswith("/"):
        raise LitebertError(
            f"--corpus {spec}: a Hub dataset is hf://ORG/NAME[:CONFIG][@REVISION][#SPLIT] "
            "(e.g. hf://wikimedia/wikipedia:20231101.zh)"
        )
    return CorpusSource(spec, repo=m["repo"], config=m["config"], revision=m["revision"], split=m["split"] or "train")


def resolve_corpus_sources(paths: Sequence[str | os.PathLike] | str | os.PathLike) -> list[CorpusSource]:
    """Expand ``paths`` into sources in reading order: a directory gives all regular non-hidden files below it
    (sorted), an ``hf://`` id a Hub dataset (see :func:`parse_hub_id`; nothing is fetched here).

    An empty file (zero bytes, only whitespace after decompression, a Parquet/Arrow file with no rows) found in a
    directory holds no document: its source is marked ``empty`` and the readers skip it; one named in ``paths``
    is an error (a wrong name or a failed download, found before any work).

    Raises:
        LitebertError: no path given, a path does not exist, a directory holds no files, a file named in
            ``paths`` is empty, a malformed ``hf://`` id.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    if not paths:
        raise LitebertError("no corpus file given (--corpus FILE...)")
    sources: list[CorpusSource] = []
    for entry in paths:
        if isinstance(entry, str) and entry.startswith(HUB_PREFIX):
            sources.append(parse_hub_id(entry))
            continue
        p = Path(entry)
        if p.is_dir():
            found = sorted(
                f
                for f in p.rglob("*")
                if f.is_file() and not any(part.startswith(".") for part in f.relative_to(p).parts)
            )
            if not found:
                raise LitebertError(f"corpus directory {p} holds no files")
            sources.extend(CorpusSource(str(f), f, f.stat().st_size, empty=_is_empty(f) is not None) for f in found)
        elif p.is_file():
            if (why := _is_empty(p)) is not None:
                raise LitebertError(f"corpus file is empty: {p}{why}")
            sources.append(CorpusSource(str(p), p, p.stat().st_size))
        else:
            raise LitebertError(f"corpus file not found: {p}")
    return sources


def _is_empty(path: Path) -> str | None:
    """None when the file may hold a document, else why it holds none: ``""`` (no text) or `` (a … file with no
    rows)``. A file that cannot be read as what it looks like counts as not empty: its reader reports it."""
    kind = _container(path)
    if kind is None:
        return "" if _is_blank_file(path) else None
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        if kind == "parquet":
            rows = pq.ParquetFile(path).metadata.num_rows
        elif kind == "arrow":
            reader = pa.ipc.open_file(pa.memory_map(str(path)))
            rows = sum(reader.get_batch(i).num_rows for i in range(reader.num_record_batches))
        else:
            rows = next((b.num_rows for b in pa.ipc.open_stream(pa.memory_map(str(path))) if b.num_rows), 0)
    except (pa.ArrowException, OSError):
        return None
    return None if rows else f" (a{'' if kind == 'parquet' else 'n'} {_KIND_NAMES[kind]} file with no rows)"


def check_corpus(
    paths: Sequence[str | os.PathLike] | str | os.PathLike, format: str = "auto", text_column: str = "text"
) -> list[CorpusSource]:
    """Resolve the sources (:func:`resolve_corpus_sources`) and check each can be read, before any work: a text
    file's compression and format (its first 64 KiB), a Parquet/Arrow file's schema and text column, a Hub
    dataset's id, config, split and text column (opens the stream: needs the Hub).

    Raises:
        LitebertError: as :func:`resolve_corpus_sources`; unknown ``format``; a compressed file corrupt or
            truncated within its first 64 KiB of text (naming the last complete line read); JSON lines without
            ``text_column``; a Parquet/Arrow file that is not one or lacks ``text_column``; a Hub dataset that
            cannot be reached or has no such config, split or column.
    """
    if format not in FORMATS:
        raise LitebertError(f"--format must be one of {', '.join(FORMATS)}, got {format!r}")
    sources = resolve_corpus_sources(paths)
    for src in sources:
        if src.empty:
            continue
        if src.path is None:
            next(_hub_rows(src, text_column), None)
        elif (kind := _container(src.path)) is not None:
            next(_arrow_batches(src.path, kind, text_column, CorpusStats()), None)
        elif format == "auto":
            detect_format(src.path, text_column)
        else:
            text_head(src.path)
    return sources


def resolve_corpus_files(paths: Sequence[str | os.PathLike] | str | os.PathLike) -> list[Path]:
    """The files of :func:`resolve_corpus_sources` (for callers that read local files only).

    Raises:
        LitebertError: as :func:`resolve_corpus_sources`, and for an ``hf://`` id.
    """
    sources = resolve_corpus_sources(paths)
    hub = [s.name for s in sources if s.path is None]
    if hub:
        raise LitebertError(f"{hub[0]}: only local files are accepted here")
    return [s.path for s in sources]


# ------------------------------------------------------------------------------------------------------------
# Compression and containers, by content
# ------------------------------------------------------------------------------------------------------------
_COMPRESSION_MAGIC = (("gzip", b"\x1f\x8b"), ("bzip2", b"BZh"), ("xz", b"\xfd7zXZ\x00"), ("zstd", b"\x28\xb5\x2f\xfd"))
_KIND_NAMES = {"parquet": "Parquet", "arrow": "Arrow IPC", "arrow-stream": "Arrow IPC stream"}
_COLUMNAR_SUFFIXES = {
    ".parquet": "a Parquet",
    ".arrow": "an Arrow IPC",
    ".feather": "an Arrow IPC",
    ".arrows": "an Arrow IPC",
}


def _head(path: Path, n: int = 8) -> bytes:
    with open(path, "rb") as fh:
        return fh.read(n)


def detect_compression(path: str | os.PathLike) -> str | None:
    """``"gzip"``, ``"bzip2"``, ``"xz"`` or ``"zstd"`` from the file's magic bytes (whatever its name), else None."""
    head = _head(Path(path))
    if len(head) >= 4 and 0x50 <= head[0] <= 0x5F and head[1:4] == b"\x2a\x4d\x18":
        return "zstd"  # a zstd skippable frame first (pzstd writes one)
    return next((name for name, magic in _COMPRESSION_MAGIC if head.startswith(magic)), None)


def _container(path: Path) -> str | None:
    """``"parquet"``, ``"arrow"`` (IPC file / Feather v2) or ``"arrow-stream"`` by magic bytes, else None (text).

    Raises:
        LitebertError: a ``.parquet``/``.arrow``/``.feather``/``.arrows`` file whose content is neither.
    """
    head = _head(path)
    if head.startswith(b"PAR1"):
        return "parquet"
    if head.startswith(b"ARROW1"):
        return "arrow"
    if head.startswith(b"\xff\xff\xff\xff") and len(head) == 8:  # IPC stream: continuation marker, metadata length
        return "arrow-stream"
    kind = _COLUMNAR_SUFFIXES.get(path.suffix.lower())
    if kind and detect_compression(path) is None:
        raise LitebertError(
            f"{path}: not {kind} file (its first bytes are {head[:8]!r}; expected "
            f"{'PAR1' if kind == 'a Parquet' else 'ARROW1 (file) or an IPC stream'})"
        )
    return None


class _ZstdReader(io.RawIOBase):
    """A zstd stream (one or more frames) as a readable raw file; a stream that ends inside a frame raises
    ``EOFError`` (``zstandard``'s own readers return the truncated data silently)."""

    def __init__(self, fh: BinaryIO) -> None:
        try:  # here, not at the top: only zstd input needs it (GPU images often lack the package)
            import zstandard
        except ImportError:
            raise LitebertError(
                "reading zstd-compressed input needs the zstandard package: pip install zstandard"
            ) from None

        self._fh = fh
        self._zstd_error = zstandard.ZstdError
        self._dctx = zstandard.ZstdDecompressor()
        self._obj = self._dctx.decompressobj()
        self._buf = b""
        self._pos = 0
        self._in_frame = False

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        while self._pos >= len(self._buf):
            chunk = self._fh.read(1 << 17)
            if not chunk:
                if self._in_frame:
                    raise EOFError("the zstd stream ends inside a frame (truncated)")
                return 0
            self._buf, self._pos = self._feed(chunk), 0
        n = min(len(b), len(self._buf) - self._pos)
        b[:n] = self._buf[self._pos : self._pos + n]
        self._pos += n
        return n

    def _feed(self, data: bytes) -> bytes:
        out = []
        while data:
            self._in_frame = True
            try:
                out.append(self._obj.decompress(data))
            except self._zstd_error as exc:  # as the other decompressors: an OSError for _stream_errors
                raise OSError(f"zstd: {exc}") from None
            if not self._obj.eof:
                break
            data = self._obj.unused_data  # the next frame
            self._obj = self._dctx.decompressobj()
            self._in_frame = False
        return b"".join(out)


_STREAM_ERRORS = (OSError, EOFError, lzma.LZMAError)


@contextlib.contextmanager
def open_decompressed(path: str | os.PathLike) -> Iterator[tuple[BinaryIO, BinaryIO]]:
    """``(text, raw)``: a binary stream of the file's decompressed bytes (the file itself when not compressed;
    see :func:`detect_compression`), and the underlying file (whose ``tell()`` is the bytes consumed)."""
    comp = detect_compression(path)
    with open(path, "rb") as raw:
        if comp is None:
            yield raw, raw
        elif comp == "gzip":
            with gzip.GzipFile(fileobj=raw, mode="rb") as fh:
                yield fh, raw
        elif comp == "bzip2":
            with bz2.BZ2File(raw, "rb") as fh:
                yield fh, raw
        elif comp == "xz":
            with lzma.LZMAFile(raw, "rb") as fh:
                yield fh, raw
        else:
            with io.BufferedReader(_ZstdReader(raw), 1 << 16) as fh:
                yield fh, raw


@contextlib.contextmanager
def _stream_errors(path: Path, lines_read: Callable[[], int]):
    """Turn a decompression error into one LitebertError naming the file and the last complete line read
    (``lines_read()`` when the error comes)."""
    try:
        yield
    except _STREAM_ERRORS as exc:
        comp = detect_compression(path) or "uncompressed"
        n = lines_read()
        where = f"after line {n}" if n else "before any complete line was read"
        raise LitebertError(f"{path}: corrupt or truncated {comp} file {where} ({type(exc).__name__}: {exc})") from None


#: the name endings of the compressions :func:`detect_compression` reads (the content decides, the name only hides
#: the data format's suffix: ``dev.csv.gz``)
COMPRESSION_SUFFIXES = (".gz", ".bz2", ".xz", ".zst")


def data_suffix(path: str | os.PathLike) -> str:
    """The lower-case suffix that names a data file's format, past a compression suffix: ``.csv`` for ``dev.csv``
    and ``dev.csv.gz``, ``.jsonl`` for ``train.jsonl.zst``."""
    path = Path(path)
    if path.suffix.lower() in COMPRESSION_SUFFIXES:
        path = path.with_suffix("")
    return path.suffix.lower()


def read_text_file(path: str | os.PathLike) -> str:
    """The whole text of a UTF-8 data file (fine-tuning's TSV/CSV/JSON files), decompressed when it is gzip,
    bzip2, xz or zstd-compressed (by content, :func:`detect_compression`): a leading byte-order mark dropped,
    ``\r\n`` and a lone ``\r`` read as ``\n`` (as a file opened in text mode).

    Raises:
        LitebertError: ``"{path}: no such file"``, ``"{path}: is a directory, expected a data file"``, a corrupt or
            truncated compressed file, or text that is not UTF-8 (``"{path}: not valid UTF-8 (reason at byte N)"``,
            the byte counted in the decompressed text, which the message then says).
    """
    path = Path(path)
    if not path.exists():
        raise LitebertError(f"{path}: no such file")
    if path.is_dir():
        raise LitebertError(f"{path}: is a directory, expected a data file")
    comp = detect_compression(path)
    try:
        with open_decompressed(path) as (fh, _):
            data = fh.read()
    except _STREAM_ERRORS as exc:
        raise LitebertError(f"{path}: corrupt or truncated {comp} file ({type(exc).__name__}: {exc})") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        where = f" of its {comp}-decompressed text" if comp else ""
        raise LitebertError(f"{path}: not valid UTF-8 ({exc.reason} at byte {exc.start}{where})") from None
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def _is_blank_file(path: Path) -> bool:
    """Whether the (decompressed) file holds only whitespace. A corrupt stream counts as not blank: the reader
    that reads it reports it, naming the last line read."""
    if path.stat().st_size == 0:
        return True
    try:
        with open_decompressed(path) as (fh, _):
            while True:
                block = fh.read(1 << 20)
                if not block:
                    return True
                if block.strip():
                    return False
    except _STREAM_ERRORS:
        return False


def _archive(head: bytes) -> str | None:
    """``"zip"`` or ``"tar"`` when (decompressed) content starts as that archive does, else None: a zip's local
    file header (``PK\\3\\4``, or ``PK\\5\\6`` for an empty archive), POSIX tar's ``ustar`` magic at offset 257."""
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return "zip"
    if head[257:262] == b"ustar":
        return "tar"
    return None


def text_head(path: str | os.PathLike, size: int = 1 << 16) -> bytes:
    """The first ``size`` bytes of a text file's decompressed content.

    Raises:
        LitebertError: a corrupt or truncated compressed stream within those bytes (naming the last complete
            line read); content that is not text: a compressed Parquet or Arrow file (read them uncompressed: they
            compress their pages themselves), a zip or tar archive (compressed or not), or other binary data (NUL
            bytes: an image, UTF-16 text).
    """
    path = Path(path)
    buf, lines = bytearray(), 0
    with _stream_errors(path, lambda: lines), open_decompressed(path) as (fh, _):
        while len(buf) < size and (line := fh.readline(size - len(buf))):  # line by line: an error names one
            buf += line
            lines += line.endswith(b"\n")
    head = bytes(buf)
    inner = "Parquet" if head.startswith(b"PAR1") else "Arrow" if head.startswith((b"ARROW1", b"\xff" * 4)) else None
    if inner:
        raise LitebertError(
            f"{path}: a {detect_compression(path)}-compressed {inner} file: give it uncompressed ({inner} files "
            "compress their own pages and need random access)"
        )
    archive = _archive(head)
    if archive:
        comp = detect_compression(path)
        raise LitebertError(
            f"{path}: a {f'{comp}-compressed ' if comp else ''}{archive} archive; litebert reads no archive: unpack it "
            "and give the files (or their directory) to --corpus"
        )
    if b"\0" in head:
        raise LitebertError(
            f"{path}: not a text file (NUL bytes at offset {head.index(0)}: binary data, or UTF-16 text; corpus text "
            "must be UTF-8)"
        )
    return head


def detect_format(path: str | os.PathLike, text_column: str = "text") -> str:
    """Guess a text file's format from its first 64 KiB of (decompressed) text (formats: the module docstring).

    Raises:
        LitebertError: JSON lines without ``text_column`` (the keys listed); content that is not text (see
            :func:`text_head`).
    """
    head = text_head(path).decode("utf-8", errors="replace")
    lines = head.split("\n")
    if len(lines) > 1 and len(head) == 1 << 16:
        lines = lines[:-1]  # the last line may be cut
    nonempty = [ln for ln in lines if ln.strip()]
    if not nonempty:
        return "bert"
    first = nonempty[0].strip()
    if first.startswith("<doc ") or first == "<doc>":
        return "wikiextractor"
    if re.match(r"\s*\[\s*\{", head.lstrip("\ufeff")):
        return "json"
    if first.startswith("{"):
        try:
            obj = json.loads(first)
            if isinstance(obj, dict) and text_column in obj:
                _check_json_text(obj[text_column], text_column, f"{path}:{lines.index(nonempty[0]) + 1}")
                return "jsonl"
            if isinstance(obj, dict):  # JSON lines without a text field: never tokenize the JSON itself as prose
                line = lines.index(nonempty[0]) + 1
                raise LitebertError(
                    f"{path}:{line}: a JSON object without a {text_column!r} field (keys: "
                    f'{", ".join(map(repr, obj))}); JSON-lines corpora need {{"{text_column}": ...}} '
                    "on every line (--text-column names the field)"
                )
        except json.JSONDecodeError:
            if re.match(r'\{\s*("|$)', first):  # '{' or '{"key": ...' and no object on the line: one JSON document
                raise LitebertError(
                    f"{path}: one JSON document over several lines, not a corpus: a JSON corpus is JSON lines (one "
                    f'{{"{text_column}": ...}} object per line) or one JSON array of such objects'
                ) from None
    if any(_WIKITEXT_TITLE.match(ln.rstrip("\r")) for ln in lines[:200]):
        return "wikitext"
    sample = nonempty[:200]
    per_line = sum(len(split_sentences(ln)) for ln in sample) / len(sample)
    return "plain" if per_line > 1.5 else "bert"


# ------------------------------------------------------------------------------------------------------------
# Text readers: (line number, line) → (first line of the document, sentences)
# ------------------------------------------------------------------------------------------------------------
def _iter_lines(path: Path, stats: CorpusStats, on_invalid: str) -> Iterator[tuple[int, str]]:
    """(line number from 1, decoded line without the newline) of the decompressed file; invalid UTF-8 lines
    skipped or raised; a corrupt compressed stream raised naming the last line read."""
    n = 0
    base = stats.input_bytes
    with _stream_errors(path, lambda: n), open_decompressed(path) as (fh, raw):
        for n, raw_line in enumerate(fh, 1):
            stats.bytes += len(raw_line)
            stats.lines += 1
            if not n & 4095:
                stats.input_bytes = base + raw.tell()
            try:
                line = raw_line.decode("utf-8")
            except UnicodeDecodeError as exc:
                where = f"{path}:{n}"
                if on_invalid == "error":
                    raise LitebertError(f"{where}: invalid UTF-8 at byte {exc.start} of the line") from None
                stats.skip(where)
                continue
            if n == 1 and line.startswith("\ufeff"):
                line = line[1:]
            yield n, line.rstrip("\r\n")
        stats.input_bytes = base + raw.tell()


def _read_bert(lines: Iterable[tuple[int, str]], split, splitter=split_sentences) -> Iterator[tuple[int, list[str]]]:
    doc: list[str] = []
    start = 0
    for n, line in lines:
        s = line.strip()
        if not s:
            if doc:
                yield start, doc
                doc = []
            continue
        if not doc:
            start = n
        if split:
            doc.extend(splitter(s))
        else:
            doc.append(s)
    if doc:
        yield start, doc


def _read_wikitext(lines: Iterable[tuple[int, str]], splitter=split_sentences) -> Iterator[tuple[int, list[str]]]:
    """A ``' = Title = '`` line starts an article only with a blank line before and after it, as WikiText writes
    titles; ``' = Goals ; A = '``-like lines inside running text are dropped like headings (this gives
    WikiText-2's published 600 train / 60 validation articles). The document's line is its title's."""
    doc: list[str] = []
    start = title_line = 1
    prev_blank = True
    pending = False  # a title candidate waiting for the next line to be blank
    for n, line in lines:
        s = line.strip()
        if pending:
            pending = False
            if not s:  # confirmed: a new article
                if doc:
                    yield start, doc
                doc = []
                start = title_line
        if not s:
            prev_blank = True
            continue
        was_blank, prev_blank = prev_blank, False
        if _WIKITEXT_TITLE.match(line) and was_blank:
            pending, title_line = True, n
            continue
        if _WIKITEXT_HEADING.match(line) or _WIKITEXT_TITLE.match(line):
            continue
        doc.extend(splitter(s))
    if doc:
        yield start, doc


def _read_wikiextractor(lines: Iterable[tuple[int, str]], splitter=split_sentences) -> Iterator[tuple[int, list[str]]]:
    doc: list[str] | None = None
    title = None
    skip_title = False
    start = 1
    for n, line in lines:
        s = line.strip()
        if s.startswith("<doc"):
            if doc:
                yield start, doc
            doc, start = [], n
            m = re.search(r'title="([^"]*)"', s)
            title = m.group(1) if m else None
            skip_title = True
            continue
        if s == "</doc>":
            if doc:
                yield start, doc
            doc, title = None, None
            continue
        if not s:
            continue
        if skip_title:
            skip_title = False
            if title is not None and s == title.strip():
                continue
        if doc is None:
            doc, start = [], n
        doc.extend(splitter(s))
    if doc:
        yield start, doc


def has_lone_surrogate(line: str, value) -> bool:
    """Whether ``value``, decoded from the JSON text ``line``, holds an unpaired UTF-16 surrogate (a ``"\\ud800"``
    escape without its partner): a code point that no UTF-8 text holds, which the tokenizers refuse with a
    TypeError. Only a line with a ``\\u`` escape is checked."""
    if "\\u" not in line:
        return False
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def check_no_lone_surrogate(text: str, value, where: str) -> None:
    """Raise when ``value``, decoded from the JSON ``text`` (a line, or a whole document), holds an unpaired UTF-16
    surrogate (:func:`has_lone_surrogate`): the tokenizers would stop on it with a TypeError deep in their code.

    Raises:
        LitebertError: ``"{where}: ..."``; for a document of several lines ``where`` gains the number of the first
        line with a ``\\ud800``-``\\udfff`` escape.
    """
    if not has_lone_surrogate(text, value):
        return
    if "\n" in text.strip():
        escape = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
        where += next((f":{n}" for n, line in enumerate(text.splitlines(), 1) if escape.search(line)), "")
    raise LitebertError(f"{where}: an unpaired UTF-16 surrogate escape (\\ud800-\\udfff), not valid Unicode")


def json_shown(value) -> str:
    """A JSON value as an error message shows it: its JSON text, cut to 60 characters."""
    shown = json.dumps(value, ensure_ascii=False)
    return shown if len(shown) <= 60 else shown[:57] + "..."


def _check_json_text(value, text_column: str, where: str) -> None:
    """A JSON line's text field that holds a number, list, object or boolean is an error (not a skipped line): the
    whole file is likely not text under that field, as a Parquet column of another type.

    Raises:
        LitebertError: ``value`` is not a string or null, naming ``where`` (file:line), the type and the value.
    """
    if value is None or isinstance(value, str):
        return
    shown = json_shown(value)
    raise LitebertError(
        f"{where}: field {text_column!r} is {type(value).__name__} ({shown}), not a string; --text-column names the "
        "field that holds the text"
    )


def _text_document(text: str, splitter) -> list[str]:
    """A document's text (a JSON field, a columnar/Hub row): paragraphs at newlines, each split into sentences."""
    return [s for para in text.split("\n") if para.strip() for s in splitter(para.strip())]


def _read_jsonl(
    lines: Iterable[tuple[int, str]],
    path: Path,
    stats: CorpusStats,
    on_invalid: str,
    splitter=split_sentences,
    text_column: str = "text",
) -> Iterator[tuple[int, list[str]]]:
    for n, line in lines:
        if not line.strip():
            continue
        where = f"{path}:{n}"
        try:
            obj = json.loads(line)
            text = obj[text_column]
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            if on_invalid == "error":
                raise LitebertError(f"{where}: not a JSON object with a string {text_column!r} field ({exc})") from None
            stats.skip(where)
            continue
        doc = _json_document(text, "\\u" in line, where, stats, on_invalid, splitter, text_column)
        if doc:
            yield n, doc


def _json_document(
    text, escaped: bool, where: str, stats: CorpusStats, on_invalid: str, splitter, text_column: str
) -> list[str] | None:
    """The sentences of a JSON object's text field ``text`` (``escaped``: its JSON had a ``\\u`` escape), or
    ``None`` for a null or invalid one, skipped and counted (``on_invalid="skip"``) or raised naming ``where``."""
    if text is None:  # a null row, as in a Parquet column: skipped and counted
        if on_invalid == "error":
            raise LitebertError(f"{where}: field {text_column!r} is null, not a string")
        stats.skip(where)
        return None
    _check_json_text(text, text_column, where)
    if escaped and has_lone_surrogate("\\u", text):  # invalid Unicode, as a line of invalid UTF-8
        if on_invalid == "error":
            raise LitebertError(f"{where}: field {text_column!r} holds an unpaired UTF-16 surrogate escape "
                                "(\\ud800-\\udfff), not valid Unicode")  # fmt: skip
        stats.skip(where)
        return None
    return _text_document(text, splitter)


def json_array_rows(text: str, items: list) -> list[tuple[int, object]]:
    """The values of ``items``, the JSON array that ``text`` holds (already parsed), each with the 1-based line of
    ``text`` it starts on (for messages naming ``file:line``)."""
    decoder, rows = json.JSONDecoder(), []
    pos, line, counted = text.index("[") + 1, 1, 0
    for _ in items:
        while text[pos] in " \t\r\n,":
            pos += 1
        line += text.count("\n", counted, pos)
        counted = pos
        obj, pos = decoder.raw_decode(text, pos)
        rows.append((line, obj))
    return rows


def _read_json_array(
    lines: Iterable[tuple[int, str]],
    path: Path,
    stats: CorpusStats,
    on_invalid: str,
    splitter=split_sentences,
    text_column: str = "text",
) -> Iterator[tuple[int, list[str]]]:
    """The documents of a file holding one JSON array of objects (format ``json``), read whole: each object as a
    JSON line is read (:func:`_read_jsonl`), its row the line it starts on."""
    kept: list[str] = []
    for n, line in lines:
        kept.extend([""] * (n - 1 - len(kept)))  # a skipped (invalid UTF-8) line keeps its place
        kept.append(line)
    text = "\n".join(kept)
    try:
        items = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LitebertError(
            f"{path}:{exc.lineno}: not valid JSON ({exc.msg}, column {exc.colno}); a JSON corpus is JSON lines or one "
            "JSON array of objects"
        ) from None
    if not isinstance(items, list):
        raise LitebertError(f"{path}: expected one JSON array of objects, got a JSON {type(items).__name__}")
    escaped = "\\u" in text
    for n, obj in json_array_rows(text, items):
        where = f"{path}:{n}"
        if not isinstance(obj, dict) or text_column not in obj:  # skipped and counted, as such a JSON line
            if on_invalid == "error":
                raise LitebertError(f"{where}: not a JSON object with a string {text_column!r} field")
            stats.skip(where)
            continue
        doc = _json_document(obj[text_column], escaped, where, stats, on_invalid, splitter, text_column)
        if doc:
            yield n, doc


# ------------------------------------------------------------------------------------------------------------
# Columnar readers: Parquet, Arrow IPC, Hub datasets → (row, text)
# ------------------------------------------------------------------------------------------------------------
_BATCH_ROWS = 1024


def _check_text_field(schema, text_column: str, name: str) -> None:
    import pyarrow as pa

    if text_column not in schema.names:
        raise LitebertError(
            f"{name}: no column {text_column!r} (columns: {', '.join(schema.names)}); --text-column names the "
            "column that holds the text"
        )
    t = schema.field(text_column).type
    # a dictionary of strings (pandas' category dtype) is text too: to_pylist gives its strings
    values = t.value_type if pa.types.is_dictionary(t) else t
    if not (pa.types.is_string(values) or pa.types.is_large_string(values) or pa.types.is_string_view(values)):
        raise LitebertError(f"{name}: column {text_column!r} is {t}, not text (string)")


def _arrow_batches(path: Path, kind: str, text_column: str, stats: CorpusStats) -> Iterator:
    """Record batches of the text column of a Parquet / Arrow IPC file, one at a time."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    base, size = stats.input_bytes, path.stat().st_size
    try:
        if kind == "parquet":
            # buffered reads of the column chunk: without them a whole row group's column is read at once
            pf = pq.ParquetFile(path, buffer_size=1 << 20, pre_buffer=False)
            _check_text_field(pf.schema_arrow, text_column, str(path))
            total = max(pf.metadata.num_rows, 1)
            batches = pf.iter_batches(batch_size=_BATCH_ROWS, columns=[text_column], use_threads=False)
        elif kind == "arrow":
            reader = pa.ipc.open_file(pa.memory_map(str(path)))
            _check_text_field(reader.schema, text_column, str(path))
            total = None
            batches = (reader.get_batch(i) for i in range(reader.num_record_batches))
        else:
            reader = pa.ipc.open_stream(pa.memory_map(str(path)))
            _check_text_field(reader.schema, text_column, str(path))
            total = None
            batches = iter(reader)
        done = 0
        for batch in batches:
            col = batch.column(batch.schema.get_field_index(text_column))
            yield col
            done += len(col)
            if total:
                stats.input_bytes = base + size * done // total
    except (pa.ArrowException, OSError) as exc:
        what = "Parquet" if kind == "parquet" else "Arrow IPC"
        raise LitebertError(f"{path}: not a readable {what} file ({type(exc).__name__}: {exc})") from None
    stats.input_bytes = base + size


def _columnar_rows(path: Path, kind: str, text_column: str, stats: CorpusStats) -> Iterator[tuple[int, str | None]]:
    row = 0
    for col in _arrow_batches(path, kind, text_column, stats):
        for text in col.to_pylist():
            yield row, text
            row += 1


def _hub_rows(src: CorpusSource, text_column: str, entry: dict | None = None) -> Iterator[tuple[int, str | None]]:
    """Rows of a Hub dataset, streamed with ``datasets.load_dataset(..., streaming=True)`` at the commit that
    ``src.revision`` (default: the main branch) points to now; that commit's sha goes to ``entry["revision"]``."""
    try:
        import datasets
        from huggingface_hub import HfApi
    except ImportError:
        raise LitebertError(
            f"{src.name}: Hub datasets need the `datasets` package (pip install 'litebert[hub]')"
        ) from None
    what = f"{src.name}: cannot stream the Hub dataset {src.repo}" + (f" config {src.config!r}" if src.config else "")
    what += (f" at revision {src.revision!r}" if src.revision else "") + f" split {src.split!r}"
    try:
        # one commit for the whole read (a branch may move while it streams), recorded for the manifest
        sha = HfApi().dataset_info(src.repo, revision=src.revision).sha or src.revision
        ds = datasets.load_dataset(src.repo, src.config, split=src.split, revision=sha, streaming=True)
    except Exception as exc:  # the Hub client raises many types (not found, gated, offline, no config, no split)
        why = {
            "RepositoryNotFoundError": "no such dataset on the Hub, or it is private and HF_TOKEN gives no access",
            "RevisionNotFoundError": f"the dataset has no revision {src.revision!r}",
            "GatedRepoError": "the dataset is gated: accept its terms on the Hub and set HF_TOKEN",
        }.get(type(exc).__name__) or _first_line(exc)
        raise LitebertError(f"{what} ({type(exc).__name__}: {why})") from None
    if entry is not None:
        entry["revision"] = sha
    features = getattr(ds, "features", None)
    if features is not None and text_column not in features:
        raise LitebertError(
            f"{src.name}: no column {text_column!r} (columns: {', '.join(features)}); --text-column names the column "
            "that holds the text"
        )
    dtype = getattr(features[text_column], "dtype", None) if features is not None else None
    if dtype is not None and dtype not in ("string", "large_string"):  # as a Parquet file's: not every row skipped
        raise LitebertError(f"{src.name}: column {text_column!r} is {dtype}, not text (string)")
    it = iter(ds)
    row = 0
    while True:
        try:
            example = next(it)
        except StopIteration:
            return
        except Exception as exc:  # network or data errors while streaming
            raise LitebertError(f"{what}: row {row} ({type(exc).__name__}: {_first_line(exc)})") from None
        if text_column not in example:
            raise LitebertError(
                f"{src.name}: row {row} has no column {text_column!r} (columns: {', '.join(example)}); --text-column "
                "names the column that holds the text"
            )
        yield row, example[text_column]
        row += 1


def _first_line(exc: BaseException, limit: int = 400) -> str:
    """The exception's message on one line (at most ``limit`` characters)."""
    text = " ".join(str(exc).split()) or "no message"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _read_rows(
    rows: Iterable[tuple[int, str | None]], name: str, stats: CorpusStats, on_invalid: str, splitter
) -> Iterator[tuple[int, list[str]]]:
    for row, text in rows:
        stats.lines += 1
        if not isinstance(text, str):
            where = f"{name} row {row}"
            if on_invalid == "error":
                raise LitebertError(f"{where}: the text is {type(text).__name__}, not a string")
            stats.skip(where)
            continue
        stats.bytes += len(text.encode("utf-8"))
        doc = _text_document(text, splitter)
        if doc:
            yield row, doc


# ------------------------------------------------------------------------------------------------------------
# Documents
# ------------------------------------------------------------------------------------------------------------
class Document(NamedTuple):
    """A document and where it came from: ``index`` over all sources in order (from 0; the instances' ``doc``),
    ``source`` (position in :func:`resolve_corpus_sources`' list and :attr:`CorpusStats.sources`), ``row`` (the
    line a text document starts on, from 1; a columnar/Hub row, from 0), ``sentences`` (non-empty)."""

    index: int
    source: int
    row: int
    sentences: list[str]


def iter_documents(
    paths: Sequence[str | os.PathLike] | str | os.PathLike,
    format: str = "auto",
    stats: CorpusStats | None = None,
    on_invalid: str = "skip",
    defer_split: bool = False,
    text_column: str = "text",
) -> Iterator[Document]:
    """Yield the :class:`Document` s of ``paths`` in order: one source at a time, one document at a time (memory is
    bounded by the longest document or one record batch). The order and identities depend on the corpus alone.

    Args:
        paths: files, directories and ``hf://`` ids (see :func:`resolve_corpus_sources`).
        format: one of ``FORMATS``, for text files; ``auto`` detects per file. Parquet/Arrow files and Hub
            datasets are always read as such.
        stats: filled in while reading (bytes, lines, skipped lines, documents, sentences, sources).
        on_invalid: ``skip`` (count invalid UTF-8 / bad JSON lines / null rows) or ``error``.
        defer_split: yield paragraphs to split as :class:`Unsplit` (see :func:`expand_document`); ``sentences``
            in ``stats`` then counts entries, not sentences.
        text_column: the text field of JSON lines, Parquet/Arrow files and Hub rows.

    Raises:
        LitebertError: bad paths (see :func:`resolve_corpus_sources`), unknown format, invalid line with
            ``on_invalid="error"``, a corrupt compressed stream, an unreadable Parquet/Arrow file or Hub dataset, a
            missing text column.
    """
    if format not in FORMATS:
        raise LitebertError(f"--format must be one of {', '.join(FORMATS)}, got {format!r}")
    if on_invalid not in ("skip", "error"):
        raise LitebertError(f"on_invalid must be 'skip' or 'error', got {on_invalid!r}")
    stats = stats if stats is not None else CorpusStats()
    sources = resolve_corpus_sources(paths)
    splitter = (lambda p: [Unsplit(p)]) if defer_split else split_sentences
    for k, src in enumerate(sources):
        path = src.path
        comp = None
        entry = {"source": src.name, "format": None, "compression": None, "revision": None, "bytes": src.size}
        if src.empty:
            fmt, docs = "empty", iter(())
            stats.empty_files.append(src.name)
            stats.input_bytes += src.size
        elif path is None:
            fmt = "hub"
            docs = _read_rows(_hub_rows(src, text_column, entry), src.name, stats, on_invalid, splitter)
        elif (kind := _container(path)) is not None:
            fmt = kind
            docs = _read_rows(_columnar_rows(path, kind, text_column, stats), src.name, stats, on_invalid, splitter)
        else:
            comp = detect_compression(path)
            if format == "auto":
                fmt = detect_format(path, text_column)  # (it checks that the content is text)
            else:
                text_head(path)  # the content is text
                fmt = format
            lines = _iter_lines(path, stats, on_invalid)
            if fmt == "bert":
                docs = _read_bert(lines, split=False)
            elif fmt == "plain":
                docs = _read_bert(lines, split=True, splitter=splitter)
            elif fmt == "wikitext":
                docs = _read_wikitext(lines, splitter)
            elif fmt == "wikiextractor":
                docs = _read_wikiextractor(lines, splitter)
            elif fmt == "json":
                docs = _read_json_array(lines, path, stats, on_invalid, splitter, text_column)
            else:
                docs = _read_jsonl(lines, path, stats, on_invalid, splitter, text_column)
        stats.files += 1
        stats.formats[src.name] = fmt
        entry.update(format=fmt, compression=comp, first_document=stats.documents, documents=0)
        stats.sources.append(entry)
        for row, doc in docs:
            yield Document(stats.documents, k, row, doc)
            stats.documents += 1
            stats.sentences += len(doc)
            entry["documents"] += 1


def read_documents(paths: Sequence[str | os.PathLike] | str | os.PathLike, **options) -> Iterator[list[str]]:
    """The sentences of each document of :func:`iter_documents`, in order; ``options`` are its keyword arguments
    (``format``, ``stats``, ``on_invalid``, ``defer_split``, ``text_column``), the errors its errors."""
    for doc in iter_documents(paths, **options):
        yield doc.sentences


def iter_sentences_text(
    paths: Sequence[str | os.PathLike] | str | os.PathLike,
    format: str = "auto",
    on_invalid: str = "skip",
    stats: CorpusStats | None = None,
    text_column: str = "text",
) -> Iterator[str]:
    """Every sentence of every document, in order (the input of tokenizer training); ``stats`` as in
    :func:`read_documents`."""
    for doc in read_documents(paths, format=format, on_invalid=on_invalid, stats=stats, text_column=text_column):
        yield from doc
