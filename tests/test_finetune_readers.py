"""Readers and task presets: formats, BOM, missing final newline, columns by name/index, bad input."""

from __future__ import annotations

import json
import re

import pytest

from litebert.errors import LitebertError
from litebert.finetune.readers import ColumnSpec, parse_column, read_examples
from litebert.finetune.tasks import TASKS, get_task


def write(tmp_path, name, text, encoding="utf-8"):
    path = tmp_path / name
    path.write_bytes(text.encode(encoding))
    return path


def test_tsv_by_name_and_by_index_agree(tmp_path):
    path = write(tmp_path, "d.tsv", 'sentence\tlabel\na "quoted" film \t1\nbad one\t0\n')
    by_name = read_examples(path, ColumnSpec(text="sentence", label="label"))
    by_index = read_examples(path, ColumnSpec(text=0, label=1, header=True))
    assert [(e.text, e.label) for e in by_name.examples] == [('a "quoted" film', "1"), ("bad one", "0")]
    assert by_name.examples == by_index.examples
    assert by_name.header == ["sentence", "label"]
    assert [e.line for e in by_name.examples] == [2, 3]


def test_bom_crlf_missing_final_newline_and_blank_lines(tmp_path):
    path = write(tmp_path, "d.tsv", "\ufeffQuality\t#1 String\t#2 String\r\n1\ta\tb\r\n\r\n0\tc\td")
    res = read_examples(path, ColumnSpec(text="#1 String", text_pair="#2 String", label="Quality"))
    assert [(e.label, e.text, e.text_pair) for e in res.examples] == [("1", "a", "b"), ("0", "c", "d")]
    assert res.examples[1].line == 4


def test_no_header_indexes(tmp_path):
    path = write(tmp_path, "d.tsv", "x\t1\t\tgood\ny\t0\t*\tbad\n")
    res = read_examples(path, ColumnSpec(text=3, label=1, header=False))
    assert [(e.text, e.label) for e in res.examples] == [("good", "1"), ("bad", "0")]


def test_csv_with_quotes_and_custom_delimiter(tmp_path):
    path = write(tmp_path, "d.csv", 'text,label\n"hello, world",pos\n"say ""hi""",neg\n')
    res = read_examples(path, ColumnSpec(text="text", label="label"))
    assert [(e.text, e.label) for e in res.examples] == [("hello, world", "pos"), ('say "hi"', "neg")]
    semi = write(tmp_path, "d.txt", "text;label\na;1\n")
    assert read_examples(semi, ColumnSpec(text=0, label=1, header=True), delimiter=";").examples[0].text == "a"


def test_jsonl(tmp_path):
    path = write(
        tmp_path,
        "d.jsonl",
        '{"sentence1": "a", "sentence2": "b", "label": 2}\n\n{"sentence1": "c", "sentence2": "d", "label": 0}',
    )
    res = read_examples(path, ColumnSpec(text="sentence1", text_pair="sentence2", label="label"))
    assert [(e.text, e.text_pair, e.label) for e in res.examples] == [("a", "b", "2"), ("c", "d", "0")]
    bad = write(tmp_path, "bad.jsonl", '{"sentence1": "a"}\n{"x": 1}\n')
    with pytest.raises(LitebertError, match=r"bad.jsonl:2: text key 'sentence1' missing"):
        read_examples(bad, ColumnSpec(text="sentence1"))


def test_jsonl_unpaired_surrogate_escape_is_one_error_naming_the_line(tmp_path):
    # "\udc00" alone is not valid Unicode: the tokenizer failed on it with a TypeError traceback in finetune,
    # evaluate and predict. A paired escape ("\ud83d\ude00", an emoji) is read as the character.
    good = '{"sentence": "ok \\ud83d\\ude00", "label": 1}\n'
    path = write(tmp_path, "d.jsonl", good + '{"sentence": "bad \\udc00", "label": 0}\n')
    with pytest.raises(LitebertError, match=r"d\.jsonl:2: an unpaired UTF-16 surrogate escape"):
        read_examples(path, ColumnSpec(text="sentence", label="label"))
    res = read_examples(write(tmp_path, "ok.jsonl", good), ColumnSpec(text="sentence", label="label"))
    assert res.examples[0].text == "ok \U0001f600"


def test_parse_column():
    assert parse_column("3") == 3
    assert parse_column("#1 String") == "#1 String"
    assert parse_column(None) is None
    with pytest.raises(LitebertError):
        parse_column("-1")


