"""Fine-tuning end to end on real GLUE/CLUE files with a tiny model: outputs, label mapping, transformers oracle,
evaluate/predict, CLI, bad input.

The model is ``albert-debug`` (H 64, 2 layers) with a WordPiece / Chinese tokenizer trained here on a slice of the
task text, random weights; runs are a few dozen steps on subsampled rows, so the whole file takes well under a
minute on 2 cores. These tests check the machinery, not accuracy (scripts/compare_pretraining.py does that).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch

from litebert.cli import main
from litebert.errors import LitebertError
from litebert.finetune import DataOptions, EvaluateConfig, FinetuneConfig, evaluate, finetune, predict

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def en_model(tiny, shared_data, tmp_path_factory):
    root = tmp_path_factory.mktemp("en")
    corpus = root / "corpus.txt"
    sst = (shared_data / "glue/SST-2/train.tsv").read_text(encoding="utf-8").splitlines()[1:2001]
    mrpc = (shared_data / "glue/MRPC/train.tsv").read_text(encoding="utf-8-sig").splitlines()[1:1001]
    lines = [row.split("\t")[0] for row in sst] + [s for row in mrpc for s in row.split("\t")[3:5]]
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return tiny.model_dir(root / "model", [corpus], "wordpiece")


@pytest.fixture(scope="module")
def zh_model(tiny, shared_data, tmp_path_factory):
    root = tmp_path_factory.mktemp("zh")
    corpus = root / "corpus.txt"
    rows = (shared_data / "chnsenticorp/train.tsv").read_text(encoding="utf-8").splitlines()[1:1501]
    corpus.write_text("\n".join(r.split("\t", 1)[1] for r in rows) + "\n", encoding="utf-8")
    return tiny.model_dir(root / "model", [corpus], "chinese")


def _config(model, train, dev, out, task=None, **kw):
    base = dict(
        model=str(model),
        train_file=str(train),
        dev_file=str(dev),
        output_dir=str(out),
        data=DataOptions(task=task) if task else kw.pop("data"),
        max_train_examples=192,
        max_eval_examples=96,
        batch_size=32,
        max_steps=12,
        learning_rate=1e-3,
        warmup_ratio=0.1,
        max_seq_length=64,
        eval_steps=6,
        progress_bar=False,
    )
    base.update(kw)
    return FinetuneConfig(**base)


@pytest.fixture(scope="module")
def sst2_run(en_model, shared_data, tmp_path_factory):
    out = tmp_path_factory.mktemp("sst2") / "run"
    glue = shared_data / "glue/SST-2"
    result = finetune(
        _config(en_model, glue / "train.tsv", glue / "dev.tsv", out, "sst2", test_file=str(glue / "test.tsv"))
    )
    return result, out


def test_sst2_outputs(sst2_run, shared_data):
    result, out = sst2_run
    assert result.steps == 12 and result.num_train == 192 and result.num_dev == 96
    assert result.metric == "accuracy" and result.labels == ["0", "1"]
    for name in (
        "eval_results.json",
        "predictions.tsv",
        "test_predictions.tsv",
        "metrics.jsonl",
        "finetune_config.json",
        "train.log",
        "best/config.json",
        "best/model.safetensors",
        "best/tokenizer.json",
    ):
        assert (out / name).exists(), name
    assert any((out / "tb").iterdir())
    res = json.loads((out / "eval_results.json").read_text())
    assert set(res) >= {"accuracy", "eval_loss", "num_examples", "best_step"} and res["num_examples"] == 96
    assert res["accuracy"] == pytest.approx(result.eval_results["accuracy"])
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in records if r["split"] == "eval"]
    assert [r["step"] for r in evals] == [6, 12]
    assert res["accuracy"] == pytest.approx(max(r["accuracy"] for r in evals))  # best/ is the best eval
    rows = (out / "predictions.tsv").read_text().splitlines()
    assert rows[0] == "index\tprediction\tlabel" and len(rows) == 97
    # dev was subsampled: `index` is the data row in dev.tsv, so its label column matches the file's
    dev_labels = [line.split("\t")[1] for line in (shared_data / "glue/SST-2/dev.tsv").read_text().splitlines()[1:]]
    indexed = [row.split("\t") for row in rows[1:]]
    assert sorted({int(i) for i, _, _ in indexed}) != list(range(96))  # a real subsample, not the first rows
    assert all(dev_labels[int(i)] == label for i, _, label in indexed)
    test_rows = (out / "test_predictions.tsv").read_text().splitlines()
    assert test_rows[0] == "index\tprediction" and len(test_rows) == 1822  # one per test row, no labels
    assert result.truncated["test"] > 0  # SST-2 test has sentences over 64 word pieces


def test_label_mapping_round_trips_through_config_json(sst2_run):
    from litebert.config import AlbertConfig

    _, out = sst2_run
    raw = json.loads((out / "best/config.json").read_text())
    assert raw["id2label"] == {"0": "0", "1": "1"} and raw["label2id"] == {"0": 0, "1": 1}
    assert raw["problem_type"] == "single_label_classification" and raw["finetuning_task"] == "sst2"
    cfg = AlbertConfig.from_json_file(out / "best/config.json")
    assert cfg.id2label == {0: "0", 1: "1"} and cfg.num_labels == 2


def test_transformers_loads_the_finetuned_model_and_agrees(sst2_run, shared_data):
    transformers = pytest.importorskip("transformers")
    from litebert.finetune.data import PadCollator, encode_examples
    from litebert.finetune.readers import read_examples
    from litebert.finetune.tasks import get_task
    from litebert.modeling import AlbertForSequenceClassification
    from litebert.tokenization import load_tokenizer

    _, out = sst2_run
    best = out / "best"
    hf = transformers.AutoModelForSequenceClassification.from_pretrained(best).eval()
    ours = AlbertForSequenceClassification.from_pretrained(best).eval()
    assert hf.config.id2label == {0: "0", 1: "1"}
    dev = shared_data / "glue/SST-2/dev.tsv"
    examples = read_examples(dev, get_task("sst2").layout_for(dev)).examples[:48]
    enc = encode_examples(examples, load_tokenizer(best), 64)
    batch = PadCollator(0)([{"input_ids": i, "token_type_ids": t} for i, t in zip(enc.input_ids, enc.token_type_ids)])
    with torch.no_grad():
        a = ours(**batch).logits
        b = hf(**batch).logits
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)
    assert torch.equal(a.argmax(-1), b.argmax(-1))
    # and the labels written by finetune() are those predictions
    preds = [line.split("\t")[1] for line in (out / "predictions.tsv").read_text().splitlines()[1:]]
    assert set(preds) <= {"0", "1"}


def test_evaluate_and_predict_reproduce_finetune(sst2_run, shared_data, tmp_path):
    _, out = sst2_run
    dev = shared_data / "glue/SST-2/dev.tsv"
    # the task is read back from config.json (finetuning_task): no columns needed
    ev = evaluate(
        EvaluateConfig(model=str(out / "best"), data_file=str(dev), output_dir=str(tmp_path / "ev"), max_seq_length=64)
    )
    assert ev.num_examples == 872 and (tmp_path / "ev/eval_results.json").exists()
    assert set(ev.metrics) == {"accuracy", "eval_loss"}
    pr = predict(
        EvaluateConfig(
            model=str(out / "best"),
            data_file=str(shared_data / "glue/SST-2/test.tsv"),
            output_dir=str(tmp_path / "pr"),
            max_seq_length=64,
        )
    )
    assert pr.labels is None and len(pr.predictions) == 1821
    written = [line.split("\t")[1] for line in (tmp_path / "pr/predictions.tsv").read_text().splitlines()[1:]]
    assert written == pr.predictions
    ours = [line.split("\t")[1] for line in (out / "test_predictions.tsv").read_text().splitlines()[1:]]
    assert ours == pr.predictions


def test_mrpc_sentence_pairs(en_model, shared_data, tmp_path):
    glue = shared_data / "glue/MRPC"
    result = finetune(
        _config(
            en_model,
            glue / "train.tsv",
            glue / "dev.tsv",
            tmp_path / "mrpc",
            "mrpc",
            optimizer="lamb",
            max_steps=6,
            eval_steps=3,
        )
    )
    assert set(result.eval_results) == {"accuracy", "f1", "eval_loss"}
    assert result.metric == "accuracy"


def test_chnsenticorp(zh_model, shared_data, tmp_path):
    data = shared_data / "chnsenticorp"
    result = finetune(
        _config(
            zh_model,
            data / "train.tsv",
            data / "dev.tsv",
            tmp_path / "chn",
            "chnsenticorp",
            test_file=str(data / "test.tsv"),
            max_steps=6,
            eval_steps=6,
        )
    )
    assert result.num_dev == 96 and result.truncated["train"] > 0  # reviews are longer than 64 characters
    assert result.test_results is not None and "accuracy" in result.test_results  # this test split has labels
    assert (tmp_path / "chn/test_results.json").exists()


def test_string_labels_csv_columns_by_index_early_stopping(en_model, tmp_path):
    rows = [("great fun", "pos"), ("dull and slow", "neg"), ("a joy", "pos"), ("boring", "neg")] * 8
    train = tmp_path / "train.csv"
    train.write_text("".join(f'"{t}",{lab}\n' for t, lab in rows), encoding="utf-8")  # no header
    data = DataOptions(text_column="0", label_column="1", header=False)
    result = finetune(
        _config(
            en_model,
            train,
            train,
            tmp_path / "run",
            data=data,
            max_train_examples=None,
            max_eval_examples=None,
            batch_size=8,
            max_steps=40,
            eval_steps=1,
            early_stopping_patience=2,
            learning_rate=1e-9,
            metrics=("f1", "accuracy"),
        )
    )
    assert result.stopped_early and result.steps < 40
    assert result.labels == ["neg", "pos"] and result.metric == "f1"
    cfg = json.loads((tmp_path / "run/best/config.json").read_text())
    assert cfg["id2label"] == {"0": "neg", "1": "pos"}
    preds = {line.split("\t")[1] for line in (tmp_path / "run/predictions.tsv").read_text().splitlines()[1:]}
    assert preds <= {"neg", "pos"}
    # the column options were saved in config.json: evaluate needs none
    assert cfg["litebert_data_options"] == {
        "text_column": 0,
        "label_column": 1,
        "header": False,
        "label_separator": ",",
    }
    ev = evaluate(EvaluateConfig(model=str(tmp_path / "run/best"), data_file=str(train), max_seq_length=64))
    assert ev.metrics["f1"] == pytest.approx(result.eval_results["f1"])


def test_regression_and_multilabel_train(en_model, tmp_path):
    reg = tmp_path / "reg.tsv"
    reg.write_text("text\tscore\n" + "".join(f"row {i}\t{i % 5 * 0.5}\n" for i in range(24)), encoding="utf-8")
    data = DataOptions(text_column="text", label_column="score")
    r = finetune(
        _config(en_model, reg, reg, tmp_path / "reg", data=data, problem_type="regression", max_steps=3, eval_steps=3)
    )
    assert set(r.eval_results) == {"pearson", "spearman", "eval_loss"}
    assert json.loads((tmp_path / "reg/best/config.json").read_text())["num_labels"] == 1
    multi = tmp_path / "multi.jsonl"
    multi.write_text(
        "".join(json.dumps({"text": f"t {i}", "tags": ["a", "b", "c"][: 1 + i % 3]}) + "\n" for i in range(24)),
        encoding="utf-8",
    )
    m = finetune(
        _config(
            en_model,
            multi,
            multi,
            tmp_path / "multi",
            problem_type="multi_label",
            max_steps=3,
            eval_steps=3,
            data=DataOptions(text_column="text", label_column="tags"),
        )
    )
    assert m.labels == ["a", "b", "c"] and set(m.eval_results) == {"accuracy", "f1", "eval_loss"}


def test_model_label_order_follows_run_glue():
    from litebert.finetune.data import model_label_order

    data = ("negative", "positive")
    assert model_label_order(data, ("positive", "negative")) == ("positive", "negative")  # the model's ids
    assert model_label_order(data, ("POSITIVE", "NEGATIVE")) == ("positive", "negative")  # case-insensitive
    assert model_label_order(data, ("LABEL_0", "LABEL_1")) == data  # transformers' default names: data order
    assert model_label_order(data, ("a", "b", "c")) == data  # another size: a new head anyway
    assert model_label_order(data, ("good", "bad")) is None  # other names, same size: a new head
    assert model_label_order(("a", "A"), ("A", "a")) == ("A", "a")  # exact names win over case
    assert model_label_order(("a", "b"), ("B", "b")) is None  # the model's names collide under case folding


def test_finetuning_a_fine_tuned_classifier_keeps_its_labels(en_model, shared_data, tmp_path, caplog):
    """A transformers classifier saved with id2label {0: positive, 1: negative} (not the data's alphabetical
    order), fine-tuned for one step at lr 1e-12 on data labelled by name: its predictions are the model's own
    before fine-tuning (transformers as the oracle). Before, the head rows were renamed in alphabetical order and
    every prediction flipped. Data labelled POSITIVE/NEGATIVE maps case-insensitively; other names re-initialise
    the classifier instead of reinterpreting it."""
    import logging
    import shutil

    transformers = pytest.importorskip("transformers")
    from litebert.finetune.data import PadCollator, encode_examples
    from litebert.finetune.readers import Example
    from litebert.tokenization import load_tokenizer

    rows = [r.split("\t") for r in (shared_data / "glue/SST-2/dev.tsv").read_text().splitlines()[1:81]]
    tok = load_tokenizer(en_model)
    enc = encode_examples([Example(i, t, None, None, i + 2) for i, (t, _) in enumerate(rows)], tok, 64)
    batch = PadCollator(tok.pad_token_id)(
        [{"input_ids": i, "token_type_ids": t} for i, t in zip(enc.input_ids, enc.token_type_ids)]
    )
    torch.manual_seed(3)
    hf = transformers.AlbertForSequenceClassification.from_pretrained(
        en_model, id2label={0: "positive", 1: "negative"}, label2id={"positive": 0, "negative": 1}
    ).eval()
    with torch.no_grad():  # a head whose predictions split the rows, none of them close to a tie
        hf.classifier.weight.mul_(100)
        margin = (lambda lg: lg[:, 1] - lg[:, 0])(hf(**batch).logits).sort().values
        k = 20 + int((margin[21:60] - margin[20:59]).argmax())
        hf.classifier.bias[1] -= float(margin[k] + margin[k + 1]) / 2
        oracle = [hf.config.id2label[int(i)] for i in hf(**batch).logits.argmax(-1)]
    assert 20 <= oracle.count("positive") <= 60
    model = tmp_path / "cls"
    hf.save_pretrained(model)
    for f in en_model.iterdir():
        if f.name not in ("config.json", "model.safetensors"):
            shutil.copy(f, model / f.name)

    def run(labels: dict[str, str], name: str) -> list[str]:
        data = tmp_path / f"{name}.tsv"
        data.write_text("sentence\tlabel\n" + "".join(f"{t}\t{labels[lab]}\n" for t, lab in rows), encoding="utf-8")
        with caplog.at_level(logging.INFO, logger="litebert.finetune"):
            finetune(
                _config(
                    model,
                    data,
                    data,
                    tmp_path / name,
                    data=DataOptions(text_column="sentence", label_column="label"),
                    max_train_examples=None,
                    max_eval_examples=None,
                    max_steps=1,
                    eval_steps=1,
                    learning_rate=1e-12,
                    precision="fp32",
                )
            )
        return [line.split("\t")[1] for line in (tmp_path / name / "predictions.tsv").read_text().splitlines()[1:]]

    assert run({"0": "negative", "1": "positive"}, "named") == oracle
    saved = json.loads((tmp_path / "named/best/config.json").read_text())
    assert saved["id2label"] == {"0": "positive", "1": "negative"}
    assert "newly initialised: (none)" in caplog.text
    assert run({"0": "NEGATIVE", "1": "POSITIVE"}, "upper") == [p.upper() for p in oracle]
    caplog.clear()
    run({"0": "bad", "1": "good"}, "other")
    assert "not the training labels ['bad', 'good']: its classifier is newly initialised" in caplog.text
    assert "newly initialised: classifier.weight, classifier.bias" in caplog.text
    from safetensors.torch import load_file

    new, old = load_file(tmp_path / "other/best/model.safetensors"), load_file(model / "model.safetensors")
    assert new["classifier.weight"].abs().max() < old["classifier.weight"].abs().max() / 10  # a fresh init
    torch.testing.assert_close(new["albert.pooler.weight"], old["albert.pooler.weight"])  # the rest is kept


def test_dropped_rows_are_logged_and_recorded(zh_model, shared_data, tmp_path, caplog, capsys):
    """OCNLI rows labelled '-' (no annotator majority) and XNLI rows of other languages are dropped by the task's
    layout: the count per file (here counted from the file's JSON) is logged by finetune and evaluate and saved in
    finetune_config.json, FinetuneResult and EvalResult; before, it was never reported."""
    import logging

    dev_rows = (shared_data / "clue/ocnli/dev.json").read_text(encoding="utf-8").splitlines()[:300]
    dev = tmp_path / "dev.json"
    dev.write_text("\n".join(dev_rows) + "\n", encoding="utf-8")
    n_dash = sum(json.loads(row)["label"] == "-" for row in dev_rows)
    assert n_dash >= 2
    train = tmp_path / "train.json"
    train.write_text(
        "\n".join((shared_data / "clue/ocnli/train.10k.json").read_text(encoding="utf-8").splitlines()[:64]) + "\n",
        encoding="utf-8",
    )
    with caplog.at_level(logging.INFO, logger="litebert.finetune"):
        result = finetune(_config(zh_model, train, dev, tmp_path / "run", "ocnli", max_steps=1, max_eval_examples=None))
    assert f"dev: {n_dash} of 300 rows of {dev} were dropped (rows labelled '-'); {300 - n_dash} read" in caplog.text
    assert result.dropped == {"train": 0, "dev": n_dash} and result.num_dev == 300 - n_dash
    saved = json.loads((tmp_path / "run/finetune_config.json").read_text())
    assert saved["dropped"] == {"train": 0, "dev": n_dash}
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="litebert.finetune"):
        ev = evaluate(
            EvaluateConfig(model=str(tmp_path / "run/best"), data_file=str(dev), output_dir=str(tmp_path / "ev"))
        )
    assert ev.dropped == n_dash and ev.num_examples == 300 - n_dash
    assert f"data: {n_dash} of 300 rows of {dev} were dropped (rows labelled '-')" in caplog.text
    assert json.loads((tmp_path / "ev/run_settings.json").read_text())["dropped"] == n_dash
    # XNLI 1.0's dev/test files hold 15 languages: the others are dropped, and said so
    xnli = tmp_path / "xnli.tsv"
    langs = [("zh", "entailment"), ("en", "neutral"), ("zh", "neutral"), ("fr", "neutral"), ("zh", "contradiction")]
    rows = [f"{lang}\t{label}\t好 {i}\t不 {i}\n" for i, (lang, label) in enumerate(langs)]
    xnli.write_text("language\tgold_label\tsentence1\tsentence2\n" + "".join(rows), encoding="utf-8")
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="litebert.finetune"):
        ev = evaluate(
            EvaluateConfig(model=str(tmp_path / "run/best"), data_file=str(xnli), data=DataOptions(task="xnli"))
        )
    assert ev.dropped == 2 and ev.num_examples == 3
    assert f"data: 2 of 5 rows of {xnli} were dropped (rows whose 'language' is not 'zh'); 3 read" in caplog.text
    # the kept rows are data rows 0, 2 and 4: predict's standard output numbers them so, as predictions.tsv does
    # (it printed 0, 1, 2, so the second line named the French row)
    assert ev.indices == [0, 2, 4]
    capsys.readouterr()
    assert main(["predict", "--model", str(tmp_path / "run/best"), "--data", str(xnli), "--task", "xnli"]) == 0
    printed = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert [int(i) for i, _ in printed] == [0, 2, 4] and [label for _, label in printed] == ev.predictions


def test_bad_input(en_model, tmp_path):
    train = tmp_path / "train.tsv"
    train.write_text("text\tlabel\ngood\tpos\nbad\tneg\n", encoding="utf-8")
    dev = tmp_path / "dev.tsv"
    dev.write_text("text\tlabel\nfine\tpos\nmeh\tneutral\n", encoding="utf-8")
    data = DataOptions(text_column="text", label_column="label")
    with pytest.raises(LitebertError, match=r"dev.tsv:3: label 'neutral' does not occur in the training labels"):
        finetune(
            _config(en_model, train, dev, tmp_path / "o1", data=data, max_train_examples=None, max_eval_examples=None)
        )
    empty = tmp_path / "empty.tsv"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(LitebertError, match="empty"):
        finetune(_config(en_model, empty, dev, tmp_path / "o2", data=data))
    with pytest.raises(LitebertError, match="label column index 7 is out of range"):
        finetune(_config(en_model, train, dev, tmp_path / "o3", data=DataOptions(text_column="0", label_column="7")))
    short = tmp_path / "short.tsv"
    short.write_text("text\tlabel\ngood\tpos\nno label here\n", encoding="utf-8")
    with pytest.raises(LitebertError, match=r"short.tsv:3: row has 1 field"):
        finetune(_config(en_model, short, dev, tmp_path / "o4", data=data))
    with pytest.raises(LitebertError, match="unknown task"):
        DataOptions(task="no_such_task")
    with pytest.raises(LitebertError, match=r"^--learning-rate 0\.0: must be > 0$"):
        _config(en_model, train, dev, tmp_path / "o5", data=data, learning_rate=0)


def test_a_too_long_max_seq_length_is_refused_before_the_weights_are_read(en_model, tmp_path, monkeypatch):
    """--max-seq-length above the model's max_position_embeddings (albert-debug: 128) is refused from config.json,
    before the tokenizer, the data and the weights are read (it used to come after loading the weights)."""
    import litebert.finetune.run as run_module

    def never(*args, **kwargs):
        raise AssertionError("read before the max_seq_length check")

    monkeypatch.setattr(run_module, "build_model", never)
    monkeypatch.setattr(run_module, "_load_tokenizer", never)
    monkeypatch.setattr(run_module, "_finetune_sources", never)
    assert json.loads((en_model / "config.json").read_text())["max_position_embeddings"] == 128
    missing = tmp_path / "not-read.tsv"
    cfg = _config(en_model, missing, missing, tmp_path / "o", task="sst2", max_seq_length=129)
    with pytest.raises(LitebertError) as err:
        finetune(cfg)
    assert (
        str(err.value) == f"max_seq_length 129 exceeds the model's max_position_embeddings 128 ({en_model}/config.json)"
    )
    assert not (tmp_path / "o").exists()


def test_evaluate_refuses_a_model_without_a_finetuned_head(en_model, tmp_path):
    # a pretraining final/ (AlbertForPreTraining) used to be evaluated with a random classifier: LABEL_0 everywhere
    dev = tmp_path / "dev.tsv"
    dev.write_text("sentence\tlabel\ngood\t1\nbad\t0\n", encoding="utf-8")
    for run in (evaluate, predict):
        with pytest.raises(LitebertError, match=r"holds an AlbertForPreTraining, not a fine-tuned model"):
            run(EvaluateConfig(model=str(en_model), data_file=str(dev), data=DataOptions(task="sst2")))


def test_truncation_is_counted(en_model):
    from litebert.finetune.data import encode_examples
    from litebert.finetune.readers import Example
    from litebert.tokenization import load_tokenizer

    tok = load_tokenizer(en_model)
    long = " ".join(["film"] * 100)
    exs = [Example(0, long, None, None, 1), Example(1, "short", None, None, 2), Example(2, long, long, None, 3)]
    enc = encode_examples(exs, tok, 16)
    assert enc.truncated == 2 and enc.longest == 203
    assert [len(i) for i in enc.input_ids] == [16, 3, 16]
    # longest first, ties cut from the second text (google-research/bert's _truncate_seq_pair; transformers' Rust
    # tokenizers keep 6 + 7 here, docs/finetune.md): 7 + 6 pieces + 3 specials
    assert enc.token_type_ids[2] == [0] * 9 + [1] * 7
    assert enc.input_ids[2][0] == tok.cls_token_id and enc.input_ids[2][-1] == tok.sep_token_id


def test_positions_longer_than_pretraining_are_reported(en_model, tmp_path, caplog):
    """A model pretrained on 8-token sequences, fine-tuned at 16: the rows that reach positions 8-15 are counted
    (by hand: 'film' x 100 and the pair are cut to 16 tokens, 'short' is 3), in the log and finetune_config.json;
    at 8 tokens, or from a random init, nothing is said."""
    import logging
    import shutil

    from litebert.config import AlbertConfig
    from litebert.finetune.data import encode_examples
    from litebert.finetune.readers import Example
    from litebert.finetune.run import untrained_positions_warning
    from litebert.tokenization import load_tokenizer

    tok = load_tokenizer(en_model)
    long = " ".join(["film"] * 100)
    enc = encode_examples(
        [Example(0, long, None, None, 1), Example(1, "short", None, None, 2), Example(2, long, long, None, 3)], tok, 16
    )
    config = AlbertConfig.from_preset("albert-debug", extra={"pretraining_max_seq_length": 8})
    msg = untrained_positions_warning(config, 16, {"train": enc}, "M")
    assert msg is not None and "positions 8-15 were never trained (2 of 3 train rows reach them)" in msg
    assert untrained_positions_warning(config, 8, {"train": enc}, "M") is None
    assert untrained_positions_warning(AlbertConfig.from_preset("albert-debug"), 16, {"train": enc}, "M") is None

    model = tmp_path / "model"
    shutil.copytree(en_model, model)
    cfg = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**cfg, "pretraining_max_seq_length": 8}))
    train = tmp_path / "t.tsv"
    train.write_text(
        "sentence\tlabel\n" + "".join(f"{long if i % 2 else 'short'}\t{i % 2}\n" for i in range(8)), encoding="utf-8"
    )
    with caplog.at_level(logging.WARNING, logger="litebert.finetune"):
        finetune(_config(model, train, train, tmp_path / "o", "sst2", max_steps=1, max_seq_length=16))
    assert "4 of 8 train rows, 4 of 8 dev rows reach them" in caplog.text
    saved = json.loads((tmp_path / "o" / "finetune_config.json").read_text())
    assert "positions 8-15 were never trained" in saved["untrained_positions_warning"]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="litebert.finetune"):
        finetune(_config(model, train, train, tmp_path / "r", "sst2", max_steps=1, max_seq_length=16, init="random"))
    assert "never trained" not in caplog.text


def test_cli(en_model, shared_data, tmp_path, capsys):
    glue = shared_data / "glue/SST-2"
    out = tmp_path / "cli"
    code = main(
        [
            "finetune",
            "--model",
            str(en_model),
            "--task",
            "sst2",
            "--train",
            str(glue / "train.tsv"),
            "--dev",
            str(glue / "dev.tsv"),
            "--output",
            str(out),
            "--max-train-examples",
            "64",
            "--max-eval-examples",
            "32",
            "--max-steps",
            "2",
            "--batch-size",
            "32",
            "--max-seq-length",
            "64",
            "--no-progress",
            "--no-checkpoints",
        ]
    )
    assert code == 0 and (out / "best/model.safetensors").exists() and not (out / "checkpoints").exists()
    printed = capsys.readouterr().out  # the loop's log lines, then the result as JSON
    assert json.loads(printed[printed.index("{\n") :])["metric"] == "accuracy"
    # run_settings.json holds the settings that `finetune --config` reads back: the same run, another output
    from litebert.cli import build_parser
    from litebert.cli.options import config_from_args

    settings = str(out / "run_settings.json")
    first = config_from_args(build_parser().parse_args(["finetune", "--config", settings]))
    again = config_from_args(
        build_parser().parse_args(["finetune", "--config", settings, "--output", str(tmp_path / "again")])
    )
    assert again == dataclasses.replace(first, output_dir=str(tmp_path / "again")) and first.max_steps == 2
    assert first.data.task == "sst2" and first.progress_bar is False and first.keep_checkpoints is False
    code = main(
        [
            "evaluate",
            "--model",
            str(out / "best"),
            "--data",
            str(glue / "dev.tsv"),
            "--max-examples",
            "20",
            "--max-seq-length",
            "64",
        ]
    )
    assert code == 0 and "accuracy" in json.loads(capsys.readouterr().out)
    code = main(
        [
            "predict",
            "--model",
            str(out / "best"),
            "--data",
            str(glue / "test.tsv"),
            "--max-examples",
            "5",
            "--max-seq-length",
            "64",
        ]
    )
    assert code == 0 and len(capsys.readouterr().out.splitlines()) == 5
    code = main(["evaluate", "--model", str(out / "best"), "--data", str(glue / "test.tsv"), "--task", "sst2"])
    assert code == 2 and "label column is required" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["finetune", "--model", "x", "--bogus"])


def test_torchrun_two_processes_equal_one_process(en_model, shared_data, tmp_path):
    """`torchrun --nproc_per_node 2 litebert finetune --batch-size 4` (DDP, gloo) trains the same weights as one
    process with batch 8 (dropout off, so the runs differ only in float summation order), the dev predictions are
    sharded over the ranks and gathered, and rank 0 alone writes OUTPUT/."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from safetensors.torch import load_file

    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    repo = Path(__file__).resolve().parents[1]
    glue = shared_data / "glue/SST-2"

    def args(out, batch):
        return [
            "-m",
            "litebert",
            "finetune",
            "--model",
            str(en_model),
            "--task",
            "sst2",
            "--train",
            str(glue / "train.tsv"),
            "--dev",
            str(glue / "dev.tsv"),
            "--output",
            str(out),
            "--max-train-examples",
            "128",
            "--max-eval-examples",
            "101",
            "--max-seq-length",
            "32",
            "--batch-size",
            str(batch),
            "--max-steps",
            "12",
            "--eval-steps",
            "6",
            "--learning-rate",
            "1e-3",
            "--hidden-dropout",
            "0",
            "--classifier-dropout",
            "0",
            "--device",
            "cpu",
            "--seed",
            "3",
            "--no-progress",
            "--precision",
            "fp32",
        ]  # fp32: only it keeps the two summation orders within 1e-4

    one = subprocess.run(
        [sys.executable, *args(tmp_path / "1x8", 8)], env=env, cwd=repo, capture_output=True, text=True, timeout=600
    )
    assert one.returncode == 0, one.stderr[-3000:]
    two = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node=2",
            *args(tmp_path / "2x4", 4),
        ],
        env=env,
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert two.returncode == 0, two.stderr[-3000:]
    w1 = load_file(str(tmp_path / "1x8" / "best" / "model.safetensors"))
    w2 = load_file(str(tmp_path / "2x4" / "best" / "model.safetensors"))
    assert sorted(w1) == sorted(w2)
    for k in w1:
        assert (w1[k] - w2[k]).abs().max() < 1e-4, k
    r1 = json.loads((tmp_path / "1x8" / "eval_results.json").read_text())
    r2 = json.loads((tmp_path / "2x4" / "eval_results.json").read_text())
    assert r1["num_examples"] == r2["num_examples"] == 101  # an odd count: rank 0 predicts 51 rows, rank 1 50
    assert r1["best_step"] == r2["best_step"] and r1["accuracy"] == r2["accuracy"]
    assert abs(r1["eval_loss"] - r2["eval_loss"]) < 1e-4
    p1 = (tmp_path / "1x8" / "predictions.tsv").read_text()
    assert p1 == (tmp_path / "2x4" / "predictions.tsv").read_text() and len(p1.splitlines()) == 102
    evals = [
        json.loads(line) for line in (tmp_path / "2x4" / "metrics.jsonl").read_text().splitlines() if '"eval"' in line
    ]
    assert [e["step"] for e in evals] == [6, 12]  # rank 0 alone logged

    # evaluate under torchrun: the rows are shared out over the ranks, rank 0 alone prints and writes, and the
    # result is the one-process one
    def eval_args(out):
        return [
            "-m",
            "litebert",
            "evaluate",
            "--model",
            str(tmp_path / "2x4" / "best"),
            "--data",
            str(glue / "dev.tsv"),
            "--max-examples",
            "101",
            "--max-seq-length",
            "32",
            "--device",
            "cpu",
            "--output",
            str(out),
        ]

    e1 = subprocess.run(
        [sys.executable, *eval_args(tmp_path / "ev1")], env=env, cwd=repo, capture_output=True, text=True, timeout=600
    )
    assert e1.returncode == 0, e1.stderr[-3000:]
    e2 = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node=2",
            *eval_args(tmp_path / "ev2"),
        ],
        env=env,
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert e2.returncode == 0, e2.stderr[-3000:]
    assert e2.stdout.count('"accuracy"') == 1  # one summary, from rank 0
    v1 = json.loads((tmp_path / "ev1" / "eval_results.json").read_text())
    v2 = json.loads((tmp_path / "ev2" / "eval_results.json").read_text())
    assert v1["num_examples"] == v2["num_examples"] == 101 and v1["accuracy"] == v2["accuracy"]
    assert abs(v1["eval_loss"] - v2["eval_loss"]) < 1e-5
    assert (tmp_path / "ev1" / "predictions.tsv").read_text() == (tmp_path / "ev2" / "predictions.tsv").read_text()


