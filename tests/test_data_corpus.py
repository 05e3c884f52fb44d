"""Corpus readers: format detection, documents and sentences, bad input."""

from __future__ import annotations

import json
import re

import pytest

from litebert.corpus import CorpusStats, detect_format, read_documents, resolve_corpus_files, split_sentences
from litebert.errors import LitebertError


def test_split_sentences_english_and_chinese():
    assert split_sentences("It rained . Then it stopped ! 下雨了。停了！") == [
        "It rained .",
        "Then it stopped !",
        "下雨了。",
        "停了！",
    ]
    assert split_sentences('He said "Go." She went. 3 left.') == ['He said "Go."', "She went.", "3 left."]
    assert split_sentences("他说：“走吧。”然后走了？没有") == ["他说：“走吧。”", "然后走了？", "没有"]
    assert split_sentences("no end here e.g. lower") == ["no end here e.g. lower"]
    assert split_sentences("  ") == []


def _write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def test_formats_detected_and_read(tmp_path):
    bert = _write(tmp_path / "bert.txt", "First sentence.\nSecond one.\n\nOther doc.\nMore.\n")
    wiki = _write(
        tmp_path / "wiki.txt",
        " \n = Title A = \n \n Para one . Para two .\n \n = = Sec = = \n"
        " Para three .\n \n = Title B = \n \n B text . More B .\n",
    )
    wx = _write(
        tmp_path / "wx.txt",
        '<doc id="1" url="u" title="T1">\nT1\n\nOne. Two.\n</doc>\n'
        '<doc id="2" url="u" title="T2">\nT2\nThree.\n</doc>\n',
    )
    jl = _write(
        tmp_path / "d.jsonl",
        json.dumps({"text": "A one. A two.\nA three."}) + "\n" + json.dumps({"text": "B one."}) + "\n",
    )
    plain = _write(tmp_path / "plain.txt", "One here. Two here. Three here.\nFour here. Five.\n\nSix. Seven here.\n")
    expected = {
        bert: ("bert", [["First sentence.", "Second one."], ["Other doc.", "More."]]),
        wiki: ("wikitext", [["Para one .", "Para two .", "Para three ."], ["B text .", "More B ."]]),
        wx: ("wikiextractor", [["One.", "Two."], ["Three."]]),
        jl: ("jsonl", [["A one.", "A two.", "A three."], ["B one."]]),
        plain: ("plain", [["One here.", "Two here.", "Three here.", "Four here.", "Five."], ["Six.", "Seven here."]]),
    }
    for path, (fmt, docs) in expected.items():
        assert detect_format(path) == fmt, path
        assert list(read_documents([path])) == docs, path
    # forcing a format
    assert list(read_documents([bert], format="plain")) == expected[bert][1]


def test_directory_of_files_is_all_files(tmp_path):
    d = tmp_path / "corpus"
    d.mkdir()
    _write(d / "b.txt", "Two.\nSentences.\n")
    _write(d / "a.txt", "One.\nHere.\n")
    _write(d / ".hidden", "Skip.\nMe.\n")
    (d / "sub").mkdir()
    _write(d / "sub" / "c.txt", "Three.\nThere.\n")
    assert [p.name for p in resolve_corpus_files([d])] == ["a.txt", "b.txt", "c.txt"]
    assert list(read_documents([d])) == [["One.", "Here."], ["Two.", "Sentences."], ["Three.", "There."]]


def test_bad_paths(tmp_path):
    with pytest.raises(LitebertError, match="not found"):
        list(read_documents([tmp_path / "missing.txt"]))
    _write(tmp_path / "empty.txt", "")
    with pytest.raises(LitebertError, match="empty"):
        list(read_documents([tmp_path / "empty.txt"]))
    _write(tmp_path / "blank.txt", "\n  \n\n")
    with pytest.raises(LitebertError, match="empty"):
        list(read_documents([tmp_path / "blank.txt"]))
    (tmp_path / "nodir").mkdir()
    with pytest.raises(LitebertError, match="no files"):
        list(read_documents([tmp_path / "nodir"]))
    with pytest.raises(LitebertError, match="--format"):
        list(read_documents([tmp_path / "blank.txt"], format="xml"))


def test_invalid_utf8_skipped_and_counted_or_reported(tmp_path):
    p = tmp_path / "bad.txt"
    p.write_bytes(b"Good line.\nBad \xff\xfe line.\nAnother good.\n\nDoc two.\nLine.\n")
    stats = CorpusStats()
    docs = list(read_documents([p], format="bert", stats=stats))
    assert docs == [["Good line.", "Another good."], ["Doc two.", "Line."]]
    assert stats.skipped_lines == 1 and stats.first_skipped == f"{p}:2"
    with pytest.raises(LitebertError, match=r"bad.txt:2: invalid UTF-8"):
        list(read_documents([p], format="bert", on_invalid="error"))


