"""Task data from the Hub (litebert/finetune/hub_data.py) through the local Hub of tests/_fake_hub.py and the real
``datasets`` code: tiny data set repositories are built here in the Hub's parquet layout (``{config}/{split}-00000-
of-00001.parquet`` named by the README's ``configs:`` block, ``ClassLabel`` features in the parquet schema as
``datasets`` writes them) from rows of the shared data files, and what the Hub adapter reads is compared with what
the file readers read from the same rows (the oracle: every field equal, only ``line`` / ``where`` differ).

Fine-tuning runs use the tiny model of tests/test_finetune_run.py (H 64, 2 layers, a few steps).
"""

from __future__ import annotations

import dataclasses
import io
import json
import re
from pathlib import Path

import pytest

from litebert.errors import LitebertError
from litebert.finetune import DataOptions, EvaluateConfig, FinetuneConfig, evaluate, finetune, predict
from litebert.finetune.hub_data import load_split, read_split
from litebert.finetune.kinds import make_kind
from litebert.finetune.tasks import get_task

datasets = pytest.importorskip("datasets")
pytestmark = pytest.mark.usefixtures("one_thread")

SST2_NAMES = ["negative", "positive"]


# ------------------------------------------------------------------------------------------------ repositories
def _parquet(rows: list[dict], features) -> bytes:
    """``rows`` as the Hub stores a split: parquet with the ``datasets`` features in its schema."""
    buffer = io.BytesIO()
    datasets.Dataset.from_list(rows, features=features).to_parquet(buffer)
    return buffer.getvalue()


def _repo(config: str, splits: dict[str, list[dict]], features) -> dict[str, bytes | str]:
    """The files of a data set repository with one config: a README whose ``configs:`` block names each split's
    ``{config}/{split}-00000-of-00001.parquet`` (as nyu-mll/glue, clue/clue and rajpurkar/squad lay theirs out)."""
    yaml = ["---", "configs:", f"- config_name: {config}", "  data_files:"]
    files: dict[str, bytes | str] = {}
    for split, rows in splits.items():
        yaml += [f"  - split: {split}", f"    path: {config}/{split}-*"]
        files[f"{config}/{split}-00000-of-00001.parquet"] = _parquet(rows, features)
    files["README.md"] = "\n".join([*yaml, "---", f"# tiny {config}", ""])
    return files


def _sst2_rows(path: Path, n: int, labelled: bool = True) -> list[dict]:
    lines = path.read_text(encoding="utf-8").splitlines()[1 : n + 1]
    if labelled:  # sentence \t 0/1 -> the Hub's ClassLabel id (0 negative, 1 positive)
        return [{"sentence": s, "label": int(y), "idx": i} for i, (s, y) in enumerate(r.split("\t") for r in lines)]
    return [{"sentence": r.split("\t")[1], "label": -1, "idx": i} for i, r in enumerate(lines)]


def _sst2_features():
    return datasets.Features(
        {
            "sentence": datasets.Value("string"),
            "label": datasets.ClassLabel(names=SST2_NAMES),
            "idx": datasets.Value("int32"),
        }
    )


@pytest.fixture(scope="module")
def sst2_files(shared_data, tmp_path_factory):
    """The first rows of the shared SST-2 files, as files (the oracle's input) and as Hub splits."""
    root = tmp_path_factory.mktemp("sst2-files")
    glue = shared_data / "glue/SST-2"
    files = {}
    for name, n in (("train", 64), ("dev", 32), ("test", 16)):
        lines = (glue / f"{name}.tsv").read_text(encoding="utf-8").splitlines()[: n + 1]
        files[name] = root / f"{name}.tsv"
        files[name].write_text("\n".join(lines) + "\n", encoding="utf-8")
    splits = {
        "train": _sst2_rows(files["train"], 64),
        "validation": _sst2_rows(files["dev"], 32),
        "test": _sst2_rows(files["test"], 16, labelled=False),
    }
    return files, _repo("sst2", splits, _sst2_features())