def test_empty_file_and_header_only(tmp_path):
    with pytest.raises(LitebertError, match="empty"):
        read_examples(write(tmp_path, "e.tsv", ""), ColumnSpec(text=0))
    with pytest.raises(LitebertError, match="empty"):
        read_examples(write(tmp_path, "e2.tsv", "\n  \n"), ColumnSpec(text=0))
    with pytest.raises(LitebertError, match="no data rows"):
        read_examples(write(tmp_path, "h.tsv", "sentence\tlabel\n"), ColumnSpec(text="sentence", label="label"))


def test_column_index_out_of_range_and_unknown_name(tmp_path):
    path = write(tmp_path, "d.tsv", "sentence\tlabel\na\t1\n")
    with pytest.raises(LitebertError, match=r"label column index 5 is out of range.*2 fields"):
        read_examples(path, ColumnSpec(text=0, label=5, header=True))
    with pytest.raises(LitebertError, match=r"'text' is not in the header \['sentence', 'label'\]"):
        read_examples(path, ColumnSpec(text="text", label="label"))


def test_row_with_too_few_fields_names_file_and_line(tmp_path):
    path = write(tmp_path, "short.tsv", "sentence\tlabel\na\t1\nb\t0\nonly text\n")
    with pytest.raises(LitebertError, match=r"short.tsv:4: row has 1 field\(s\), expected at least 2"):
        read_examples(path, ColumnSpec(text="sentence", label="label"))


def test_optional_label_for_test_files(tmp_path):
    path = write(tmp_path, "test.tsv", "index\tsentence\n0\ta\n1\tb\n")
    res = read_examples(path, ColumnSpec(text="sentence", label="label", label_optional=True))
    assert not res.has_labels and [e.label for e in res.examples] == [None, None]
    with pytest.raises(LitebertError, match="label column is required"):
        read_examples(path, ColumnSpec(text="sentence", label="label", label_optional=True), require_label=True)


def test_task_presets_pick_layouts(tmp_path):
    cola_train = write(
        tmp_path, "cola.tsv", "gj04\t1\t\tOur friends won't buy this.\ngj04\t0\t*\tThey drank the pub.\n"
    )
    cola_test = write(tmp_path, "cola_test.tsv", "index\tsentence\n0\tBill whistled.\n")
    cola = get_task("CoLA")
    assert read_examples(cola_train, cola.layout_for(cola_train)).examples[1].label == "0"
    test = read_examples(cola_test, cola.layout_for(cola_test))
    assert test.examples[0].text == "Bill whistled." and not test.has_labels

    xnli = get_task("xnli")
    mt = write(tmp_path, "mt.tsv", "premise\thypo\tlabel\na\tb\tcontradictory\n")
    assert read_examples(mt, xnli.layout_for(mt)).examples[0].label == "contradiction"
    dev = write(
        tmp_path,
        "xnli.dev.tsv",
        "language\tgold_label\tsentence1\tsentence2\nen\tneutral\ta\tb\nzh\tentailment\t你\t好\n",
    )
    res = read_examples(dev, xnli.layout_for(dev))
    assert [(e.text, e.label) for e in res.examples] == [("你", "entailment")] and res.skipped == 1
    assert res.examples[0].index == 1  # the file's second data row: predictions.tsv joins back to the file

    lcqmc = get_task("lcqmc")
    raw = write(tmp_path, "lcqmc.txt", "喜欢打篮球的男生喜欢什么样的女生\t爱打篮球的男生喜欢什么样的女生\t1\n")
    assert read_examples(raw, lcqmc.layout_for(raw)).examples[0].label == "1"
    with pytest.raises(LitebertError, match="does not look like a sst2 file"):
        get_task("sst-2").layout_for(dev)
    with pytest.raises(LitebertError, match="unknown task"):
        get_task("no_such_task")
    assert set(TASKS) >= {"sst2", "mrpc", "cola", "stsb", "qnli", "rte", "qqp", "mnli", "chnsenticorp", "lcqmc", "xnli"}


