"""Corpus inputs (issue 27): compressed text by content, Parquet / Arrow record batches, JSON lines with
``--text-column``, ``hf://`` datasets; document identity (source + row); bad input.

The oracle throughout is the uncompressed text file: every other form of the same corpus must give the same
documents, and ``prepare`` the same shard bytes."""

from __future__ import annotations

import bz2
import gzip
import hashlib
import io
import json
import lzma
import re
import tarfile
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest
import zstandard

from litebert.corpus import (
    CorpusStats,
    check_corpus,
    corpus_bytes,
    data_suffix,
    detect_compression,
    detect_format,
    iter_documents,
    parse_hub_id,
    read_documents,
    read_text_file,
    split_sentences,
)
from litebert.data import PrepareConfig, prepare
from litebert.errors import LitebertError

# Three documents of paragraphs (one paragraph per line in the plain form, a blank line between documents).
DOCS = [
    ["The cat sat on the mat. It was warm there.", "Then the dog came in. The cat left at once!"],
    ["Rain fell all day. The river rose.", "By night the road was closed. Nobody went out."],
    ["下雨了。路上没有人。", "A third paragraph here. It ends the corpus."],
]


def _plain(docs=DOCS) -> str:
    return "\n\n".join("\n".join(d) for d in docs) + "\n"


def _rows(docs=DOCS) -> list[str]:
    return ["\n".join(d) for d in docs]


def _compress(kind: str, data: bytes) -> bytes:
    if kind == "gz":
        return gzip.compress(data, mtime=0)
    if kind == "bz2":
        return bz2.compress(data)
    if kind == "xz":
        return lzma.compress(data)
    # two frames, each after a skippable frame, as pzstd writes
    c = zstandard.ZstdCompressor()
    half = len(data) // 2
    skippable = (0x184D2A50).to_bytes(4, "little") + (4).to_bytes(4, "little") + b"meta"
    return skippable + c.compress(data[:half]) + skippable + c.compress(data[half:])


def _write_forms(d: Path, docs=DOCS, column: str = "text") -> dict[str, Path]:
    """The same corpus as plain text, each compression, JSON lines, Parquet, Arrow IPC file and stream."""
    d.mkdir(parents=True, exist_ok=True)
    text = _plain(docs).encode("utf-8")
    forms = {"plain": d / "corpus.txt"}
    forms["plain"].write_bytes(text)
    for kind in ("gz", "bz2", "xz", "zst"):
        forms[kind] = d / f"corpus.txt.{kind}"
        forms[kind].write_bytes(_compress(kind, text))
    forms["jsonl"] = d / "corpus.jsonl"
    forms["jsonl"].write_text("".join(json.dumps({"id": i, column: t}) + "\n" for i, t in enumerate(_rows(docs))))
    table = pa.table({"id": list(range(len(docs))), column: _rows(docs)})
    forms["parquet"] = d / "corpus.parquet"
    pq.write_table(table, forms["parquet"], row_group_size=2)  # two row groups: batches cross them
    forms["arrow"] = d / "corpus.arrow"
    feather.write_feather(table, forms["arrow"], compression="uncompressed", chunksize=2)
    forms["arrow-stream"] = d / "corpus.arrows"
    with pa.OSFile(str(forms["arrow-stream"]), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table, max_chunksize=2)
    return forms


def _expected_sentences(docs=DOCS) -> list[list[str]]:
    return [[s for para in d for s in split_sentences(para)] for d in docs]


# ---------------------------------------------------------------------------------------------------- readers
def test_every_form_gives_the_same_documents_and_their_rows(tmp_path):
    forms = _write_forms(tmp_path)
    expected = _expected_sentences()
    assert expected[2][:2] == ["下雨了。", "路上没有人。"]
    text_rows = [1, 4, 7]  # the line each plain document starts on
    for name, path in forms.items():
        stats = CorpusStats()
        docs = list(iter_documents([path], stats=stats))
        assert [d.sentences for d in docs] == expected, name
        assert [d.index for d in docs] == [0, 1, 2]
        rows = [d.row for d in docs]
        if name in ("jsonl",):
            assert rows == [1, 2, 3], name  # JSON lines: the line, from 1
        elif name in ("parquet", "arrow", "arrow-stream"):
            assert rows == [0, 1, 2], name  # columnar: the row, from 0
        else:
            assert rows == text_rows, name
        (entry,) = stats.sources
        compression = {"gz": "gzip", "bz2": "bzip2", "xz": "xz", "zst": "zstd"}.get(name)
        fmt = {"jsonl": "jsonl", "parquet": "parquet", "arrow": "arrow", "arrow-stream": "arrow-stream"}.get(
            name, "plain"
        )
        assert entry == {
            "source": str(path),
            "format": fmt,
            "compression": compression,
            "revision": None,
            "bytes": path.stat().st_size,
            "first_document": 0,
            "documents": 3,
        }, name
        assert stats.documents == 3 and stats.bytes > 0
        assert stats.input_bytes == path.stat().st_size, name  # progress reaches the file's size on disk
    # the text column is chosen by --text-column, for JSON lines and columnar files alike
    other = _write_forms(tmp_path / "body", column="body")
    for name in ("jsonl", "parquet", "arrow"):
        assert list(read_documents([other[name]], text_column="body")) == expected, name
    assert detect_format(other["jsonl"], text_column="body") == "jsonl"