# ------------------------------------------------------------------------ output directories, resume, lengths
def _files(directory):
    """Every file under ``directory`` with its bytes (to show that a refused command wrote nothing)."""
    return {p.relative_to(directory): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def _sst2_argv(model, out, *extra, shared_data):
    glue = shared_data / "glue/SST-2"
    return [
        "finetune",
        "--model",
        str(model),
        "--task",
        "sst2",
        "--train",
        str(glue / "train.tsv"),
        "--dev",
        str(glue / "dev.tsv"),
        "--output",
        str(out),
        "--max-train-examples",
        "96",
        "--max-eval-examples",
        "48",
        "--batch-size",
        "16",
        "--max-seq-length",
        "32",
        "--learning-rate",
        "1e-3",
        "--precision",
        "fp32",
        "--device",
        "cpu",
        "--no-progress",
        *map(str, extra),
    ]


def test_finetune_and_pretrain_write_only_into_a_new_or_empty_directory_or_their_own_run(
    en_model, shared_data, tmp_path, capsys
):
    """Defect: `finetune --output pt/final` wrote best/, checkpoints/ ... into the source model, `pretrain` replaced
    a model directory's config.json, a rerun of `--no-checkpoints` replaced best/. Now each is one error line and
    nothing is written."""
    import shutil

    def run(out, *extra):
        return main(_sst2_argv(en_model, out, "--max-steps", 2, *extra, shared_data=shared_data))

    def error():
        err = capsys.readouterr().err.strip().splitlines()
        return err[-1] if err else ""

    model_files = _files(en_model)
    assert run(en_model) == 2
    assert (
        error()
        == f"error: --output {en_model} is the --model directory, which the run reads: choose a new --output (nothing was written)"
    )
    copy = tmp_path / "copy"  # any directory that holds a model
    shutil.copytree(en_model, copy)
    assert run(copy) == 2
    assert "holds a model (config.json, model.safetensors): a run never writes into a model directory" in error()
    pretrain = ["pretrain", "--data", str(tmp_path / "data"), "--model-config", "albert-debug", "--output", str(copy)]
    assert main(pretrain) == 2 and "holds a model (config.json, model.safetensors)" in error()
    assert _files(en_model) == model_files and _files(copy) == model_files

    # a finished run without checkpoints is written over neither by a rerun nor by --resume
    out = tmp_path / "ft_nc"
    assert run(out, "--no-checkpoints") == 0
    capsys.readouterr()
    before = _files(out)
    assert run(out, "--no-checkpoints") == 2
    assert error() == (
        f"error: --output {out} holds a finished `litebert finetune` run (its model is in {out / 'best'}): choose a "
        f"new --output, or remove {out} to run it again (nothing was written)"
    )
    assert run(out, "--resume", "auto") == 2 and "without checkpoints, nothing to resume" in error()
    assert main([*pretrain[:-1], str(out)]) == 2 and "holds a `litebert finetune` run (run_settings.json)" in error()
    assert _files(out) == before

    other = tmp_path / "other"  # files of one's own
    other.mkdir()
    (other / "notes.txt").write_text("keep me")
    assert run(other) == 2 and f"--output {other} is not empty (holds notes.txt)" in error()
    assert run(other, "--resume", "auto") == 2 and "holds no `litebert finetune` run to resume" in error()
    assert _files(other) == {Path("notes.txt"): b"keep me"}
    empty = tmp_path / "empty"
    empty.mkdir()
    assert run(empty) == 0 and (empty / "best" / "model.safetensors").is_file()


def test_a_run_directory_as_model_names_the_model_directory_inside_it(en_model, shared_data, tmp_path, capsys):
    """Defect: `--model RUN` (a pretrain or finetune run directory rather than its final/ or best/) failed on a
    missing tokenizer or config.json. Now finetune, evaluate and predict say what RUN is and what to pass, in one
    line, before anything is written."""
    import shutil

    pre, ft = tmp_path / "pre", tmp_path / "ft"
    for run, command, model in ((pre, "pretrain", "final"), (ft, "finetune", "best")):
        (run / "checkpoints").mkdir(parents=True)
        (run / "run_settings.json").write_text(json.dumps({"command": command, f"{command}_config": {}}))
        shutil.copytree(en_model, run / model)
    shutil.copy(en_model / "config.json", pre / "config.json")  # pretrain writes the run's config.json too
    dev = str(shared_data / "glue/SST-2/dev.tsv")
    out = tmp_path / "out"
    runs = [
        (_sst2_argv(pre, out, shared_data=shared_data), pre, "pretrain", pre / "final"),
        (["evaluate", "--model", str(ft), "--data", dev, "--output", str(out)], ft, "finetune", ft / "best"),
        (["predict", "--model", str(ft), "--data", dev, "--output", str(out)], ft, "finetune", ft / "best"),
        (["evaluate", "--model", str(pre), "--data", dev, "--task", "sst2"], pre, "pretrain", pre / "final"),
    ]
    for argv, run, command, model in runs:
        assert main(argv) == 2, argv
        assert capsys.readouterr().err.strip().splitlines()[-1] == (
            f"error: {run} is a `litebert {command}` run directory, not a model directory: pass {model}"
        )
        assert not out.exists()


def test_max_seq_length_too_small_for_the_tasks_texts_is_refused_before_training(
    en_model, sst2_run, shared_data, tmp_path, capsys
):
    """Defect: `finetune --task mrpc --max-seq-length 4` was accepted, though a sentence pair needs 5 positions
    ([CLS] a [SEP] b [SEP] with a token of each sentence); single sentences need 3 (which was refused). Now the task
    decides, before any file is read or written; evaluate/predict too."""
    mrpc = shared_data / "glue/MRPC"
    out = tmp_path / "out"
    argv = ["finetune", "--model", str(en_model), "--task", "mrpc", "--train", str(mrpc / "train.tsv"), "--dev",
            str(mrpc / "dev.tsv"), "--output", str(out), "--max-steps", "1", "--no-progress"]  # fmt: skip
    assert main([*argv, "--max-seq-length", "4"]) == 2
    assert capsys.readouterr().err == (
        "error: --max-seq-length 4: --task mrpc needs at least 5 positions ([CLS] a [SEP] b [SEP], one token of each "
        "text)\n"
    )
    assert not out.exists()
    own = ["--task-type", "choice", "--train", str(tmp_path / "t.jsonl"), "--dev", str(tmp_path / "d.jsonl")]
    assert main(["finetune", "--model", str(en_model), *own, "--output", str(out), "--max-seq-length", "4"]) == 2
    assert capsys.readouterr().err == (
        "error: --max-seq-length 4: a choice task needs at least 5 positions ([CLS] context [SEP] option [SEP], one "
        "token of each text)\n"
    )
    assert not out.exists()
    _, run = sst2_run  # evaluate a classifier on pairs (its saved layout replaced by --text-pair-column)
    ev = ["evaluate", "--model", str(run / "best"), "--data", str(mrpc / "dev.tsv"), "--text-column", "#1 String",
          "--text-pair-column", "#2 String", "--label-column", "Quality", "--max-seq-length", "4"]  # fmt: skip
    assert main(ev) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "error: --max-seq-length 4: a classification task needs at least 5 positions ([CLS] a [SEP] b [SEP], one "
        "token of each text)"
    )
    # single sentences: 3 is enough
    assert main(_sst2_argv(en_model, out, "--max-steps", 1, "--max-seq-length", 3, shared_data=shared_data)) == 0
    assert json.loads((out / "best" / "config.json").read_text())["litebert_max_seq_length"] == 3