@pytest.mark.parametrize(
    "task,split,rows,pair",
    [("sst2", "SST-2", 872, False), ("mrpc", "MRPC", 408, True), ("chnsenticorp", "chnsenticorp", 1200, False)],
)
def test_real_glue_and_clue_files(shared_data, task, split, rows, pair):
    base = shared_data / ("glue" if split != "chnsenticorp" else "") / split
    spec = get_task(task)
    dev = read_examples(base / "dev.tsv", spec.layout_for(base / "dev.tsv"), require_label=True)
    assert len(dev.examples) == rows
    assert {e.label for e in dev.examples} == {"0", "1"}
    assert (dev.examples[0].text_pair is not None) == pair
    test = read_examples(base / "test.tsv", spec.layout_for(base / "test.tsv"))
    assert test.examples and all(e.text for e in test.examples)
    assert test.has_labels == (task == "chnsenticorp")


def test_jsonl_list_labels_are_multi_label(tmp_path):
    """docs/finetune.md: "a list value is a multi-label field" — without --problem-type the list column makes the
    problem multi-label; list items are labels as they are (never split on the separator)."""
    from litebert.finetune import DataOptions
    from litebert.finetune.data import LabelSpace
    from litebert.finetune.kinds import make_kind

    path = write(
        tmp_path,
        "d.jsonl",
        '{"text": "x", "labels": ["a"]}\n{"text": "y", "labels": ["a", "b"]}\n{"text": "z", "labels": ["c, d"]}\n',
    )
    data = DataOptions(text_column="text", label_column="labels")
    kind = make_kind(data)
    train = kind.read(path, require_labels=True)
    assert [ex.labels for ex in train.examples] == [("a",), ("a", "b"), ("c, d",)]
    kind.fit(train)
    assert kind.space.problem_type == "multi_label" and kind.labels == ["a", "b", "c, d"]
    over = kind.config_overrides()
    assert over["problem_type"] == "multi_label_classification" and over["id2label"] == {0: "a", 1: "b", 2: "c, d"}
    assert [kind.space.encode(ex, path) for ex in train.examples] == [[1, 0, 0], [1, 1, 0], [0, 0, 1]]
    assert kind.space.decode([1, 1, 0]) == "a,b"
    explicit = make_kind(data, problem_type="multi_label")
    explicit.fit(train)
    assert explicit.labels == kind.labels
    with pytest.raises(
        LitebertError,
        match=r"d\.jsonl:1: the label field 'labels' is a JSON list \(a multi-label field\) but --problem-type "
        r"single_label",
    ):
        make_kind(data, problem_type="single_label").fit(train)
    with pytest.raises(LitebertError, match=r"d\.jsonl:1: the label is a JSON list .* is single_label"):
        LabelSpace("single_label", ("a", "b")).encode(train.examples[0], path, "model's")


def test_list_labels_under_a_task_preset_name_the_task_not_a_problem_type_never_given(tmp_path):
    from litebert.finetune import DataOptions
    from litebert.finetune.kinds import make_kind

    path = write(tmp_path, "s.jsonl", '{"sentence": "x", "label": ["0"]}\n{"sentence": "y", "label": ["0", "1"]}\n')
    kind = make_kind(DataOptions(task="sst2"))
    train = kind.read(path, require_labels=True)
    with pytest.raises(LitebertError) as err:
        kind.fit(train)
    assert str(err.value) == (
        f"{path}:1: the label field 'label' is a JSON list (a multi-label field) but --task sst2 is single_label; "
        "add --problem-type multi_label to read it as multi-label, or drop --task sst2"
    )
    explicit = make_kind(DataOptions(task="sst2"), problem_type="multi_label")
    explicit.fit(train)
    assert explicit.space.problem_type == "multi_label" and explicit.labels == ["0", "1"]


def test_multi_label_without_any_label_names_file_and_field(tmp_path):
    from litebert.finetune import DataOptions
    from litebert.finetune.kinds import make_kind

    path = write(tmp_path, "e.jsonl", '{"text": "x", "labels": []}\n{"text": "y", "labels": []}\n')
    kind = make_kind(DataOptions(text_column="text", label_column="labels"))
    with pytest.raises(
        LitebertError, match=r"e\.jsonl: no label found: the label field 'labels' is empty in all 2 rows"
    ):
        kind.fit(kind.read(path, require_labels=True))
    tsv = write(tmp_path, "e.tsv", "text\ttags\nx\t\ny\t \n")  # --problem-type multi_label, empty fields
    kind = make_kind(DataOptions(text_column="text", label_column="tags"), problem_type="multi_label")
    with pytest.raises(LitebertError, match=r"e\.tsv: no label found: the label field 'tags' is empty in all 2 rows"):
        kind.fit(kind.read(tsv, require_labels=True))