def test_dictionary_encoded_text_column_is_text(tmp_path):
    """A text column stored as a dictionary of strings (pandas' ``category`` dtype) reads as the plain column."""
    table = pa.table({"id": list(range(len(DOCS))), "text": pa.array(_rows()).dictionary_encode()})
    assert pa.types.is_dictionary(table.schema.field("text").type)
    pq.write_table(table, tmp_path / "corpus.parquet")
    feather.write_feather(table, tmp_path / "corpus.arrow", compression="uncompressed")
    assert pa.types.is_dictionary(pq.read_schema(tmp_path / "corpus.parquet").field("text").type)
    for name in ("corpus.parquet", "corpus.arrow"):
        check_corpus([tmp_path / name])
        assert [d.sentences for d in iter_documents([tmp_path / name])] == _expected_sentences(), name
    numbers = pa.table({"text": pa.array([1, 2, 1]).dictionary_encode()})
    pq.write_table(numbers, tmp_path / "numbers.parquet")
    with pytest.raises(LitebertError, match=r"numbers\.parquet: column 'text' is .*int64.*, not text"):
        check_corpus([tmp_path / "numbers.parquet"])


def test_compression_and_format_are_detected_by_content(tmp_path):
    text = _plain().encode("utf-8")
    lying = tmp_path / "gzip_named.txt"  # gzip content, a text name
    lying.write_bytes(gzip.compress(text))
    zst_as_bz2 = tmp_path / "really_zstd.bz2"
    zst_as_bz2.write_bytes(zstandard.ZstdCompressor().compress(text))
    not_compressed = tmp_path / "plain.txt.gz"  # a plain file with a compressed name
    not_compressed.write_bytes(text)
    wx = tmp_path / "wiki.xz"  # WikiExtractor output inside xz: the format is detected in the decompressed text
    wx.write_bytes(lzma.compress(b'<doc id="1" url="u" title="T">\nT\n\nOne here. Two here.\n</doc>\n'))
    assert [detect_compression(p) for p in (lying, zst_as_bz2, not_compressed, wx)] == ["gzip", "zstd", None, "xz"]
    assert detect_format(wx) == "wikiextractor" and detect_format(lying) == "plain"
    for p in (lying, zst_as_bz2, not_compressed):
        assert list(read_documents([p])) == _expected_sentences(), p
    assert list(read_documents([wx])) == [["One here.", "Two here."]]


def test_directory_mixed_forms_sorted_hidden_skipped_and_traceable(tmp_path):
    forms = _write_forms(tmp_path / "c")
    (tmp_path / "c" / ".hidden.txt").write_text("Never read. Not at all.\n")
    stats = CorpusStats()
    docs = list(iter_documents([tmp_path / "c"], stats=stats))
    names = sorted(p.name for p in forms.values())
    assert [Path(e["source"]).name for e in stats.sources] == names
    assert [e["first_document"] for e in stats.sources] == [3 * i for i in range(len(names))]
    assert len(docs) == 3 * len(names) and [d.index for d in docs] == list(range(len(docs)))
    # any document's source and row recovered from the source list alone (what the manifest records)
    for d in docs:
        entry = stats.sources[d.source]
        assert entry["first_document"] <= d.index < entry["first_document"] + entry["documents"]
        assert d.sentences == _expected_sentences()[d.index - entry["first_document"]]
    assert corpus_bytes(check_corpus([tmp_path / "c"])) == sum(p.stat().st_size for p in forms.values())


