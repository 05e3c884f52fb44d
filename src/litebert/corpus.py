"""Corpus readers: files → documents, each a list of sentence strings (docs/algorithms.md §2 "Input").

Formats, chosen by content (:func:`detect_format`) unless forced:

``bert``            one sentence per line, a blank line between documents (google-research's input format).
``wikitext``        WikiText: an article starts at a ``' = Title = '`` line; ``' = = Section = = '`` headings are
                    dropped; each paragraph line is split into sentences.
``wikiextractor``   ``<doc ...>`` … ``</doc>``; the title line after ``<doc>`` is dropped; paragraphs split.
``jsonl``           one JSON object per line with a ``text`` field; each object is a document, split at newlines
                    into paragraphs and then into sentences.
``plain``           paragraphs, one per line, a blank line between documents; each line split into sentences.

Sentence splitting (:func:`split_sentences`) is a documented rule, not a model: a sentence ends after ``.``, ``!``
or ``?`` (with any closing quotes/brackets) that is followed by whitespace and then an upper-case letter, a digit,
an opening quote/bracket, a CJK character or ``<`` (WikiText's ``<unk>``); and after Chinese ``。！？`` (with
closing quotes),
whether or not a space follows. Abbreviations such as "Mr. Smith" are split too; that costs a sentence boundary,
not text.

Bad input: a missing path or a file with no text raises :class:`~litebert.errors.LitebertError`; a directory
stands for every regular, non-hidden file below it (sorted). A line that is not valid UTF-8 is skipped and counted
(``on_invalid="skip"``, the default; the first one is named in the summary) or raises an error naming the file
and line (``on_invalid="error"``).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from litebert.errors import LitebertError

FORMATS = ("auto", "bert", "wikitext", "wikiextractor", "jsonl", "plain")

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
    """Counts gathered while reading: files, bytes, lines, skipped lines (invalid UTF-8 / bad JSON),
    documents and sentences yielded."""

    files: int = 0
    bytes: int = 0
    lines: int = 0
    skipped_lines: int = 0
    first_skipped: str | None = None
    documents: int = 0
    sentences: int = 0
    formats: dict = field(default_factory=dict)

    def skip(self, where: str) -> None:
        self.skipped_lines += 1
        if self.first_skipped is None:
            self.first_skipped = where


def resolve_corpus_files(paths: Sequence[str | os.PathLike] | str | os.PathLike) -> list[Path]:
    """Expand ``paths`` into a list of files: a directory gives all regular non-hidden files below it (sorted).

    Raises:
        LitebertError: no path given, a path does not exist, a directory holds no files, or a file is empty
            (zero bytes or only whitespace).
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    if not paths:
        raise LitebertError("no corpus file given (--corpus FILE...)")
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(
                f
                for f in p.rglob("*")
                if f.is_file() and not any(part.startswith(".") for part in f.relative_to(p).parts)
            )
            if not found:
                raise LitebertError(f"corpus directory {p} holds no files")
            files.extend(found)
        elif p.is_file():
            files.append(p)
        else:
            raise LitebertError(f"corpus file not found: {p}")
    for f in files:
        if _is_blank_file(f):
            raise LitebertError(f"corpus file is empty: {f}")
    return files


def _is_blank_file(path: Path) -> bool:
    if path.stat().st_size == 0:
        return True
    with open(path, "rb") as fh:
        while True:
            block = fh.read(1 << 20)
            if not block:
                return True
            if block.strip():
                return False


def detect_format(path: Path) -> str:
    """Guess a file's format from its first 64 KiB (see the module docstring for the formats)."""
    with open(path, "rb") as fh:
        head = fh.read(1 << 16).decode("utf-8", errors="replace")
    lines = head.split("\n")
    if len(lines) > 1 and len(head) == 1 << 16:
        lines = lines[:-1]  # the last line may be cut
    nonempty = [ln for ln in lines if ln.strip()]
    if not nonempty:
        return "bert"
    first = nonempty[0].strip()
    if first.startswith("<doc ") or first == "<doc>":
        return "wikiextractor"
    if first.startswith("{"):
        try:
            obj = json.loads(first)
            if isinstance(obj, dict) and "text" in obj:
                return "jsonl"
            if isinstance(obj, dict):  # JSON lines without a text field: never tokenize the JSON itself as prose
                line = lines.index(nonempty[0]) + 1
                raise LitebertError(
                    f"{path}:{line}: a JSON object without a 'text' field (keys: "
                    f'{", ".join(map(repr, obj))}); JSON-lines corpora need {{"text": ...}} '
                    "on every line"
                )
        except json.JSONDecodeError:
            pass
    if any(_WIKITEXT_TITLE.match(ln.rstrip("\r")) for ln in lines[:200]):
        return "wikitext"
    sample = nonempty[:200]
    per_line = sum(len(split_sentences(ln)) for ln in sample) / len(sample)
    return "plain" if per_line > 1.5 else "bert"


def _iter_lines(path: Path, stats: CorpusStats, on_invalid: str) -> Iterator[tuple[int, str]]:
    """(line number from 1, decoded line without the newline); invalid UTF-8 lines skipped or raised."""
    with open(path, "rb") as fh:
        for n, raw in enumerate(fh, 1):
            stats.bytes += len(raw)
            stats.lines += 1
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                where = f"{path}:{n}"
                if on_invalid == "error":
                    raise LitebertError(f"{where}: invalid UTF-8 at byte {exc.start} of the line") from None
                stats.skip(where)
                continue
            if n == 1 and line.startswith("\ufeff"):
                line = line[1:]
            yield n, line.rstrip("\r\n")