def test_evaluate_and_predict_never_write_over_a_runs_files(sst2_run, shared_data, tmp_path, capsys):
    """Defect: `predict --output RUN` replaced the run's dev predictions.tsv and run_settings.json ("command":
    "predict"), after which `finetune --config RUN/run_settings.json` no longer repeated the run."""
    from litebert.cli import build_parser
    from litebert.cli.options import config_from_args

    _, out = sst2_run
    glue = shared_data / "glue/SST-2"
    before = _files(out)
    for command, data in (("predict", "test.tsv"), ("evaluate", "dev.tsv")):
        argv = [command, "--model", str(out / "best"), "--data", str(glue / data), "--max-examples", "8"]
        assert main([*argv, "--output", str(out)]) == 2
        assert capsys.readouterr().err == (
            f"error: --output {out} already holds predictions.tsv (of a `litebert finetune` run), which {command} "
            "would overwrite: choose another --output (nothing was written)\n"
        )
    assert _files(out) == before
    again = config_from_args(build_parser().parse_args(["finetune", "--config", str(out / "run_settings.json")]))
    assert again.data.task == "sst2" and again.max_steps == 12
    # a new directory is fine, once: the second run would overwrite the first one's files
    argv = ["evaluate", "--model", str(out / "best"), "--data", str(glue / "dev.tsv"), "--max-examples", "8"]
    assert main([*argv, "--output", str(tmp_path / "ev")]) == 0
    first = _files(tmp_path / "ev")
    assert set(first) == {Path("predictions.tsv"), Path("eval_results.json"), Path("run_settings.json")}
    capsys.readouterr()
    assert main([*argv, "--output", str(tmp_path / "ev")]) == 2
    assert "already holds predictions.tsv (of a `litebert evaluate` run)" in capsys.readouterr().err
    assert _files(tmp_path / "ev") == first
    # nor into a model directory (before: best/ gained run_settings.json and `info` called it an evaluate run)
    best = _files(out / "best")
    for command in ("evaluate", "predict"):
        argv = [command, "--model", str(out / "best"), "--data", str(glue / "dev.tsv"), "--max-examples", "8"]
        assert main([*argv, "--output", str(out / "best")]) == 2
        assert capsys.readouterr().err.startswith(
            f"error: --output {out / 'best'} holds a model (config.json, model.safetensors): a run never writes into "
            "a model directory"
        )
    assert _files(out / "best") == best