@pytest.fixture(scope="module")
def en_model(tiny, shared_data, tmp_path_factory):
    root = tmp_path_factory.mktemp("hub-en")
    corpus = root / "corpus.txt"
    sst = (shared_data / "glue/SST-2/train.tsv").read_text(encoding="utf-8").splitlines()[1:1001]
    squad = json.loads((shared_data / "squad/v1.1/dev-v1.1.json").read_text(encoding="utf-8"))["data"][0]
    lines = [row.split("\t")[0] for row in sst] + [p["context"] for p in squad["paragraphs"][:20]]
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return tiny.model_dir(root / "model", [corpus], "wordpiece")


def _config(model, out, task="sst2", **kw):
    base = dict(
        model=str(model),
        output_dir=str(out),
        data=DataOptions(task=task),
        batch_size=16,
        max_steps=4,
        learning_rate=1e-3,
        max_seq_length=48,
        eval_steps=4,
        progress_bar=False,
    )
    return FinetuneConfig(**{**base, **kw})


def _strip(examples, *fields):
    """The examples without the fields that name where a row came from (a file line vs a Hub row number)."""
    return [dataclasses.replace(ex, **dict.fromkeys(fields, None)) for ex in examples]


# ---------------------------------------------------------------------------------------- rows equal the files'
def test_sst2_hub_rows_are_the_file_readers_examples(fake_hub, sst2_files):
    files, repo = sst2_files
    sha = fake_hub.add_repo("nyu-mll/glue", repo, repo_type="dataset")
    task = get_task("sst2")
    kind = make_kind(DataOptions(task="sst2"))
    for role, n in (("train", 64), ("dev", 32)):
        split = load_split(task, role)
        assert split.revision == sha and split.split == ("train" if role == "train" else "validation")
        hub = read_split(kind, split, require_labels=True)
        file = kind.read(files[role], require_labels=True)
        assert len(hub.examples) == n and hub.has_labels
        # ClassLabel negative/positive came back as the GLUE files' 0/1, row numbers as the file's data rows
        assert _strip(hub.examples, "line") == _strip(file.examples, "line")
        assert {ex.label for ex in hub.examples} == {"0", "1"}
    test = load_split(task, "test")
    assert not test.has_labels
    hub = read_split(kind, test, require_labels=False)
    file = kind.read(files["test"], require_labels=False)
    assert not hub.has_labels and _strip(hub.examples, "line") == _strip(file.examples, "line")
    with pytest.raises(LitebertError, match=r"nyu-mll/glue\[sst2\]/test: no row has a label"):
        read_split(kind, test, require_labels=True)


