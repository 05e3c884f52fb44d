"""Multiple choice (C3, SWAG, RACE, COPA layouts) and the CLUE classification tasks: readers on the real files,
padded options masked to -inf, fine-tuning end to end with a tiny Chinese model, transformers'
``AutoModelForMultipleChoice`` as the oracle, bad input.

The model is ``albert-debug`` (random weights) with a Chinese character tokenizer trained here on a slice of the
task text; runs are a few steps: these tests check the machinery, not accuracy.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from litebert.errors import LitebertError
from litebert.finetune import DataOptions, EvaluateConfig, FinetuneConfig, evaluate, finetune
from litebert.finetune.choice import ChoiceCollator, read_choice_file

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def zh_model(tiny, shared_data, tmp_path_factory):
    root = tmp_path_factory.mktemp("zh")
    docs = json.loads((shared_data / "c3/c3-m-train.json").read_text(encoding="utf-8"))[:200]
    lines = ["".join(d[0]) for d in docs]
    lines += [
        json.loads(r)["sentence1"]
        for r in (shared_data / "clue/ocnli/train.10k.json").read_text(encoding="utf-8").splitlines()[:1000]
    ]
    lines += [
        json.loads(r)["sentence"]
        for r in (shared_data / "clue/tnews/train.json").read_text(encoding="utf-8").splitlines()[:1000]
    ]
    corpus = root / "corpus.txt"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return tiny.model_dir(root / "model", [corpus], "chinese")


# ------------------------------------------------------------------------------------------------ readers
def test_c3_reader_labels_are_the_answer_index(shared_data):
    read = read_choice_file(shared_data / "c3/c3-m-dev.json")
    raw = json.loads((shared_data / "c3/c3-m-dev.json").read_text(encoding="utf-8"))
    questions = [q for d in raw for q in d[1]]
    assert len(read.examples) == len(questions) == 1991 and read.has_labels
    for ex, q in zip(read.examples, questions):
        assert ex.options == q["choice"] and ex.options[ex.label] == q["answer"]
    assert {len(ex.options) for ex in read.examples} == {2, 3, 4}
    assert read.examples[0].first.startswith("梅兰芳是中国著名的京剧演员")
    assert read.examples[0].seconds[2] == "梅兰芳是一个什么样的人? 他是一个很虚心的人"


def test_swag_race_copa_layouts(shared_data, tmp_path):
    swag = read_choice_file(shared_data / "swag/sample.json")
    rows = [json.loads(r) for r in (shared_data / "swag/sample.json").read_text().splitlines() if r.strip()]
    assert [ex.label for ex in swag.examples] == [r["label"] for r in rows] and len(swag.examples) == 10
    assert swag.examples[0].seconds[0] == f"{rows[0]['sent2']} {rows[0]['ending0']}"
    csv_file = tmp_path / "val.csv"  # the official SWAG CSV columns
    header = [
        "video-id",
        "fold-ind",
        "startphrase",
        "sent1",
        "sent2",
        "gold-source",
        "ending0",
        "ending1",
        "ending2",
        "ending3",
        "label",
    ]
    import csv

    with open(csv_file, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(header)
        for i, r in enumerate(rows):
            w.writerow(
                [
                    f"v{i}",
                    i,
                    f"{r['sent1']} {r['sent2']}",
                    *(r[k] for k in header[3:5]),
                    "gold",
                    *(r[f"ending{j}"] for j in range(4)),
                    r["label"],
                ]
            )
    from_csv = read_choice_file(csv_file)
    assert [(e.first, e.seconds, e.label) for e in from_csv.examples] == [
        (e.first, e.seconds, e.label) for e in swag.examples
    ]
    # gzip-compressed (before: "not valid UTF-8"): the same rows, the CSV told by the suffix before .gz
    import gzip

    packed = tmp_path / "swag.csv.gz"
    packed.write_bytes(gzip.compress(csv_file.read_bytes()))
    from_gz = read_choice_file(packed)
    assert from_gz.format == from_csv.format == "csv"
    assert [(e.first, e.seconds, e.label) for e in from_gz.examples] == [
        (e.first, e.seconds, e.label) for e in from_csv.examples
    ]
    race = tmp_path / "race.json"
    race.write_text(
        json.dumps(
            {
                "id": "m1.txt",
                "article": "Tom has a cat.",
                "questions": ["Tom has a _ .", "Who?"],
                "options": [["cat", "dog"], ["Tom", "Ann", "Bob"]],
                "answers": ["A", "C"],
            }
        )
    )
    read = read_choice_file(race)
    assert [ex.label for ex in read.examples] == [0, 2] and read.examples[0].seconds == [
        "Tom has a cat .",
        "Tom has a dog .",
    ]
    copa = tmp_path / "copa.jsonl"
    copa.write_text(
        json.dumps(
            {
                "premise": "The man fell.",
                "choice1": "He slipped.",
                "choice2": "He sang.",
                "question": "cause",
                "label": 0,
                "idx": 7,
            }
        )
        + "\n"
    )
    ex = read_choice_file(copa).examples[0]
    assert ex.seconds == ["What was the cause? He slipped.", "What was the cause? He sang."] and ex.id == "7"


def test_bad_choice_labels_name_the_file_and_line(tmp_path):
    swag = tmp_path / "swag.jsonl"
    row = {"sent1": "a", "sent2": "b", "ending0": "c", "ending1": "d", "label": 1}
    swag.write_text(json.dumps(row) + "\n" + json.dumps({**row, "label": 4}) + "\n")
    with pytest.raises(LitebertError, match=r"swag\.jsonl:2: label 4 is not one of the 2 options"):
        read_choice_file(swag)
    c3 = tmp_path / "c3.json"
    c3.write_text(json.dumps([[["p"], [{"question": "q", "choice": ["x", "y"], "answer": "z"}], "d-1"]]))
    with pytest.raises(LitebertError, match=r"c3\.json: document 0 \(id d-1\), question 0: the answer 'z' is not"):
        read_choice_file(c3)
    race = tmp_path / "race.jsonl"
    race.write_text(json.dumps({"article": "a", "questions": ["q"], "options": [["x", "y"]], "answers": ["D"]}) + "\n")
    with pytest.raises(LitebertError, match=r"race\.jsonl:1: question 0: the answer 'D' is not one of its options"):
        read_choice_file(race)
    other = tmp_path / "other.jsonl"
    other.write_text('{"text": "a", "label": 0}\n')
    with pytest.raises(LitebertError, match=r"other\.jsonl:1: not a multiple-choice row"):
        read_choice_file(other)


def test_padded_options_get_minus_inf_and_are_never_chosen():
    from litebert.config import AlbertConfig
    from litebert.finetune.choice import choice_logits
    from litebert.modeling import AlbertForMultipleChoice

    items = [
        {"input_ids": [[2, 5, 3], [2, 6, 7, 3]], "token_type_ids": [[0, 0, 0], [0, 0, 0, 1]], "labels": 1},
        {"input_ids": [[2, 8, 3], [2, 9, 3], [2, 5, 6, 3]], "token_type_ids": [[0] * 3, [0] * 3, [0] * 4], "labels": 2},
    ]
    batch = ChoiceCollator(0)(items)
    assert batch["input_ids"].shape == (2, 3, 4) and batch["choice_mask"].tolist() == [[1, 1, 0], [1, 1, 1]]
    assert batch["input_ids"][0, 2].tolist() == [2, 3, 0, 0] and batch["attention_mask"][0, 2].tolist() == [1, 1, 0, 0]
    torch.manual_seed(0)
    model = AlbertForMultipleChoice(AlbertConfig.from_preset("albert-debug", vocab_size=16)).eval()
    with torch.no_grad():
        model.classifier.bias.fill_(100.0)  # would make any option "win" by a lot; the mask still wins
        logits = choice_logits(model, batch)
        alone = model(
            input_ids=batch["input_ids"][:1, :2],
            attention_mask=batch["attention_mask"][:1, :2],
            token_type_ids=batch["token_type_ids"][:1, :2],
        ).logits
    assert torch.isinf(logits[0, 2]) and logits[0, 2] < 0 and torch.isfinite(logits[1]).all()
    torch.testing.assert_close(logits[0, :2], alone[0])  # the padded third option changes nothing
    assert logits.softmax(-1)[0, 2] == 0


# ------------------------------------------------------------------------------------------------ end to end
@pytest.fixture(scope="module")
def c3_run(zh_model, shared_data, tmp_path_factory):
    out = tmp_path_factory.mktemp("c3") / "run"
    cfg = FinetuneConfig(
        model=str(zh_model),
        train_file=str(shared_data / "c3/c3-m-train.json"),
        dev_file=str(shared_data / "c3/c3-m-dev.json"),
        output_dir=str(out),
        data=DataOptions(task="c3"),
        max_train_examples=64,
        max_eval_examples=48,
        batch_size=8,
        max_steps=6,
        learning_rate=2e-3,
        max_seq_length=48,
        eval_steps=3,
        progress_bar=False,
        precision="fp32",
    )  # compared with transformers in fp32; the options' logits are near-ties
    return finetune(cfg), out


def test_c3_outputs(c3_run):
    result, out = c3_run
    assert result.metric == "accuracy" and set(result.eval_results) == {"accuracy", "eval_loss"}
    rows = [ln.split("\t") for ln in (out / "predictions.tsv").read_text().splitlines()]
    assert rows[0] == ["index", "id", "prediction", "label"] and len(rows) == 49
    acc = sum(r[2] == r[3] for r in rows[1:]) / 48
    assert result.eval_results["accuracy"] == pytest.approx(acc)
    cfg = json.loads((out / "best/config.json").read_text())
    assert cfg["architectures"] == ["AlbertForMultipleChoice"] and cfg["litebert_task_type"] == "choice"


def test_transformers_multiple_choice_gives_the_same_argmax(c3_run, shared_data):
    """Each dev question alone, with only its own 2-4 options (no padding, no mask), in transformers'
    AutoModelForMultipleChoice: the argmax equals litebert's prediction (padded and masked in a batch)."""
    transformers = pytest.importorskip("transformers")
    from litebert.finetune.choice import ChoiceKind
    from litebert.tokenization import load_tokenizer

    _, out = c3_run
    hf = transformers.AutoModelForMultipleChoice.from_pretrained(out / "best").eval()
    rows = [ln.split("\t") for ln in (out / "predictions.tsv").read_text().splitlines()[1:]]
    kind = ChoiceKind(DataOptions(task="c3"))
    read = kind.read(shared_data / "c3/c3-m-dev.json", require_labels=True)
    by_index = {ex.index: ex for ex in read.examples}
    import dataclasses

    sub = dataclasses.replace(read, examples=[by_index[int(r[0])] for r in rows])
    feats = kind.featurize(sub, load_tokenizer(out / "best"), 48, "dev")
    n_options = set()
    for item, row in zip(feats.items, rows):
        batch = ChoiceCollator(0)([item])
        n_options.add(batch["input_ids"].shape[1])
        with torch.no_grad():
            logits = hf(
                input_ids=batch["input_ids"],
                attention_mask=batch["attention_mask"],
                token_type_ids=batch["token_type_ids"],
            ).logits
        assert int(logits.argmax(-1)) == int(row[2])
    assert len(n_options) >= 2  # questions with different numbers of options were compared