def test_a_tokenizer_of_another_vocabulary_is_refused_by_finetune_evaluate_and_predict(
    en_model, sst2_run, tiny, shared_data, tmp_path, capsys
):
    """Defect: `finetune --tokenizer DIR` with a tokenizer of fewer ids than the model's vocab_size was accepted and
    best/ paired the model with it; `predict`/`evaluate --tokenizer DIR` with more ids crashed with `IndexError:
    index out of range in self` deep in the embedding. Now all three compare the vocabulary with the model
    directory's own tokenizer files (their fingerprints) and refuse another one in one line naming both, before
    anything is written; the same vocabulary from another directory is fine, and a model directory without
    tokenizer files keeps the size check."""
    import shutil

    from litebert.tokenization import load_tokenizer

    _, run = sst2_run
    best = run / "best"
    glue = shared_data / "glue/SST-2"
    own = load_tokenizer(en_model)
    smaller, larger = (
        tiny.tokenizer("wordpiece", 800),
        tiny.tokenizer("sentencepiece"),
    )  # (3000 ids; the cache key is the call)
    assert load_tokenizer(smaller).vocab_size < own.vocab_size < load_tokenizer(larger).vocab_size

    def refused(tokenizer, model):
        return (
            f"error: --tokenizer {tokenizer} is not the tokenizer of the model {model}: "
            f"{load_tokenizer(tokenizer).vocab_size} tokens (vocabulary sha256 "
            f"{load_tokenizer(tokenizer).vocab_fingerprint()[:12]}…) vs the model directory's own {own.vocab_size} "
            f"tokens (sha256 {own.vocab_fingerprint()[:12]}…); drop --tokenizer to use the model's own tokenizer\n"
        )

    out = tmp_path / "ft"
    argv = _sst2_argv(en_model, out, "--max-steps", 1, shared_data=shared_data)
    for tok in (smaller, larger):
        assert main([*argv, "--tokenizer", str(tok)]) == 2
        assert capsys.readouterr().err.splitlines(keepends=True)[-1] == refused(tok, en_model)
    assert not out.exists()
    for command in ("predict", "evaluate"):
        for tok in (smaller, larger):
            ev = [command, "--model", str(best), "--data", str(glue / "dev.tsv"), "--max-examples", "4"]
            assert main([*ev, "--tokenizer", str(tok), "--output", str(tmp_path / command)]) == 2
            err = capsys.readouterr().err
            assert err == refused(tok, best) and "Traceback" not in err
            assert not (tmp_path / command).exists()

    # the model's own vocabulary from another directory: the same results
    copy = tmp_path / "tok_copy"
    own.save(copy)
    cfg = EvaluateConfig(model=str(best), data_file=str(glue / "dev.tsv"), max_examples=8, precision="fp32")
    plain = evaluate(cfg)
    assert evaluate(dataclasses.replace(cfg, tokenizer=str(copy))).metrics == plain.metrics
    # a model directory without tokenizer files: only the size can be checked
    bare = tmp_path / "bare"
    bare.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(best / name, bare / name)
    with pytest.raises(LitebertError) as exc:
        evaluate(dataclasses.replace(cfg, model=str(bare), tokenizer=str(larger)))
    assert str(exc.value) == (
        f"the tokenizer {larger} has {load_tokenizer(larger).vocab_size} tokens but the model's vocab_size is "
        f"{own.vocab_size} ({bare / 'config.json'}): tokenizer and model do not belong together"
    )
    assert evaluate(dataclasses.replace(cfg, model=str(bare), tokenizer=str(copy))).metrics == plain.metrics