def test_invalid_utf8_inside_a_compressed_stream_is_skipped_like_plain_text(tmp_path):
    raw = b"First here. Second here.\n\xff\xfe broken line\nThird here. Fourth.\n"
    plain, packed = tmp_path / "a.txt", tmp_path / "b.txt.zst"
    plain.write_bytes(raw)
    packed.write_bytes(zstandard.ZstdCompressor().compress(raw))
    got = {}
    for p in (plain, packed):
        stats = CorpusStats()
        got[p] = list(read_documents([p], stats=stats))
        assert (stats.skipped_lines, stats.first_skipped) == (1, f"{p}:2")
    assert got[plain] == got[packed] == [["First here.", "Second here.", "Third here.", "Fourth."]]
    with pytest.raises(LitebertError, match=r"b\.txt\.zst:2: invalid UTF-8"):
        list(read_documents([packed], on_invalid="error"))


def test_null_rows_are_skipped_and_counted(tmp_path):
    path = tmp_path / "n.parquet"
    pq.write_table(pa.table({"text": ["One here. Two here.", None, "", "Three here."]}), path)
    stats = CorpusStats()
    docs = list(iter_documents([path], stats=stats))
    assert [(d.row, d.sentences) for d in docs] == [(0, ["One here.", "Two here."]), (3, ["Three here."])]
    assert (stats.skipped_lines, stats.first_skipped) == (1, f"{path} row 1")
    with pytest.raises(LitebertError, match=r"n\.parquet row 1: the text is NoneType"):
        list(read_documents([path], on_invalid="error"))


def test_hub_ids_parse():
    s = parse_hub_id("hf://wikimedia/wikipedia:20231101.zh@abc123#validation")
    assert (s.repo, s.config, s.revision, s.split) == ("wikimedia/wikipedia", "20231101.zh", "abc123", "validation")
    s = parse_hub_id("hf://allenai/c4")
    assert (s.repo, s.config, s.revision, s.split, s.size) == ("allenai/c4", None, None, "train", None)
    assert corpus_bytes([s]) is None
    for bad in ("hf://", "hf://a/b/c", "hf://a b", "hf:///abs"):
        with pytest.raises(LitebertError, match=r"hf://ORG/NAME\[:CONFIG\]\[@REVISION\]\[#SPLIT\]"):
            parse_hub_id(bad)