def test_token_qa_and_choice_hub_rows_are_the_file_readers_examples(fake_hub, shared_data, en_model, tmp_path):
    Seq, Value, ClassLabel = datasets.Sequence, datasets.Value, datasets.ClassLabel
    # CoNLL-2003: tokens + ner_tags ClassLabel ids, as eriktks/conll2003's parquet conversion has them
    conll = get_task("conll2003")
    conll_text = (shared_data / "conll2003/train.txt").read_text(encoding="utf-8").split("\n\n")[:25]
    conll_file = tmp_path / "conll.txt"
    conll_file.write_text("\n\n".join(conll_text) + "\n", encoding="utf-8")
    token_kind = make_kind(DataOptions(task="conll2003"))
    from_file = token_kind.read(conll_file, require_labels=True)
    tags = list(conll.labels)
    conll_rows = [
        {"id": str(i), "tokens": ex.words, "ner_tags": [tags.index(t) for t in ex.tags]}
        for i, ex in enumerate(from_file.examples)
    ]
    conll_features = datasets.Features(
        {"id": Value("string"), "tokens": Seq(Value("string")), "ner_tags": Seq(ClassLabel(names=tags))}
    )
    repo = _repo("conll2003", {"train": conll_rows, "validation": conll_rows[:5]}, conll_features)
    fake_hub.add_repo("eriktks/conll2003", repo, repo_type="dataset", revision="refs/convert/parquet")
    hub = read_split(token_kind, load_split(conll, "train"), require_labels=True)
    assert _strip(hub.examples, "line") == _strip(from_file.examples, "line") and hub.format == "jsonl"

    # SQuAD v1.1: one row per question, answers as {text: [...], answer_start: [...]}
    squad_json = json.loads((shared_data / "squad/v1.1/dev-v1.1.json").read_text(encoding="utf-8"))
    article = {**squad_json["data"][0], "paragraphs": squad_json["data"][0]["paragraphs"][:3]}
    squad_file = tmp_path / "squad.json"
    squad_file.write_text(json.dumps({"version": "1.1", "data": [article]}), encoding="utf-8")
    squad_rows = [
        {
            "id": q["id"],
            "title": article["title"],
            "context": p["context"],
            "question": q["question"],
            "answers": {
                "text": [a["text"] for a in q["answers"]],
                "answer_start": [a["answer_start"] for a in q["answers"]],
            },
        }
        for p in article["paragraphs"]
        for q in p["qas"]
    ]
    squad_features = datasets.Features(
        {
            **{k: Value("string") for k in ("id", "title", "context", "question")},
            "answers": Seq({"text": Value("string"), "answer_start": Value("int32")}),
        }
    )
    fake_hub.add_repo(
        "rajpurkar/squad",
        _repo("plain_text", {"train": squad_rows, "validation": squad_rows[:4]}, squad_features),
        repo_type="dataset",
    )
    qa_kind = make_kind(DataOptions(task="squad"))
    hub = read_split(qa_kind, load_split(get_task("squad"), "train"), require_labels=True)
    from_file = qa_kind.read(squad_file, require_labels=True)
    assert len(hub.examples) == len(squad_rows) > 10
    assert _strip(hub.examples, "where") == _strip(from_file.examples, "where")
    assert hub.offsets == from_file.offsets

    # SWAG (regular): the CSV's columns, label a ClassLabel of 4; the test split's -1 labels are predicted
    swag_rows = [
        {"video-id": f"v{i}", **json.loads(line)}
        for i, line in enumerate((shared_data / "swag/sample.json").read_text(encoding="utf-8").splitlines())
    ]
    swag_file = tmp_path / "swag.jsonl"
    swag_file.write_text("".join(json.dumps(r) + "\n" for r in swag_rows), encoding="utf-8")
    swag_features = datasets.Features(
        {
            "video-id": Value("string"),
            **{k: Value("string") for k in ("sent1", "sent2", "ending0", "ending1", "ending2", "ending3")},
            "label": ClassLabel(names=["0", "1", "2", "3"]),
        }
    )
    swag_test = [{**r, "label": -1} for r in swag_rows[:4]]
    fake_hub.add_repo(
        "allenai/swag",
        _repo("regular", {"train": swag_rows, "validation": swag_rows[:4], "test": swag_test}, swag_features),
        repo_type="dataset",
    )
    choice_kind = make_kind(DataOptions(task="swag"))
    hub = read_split(choice_kind, load_split(get_task("swag"), "train"), require_labels=True)
    from_file = choice_kind.read(swag_file, require_labels=True)
    assert _strip(hub.examples, "line") == _strip(from_file.examples, "line")
    assert [ex.label for ex in hub.examples] == [r["label"] for r in swag_rows]
    test = read_split(choice_kind, load_split(get_task("swag"), "test"), require_labels=False)
    assert not test.has_labels and [ex.options for ex in test.examples] == [ex.options for ex in hub.examples[:4]]

    # each kind fine-tunes from its Hub splits alone (a few steps: the machinery, not accuracy)
    for task, rows, metric in (
        ("conll2003", conll_rows, "f1"),
        ("squad", squad_rows, "f1"),
        ("swag", swag_rows, "accuracy"),
    ):
        out = tmp_path / task
        test_split = "test" if task == "swag" else None
        data = DataOptions(task=task, **({"max_query_length": 16, "doc_stride": 8} if task == "squad" else {}))
        result = finetune(_config(en_model, out, data=data, max_steps=2, eval_steps=2, test_split=test_split))
        assert result.metric == metric and metric in result.eval_results
        sources = json.loads((out / "run_settings.json").read_text())["data_sources"]
        assert [sources[k]["rows"] for k in ("train", "dev")] == [
            len(rows),
            min(len(rows), 5 if task == "conll2003" else 4),
        ]
    assert (tmp_path / "swag/test_predictions.tsv").exists() and not (tmp_path / "swag/test_results.json").exists()