def test_dropped_rows_keep_the_file_row_numbers(tmp_path):
    """OCNLI's '-' rows are dropped, but every kept row's index stays its 0-based data row in the file (the
    `index` column of predictions.tsv, docs/finetune.md), so predictions join back to the file and to OCNLI's
    `id`; before, the rows after a dropped one were renumbered and every later prediction named the wrong row."""
    rows = [("a", "b", "neutral"), ("c", "d", "-"), ("e", "f", "entailment"), ("g", "h", "-"), ("i", "j", "neutral")]
    ocnli = get_task("ocnli")
    lines = [json.dumps({"sentence1": s1, "sentence2": s2, "label": y, "id": i}) for i, (s1, s2, y) in enumerate(rows)]
    path = write(tmp_path, "dev.json", "\n".join(lines) + "\n")
    res = read_examples(path, ocnli.layout_for(path))
    assert [(e.index, e.text, e.label) for e in res.examples] == [
        (0, "a", "neutral"),
        (2, "e", "entailment"),
        (4, "i", "neutral"),
    ]
    assert res.skipped == 2
    tsv = write(tmp_path, "dev.tsv", "s1\ts2\tlabel\n" + "".join(f"{a}\t{b}\t{y}\n" for a, b, y in rows))
    spec = ColumnSpec(text="s1", text_pair="s2", label="label", skip_labels=("-",))
    assert [e.index for e in read_examples(tsv, spec).examples] == [0, 2, 4]


#: the characters ``str.splitlines`` ends a line at besides ``\n`` and ``\r``: text inside a row, never a row end
UNICODE_BREAKS = ("\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")


@pytest.mark.parametrize("ch", UNICODE_BREAKS, ids=[f"U+{ord(c):04X}" for c in UNICODE_BREAKS])
def test_unicode_line_breaks_inside_a_field_do_not_end_the_row(tmp_path, ch):
    """str.splitlines() split rows at \\v, \\f, \\x1c-\\x1e, U+0085, U+2028, U+2029: a valid TSV row or JSON line
    holding one in a field was refused ("row has 1 field(s)", "not a JSON line") with a wrong line number. A row ends
    at \\n (\\r\\n) in every reader; the oracle is json.loads of each \\n-terminated line and the csv module."""
    from litebert.finetune.choice import read_choice_file
    from litebert.finetune.qa import read_qa_file
    from litebert.finetune.readers import data_lines
    from litebert.finetune.token import read_token_file

    assert data_lines(f"a{ch}b\r\nc\n\nd") == [f"a{ch}b", "c", "", "d"]
    tsv = write(tmp_path, "d.tsv", f"sentence\tlabel\r\nfirst row\t1\na{ch}b\t1\n\nlast row\t0")
    res = read_examples(tsv, ColumnSpec(text="sentence", label="label"))
    assert [(e.text, e.label, e.line) for e in res.examples] == [
        ("first row", "1", 2),
        (f"a{ch}b", "1", 3),
        ("last row", "0", 5),
    ]
    # CSV goes through the csv module, which already read it so: the TSV reader now agrees with it
    csv_file = write(tmp_path, "d.csv", f"sentence,label\r\nfirst row,1\na{ch}b,1\n\nlast row,0")
    assert [
        (e.text, e.label) for e in read_examples(csv_file, ColumnSpec(text="sentence", label="label")).examples
    ] == [(e.text, e.label) for e in res.examples]
    rows = [{"text": "first", "labels": ["pos"]}, {"text": f"a{ch}b line", "labels": ["pos"]}, {"text": "last"}]
    jsonl = write(tmp_path, "d.jsonl", "\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n")
    oracle = [json.loads(line) for line in jsonl.read_text(encoding="utf-8").split("\n") if line]
    got = read_examples(jsonl, ColumnSpec(text="text"))
    assert [e.text for e in got.examples] == [r["text"] for r in oracle] and [e.line for e in got.examples] == [1, 2, 3]

    ner = write(tmp_path, "ner.txt", f"EU\tB-ORG\nre{ch}jects\tO\n\nGerman\tS-MISC\n")
    assert [ex.words for ex in read_token_file(ner).examples] == [["EU", f"re{ch}jects"], ["German"]]
    ner_jl = write(
        tmp_path,
        "ner.jsonl",
        json.dumps({"tokens": ["a", f"x{ch}y"], "tags": ["O", "O"]}, ensure_ascii=False)
        + '\n{"tokens": ["b"], "tags": ["O"]}\n',
    )
    assert [ex.words for ex in read_token_file(ner_jl).examples] == [["a", f"x{ch}y"], ["b"]]

    row = {"sent1": "a", "sent2": "b", "ending0": f"c{ch}c", "ending1": "d", "label": 1}
    swag = write(tmp_path, "swag.jsonl", json.dumps(row, ensure_ascii=False) + "\n" + json.dumps(row) + "\n")
    choice = read_choice_file(swag).examples
    assert [ex.line for ex in choice] == [1, 2] and choice[0].options[0].endswith(f"c{ch}c")

    qa_rows = [
        {
            "id": "q1",
            "question": "Who?",
            "context": f"Ann{ch}met Bob.",
            "answers": {"text": ["Ann"], "answer_start": [0]},
        },
        {"id": "q2", "question": "Who?", "context": "Bob met Ann.", "answers": {"text": ["Bob"], "answer_start": [0]}},
    ]
    qa = write(tmp_path, "qa.jsonl", "\n".join(json.dumps(r, ensure_ascii=False) for r in qa_rows) + "\n")
    read = read_qa_file(qa)
    assert [ex.qid for ex in read.examples] == ["q1", "q2"] and read.examples[0].context == f"Ann{ch}met Bob."