def _read_bert(lines: Iterable[tuple[int, str]], split, splitter=split_sentences) -> Iterator[list[str]]:
    doc: list[str] = []
    for _, line in lines:
        s = line.strip()
        if not s:
            if doc:
                yield doc
                doc = []
            continue
        if split:
            doc.extend(splitter(s))
        else:
            doc.append(s)
    if doc:
        yield doc


def _read_wikitext(lines: Iterable[tuple[int, str]], splitter=split_sentences) -> Iterator[list[str]]:
    """A ``' = Title = '`` line starts an article only with a blank line before and after it, as WikiText writes
    titles; ``' = Goals ; A = '``-like lines inside running text are dropped like headings (this gives
    WikiText-2's published 600 train / 60 validation articles)."""
    doc: list[str] = []
    prev_blank = True
    pending = False  # a title candidate waiting for the next line to be blank
    for _, line in lines:
        s = line.strip()
        if pending:
            pending = False
            if not s:  # confirmed: a new article
                if doc:
                    yield doc
                doc = []
        if not s:
            prev_blank = True
            continue
        was_blank, prev_blank = prev_blank, False
        if _WIKITEXT_TITLE.match(line) and was_blank:
            pending = True
            continue
        if _WIKITEXT_HEADING.match(line) or _WIKITEXT_TITLE.match(line):
            continue
        doc.extend(splitter(s))
    if doc:
        yield doc


def _read_wikiextractor(lines: Iterable[tuple[int, str]], splitter=split_sentences) -> Iterator[list[str]]:
    doc: list[str] | None = None
    title = None
    skip_title = False
    for _, line in lines:
        s = line.strip()
        if s.startswith("<doc"):
            if doc:
                yield doc
            doc = []
            m = re.search(r'title="([^"]*)"', s)
            title = m.group(1) if m else None
            skip_title = True
            continue
        if s == "</doc>":
            if doc:
                yield doc
            doc, title = None, None
            continue
        if not s:
            continue
        if skip_title:
            skip_title = False
            if title is not None and s == title.strip():
                continue
        if doc is None:
            doc = []
        doc.extend(splitter(s))
    if doc:
        yield doc


def _read_jsonl(
    lines: Iterable[tuple[int, str]], path: Path, stats: CorpusStats, on_invalid: str, splitter=split_sentences
) -> Iterator[list[str]]:
    for n, line in lines:
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            text = obj["text"]
            if not isinstance(text, str):
                raise TypeError("text is not a string")
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            where = f"{path}:{n}"
            if on_invalid == "error":
                raise LitebertError(f"{where}: not a JSON object with a string 'text' field ({exc})") from None
            stats.skip(where)
            continue
        doc = [s for para in text.split("\n") if para.strip() for s in splitter(para.strip())]
        if doc:
            yield doc


def read_documents(
    paths: Sequence[str | os.PathLike] | str | os.PathLike,
    format: str = "auto",
    stats: CorpusStats | None = None,
    on_invalid: str = "skip",
    defer_split: bool = False,
) -> Iterator[list[str]]:
    """Yield the documents of ``paths`` in order, each a non-empty list of sentence strings; one file at a time,
    one document at a time (memory is bounded by the longest document).

    Args:
        paths: files and/or directories (see :func:`resolve_corpus_files`).
        format: one of ``FORMATS``; ``auto`` detects per file.
        stats: filled in while reading (bytes, lines, skipped lines, documents, sentences).
        on_invalid: ``skip`` (count invalid UTF-8 / bad JSON lines) or ``error``.
        defer_split: yield paragraphs to split as :class:`Unsplit` (see :func:`expand_document`); ``sentences``
            in ``stats`` then counts entries, not sentences.

    Raises:
        LitebertError: bad paths (see :func:`resolve_corpus_files`), unknown format, invalid line with
            ``on_invalid="error"``.
    """
    if format not in FORMATS:
        raise LitebertError(f"--format must be one of {', '.join(FORMATS)}, got {format!r}")
    if on_invalid not in ("skip", "error"):
        raise LitebertError(f"on_invalid must be 'skip' or 'error', got {on_invalid!r}")
    stats = stats if stats is not None else CorpusStats()
    files = resolve_corpus_files(paths)
    splitter = (lambda p: [Unsplit(p)]) if defer_split else split_sentences
    for path in files:
        fmt = detect_format(path) if format == "auto" else format
        stats.files += 1
        stats.formats[str(path)] = fmt
        lines = _iter_lines(path, stats, on_invalid)
        if fmt == "bert":
            docs = _read_bert(lines, split=False)
        elif fmt == "plain":
            docs = _read_bert(lines, split=True, splitter=splitter)
        elif fmt == "wikitext":
            docs = _read_wikitext(lines, splitter)
        elif fmt == "wikiextractor":
            docs = _read_wikiextractor(lines, splitter)
        else:
            docs = _read_jsonl(lines, path, stats, on_invalid, splitter)
        for doc in docs:
            stats.documents += 1
            stats.sentences += len(doc)
            yield doc


def iter_sentences_text(
    paths: Sequence[str | os.PathLike] | str | os.PathLike,
    format: str = "auto",
    on_invalid: str = "skip",
    stats: CorpusStats | None = None,
) -> Iterator[str]:
    """Every sentence of every document, in order (the input of tokenizer training); ``stats`` as in
    :func:`read_documents`."""
    for doc in read_documents(paths, format=format, on_invalid=on_invalid, stats=stats):
        yield from doc