# ---------------------------------------------------------------------------------------------------- bad input
def _corrupt_forms(d: Path) -> dict[str, tuple[Path, str]]:
    """Broken files and the error each must give (a regex)."""
    d.mkdir()
    text = (_plain() * 200).encode("utf-8")
    out = {}
    gz = bytearray(gzip.compress(text * 25))  # > 1 MiB: the CRC error comes while streaming, after the last line
    gz[-8] ^= 0xFF  # the CRC-32 in the trailer
    out["gzip-crc"] = (d / "crc.txt.gz", gz, r"crc\.txt\.gz: corrupt or truncated gzip file after line \d+ .*CRC")
    out["gzip-truncated"] = (d / "cut.gz", gzip.compress(text)[:-100], r"cut\.gz: corrupt or truncated gzip file")
    bz = bytearray(bz2.compress(text))
    bz[len(bz) // 2] ^= 0xFF
    out["bzip2"] = (d / "bad.bz2", bz, r"bad\.bz2: corrupt or truncated bzip2 file")
    out["xz-truncated"] = (d / "cut.xz", lzma.compress(text)[:-50], r"cut\.xz: corrupt or truncated xz file")
    zst = zstandard.ZstdCompressor().compress(text)
    out["zstd-truncated"] = (
        d / "cut.zst",
        zst[: len(zst) * 2 // 3],
        r"cut\.zst: corrupt or truncated zstd .*truncated",
    )
    out["not-arrow"] = (d / "x.arrow", b"id,text\n1,hello\n", r"x\.arrow: not an Arrow IPC file")
    buf = pa.BufferOutputStream()
    pq.write_table(pa.table({"id": [1], "body": ["One. Two."]}), buf)
    out["parquet-no-column"] = (
        d / "p.parquet",
        buf.getvalue().to_pybytes(),
        r"p\.parquet: no column 'text' \(columns: id, body\)",
    )
    out["parquet-cut"] = (
        d / "q.parquet",
        buf.getvalue().to_pybytes()[:-30],
        r"q\.parquet: not a readable Parquet file",
    )
    out["gzip-parquet"] = (
        d / "t.parquet.gz",
        gzip.compress(buf.getvalue().to_pybytes()),
        r"t\.parquet\.gz: a gzip-compressed Parquet file: give it uncompressed",
    )
    out["binary"] = (
        d / "image.png",
        b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR" + bytes(range(256)),
        r"image\.png: not a text file \(NUL bytes at offset 8",
    )
    out["utf16"] = (d / "u16.txt", "Some text. More text.\n".encode("utf-16"), r"u16\.txt: not a text file .*UTF-16")
    # archives: told by their magic bytes (zip: PK\3\4 at 0; tar: ustar at 257), not the NUL bytes they also hold
    unpack = r"litebert reads no archive: unpack it and give the files \(or their directory\) to --corpus$"
    zipped = io.BytesIO()
    with zipfile.ZipFile(zipped, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("corpus.txt", _plain())
    out["zip"] = (d / "corpus.zip", zipped.getvalue(), rf"corpus\.zip: a zip archive; {unpack}")
    out["zip-named-txt"] = (d / "zip.txt", zipped.getvalue(), rf"zip\.txt: a zip archive; {unpack}")
    tarred = io.BytesIO()
    with tarfile.open(fileobj=tarred, mode="w", format=tarfile.USTAR_FORMAT) as tf:
        info = tarfile.TarInfo("corpus.txt")
        info.size = len(_plain().encode())
        tf.addfile(info, io.BytesIO(_plain().encode()))
    out["tar"] = (d / "corpus.tar", tarred.getvalue(), rf"corpus\.tar: a tar archive; {unpack}")
    out["tar-gz"] = (
        d / "corpus.tar.gz",
        gzip.compress(tarred.getvalue(), mtime=0),
        rf"corpus\.tar\.gz: a gzip-compressed tar archive; {unpack}",
    )
    for path, data, _ in out.values():
        path.write_bytes(bytes(data))
    return {k: (p, msg) for k, (p, _, msg) in out.items()}


def test_bad_inputs_are_one_clear_error(tmp_path):
    for name, (path, msg) in _corrupt_forms(tmp_path / "bad").items():
        with pytest.raises(LitebertError, match=msg):
            list(read_documents([path]))
        if name in ("binary", "utf16", "zip", "tar-gz"):  # also with a forced format
            with pytest.raises(LitebertError, match=msg):
                list(read_documents([path], format="bert"))
        up_front = ("not-arrow", "parquet-no-column", "parquet-cut", "gzip-parquet", "binary", "utf16", "zip", "tar")
        if name in up_front:
            with pytest.raises(LitebertError, match=msg):
                check_corpus([path])


_CODECS = {  # compress, and the incremental decompressor that is the oracle of what a cut-off file still holds
    "gz": (gzip.compress, lambda b: zlib.decompressobj(31).decompress(b)),
    "bz2": (bz2.compress, lambda b: bz2.BZ2Decompressor().decompress(b)),
    "xz": (lzma.compress, lambda b: lzma.LZMADecompressor().decompress(b)),
    "zst": (zstandard.ZstdCompressor().compress, lambda b: zstandard.ZstdDecompressor().decompressobj().decompress(b)),
}


@pytest.mark.parametrize("ext", list(_CODECS))
@pytest.mark.parametrize("cut", [6_000, 60_000])  # within the first 64 KiB of text (checked up front) / beyond it
def test_cut_off_compressed_file_names_the_last_line_read(tmp_path, ext, cut):
    """A compressed file cut off early names where: after the last complete line the readable part holds (what an
    incremental decompressor gets from the cut bytes), or before any line when none could be decoded (a bzip2
    block is decoded whole); up front by check_corpus when the cut is within its first 64 KiB of text."""
    text = "".join(f"Line {i} says {'word ' * (i % 7)}and {i * 7919 % 10007} more.\n" for i in range(40_000)).encode()
    compress, decompress = _CODECS[ext]
    data = compress(text)
    assert len(data) > cut
    path = tmp_path / f"cut.txt.{ext}"
    path.write_bytes(data[:cut])
    lines = decompress(data[:cut]).count(b"\n")
    where = f"after line {lines}" if lines else "before any complete line was read"
    with pytest.raises(
        LitebertError, match=rf"cut\.txt\.{ext}: corrupt or truncated \w+ file (after line|before)"
    ) as e:
        check_corpus([path])
        list(read_documents([path]))
    n = int(m.group(1)) if (m := re.search(r"after line (\d+) ", str(e.value))) else 0
    if len(decompress(data[:cut])) < 1 << 16:  # the error comes from the format check: exactly where
        assert where in str(e.value)
    else:  # from the stream, which reads in blocks: at most the lines the cut bytes hold, and past the head
        assert 0 < n <= lines and n > text[: 1 << 16].count(b"\n") - 1


# ---------------------------------------------------------------------------------------------------- prepare
def _digest(d: Path) -> dict:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.glob("shard-*"))}


@pytest.fixture(scope="module")
def wiki_docs(tiny) -> list[list[str]]:
    """Twelve WikiText-2 articles as documents of paragraphs (three sentences each)."""
    docs = list(read_documents([tiny.wikitext_subset(12)]))
    return [[" ".join(d[i : i + 3]) for i in range(0, len(d), 3)] for d in docs]


def test_prepare_gives_identical_shards_from_every_form(tmp_path, tiny, wiki_docs):
    forms = _write_forms(tmp_path / "forms", wiki_docs)
    tok = str(tiny.tokenizer("sentencepiece"))
    manifests, digests = {}, {}
    for name, path in forms.items():
        out = tmp_path / "out" / name
        res = prepare(
            PrepareConfig(
                corpus=[str(path)], tokenizer=tok, output=str(out), max_seq_length=64, shard_size=300, progress=False
            )
        )
        manifests[name], digests[name] = res.manifest, _digest(out)
    out = tmp_path / "out" / "zst-2-workers"  # the reader feeds worker processes the same documents
    cfg = dict(tokenizer=tok, output=str(out), max_seq_length=64, shard_size=300, workers=2, progress=False)
    prepare(PrepareConfig(corpus=[str(forms["zst"])], **cfg))
    digests["zst-2-workers"] = _digest(out)
    base = manifests["plain"]
    assert base["counts"]["documents"] == 12 and len(base["shards"]) >= 2
    assert digests["zst-2-workers"] == digests["plain"]
    for name in forms:
        assert digests[name] == digests["plain"], name
        assert manifests[name]["shards"] == base["shards"], name
        assert manifests[name]["counts"]["instances"] == base["counts"]["instances"], name


def test_prepare_bad_input_leaves_nothing(tmp_path, tiny):
    tok = str(tiny.tokenizer("sentencepiece"))
    for name, (path, msg) in _corrupt_forms(tmp_path / "bad").items():
        out = tmp_path / f"out-{name}"
        with pytest.raises(LitebertError, match=msg):
            prepare(PrepareConfig(corpus=[str(path)], tokenizer=tok, output=str(out), progress=False))
        assert not out.exists(), name
        assert not [p for p in tmp_path.iterdir() if p.name.startswith(f".out-{name}")], name  # no temp dir left


def test_train_tokenizer_reads_columnar_and_compressed_forms(tmp_path):
    from litebert.corpus import iter_sentences_text
    from litebert.tokenization import load_tokenizer, train_tokenizer

    docs = [[f"Word{i} and word{i + 1} went out. They came back at {i}!" for i in range(j, j + 20)] for j in range(5)]
    forms = _write_forms(tmp_path / "f", docs, column="body")
    plain = list(iter_sentences_text([forms["plain"]]))
    assert len(plain) == 200 and plain[:2] == ["Word0 and word1 went out.", "They came back at 0!"]
    for name in ("zst", "parquet"):  # what the trainer reads (its ties make vocabularies differ run to run)
        assert list(iter_sentences_text([forms[name]], text_column="body")) == plain, name
    train_tokenizer([forms["parquet"]], "wordpiece", 120, tmp_path / "tok", text_column="body")
    pieces = load_tokenizer(tmp_path / "tok").tokenize("they came back")
    assert pieces == ["they", "came", "back"]  # the body column's words, each frequent enough to be a token
    with pytest.raises(LitebertError, match=r"corpus\.parquet: no column 'text' \(columns: id, body\)"):
        train_tokenizer([forms["parquet"]], "wordpiece", 120, tmp_path / "never")
    assert not (tmp_path / "never").exists()


# ---------------------------------------------------------------------------------------------------- hf:// (fake Hub)
_CARD = b"""---
configs:
- config_name: en
  data_files:
  - split: train
    path: en/train-*.parquet
- config_name: zh
  data_files:
  - split: train
    path: zh/train-*.parquet
---
"""


def _parquet_bytes(rows: list[str]) -> bytes:
    buf = pa.BufferOutputStream()
    pq.write_table(pa.table({"id": list(range(len(rows))), "text": rows}), buf, row_group_size=2)
    return buf.getvalue().to_pybytes()


def test_hub_dataset_streams_config_and_revision(fake_hub):
    zh = [["第一段。第二句。", "另一段。"], ["天气很好。我们出去了。"]]
    main = fake_hub.add_repo(
        "org/wiki",
        files={
            "README.md": _CARD,
            "en/train-0.parquet": _parquet_bytes(_rows()),
            "zh/train-0.parquet": _parquet_bytes(_rows(zh)),
        },
        repo_type="dataset",
    )
    v1 = fake_hub.add_repo(
        "org/wiki",
        files={
            "README.md": _CARD,
            "en/train-0.parquet": _parquet_bytes(_rows()[:1]),
            "zh/train-0.parquet": _parquet_bytes([]),
        },
        repo_type="dataset",
        revision="v1",
    )
    stats = CorpusStats()
    docs = list(iter_documents(["hf://org/wiki:en", "hf://org/wiki:zh", "hf://org/wiki:en@v1"], stats=stats))
    assert [d.sentences for d in docs] == _expected_sentences() + _expected_sentences(zh) + _expected_sentences()[:1]
    assert [(d.source, d.row) for d in docs] == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (2, 0)]
    assert [(e["source"], e["format"], e["revision"], e["first_document"], e["documents"]) for e in stats.sources] == [
        ("hf://org/wiki:en", "hub", main, 0, 3),
        ("hf://org/wiki:zh", "hub", main, 3, 2),
        ("hf://org/wiki:en@v1", "hub", v1, 5, 1),  # the commit read is recorded: a branch can move later
    ]
    # the main branch moves on: a pinned sha still reads the old rows
    fake_hub.add_repo(
        "org/wiki",
        files={"README.md": _CARD, "en/train-0.parquet": _parquet_bytes(["New text. Here."])},
        repo_type="dataset",
    )
    assert list(read_documents([f"hf://org/wiki:en@{main}"])) == _expected_sentences()
    assert list(read_documents(["hf://org/wiki:en"])) == [["New text.", "Here."]]