@pytest.mark.parametrize("kind", ["ner-jsonl", "swag-jsonl", "c3-json", "squad-json", "qa-jsonl"])
def test_every_json_reader_names_an_unpaired_surrogate_escape(tmp_path, kind):
    """The NER, multiple-choice and QA readers parse JSON themselves: a lone "\\udc00" there reached the tokenizer
    as a TypeError traceback. Each now says which file and line holds it (json.dumps writes the lone escape)."""
    from litebert.finetune.choice import read_choice_file
    from litebert.finetune.qa import read_qa_file
    from litebert.finetune.token import read_token_file

    bad = "bad \udc00"
    ctx = "Paris is in France."
    swag = {"sent1": "A man", "sent2": "He", **{f"ending{i}": f"e{i}" for i in range(4)}, "label": 0}
    squad = {"version": "v1.1", "data": [{"title": "t", "paragraphs": [{"context": ctx, "qas": [
        {"id": "a", "question": "Where?", "answers": [{"text": "France", "answer_start": 12}]},
        {"id": "b", "question": bad, "answers": [{"text": "Paris", "answer_start": 0}]}]}]}]}  # fmt: skip
    qa = {"id": "1", "question": "Where?", "context": ctx, "answers": {"text": ["France"], "answer_start": [12]}}
    files = {
        "ner-jsonl": ("n.jsonl", [{"tokens": ["John"], "tags": ["B-PER"]}, {"tokens": [bad], "tags": ["O"]}], 2),
        "swag-jsonl": ("s.jsonl", [swag, {**swag, "sent2": bad}], 2),
        "c3-json": ("c.json", [[["Doc"], [{"question": "Q?", "choice": ["a", bad], "answer": "a"}], "id1"]], None),
        "squad-json": ("q.json", squad, 11),
        "qa-jsonl": ("r.jsonl", [qa, {**qa, "id": "2", "context": bad + " France", "question": "Q?"}], 2),
    }
    name, content, line = files[kind]
    path = tmp_path / name
    if kind == "squad-json":
        text = json.dumps(content, indent=1)  # a pretty-printed document: the line of the escape is named
        line = next(n for n, s in enumerate(text.splitlines(), 1) if "\\udc00" in s)
    elif kind == "c3-json":
        text = json.dumps(content)
    else:
        text = "".join(json.dumps(row) + "\n" for row in content)
    path.write_text(text)
    read = {"ner": read_token_file, "swag": read_choice_file, "c3": read_choice_file}.get(
        kind.split("-")[0], read_qa_file
    )
    where = name if line is None else f"{name}:{line}"  # a one-line document: the file
    with pytest.raises(LitebertError, match=rf"{where}: an unpaired UTF-16 surrogate escape"):
        read(path)


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        # an unquoted comma in CSV text: the label was taken by header index, so 'comma inside' became a class
        (
            "d.csv",
            "text,label\ngood film,pos\nstray, comma inside,neg\n",
            "d.csv:3: row has 3 fields, the header has 2",
        ),
        ("d.tsv", "sentence\tlabel\na\t1\nb\tc\t0\n", "d.tsv:3: row has 3 fields, the header has 2"),
        ("n.tsv", "a\t1\nb\tc\t0\n", "n.tsv:2: row has 3 fields, the first row has 2"),
    ],
)
def test_a_row_with_more_fields_than_the_header_is_an_error_naming_the_line(tmp_path, name, text, message):
    path = write(tmp_path, name, text)
    spec = ColumnSpec(text=0, label=1, header="n." not in name)
    with pytest.raises(LitebertError, match=re.escape(message) + r": a field holds the delimiter"):
        read_examples(path, spec)
    # a trailing delimiter (an empty extra field) is still read
    ok = write(tmp_path, "ok.tsv", "sentence\tlabel\na\t1\t\nb\t0\n")
    assert [(e.text, e.label) for e in read_examples(ok, ColumnSpec(text=0, label=1, header=True)).examples] == [
        ("a", "1"),
        ("b", "0"),
    ]


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ('{"text": null, "label": "pos"}', None),  # null text is an empty field, as in CSV
        ('{"text": 123, "label": "pos"}', "the text field 'text' is a number (123), expected a string"),
        ('{"text": ["p", "q"], "label": "pos"}', 'the text field \'text\' is a JSON list (["p", "q"]), expected'),
        (
            '{"text": "x", "label": {"k": 1}}',
            "the label field 'label' is a JSON object ({\"k\": 1}), expected a string",
        ),
        ('{"text": "x", "label": [["a"]]}', "an item of the label field 'label' is a JSON list ([\"a\"])"),
    ],
)
def test_json_fields_of_the_wrong_type_are_errors_not_their_json_spelling(tmp_path, row, message):
    """Before, {"text": null} was read as the text "null", 123 as "123", a list as "p,q" and an object label as
    the class '{"k": 1}'."""
    path = write(tmp_path, "d.jsonl", '{"text": "ok", "label": "neg"}\n' + row + "\n")
    spec = ColumnSpec(text="text", label="label")
    if message is None:
        assert read_examples(path, spec).examples[1].text == ""
        return
    with pytest.raises(LitebertError, match="^" + re.escape(f"{path}:2: {message}")):
        read_examples(path, spec)