def test_evaluate_reproduces_c3(c3_run, shared_data, tmp_path):
    _, out = c3_run
    ev = evaluate(
        EvaluateConfig(
            model=str(out / "best"),
            data_file=str(shared_data / "c3/c3-m-dev.json"),
            max_seq_length=48,
            max_examples=30,
            output_dir=str(tmp_path),
            precision="fp32",
        )
    )
    assert ev.num_examples == 30 and set(ev.metrics) == {"accuracy", "eval_loss"}
    rows = [ln.split("\t") for ln in (tmp_path / "predictions.tsv").read_text().splitlines()[1:]]
    assert [int(r[2]) for r in rows] == ev.predictions and [int(r[3]) for r in rows] == ev.labels
    assert ev.metrics["accuracy"] == pytest.approx(sum(r[2] == r[3] for r in rows) / 30)
    # the same rows in finetune's dev predictions (a random subsample) got the same option
    ours = {r[0]: r[2] for r in (ln.split("\t") for ln in (out / "predictions.tsv").read_text().splitlines()[1:])}
    assert all(ours[r[0]] == r[2] for r in rows if r[0] in ours)


def test_label_minus_one_is_no_label(c3_run, tmp_path):
    """HF SWAG's test split (and COPA's, HellaSwag's) writes label -1 for "no label": predict refused it ("label -1
    is not one of the 4 options"). Now -1 reads as no label: predict predicts the rows unscored; a training or dev
    file with such a row is an error naming its line, as for a missing label."""
    from litebert.finetune import predict

    rows = [
        {
            "video-id": "v0",
            "sent1": "一个人坐着。",
            "sent2": "他",
            "ending0": "站起来。",
            "ending1": "睡着了。",
            "label": -1,
        },
        {
            "video-id": "v1",
            "sent1": "她在跑步。",
            "sent2": "她",
            "ending0": "停下了。",
            "ending1": "笑了。",
            "label": -1,
        },
    ]
    swag = tmp_path / "swag_test.jsonl"
    swag.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    read = read_choice_file(swag, require_labels=False)
    assert [(ex.id, ex.label, ex.line) for ex in read.examples] == [("v0", None, 1), ("v1", None, 2)]
    assert not read.has_labels
    with pytest.raises(LitebertError) as err:
        read_choice_file(swag)
    assert str(err.value) == (
        f"{swag}:1: example v0 has no label (missing, empty or -1); training and dev files need one"
    )
    mixed = tmp_path / "mixed.jsonl"  # a dev file with one unlabelled row: its line
    mixed.write_text(json.dumps({**rows[0], "label": 1}) + "\n" + json.dumps(rows[1]) + "\n")
    with pytest.raises(LitebertError, match=r"^.*mixed\.jsonl:2: example v1 has no label \(missing, empty or -1\)"):
        read_choice_file(mixed)
    csv_file = tmp_path / "test.csv"  # the official CSV with -1 (a string there)
    csv_file.write_text("video-id,sent1,sent2,ending0,ending1,label\nv0,a,b,c,d,-1\n")
    assert [ex.label for ex in read_choice_file(csv_file, require_labels=False).examples] == [None]
    copa = tmp_path / "copa_test.jsonl"
    copa.write_text('{"premise": "p", "choice1": "a", "choice2": "b", "question": "cause", "label": -1, "idx": 3}\n')
    assert [ex.label for ex in read_choice_file(copa, require_labels=False).examples] == [None]
    bad = tmp_path / "bad.jsonl"  # other negative labels stay errors
    bad.write_text(json.dumps({**rows[0], "label": -2}) + "\n")
    with pytest.raises(LitebertError, match=r"bad\.jsonl:1: label -2 is not one of the 2 options \(0\.\.1\)"):
        read_choice_file(bad, require_labels=False)

    # predict: every row predicted, as the same rows without a label field are; no metrics, no label column
    _, out = c3_run
    plain = tmp_path / "plain.jsonl"
    plain.write_text(
        "".join(json.dumps({k: v for k, v in r.items() if k != "label"}, ensure_ascii=False) + "\n" for r in rows),
        encoding="utf-8",
    )
    cfg = EvaluateConfig(model=str(out / "best"), data_file=str(plain), max_seq_length=48, precision="fp32")
    oracle = predict(cfg).predictions
    pr = predict(dataclasses.replace(cfg, data_file=str(swag), output_dir=str(tmp_path / "pr")))
    assert pr.predictions == oracle and len(oracle) == 2 and pr.labels is None and pr.metrics == {}
    assert (tmp_path / "pr/predictions.tsv").read_text().splitlines() == [
        "index\tid\tprediction",
        f"0\tv0\t{oracle[0]}",
        f"1\tv1\t{oracle[1]}",
    ]