def test_a_labelled_splits_rows_without_a_label_are_dropped_and_counted(fake_hub):
    """OCNLI-like rows (CLUE's ``-`` rows as -1 in a labelled split): dropped as the file reader drops ``-`` rows,
    counted, and the other rows keep their row numbers (the ``index`` of predictions.tsv)."""
    names = ["neutral", "entailment", "contradiction"]
    rows = [{"sentence1": f"a{i}", "sentence2": f"b{i}", "label": y} for i, y in enumerate([0, -1, 2, 1, -1])]
    features = datasets.Features(
        {
            "sentence1": datasets.Value("string"),
            "sentence2": datasets.Value("string"),
            "label": datasets.ClassLabel(names=names),
        }
    )
    fake_hub.add_repo("clue/clue", _repo("ocnli", {"train": rows, "validation": rows}, features), repo_type="dataset")
    read = read_split(make_kind(DataOptions(task="ocnli")), load_split(get_task("ocnli"), "dev"), require_labels=True)
    assert [(ex.index, ex.text, ex.text_pair, ex.label) for ex in read.examples] == [
        (0, "a0", "b0", "neutral"),
        (2, "a2", "b2", "contradiction"),
        (3, "a3", "b3", "entailment"),
    ]
    assert read.skipped == 2 and read.skip_reason == "rows labelled '-1'"


# ------------------------------------------------------------------------------------ finetune / evaluate / predict
def test_finetune_from_the_hub_then_offline_evaluate_and_predict(fake_hub, sst2_files, en_model, tmp_path):
    files, repo = sst2_files
    sha = fake_hub.add_repo("nyu-mll/glue", repo, repo_type="dataset")
    hub_run = finetune(_config(en_model, tmp_path / "hub", test_split="test"))
    file_run = finetune(
        _config(en_model, tmp_path / "files", train_file=str(files["train"]), dev_file=str(files["dev"]))
    )
    # the same rows, the same label ids, the same weights: the same dev results
    assert hub_run.num_train == file_run.num_train == 64 and hub_run.labels == file_run.labels == ["0", "1"]
    assert hub_run.eval_results == pytest.approx(file_run.eval_results)
    hub_config = json.loads((tmp_path / "hub/best/config.json").read_text())
    file_config = json.loads((tmp_path / "files/best/config.json").read_text())
    assert hub_config["id2label"] == file_config["id2label"] == {"0": "0", "1": "1"}
    assert hub_config["litebert_hub_dataset"] == {"dataset": "nyu-mll/glue", "config": "sst2", "revision": sha}
    settings = json.loads((tmp_path / "hub/run_settings.json").read_text())
    assert settings["data_sources"]["dev"] == {
        "dataset": "nyu-mll/glue",
        "config": "sst2",
        "split": "validation",
        "revision": sha,
        "rows": 32,
    }
    assert settings["data_sources"]["test"]["split"] == "test"
    # the test split has no labels: predicted, not scored
    assert hub_run.test_results is None and not (tmp_path / "hub/test_results.json").exists()
    rows = (tmp_path / "hub/test_predictions.tsv").read_text().splitlines()
    assert rows[0] == "index\tprediction" and len(rows) == 17

    # a second run from the cache, offline: no request reaches the Hub
    fake_hub.go_offline()
    served = len(fake_hub.requests)
    again = finetune(_config(en_model, tmp_path / "offline"))
    assert again.eval_results == pytest.approx(hub_run.eval_results)
    best = str(tmp_path / "hub/best")
    evaluated = evaluate(EvaluateConfig(model=best, output_dir=str(tmp_path / "eval")))
    assert evaluated.metrics["accuracy"] == pytest.approx(hub_run.eval_results["accuracy"])
    assert json.loads((tmp_path / "eval/run_settings.json").read_text())["data_source"]["revision"] == sha
    predicted = predict(EvaluateConfig(model=best))
    assert predicted.metrics == {} and len(predicted.predictions) == 16
    assert predicted.predictions == [r.split("\t")[1] for r in rows[1:]]
    with pytest.raises(LitebertError, match=r"glue\[sst2\]/test: no row has a label.*predicted"):
        evaluate(EvaluateConfig(model=best, split="test"))
    assert len(fake_hub.requests) == served