def test_hub_dataset_errors_name_the_dataset(fake_hub):
    fake_hub.add_repo(
        "org/wiki", files={"README.md": _CARD, "en/train-0.parquet": _parquet_bytes(_rows())}, repo_type="dataset"
    )
    cases = {
        "hf://org/missing": r"hf://org/missing: cannot stream the Hub dataset org/missing split 'train' "
        r"\(RepositoryNotFoundError: no such dataset on the Hub",
        "hf://org/wiki:fr": r"hf://org/wiki:fr: cannot stream the Hub dataset org/wiki config 'fr' split 'train' \(",
        "hf://org/wiki:en@v9": r"hf://org/wiki:en@v9: cannot stream .* at revision 'v9' .*no revision 'v9'\)$",
        "hf://org/wiki:en#test": r"hf://org/wiki:en#test: cannot stream .* split 'test'",
    }
    for spec, msg in cases.items():
        with pytest.raises(LitebertError, match=msg):
            check_corpus([spec])
    with pytest.raises(LitebertError, match=r"hf://org/wiki:en: no column 'body' \(columns: id, text\)"):
        check_corpus(["hf://org/wiki:en"], text_column="body")
    with pytest.raises(LitebertError, match=r"hf://org/wiki:en: column 'id' is int64, not text \(string\)$"):
        check_corpus(["hf://org/wiki:en"], text_column="id")  # as a Parquet file's, not every row skipped
    with pytest.raises(LitebertError, match=r"hf://org/wiki: .*Config name is missing.*\['en', 'zh'\]"):
        check_corpus(["hf://org/wiki"])  # a dataset with configs needs one: the message lists them
    fake_hub.add_repo("org/locked", files={"train.parquet": _parquet_bytes(_rows())}, repo_type="dataset", gated=True)
    with pytest.raises(LitebertError, match=r"hf://org/locked: cannot stream the Hub dataset org/locked .*gated"):
        check_corpus(["hf://org/locked"])
    fake_hub.add_repo("org/news", files={"train.parquet": _parquet_bytes(_rows())}, repo_type="dataset")
    fake_hub.go_offline()  # the Hub cannot be reached (org/news was never read, so nothing of it is cached)
    with pytest.raises(LitebertError, match=r"hf://org/news: cannot stream the Hub dataset org/news split 'train' \("):
        check_corpus(["hf://org/news"])