def _records(run_dir):
    """metrics.jsonl without the timing fields (the only ones two identical runs differ in)."""
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k not in ("tokens_per_second", "steps_per_second")} for r in rows]


def test_interrupted_finetune_resumes_to_the_uninterrupted_result(en_model, shared_data, tmp_path, capsys):
    """Defect: finetune checkpointed only at the end, so `--resume auto` after a kill silently started from step 1.
    Now a checkpoint is written at every evaluation (--save-steps); a run SIGKILLed while writing the step-8
    checkpoint resumes from step 4 to the same weights, dev results and metrics.jsonl as an uninterrupted run."""
    import os
    import signal
    import subprocess
    import sys

    # log windows that end at the checkpoints: the loop does not checkpoint a half-filled window
    common = ["--max-steps", 12, "--eval-steps", 4, "--logging-steps", 4]
    assert main(_sst2_argv(en_model, tmp_path / "ref", *common, shared_data=shared_data)) == 0
    ref = tmp_path / "ref"
    assert [p.name for p in (ref / "checkpoints").iterdir()] == ["step-12"]  # one kept (the newest)

    out = tmp_path / "killed"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "LITEBERT_TEST_KILL_DURING_SAVE": "8"}
    killed = subprocess.run(
        [sys.executable, "-m", "litebert", *_sst2_argv(en_model, out, *common, shared_data=shared_data)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    assert sorted(p.name for p in (out / "checkpoints").iterdir() if not p.name.startswith(".")) == ["step-4"]
    capsys.readouterr()
    assert main(_sst2_argv(en_model, out, *common, shared_data=shared_data)) == 2  # a fresh run is refused
    assert "already holds checkpoints (newest step-4); pass --resume auto" in capsys.readouterr().err
    assert main(_sst2_argv(en_model, out, *common, "--resume", "auto", shared_data=shared_data)) == 0
    assert f"resumed from {out / 'checkpoints' / 'step-4'} at step 4" in capsys.readouterr().out

    from safetensors.torch import load_file

    want, got = load_file(str(ref / "best/model.safetensors")), load_file(str(out / "best/model.safetensors"))
    assert sorted(want) == sorted(got) and all(torch.equal(want[k], got[k]) for k in want)
    last = [torch.load(d / "checkpoints/step-12/model.pt", weights_only=True) for d in (ref, out)]
    assert all(torch.equal(last[0][k], last[1][k]) for k in last[0])  # the weights at the end, bit for bit
    assert json.loads((out / "eval_results.json").read_text()) == json.loads((ref / "eval_results.json").read_text())
    assert (out / "predictions.tsv").read_text() == (ref / "predictions.tsv").read_text()
    assert _records(out) == _records(ref)  # no duplicate rows from the killed run
    assert [(r["split"], r["step"]) for r in _records(out) if r["split"] == "eval"] == [("eval", s) for s in (4, 8, 12)]


def test_resume_auto_without_a_checkpoint_starts_over_and_says_so(en_model, shared_data, tmp_path, caplog):
    """A run interrupted before its first checkpoint: `--resume auto` logs that it starts from step 0 and ends where
    an uninterrupted run does (the interrupted run's metrics.jsonl rows are not kept)."""
    import logging
    import shutil

    glue = shared_data / "glue/SST-2"

    def cfg(out, **kw):
        return _config(
            en_model,
            glue / "train.tsv",
            glue / "dev.tsv",
            out,
            "sst2",
            max_steps=4,
            eval_steps=4,
            precision="fp32",
            **kw,
        )

    ref = finetune(cfg(tmp_path / "ref"))
    out = tmp_path / "run"
    out.mkdir()
    for name in ("run_settings.json", "finetune_config.json", "metrics.jsonl", "train.log"):  # what it had written
        shutil.copy(tmp_path / "ref" / name, out / name)
    with caplog.at_level(logging.INFO, logger="litebert.finetune"):
        again = finetune(cfg(out, resume="auto"))
    assert f"--resume auto: no checkpoint in {out}, starting from step 0" in caplog.text
    assert again.eval_results == ref.eval_results and again.steps == 4
    assert _records(out) == _records(tmp_path / "ref")


def test_evaluate_uses_the_length_the_model_was_fine_tuned_with(en_model, shared_data, tmp_path, caplog):
    """Defect: evaluate/predict cut rows at 128 tokens whatever the model was fine-tuned with (finetune's dev
    evaluation: 7 rows truncated; evaluate: 0 and another loss). Now they default to the fine-tuned length
    (``litebert_max_seq_length`` in config.json), for every kind; an explicit --max-seq-length wins, with a warning."""
    import logging

    glue = shared_data / "glue/SST-2"
    dev = tmp_path / "dev.tsv"  # the whole file is dev (no subsample), so evaluate sees what finetune's evaluation saw
    dev.write_text("".join((glue / "dev.tsv").read_text(encoding="utf-8").splitlines(keepends=True)[:61]))
    run = tmp_path / "sst2"
    finetune(
        _config(
            en_model, glue / "train.tsv", dev, run, "sst2", max_eval_examples=None, max_seq_length=16, precision="fp32"
        )
    )
    saved = json.loads((run / "eval_results.json").read_text())
    assert saved["num_examples"] == 60 and saved["truncated"] > 0
    assert json.loads((run / "best/config.json").read_text())["litebert_max_seq_length"] == 16
    with caplog.at_level(logging.WARNING, logger="litebert.finetune"):
        ev = evaluate(EvaluateConfig(model=str(run / "best"), data_file=str(dev), precision="fp32"))
    assert "fine-tuned with" not in caplog.text
    assert ev.truncated == saved["truncated"] and ev.num_examples == 60
    assert ev.metrics["eval_loss"] == pytest.approx(saved["eval_loss"], rel=1e-5)
    assert ev.metrics["accuracy"] == saved["accuracy"]
    with caplog.at_level(logging.WARNING, logger="litebert.finetune"):
        longer = evaluate(
            EvaluateConfig(model=str(run / "best"), data_file=str(dev), max_seq_length=64, precision="fp32")
        )
    assert f"{run / 'best'} was fine-tuned with --max-seq-length 16; this run cuts rows at 64 tokens" in caplog.text
    assert longer.truncated < saved["truncated"]
    pr = predict(EvaluateConfig(model=str(run / "best"), data_file=str(dev), precision="fp32"))
    assert pr.truncated == saved["truncated"]

    # NER: sentences longer than the fine-tuned length are split into windows, so the loss depends on it too
    conll = shared_data / "conll2003"
    ner_dev = tmp_path / "ner_dev.txt"
    ner_dev.write_text("\n\n".join(conll.joinpath("dev.txt").read_text().split("\n\n")[1:21]) + "\n")
    ner = tmp_path / "ner"
    finetune(
        _config(
            en_model,
            conll / "train.txt",
            ner_dev,
            ner,
            "conll2003",
            max_train_examples=64,
            max_eval_examples=None,
            max_steps=2,
            eval_steps=2,
            max_seq_length=12,
            precision="fp32",
        )
    )
    saved = json.loads((ner / "eval_results.json").read_text())
    ev = evaluate(EvaluateConfig(model=str(ner / "best"), data_file=str(ner_dev), precision="fp32"))
    assert ev.metrics["eval_loss"] == pytest.approx(saved["eval_loss"], rel=1e-5)
    assert ev.metrics["accuracy"] == saved["accuracy"] and ev.num_examples == saved["num_examples"] >= 15
    longer = evaluate(
        EvaluateConfig(model=str(ner / "best"), data_file=str(ner_dev), max_seq_length=64, precision="fp32")
    )
    assert longer.metrics["eval_loss"] != pytest.approx(saved["eval_loss"], rel=1e-5)


def test_resume_refuses_changed_settings(en_model, shared_data, tmp_path, capsys):
    """Defect: `finetune --resume auto` with another learning rate and batch size resumed and recorded the new ones,
    and a finished run resumed with a smaller --max-steps rewrote its results. Now both are refused, naming each
    change old → new, and nothing is written; a change of what does not alter the training (logging) is fine.
    Defect: `--resume auto` on a finished run (checkpoints kept) was accepted and rewrote eval_results.json and the
    predictions; with another --test it replaced test_predictions.tsv by that file's. Now a finished run is refused
    before anything is written, and --test is compared like the other data files."""
    glue = shared_data / "glue/SST-2"
    rows = (glue / "test.tsv").read_text(encoding="utf-8").splitlines(keepends=True)
    test_a, test_b = tmp_path / "test_a.tsv", tmp_path / "test_b.tsv"
    test_a.write_text("".join(rows[:21]), encoding="utf-8")
    test_b.write_text("".join(rows[:1] + rows[21:51]), encoding="utf-8")
    out = tmp_path / "run"
    common = ["--max-steps", 8, "--eval-steps", 4, "--test", test_a]
    assert main(_sst2_argv(en_model, out, *common, shared_data=shared_data)) == 0
    assert len((out / "test_predictions.tsv").read_text().splitlines()) == 21
    capsys.readouterr()
    before = _files(out)

    def last_error():
        return capsys.readouterr().err.strip().splitlines()[-1]  # one error line, after the data warnings

    finished = (
        f"error: --output {out} holds a finished `litebert finetune` run (eval_results.json): a finished run is not "
        "resumed, so its results stay as they are; choose a new or empty --output (nothing was written)"
    )
    for test in (test_a, test_b):
        assert main(_sst2_argv(en_model, out, *common[:-1], test, "--resume", "auto", shared_data=shared_data)) == 2
        assert last_error() == finished
    # rerun without --resume: told the run is finished and where its model is, not "pass --resume auto" (which the
    # line above refuses); checked before the checkpoints it kept
    assert main(_sst2_argv(en_model, out, *common, shared_data=shared_data)) == 2
    assert last_error() == (
        f"error: --output {out} holds a finished `litebert finetune` run (its model is in {out / 'best'}): choose a "
        f"new --output, or remove {out} to run it again (nothing was written)"
    )
    # the report's command: the run's own settings, another --test
    again = ["finetune", "--config", str(out / "run_settings.json"), "--output", str(out), "--resume", "auto"]
    assert main([*again, "--test", str(test_b), "--no-progress"]) == 2 and last_error() == finished
    assert _files(out) == before

    # the same run killed after its last checkpoint, before its results: resumable, with the run's settings only
    for name in ("eval_results.json", "predictions.tsv", "test_predictions.tsv"):
        (out / name).unlink()
    files = ("finetune_config.json", "run_settings.json")
    unfinished = {name: (out / name).read_bytes() for name in files}
    changed = [*common, "--learning-rate", "5e-2", "--batch-size", "4", "--resume", "auto"]
    assert main(_sst2_argv(en_model, out, *changed, shared_data=shared_data)) == 2
    err = last_error()
    assert err.startswith("error: --resume: ") and "was trained with other settings" in err and "new --output" in err
    assert "--learning-rate 0.001 → 0.05" in err and "--batch-size 16 → 4" in err
    other_test = [*common[:-1], test_b, "--resume", "auto"]
    assert main(_sst2_argv(en_model, out, *other_test, shared_data=shared_data)) == 2
    assert f"--test {str(test_a)!r} → {str(test_b)!r}" in last_error()
    shorter = ["--max-steps", 4, "--eval-steps", 4, "--test", test_a, "--resume", "auto"]
    assert main(_sst2_argv(en_model, out, *shorter, shared_data=shared_data)) == 2
    assert "--max-steps 4 is below the checkpoint's step 8" in capsys.readouterr().err
    assert {name: (out / name).read_bytes() for name in files} == unfinished
    assert not list(out.glob("run_settings.resume-*")) and not (out / "eval_results.json").exists()
    logging_only = [*common, "--logging-steps", 2, "--resume", "auto"]
    assert main(_sst2_argv(en_model, out, *logging_only, shared_data=shared_data)) == 0
    for name in ("eval_results.json", "predictions.tsv", "test_predictions.tsv"):
        assert (out / name).read_bytes() == before[Path(name)]


def test_a_preset_reads_a_file_of_another_layout_by_the_columns_the_user_gave(tmp_path):
    """--task sst2 on a TSV headed ``text  label``: refused without columns (naming the expected header), read with
    --text-column text (the preset's label column and label set still apply)."""
    f = tmp_path / "mine.tsv"
    f.write_text("text\tlabel\na fine film\t1\na dull one\t0\n", encoding="utf-8")
    with pytest.raises(LitebertError, match=r"does not look like a sst2 file: expected a header with sentence;"):
        DataOptions(task="sst2").read(f, require_label=True)
    read = DataOptions(task="sst2", text_column="text").read(f, require_label=True)
    assert [(ex.text, ex.label) for ex in read.examples] == [("a fine film", "1"), ("a dull one", "0")]


def test_resume_from_a_pretrain_checkpoint_is_refused_before_anything_is_written(
    en_model, shared_data, tmp_path, capsys
):
    """`finetune --resume PATH` from a pretraining run's checkpoint is refused in one line saying what the
    checkpoint is, before run_settings.json or anything else is written (before, the training loop refused it
    after the run's files were written)."""
    from litebert.checkpoint import load_config
    from litebert.modeling import AlbertForPreTraining
    from litebert.training.state import save_checkpoint

    run = tmp_path / "pre"
    run.mkdir()
    (run / "run_settings.json").write_text(json.dumps({"command": "pretrain", "pretrain_config": {}}))
    state = AlbertForPreTraining(load_config(en_model)).state_dict()
    ckpt = save_checkpoint(
        run, 5, rank=0, world_size=1, model_state=state, optimizer_state={}, scheduler_state={}, trainer_state={}
    )
    out = tmp_path / "ft"
    assert main(_sst2_argv(en_model, out, "--max-steps", 2, "--resume", str(ckpt), shared_data=shared_data)) == 2
    last = capsys.readouterr().err.splitlines()[-1]  # (after the data's truncation notes)
    assert last.startswith(
        f"error: --resume {ckpt}: a `litebert pretrain` checkpoint (AlbertForPreTraining), not a `litebert finetune` "
        "one (AlbertForSequenceClassification)"
    )
    assert not out.exists()  # not even an empty --output (before, it was made before the checks)
    # a --resume PATH that is no checkpoint: refused, and no --output (nor its parents) is left behind
    nested = tmp_path / "new" / "ft"
    for path, why in (
        (tmp_path / "nothing", f"--resume {tmp_path / 'nothing'}: no such checkpoint directory"),
        (run, f"--resume {run} is a run directory: use --resume auto (its newest checkpoint is {ckpt})"),
    ):
        assert main(_sst2_argv(en_model, nested, "--max-steps", 2, "--resume", path, shared_data=shared_data)) == 2
        assert capsys.readouterr().err.splitlines()[-1].startswith(f"error: {why}")
        assert not (tmp_path / "new").exists()


def test_data_the_tokenizer_does_not_cover_is_warned_about(sst2_run, shared_data, tmp_path, caplog):
    """An English model on Chinese reviews ran without a word while it saw nearly every token as [UNK]. The oracle:
    the model's tokenizer on the same rows, cut to max_seq_length as fine-tuning cuts them."""
    from litebert.tokenization import load_tokenizer

    _, out = sst2_run
    zh = shared_data / "chnsenticorp/dev.tsv"
    tok = load_tokenizer(out / "best")
    ids = [tok.encode(r.split("\t", 1)[1])[:62] for r in zh.read_text(encoding="utf-8").splitlines()[1:]]
    share = sum(i == tok.unk_token_id for row in ids for i in row) / sum(map(len, ids))
    assert share > 0.5
    cfg = dict(model=str(out / "best"), max_seq_length=64, progress_bar=False)
    with caplog.at_level("WARNING", logger="litebert"):
        columns = DataOptions(text_column="text_a", label_column="label")  # ChnSentiCorp's header
        evaluate(EvaluateConfig(data_file=str(zh), output_dir=str(tmp_path / "zh"), data=columns, **cfg))
    assert (
        f"data: {100 * share:.1f}% of the tokens of {zh} are the unknown token '[UNK]': the model's tokenizer does "
        "not cover this data" in caplog.text
    )
    caplog.clear()
    with caplog.at_level("WARNING", logger="litebert"):
        evaluate(
            EvaluateConfig(data_file=str(shared_data / "glue/SST-2/dev.tsv"), output_dir=str(tmp_path / "en"), **cfg)
        )
    assert "unknown token" not in caplog.text


def test_a_label_column_alone_is_laid_over_the_layout_saved_with_the_model(sst2_run, shared_data, tmp_path, capsys):
    """`evaluate --label-column X` alone threw the saved task away and asked for --task or --text-column; it is now
    read over the saved layout, as --delimiter is: a wrong name is named against the header."""
    _, out = sst2_run
    dev = shared_data / "glue/SST-2/dev.tsv"
    base = ["evaluate", "--model", str(out / "best"), "--data", str(dev), "--max-seq-length", "64"]
    assert main([*base, "--label-column", "nope", "--output", str(tmp_path / "a")]) == 2
    assert capsys.readouterr().err == (
        f"error: {dev}: a label column is required here (got 'nope'; header ['sentence', 'label'])\n"
    )
    assert main([*base, "--label-column", "label", "--output", str(tmp_path / "b")]) == 0
    assert json.loads((tmp_path / "b/eval_results.json").read_text())["num_examples"] == 872