def test_json_labels_read_as_the_file_writes_them(tmp_path):
    """Numbers keep their spelling, booleans are JSON's (BoolQ's `answer`: before, Python's 'True'), null is no
    label."""
    rows = [{"t": "a", "y": 1}, {"t": "b", "y": 0.5}, {"t": "c", "y": True}, {"t": "d", "y": False}, {"t": "e"}]
    rows[4]["y"] = None
    path = write(tmp_path, "d.jsonl", "\n".join(json.dumps(r) for r in rows) + "\n")
    got = read_examples(path, ColumnSpec(text="t", label="y"))
    assert [e.label for e in got.examples] == ["1", "0.5", "true", "false", ""]


@pytest.mark.parametrize(
    ("name", "text", "line"),
    [
        ("d.csv", "text,label\ngood,pos\nbad,\nok,neg\n", 3),
        ("d.jsonl", '{"text": "good", "label": "pos"}\n{"text": "bad", "label": null}\n', 2),
    ],
)
def test_an_empty_label_in_a_training_or_dev_file_is_an_error_naming_the_line(tmp_path, name, text, line):
    """Before, an empty CSV label became the class '' and a JSON null the class 'null'."""
    from litebert.finetune import DataOptions
    from litebert.finetune.data import LabelSpace
    from litebert.finetune.kinds import make_kind

    path = write(tmp_path, name, text)
    kind = make_kind(DataOptions(text_column="text", label_column="label"))
    train = kind.read(path, require_labels=True)
    with pytest.raises(LitebertError) as err:
        kind.fit(train)
    assert str(err.value) == (
        f"{path}:{line}: the label field 'label' is empty; every row of a training file needs a label "
        "(litebert predict reads rows without one)"
    )
    bad = next(ex for ex in train.examples if ex.line == line)
    with pytest.raises(LitebertError, match=re.escape(f"{path}:{line}: the label is empty; every row of a dev")):
        LabelSpace("single_label", ("neg", "pos")).encode(bad, path, "dev")
    with pytest.raises(LitebertError, match=re.escape(f"{path}:{line}: the label is empty")):
        LabelSpace("regression").encode(bad, path, "dev")