def test_files_win_over_the_hub(fake_hub, sst2_files, en_model, tmp_path):
    files, _ = sst2_files  # no repository on the Hub at all: files alone must do
    result = finetune(
        _config(
            en_model,
            tmp_path / "run",
            train_file=str(files["train"]),
            dev_file=str(files["dev"]),
            test_file=str(files["test"]),
        )
    )
    assert result.num_train == 64 and fake_hub.requests == []
    settings = json.loads((tmp_path / "run/run_settings.json").read_text())
    assert settings["data_sources"] == {k: {"file": str(files[k])} for k in ("train", "dev", "test")}
    assert "litebert_hub_dataset" not in json.loads((tmp_path / "run/best/config.json").read_text())


def test_hub_errors_name_the_data_set_before_any_training(fake_hub, sst2_files, en_model, tmp_path):
    files, repo = sst2_files
    task = get_task("sst2")
    with pytest.raises(LitebertError, match=r"nyu-mll/glue \(sst2\), split 'train'.*(doesn't exist|not found)"):
        load_split(task, "train")  # not on the Hub
    fake_hub.add_repo("nyu-mll/glue", repo, repo_type="dataset")
    with pytest.raises(LitebertError, match=r"split 'nope'.*Unknown split"):
        load_split(task, "nope")
    with pytest.raises(LitebertError, match=r"revision 'v9'.*Revision 'v9' doesn't exist"):
        load_split(task, "train", "v9")
    with pytest.raises(LitebertError, match=r"give --train FILE: --task chnsenticorp has no Hub data set"):
        _config(en_model, tmp_path / "x", task="chnsenticorp")
    with pytest.raises(LitebertError, match="not both"):
        _config(en_model, tmp_path / "x", test_split="test", test_file=str(files["test"]))
    # a column the table reads but the data set lacks; a class name the table cannot map
    renamed = [{"text": r["sentence"], "label": r["label"]} for r in _sst2_rows(files["train"], 8)]
    features = datasets.Features({"text": datasets.Value("string"), "label": datasets.ClassLabel(names=SST2_NAMES)})
    fake_hub.add_repo("nyu-mll/glue", _repo("sst2", {"train": renamed}, features), repo_type="dataset", revision="v2")
    with pytest.raises(LitebertError, match=r"has no column 'sentence', which --task sst2 reads.*'text'"):
        load_split(task, "train", "v2")
    odd = datasets.Features({"sentence": datasets.Value("string"), "label": datasets.ClassLabel(names=["neg", "pos"])})
    rows = [{"sentence": r["sentence"], "label": r["label"]} for r in _sst2_rows(files["train"], 8)]
    fake_hub.add_repo("nyu-mll/glue", _repo("sst2", {"train": rows}, odd), repo_type="dataset", revision="v3")
    with pytest.raises(LitebertError, match=r"class names \['neg', 'pos'\].*not sst2 labels"):
        load_split(task, "train", "v3")
    # an unknown config: the repository has no sst2
    fake_hub.add_repo("nyu-mll/glue", _repo("cola", {"train": rows}, odd), repo_type="dataset", revision="v4")
    with pytest.raises(LitebertError, match=r"nyu-mll/glue \(sst2\).*sst2"):
        load_split(task, "train", "v4")
    out = tmp_path / "never"
    with pytest.raises(LitebertError, match="v9"):
        finetune(_config(en_model, out, data=DataOptions(task="sst2", dataset_revision="v9")))
    assert not out.exists()  # refused before anything was written
    fake_hub.go_offline()
    with pytest.raises(LitebertError, match=r"allenai/swag \(regular\), split 'train'.*could not be reached"):
        load_split(get_task("swag"), "train")  # offline with nothing cached