# ------------------------------------------------------------------------------------------------ CLUE
def test_clue_readers(shared_data):
    from litebert.finetune.tasks import get_task

    data = DataOptions(task="ocnli")
    dev = data.read(shared_data / "clue/ocnli/dev.json", require_label=True)
    assert len(dev.examples) == 2950 and dev.skipped == 50  # rows labelled "-" dropped (SOURCE.md)
    assert {ex.label for ex in dev.examples} == set(get_task("ocnli").labels)
    labels = [json.loads(r)["label"] for r in (shared_data / "clue/tnews/labels.json").read_text().splitlines()]
    assert get_task("tnews").labels == tuple(labels)
    afqmc = DataOptions(task="afqmc").read(shared_data / "clue/afqmc/dev.json", require_label=True)
    assert len(afqmc.examples) == 4316 and afqmc.examples[0].text_pair == "里可以提花呗额度"
    xnli = DataOptions(task="xnli").read(shared_data / "xnli_zh/dev.tsv", require_label=True)
    assert len(xnli.examples) == 2490


def test_tnews_finetune_and_ocnli_model_scored_on_xnli(zh_model, shared_data, tmp_path):
    tnews = shared_data / "clue/tnews"
    result = finetune(
        FinetuneConfig(
            model=str(zh_model),
            train_file=str(tnews / "train.json"),
            dev_file=str(tnews / "dev.json"),
            output_dir=str(tmp_path / "tnews"),
            data=DataOptions(task="tnews"),
            max_train_examples=96,
            max_eval_examples=48,
            batch_size=16,
            max_steps=4,
            learning_rate=2e-3,
            max_seq_length=32,
            progress_bar=False,
        )
    )
    assert result.labels == list(json.loads((tmp_path / "tnews/best/config.json").read_text())["label2id"])
    assert len(result.labels) == 15 and set(result.eval_results) == {"accuracy", "eval_loss"}
    ocnli = shared_data / "clue/ocnli"
    finetune(
        FinetuneConfig(
            model=str(zh_model),
            train_file=str(ocnli / "train.10k.json"),
            dev_file=str(ocnli / "dev.json"),
            output_dir=str(tmp_path / "ocnli"),
            data=DataOptions(task="ocnli"),
            max_train_examples=64,
            max_eval_examples=32,
            batch_size=16,
            max_steps=2,
            learning_rate=2e-3,
            max_seq_length=32,
            progress_bar=False,
        )
    )
    # the OCNLI model on XNLI-zh dev: the same three label names, so the model's labels apply as they are
    ev = evaluate(
        EvaluateConfig(
            model=str(tmp_path / "ocnli/best"),
            data_file=str(shared_data / "xnli_zh/dev.tsv"),
            data=DataOptions(task="xnli"),
            max_seq_length=32,
            max_examples=60,
        )
    )
    assert ev.num_examples == 60 and set(ev.predictions) <= {"contradiction", "entailment", "neutral"}
    assert ev.metrics["accuracy"] == pytest.approx(sum(p == g for p, g in zip(ev.predictions, ev.labels)) / 60)