def test_prepare_from_the_hub_equals_the_local_parquet(tmp_path, tiny, wiki_docs, fake_hub):
    rows = _rows(wiki_docs)
    local = tmp_path / "wiki.parquet"
    local.write_bytes(_parquet_bytes(rows))
    fake_hub.add_repo(
        "org/wiki",
        files={
            "data/train-00000-of-00002.parquet": _parquet_bytes(rows[:5]),
            "data/train-00001-of-00002.parquet": _parquet_bytes(rows[5:]),
        },
        repo_type="dataset",
    )
    tok = str(tiny.tokenizer("sentencepiece"))
    made = {}
    for name, corpus in (("local", str(local)), ("hub", "hf://org/wiki")):
        out = tmp_path / name
        cfg = PrepareConfig(
            corpus=[corpus], tokenizer=tok, output=str(out), max_seq_length=64, shard_size=300, progress=False
        )
        made[name] = (prepare(cfg).manifest, _digest(out))
    (local_manifest, local_digest), (hub_manifest, hub_digest) = made["local"], made["hub"]
    assert hub_digest == local_digest and len(hub_digest) >= 2
    assert hub_manifest["shards"] == local_manifest["shards"]
    assert [(e["source"], e["format"], e["first_document"], e["documents"]) for e in hub_manifest["corpus"]] == [
        ("hf://org/wiki", "hub", 0, 12)
    ]
    with pytest.raises(LitebertError, match=r"hf://org/nowhere: cannot stream the Hub dataset org/nowhere"):
        prepare(PrepareConfig(corpus=["hf://org/nowhere"], tokenizer=tok, output=str(tmp_path / "x"), progress=False))
    assert not (tmp_path / "x").exists() and sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_instances_trace_back_to_source_and_row(tmp_path, tiny, wiki_docs):
    """The recipe of docs/pretraining.md: instance -> ``doc`` -> manifest ``corpus`` entry -> row; the instance's
    segment A is that row's tokens at the recorded positions."""
    from litebert.data import PretrainingDataset
    from litebert.data.instances import META_INDEX as M
    from litebert.tokenization import load_tokenizer

    text = _write_forms(tmp_path / "a", wiki_docs[:6])["xz"]
    table = _write_forms(tmp_path / "b", wiki_docs[6:])["parquet"]
    out = tmp_path / "out"
    tok = str(tiny.tokenizer("sentencepiece"))
    prepare(
        PrepareConfig(corpus=[str(text), str(table)], tokenizer=tok, output=str(out), max_seq_length=64, progress=False)
    )
    corpus = json.loads((out / "manifest.json").read_text())["corpus"]
    assert [(e["source"], e["first_document"], e["documents"]) for e in corpus] == [
        (str(text), 0, 6),
        (str(table), 6, 6),
    ]
    ds, tk = PretrainingDataset(out), load_tokenizer(out / "tokenizer")
    seen = set()
    for i in range(0, len(ds), 7):
        raw = ds.raw(i)
        m, ids = raw["meta"], raw["input_ids"]
        doc = int(m[M["doc"]])
        src = next(e for e in corpus if e["first_document"] <= doc < e["first_document"] + e["documents"])
        d = next(d for d in iter_documents([src["source"]]) if d.index == doc - src["first_document"])
        stream = np.array([t for s in tk.encode_batch(d.sentences) for t in s])
        la = int(m[M["len_a"]])
        assert np.array_equal(ids[1 : la + 1], stream[m[M["a_start"]] : m[M["a_end"]]]), i
        seen.add((src["source"], d.row))
    rows = {r for s, r in seen if s == str(table)}
    assert rows <= set(range(6)) and len(rows) > 1 and any(s == str(text) for s, _ in seen)


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="measures the resident set from /proc (Linux)")
def test_parquet_memory_is_bounded_by_a_batch_not_the_row_group(tmp_path):
    """A 41 MB Parquet file in ONE row group: reading it raises the resident set by far less than the file
    (pyarrow's default reads a whole row group's column at once: about +50 MB here)."""
    import subprocess
    import sys

    rng = __import__("random").Random(0)
    rows = [f"{rng.getrandbits(2048):0512x}. Then {i}." for i in range(80_000)]
    path = tmp_path / "one_group.parquet"
    pq.write_table(pa.table({"text": rows}), path, row_group_size=len(rows), use_dictionary=False)
    assert pq.ParquetFile(path).metadata.num_row_groups == 1 and path.stat().st_size > 40e6
    del rows
    code = (
        "import os, sys\n"
        "import pyarrow.parquet\n"
        "from litebert.corpus import iter_documents\n"
        "def rss():\n"
        "    with open('/proc/self/statm') as f:\n"
        "        return int(f.read().split()[1]) * os.sysconf('SC_PAGE_SIZE') / 2**20\n"
        "r0, peak, n = rss(), 0.0, 0\n"  # the baseline: pyarrow loaded
        "for doc in iter_documents([sys.argv[1]]):\n"
        "    n += 1\n"
        "    if n % 256 == 1:\n"
        "        peak = max(peak, rss())\n"
        "print(n, peak - r0)\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True).stdout
    n, grew_mb = out.split()
    assert int(n) == 80_000
    assert float(grew_mb) < 24, grew_mb


def test_cli_prepare_text_column_and_bad_input(tmp_path, tiny, wiki_docs, capsys):
    from litebert.cli import main

    forms = _write_forms(tmp_path / "f", wiki_docs[:4], column="body")
    tok = str(tiny.tokenizer("sentencepiece"))
    args = ["prepare", "--tokenizer", tok, "--max-seq-length", "64", "--no-progress"]
    assert (
        main([*args, "--corpus", str(forms["parquet"]), "--text-column", "body", "--output", str(tmp_path / "a")]) == 0
    )
    assert "prepared 4 documents" in capsys.readouterr().out
    assert main([*args, "--corpus", str(forms["parquet"]), "--output", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and re.search(r"corpus\.parquet: no column 'text' \(columns: id, body\)", err), err
    assert not (tmp_path / "b").exists()


def test_zstd_input_without_the_zstandard_package_is_one_clear_error(tmp_path, monkeypatch):
    """zstandard is imported only for zstd input (GPU images lack it): without it, one error, no traceback."""
    import sys

    path = tmp_path / "wiki.txt.zst"
    path.write_bytes(zstandard.ZstdCompressor().compress(b"One sentence here.\nAnother one there.\n"))
    monkeypatch.setitem(sys.modules, "zstandard", None)  # `import zstandard` now raises ImportError
    with pytest.raises(LitebertError, match="needs the zstandard package"):
        list(read_documents([path]))


@pytest.mark.parametrize("kind", ["gz", "bz2", "xz", "zst"])
def test_data_files_are_read_whole_compressed_or_not(tmp_path, kind):
    """Defect: a gzip-compressed fine-tuning file (dev.csv.gz) was refused as "not valid UTF-8". Fine-tuning's
    readers read data files through read_text_file, which decompresses by content as prepare does (the text of the
    uncompressed file is the oracle: BOM dropped, CRLF and CR read as LF) and names the format's suffix past the
    compression's; invalid UTF-8 or a cut-off stream is one error naming the file."""
    raw = "\ufeffsentence\tlabel\r\nla vie en rose\t1\rbad\t0\n下雨了\t1\n".encode()
    plain = tmp_path / "dev.tsv"
    plain.write_bytes(raw)
    packed = tmp_path / f"dev.csv.{kind}"
    packed.write_bytes(_compress(kind, raw))
    oldname = tmp_path / "dev.data"  # the content decides, not the name
    oldname.write_bytes(_compress(kind, raw))
    assert read_text_file(plain) == "sentence\tlabel\nla vie en rose\t1\nbad\t0\n下雨了\t1\n"
    assert read_text_file(packed) == read_text_file(oldname) == read_text_file(plain)
    assert (data_suffix(packed), data_suffix(plain), data_suffix(tmp_path / "t.JSONL.GZ")) == (".csv", ".tsv", ".jsonl")
    comp = {"gz": "gzip", "bz2": "bzip2", "xz": "xz", "zst": "zstd"}[kind]
    bad = tmp_path / f"bad.tsv.{kind}"
    bad.write_bytes(_compress(kind, b"ok\t1\n\xff\xfe\t0\n"))
    with pytest.raises(LitebertError) as exc:
        read_text_file(bad)
    assert str(exc.value) == f"{bad}: not valid UTF-8 (invalid start byte at byte 5 of its {comp}-decompressed text)"
    cut = tmp_path / f"cut.tsv.{kind}"
    cut.write_bytes(_compress(kind, raw * 200)[:-30])
    with pytest.raises(LitebertError, match=rf"^{re.escape(str(cut))}: corrupt or truncated {comp} file \("):
        read_text_file(cut)
    (tmp_path / "plainbad.tsv").write_bytes(b"ok\t1\n\xff\t0\n")
    with pytest.raises(LitebertError) as exc:
        read_text_file(tmp_path / "plainbad.tsv")
    assert str(exc.value) == f"{tmp_path / 'plainbad.tsv'}: not valid UTF-8 (invalid start byte at byte 5)"
    with pytest.raises(LitebertError, match=r": no such file$"):
        read_text_file(tmp_path / "missing.tsv.gz")
    with pytest.raises(LitebertError, match=r": is a directory, expected a data file$"):
        read_text_file(tmp_path)