def test_cli_task_without_files_reads_the_hub(fake_hub, sst2_files, en_model, tmp_path, capsys):
    """The README's one-line fine-tune (`litebert finetune --model albert/albert-base-v2 --task sst2 --output O`:
    model and data from the Hub), then predict on the test split and evaluate on dev with nothing but the model."""
    from litebert.cli import main

    _, repo = sst2_files
    sha = fake_hub.add_repo("nyu-mll/glue", repo, repo_type="dataset")
    fake_hub.add_dir("albert/albert-base-v2", en_model)  # the tiny model under the README's Hub id
    out = tmp_path / "sst2"
    argv = ["finetune", "--model", "albert/albert-base-v2", "--task", "sst2", "--output", str(out)]
    assert main([*argv, "--max-steps", "2", "--max-seq-length", "48", "--no-progress", "--test-split", "test"]) == 0
    printed = capsys.readouterr().out
    result = json.loads(printed[printed.index("{\n") :])
    assert result["test_results"] is None and (out / "test_predictions.tsv").exists()
    settings = json.loads((out / "run_settings.json").read_text())
    assert settings["finetune_config"]["train_file"] is None
    assert settings["data_sources"]["train"]["revision"] == sha
    assert main(["predict", "--model", str(out / "best")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 16 and [line.split("\t")[0] for line in lines] == [str(i) for i in range(16)]
    assert main(["evaluate", "--model", str(out / "best"), "--dataset-revision", sha]) == 0
    printed = capsys.readouterr().out
    assert json.loads(printed[printed.index("{\n") :])["num_examples"] == 32
    assert main(["evaluate", "--model", str(out / "best"), "--split", "test"]) == 2
    assert "no row has a label" in capsys.readouterr().err


def test_unreachable_hub_fails_fast_or_reads_the_cache(fake_hub, sst2_files, caplog):
    """No network, HF_HUB_OFFLINE unset (the Hub's port refuses connections): an uncached data set is one error
    naming it and the endpoint within seconds (datasets alone retried for ~20 s, logging each retry); a cached one is
    read from the cache, the same rows."""
    import time

    import huggingface_hub.constants as hc

    _, repo = sst2_files
    sha = fake_hub.add_repo("nyu-mll/glue", repo, repo_type="dataset")
    task = get_task("sst2")
    online = load_split(task, "dev")
    fake_hub.stop()  # the Hub goes away; HF_HUB_OFFLINE stays unset
    caplog.clear()
    start = time.perf_counter()
    cached = load_split(task, "dev")
    assert cached.rows == online.rows and cached.revision == sha
    assert not hc.HF_HUB_OFFLINE  # offline only for that call
    assert not [r for r in caplog.records if "Retry" in r.getMessage()]
    with pytest.raises(LitebertError) as raised:
        load_split(get_task("swag"), "train")  # never downloaded
    assert time.perf_counter() - start < 10
    message = str(raised.value)
    assert message.startswith("allenai/swag (regular), split 'train': the Hub (http://127.0.0.1:")
    assert "could not be reached and the data set is not in the cache" in message and "\n" not in message
    import datasets.config as dc

    assert not hc.HF_HUB_OFFLINE and not dc.HF_HUB_OFFLINE  # both flags restored after the error too
    assert not [r for r in caplog.records if "Retry" in r.getMessage()]


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--model", "finall", r"^error: finall: model directory not found \(and not a Hub id ORG/NAME\)$"),
        ("--model", "org/missing", r"--model org/missing: no local directory org/missing, and no Hub repository"),
        ("--tokenizer", "tok", r"^error: tokenizer directory not found: tok$"),
    ],
)
def test_a_mistyped_model_is_reported_before_the_data_set(fake_hub, en_model, tmp_path, capsys, option, value, message):
    """`finetune --model finall --task sst2`: the model (and tokenizer) are checked before the task's Hub data set
    is asked for, so the error names them (the data set, absent from this Hub, was reported instead)."""
    from litebert.cli import main

    out = tmp_path / "sst2x"
    model = value if option == "--model" else str(en_model)
    argv = ["finetune", "--model", model, "--task", "sst2", "--output", str(out)]
    assert main(argv + ([option, value] if option != "--model" else [])) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and re.search(message, err[0]), err
    assert not [r for r in fake_hub.requests if "glue" in str(r)]  # the data set was never asked for
    assert not out.exists()


def test_library_finetune_checks_the_model_before_the_data_set(fake_hub, en_model, tmp_path):
    with pytest.raises(LitebertError, match=r"finall: model directory not found"):
        finetune(_config(tmp_path / "finall", tmp_path / "out"))
    with pytest.raises(LitebertError, match=r"no tokenizer|tok"):
        finetune(_config(en_model, tmp_path / "out2", tokenizer=str(tmp_path / "tok")))
    assert not [r for r in fake_hub.requests if "glue" in str(r)]