@pytest.mark.parametrize("layout", ["one line", "pretty", "rows as arrays"])
def test_a_json_file_holding_one_array_of_rows_is_read_with_each_rows_line(tmp_path, layout):
    """`datasets` reads a .json array of objects, and pandas' to_json(orient="records") writes one; before, every
    reader said the first line was not JSON, or that a column name was used on an array."""
    rows = [{"text": "good film", "label": "pos"}, {"text": "bad film", "label": "neg"}]
    if layout == "one line":
        text, lines, spec = json.dumps(rows), [1, 1], ColumnSpec(text="text", label="label")
    elif layout == "pretty":
        text, lines, spec = json.dumps(rows, indent=2), [2, 6], ColumnSpec(text="text", label="label")
    else:
        text = "[\n" + ",\n".join(json.dumps([r["text"], r["label"]]) for r in rows) + "\n]\n"
        lines, spec = [2, 3], ColumnSpec(text=0, label=1)
    path = write(tmp_path, "d.json", text)
    got = read_examples(path, spec)
    assert [(e.text, e.label, e.line) for e in got.examples] == [
        ("good film", "pos", lines[0]),
        ("bad film", "neg", lines[1]),
    ]
    # JSON lines whose rows are arrays stay JSON lines; a one-line array of strings is one row
    jl = write(tmp_path, "a.jsonl", '["good film", "pos"]\n["bad film", "neg"]\n')
    assert [(e.text, e.label, e.line) for e in read_examples(jl, ColumnSpec(text=0, label=1)).examples] == [
        ("good film", "pos", 1),
        ("bad film", "neg", 2),
    ]


def test_a_json_file_that_is_one_object_or_a_broken_array_says_so(tmp_path):
    obj = write(tmp_path, "o.json", json.dumps({"data": [{"text": "a", "label": "x"}]}, indent=2))
    with pytest.raises(LitebertError) as err:
        read_examples(obj, ColumnSpec(text="text", label="label"))
    assert str(err.value) == (
        f"{obj}: the file is one JSON object over several lines, not JSON lines; write one object per line "
        "(or one JSON array of objects)"
    )
    broken = write(tmp_path, "b.json", '[\n  {"text": "a", "label": "x"},\n  {"text": "b" "label": "y"}\n]\n')
    with pytest.raises(LitebertError, match=re.escape(f"{broken}:3: not valid JSON (Expecting ',' delimiter")):
        read_examples(broken, ColumnSpec(text="text", label="label"))


def test_ner_and_multiple_choice_read_a_json_array_file_too(tmp_path):
    from litebert.finetune.choice import read_choice_file
    from litebert.finetune.token import read_token_file

    ner = write(tmp_path, "n.json", json.dumps([{"tokens": ["John", "ran"], "tags": ["B-PER", "O"]}], indent=1))
    got = read_token_file(ner)
    assert [(e.words, e.tags) for e in got.examples] == [(["John", "ran"], ["B-PER", "O"])]
    swag = {"sent1": "He", "sent2": "opens", "ending0": "a door", "ending1": "a sky", "label": 0}
    choice = write(tmp_path, "s.json", json.dumps([swag, dict(swag, label=1)], indent=1))
    assert [ex.label for ex in read_choice_file(choice).examples] == [0, 1]


@pytest.mark.parametrize("name", ["dev.csv.gz", "dev.jsonl.gz"])
def test_a_compressed_file_reads_as_its_text(tmp_path, name):
    """Before, a .csv.gz was 'not valid UTF-8'; the format is told past the compression suffix."""
    import gzip

    if name.startswith("dev.csv"):
        text, spec = 'text,label\n"a, b",pos\nc,neg\n', ColumnSpec(text="text", label="label")
    else:
        text, spec = (
            '{"text": "a, b", "label": "pos"}\n{"text": "c", "label": "neg"}\n',
            ColumnSpec(text="text", label="label"),
        )
    plain = write(tmp_path, name[:-3], text)
    packed = tmp_path / name
    packed.write_bytes(gzip.compress(text.encode()))
    got = read_examples(packed, spec)
    assert [(e.text, e.label, e.line) for e in got.examples] == [
        ("a, b", "pos", 2 - name.endswith("jsonl.gz")),
        ("c", "neg", 3 - name.endswith("jsonl.gz")),
    ]
    assert got.examples == read_examples(plain, spec).examples and got.format == read_examples(plain, spec).format