def test_bad_jsonl_line(tmp_path):
    p = _write(tmp_path / "d.jsonl", '{"text": "A. B."}\n{not json}\n{"text": "C."}\n')
    stats = CorpusStats()
    assert list(read_documents([p], stats=stats)) == [["A.", "B."], ["C."]]
    assert stats.skipped_lines == 1
    with pytest.raises(LitebertError, match=r"d.jsonl:2"):
        list(read_documents([p], on_invalid="error"))


def test_jsonl_without_text_field_is_refused(tmp_path):
    # {"txt": ...} lines used to be detected as plain text and the JSON itself prepared as sentences.
    p = _write(tmp_path / "d.jsonl", '\n{"txt": "hello world"}\n{"txt": "more"}\n')
    with pytest.raises(LitebertError, match=r"d.jsonl:2: a JSON object without a 'text' field \(keys: 'txt'\)"):
        detect_format(p)
    with pytest.raises(LitebertError, match=r"d.jsonl:2"):
        list(read_documents([p]))


def test_real_corpora(tiny):
    stats = CorpusStats()
    docs = list(read_documents([tiny.wikitext_subset(60)], stats=stats))
    assert stats.formats[str(tiny.wikitext_subset(60))] == "wikitext"
    assert len(docs) == 60
    assert docs[0][0].startswith("Senjō no Valkyria 3 :")
    assert not any(s.startswith("= ") for d in docs for s in d)  # headings dropped
    assert stats.sentences > 20 * len(docs)

    # WikiText-2 as published: 600 train and 60 validation articles
    assert sum(1 for _ in read_documents([tiny.wikitext_train()], defer_split=True)) == 600
    assert sum(1 for _ in read_documents([tiny.wikitext_train().with_name("wiki.valid.tokens")])) == 60

    clue = list(read_documents([tiny.clue_zh()]))
    assert len(clue) == 2500
    assert detect_format(tiny.clue_zh()) in ("bert", "plain")
    news = list(read_documents([tiny.news_zh()]))
    assert 5 <= len(news) <= 20
    assert all(s.strip() for d in news for s in d)


@pytest.mark.parametrize(
    ("value", "type_name"), [(42, "int"), (["A.", "B."], "list"), ({"t": "A."}, "dict"), (True, "bool")]
)
def test_jsonl_text_field_of_another_type_is_one_error_naming_line_and_type(tmp_path, value, type_name):
    # such rows used to be skipped as "invalid lines", and prepare then suggested checking --format and the encoding
    lines = [{"text": "A first. Document here."}, {"text": "Second one. Is fine."}, {"text": value}]
    p = _write(tmp_path / "d.jsonl", "".join(json.dumps(o) + "\n" for o in lines))
    msg = rf"d\.jsonl:3: field 'text' is {type_name} \({re.escape(json.dumps(value))}\), not a string"
    for on_invalid in ("skip", "error"):
        with pytest.raises(LitebertError, match=msg):
            list(read_documents([p], on_invalid=on_invalid))
    # on the first line, the format check (which runs before any work) finds it
    p.write_text("".join(json.dumps(o) + "\n" for o in reversed(lines)))
    with pytest.raises(LitebertError, match=msg.replace(":3:", ":1:")):
        detect_format(p)


def test_jsonl_null_text_is_skipped_like_a_null_row(tmp_path):
    p = _write(tmp_path / "d.jsonl", '{"text": "A. B."}\n{"text": null}\n{"text": "C."}\n')
    stats = CorpusStats()
    assert list(read_documents([p], stats=stats)) == [["A.", "B."], ["C."]]
    assert (stats.skipped_lines, stats.first_skipped) == (1, f"{p}:2")


def test_jsonl_unpaired_surrogate_escape_is_an_invalid_line(tmp_path):
    # "\ud800" alone decodes to a code point no UTF-8 text holds: the tokenizer then failed with a TypeError
    # traceback in train-tokenizer and prepare. A paired escape ("\ud83d\ude00", an emoji) is text.
    p = _write(
        tmp_path / "d.jsonl", '{"text": "A. B \\ud83d\\ude00."}\n{"text": "Bad \\ud800 here."}\n{"text": "C."}\n'
    )
    stats = CorpusStats()
    assert list(read_documents([p], stats=stats)) == [["A.", "B \U0001f600."], ["C."]]
    assert (stats.skipped_lines, stats.first_skipped) == (1, f"{p}:2")
    with pytest.raises(LitebertError, match=r"d\.jsonl:2: field 'text' holds an unpaired UTF-16 surrogate"):
        list(read_documents([p], on_invalid="error"))


def _empty_forms(d):
    """Files that hold no document: zero bytes, only whitespace (gzip-compressed), a Parquet file with no rows."""
    import gzip

    import pyarrow as pa
    import pyarrow.parquet as pq

    d.mkdir(parents=True, exist_ok=True)
    _write(d / "a_zero.txt", "")
    (d / "b_blank.txt.gz").write_bytes(gzip.compress(b"\n  \n\n", mtime=0))
    pq.write_table(pa.table({"text": pa.array([], pa.string())}), d / "c_rows.parquet")
    return [d / "a_zero.txt", d / "b_blank.txt.gz", d / "c_rows.parquet"]


def test_empty_files_in_a_directory_are_skipped_and_named(tmp_path):
    d = tmp_path / "corpus"
    empty = _empty_forms(d)
    _write(d / "d_text.txt", "One.\nHere.\n\nTwo.\nThere.\n")
    stats = CorpusStats()
    assert list(read_documents([d], stats=stats)) == [["One.", "Here."], ["Two.", "There."]]
    assert stats.empty_files == [str(p) for p in empty]
    # every source keeps its manifest entry (documents are numbered over them all); the empty ones hold none
    assert [(s["source"], s["format"], s["documents"]) for s in stats.sources] == [
        (str(empty[0]), "empty", 0),
        (str(empty[1]), "empty", 0),
        (str(empty[2]), "empty", 0),
        (str(d / "d_text.txt"), "bert", 2),
    ]
    # a directory of empty files only reads as no document (prepare then says so, naming them)
    only = tmp_path / "only"
    _empty_forms(only)
    stats = CorpusStats()
    assert list(read_documents([only], stats=stats)) == [] and len(stats.empty_files) == 3


def test_an_empty_file_named_on_the_command_line_is_an_error(tmp_path):
    for p in _empty_forms(tmp_path / "e"):
        why = r" \(a Parquet file with no rows\)" if p.suffix == ".parquet" else ""
        with pytest.raises(LitebertError, match=rf"^corpus file is empty: {re.escape(str(p))}{why}$"):
            list(read_documents([p]))


@pytest.mark.parametrize("indent", [None, 2])
def test_a_json_array_corpus_is_read_as_its_objects_text(tmp_path, indent):
    """pandas' to_json(orient="records") / json.dump of a list: before, it was detected as plain text and the shards
    held its brackets, keys and \\u escapes. The oracle: json.loads of the file, each object's text split as a JSON
    line's is."""
    import gzip

    rows = [{"text": "Senj\u014d no Valkyria. A second sentence.\nA new paragraph."}, {"id": 3}, {"text": None}]
    rows.append({"text": "Last one."})
    text = json.dumps(rows, indent=indent)
    p = _write(tmp_path / "d.json", text)
    jl = _write(tmp_path / "d.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    assert detect_format(p) == "json"
    stats = CorpusStats()
    got = list(read_documents([p], stats=stats))
    assert (
        got
        == list(read_documents([jl]))
        == [
            ["Senj\u014d no Valkyria.", "A second sentence.", "A new paragraph."],
            ["Last one."],
        ]
    )
    lines = [1, 1, 1] if indent is None else [2, 5, 8]  # where the skipped objects start
    assert (stats.skipped_lines, stats.first_skipped) == (2, f"{p}:{lines[1]}")
    gz = tmp_path / "d.json.gz"
    gz.write_bytes(gzip.compress(text.encode()))
    assert list(read_documents([gz])) == got
    with pytest.raises(LitebertError, match=re.escape(f"{p}:{lines[1]}: not a JSON object with a string 'text'")):
        list(read_documents([p], on_invalid="error"))


def test_a_json_document_over_several_lines_is_refused_not_read_as_prose(tmp_path):
    """A SQuAD file given as a corpus was read as plain text (its keys and braces became sentences)."""
    squad = _write(tmp_path / "dev.json", json.dumps({"data": [{"paragraphs": [{"context": "A. B."}]}]}, indent=2))
    with pytest.raises(LitebertError) as err:
        list(read_documents([squad]))
    assert str(err.value) == (
        f"{squad}: one JSON document over several lines, not a corpus: a JSON corpus is JSON lines (one "
        '{"text": ...} object per line) or one JSON array of such objects'
    )
    broken = _write(tmp_path / "b.json", '[\n  {"text": "A."},\n  {"text": "B." oops}\n]\n')
    with pytest.raises(LitebertError, match=re.escape(f"{broken}:3: not valid JSON (Expecting ',' delimiter")):
        list(read_documents([broken]))
