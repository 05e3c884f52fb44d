"""Token classification (NER): readers on the real CoNLL-2003 / Weibo / MSRA files, seqeval parity and a
hand-computed conlleval case, windows, fine-tuning end to end with a tiny model, transformers' token-classification
pipeline as the oracle, bad input.

The model is ``albert-debug`` (H 64, 2 layers, random weights) with a tokenizer trained here on a slice of the task
text; runs are a few steps on a hundred sentences: these tests check the machinery, not accuracy.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging

import pytest
import torch

from litebert.errors import LitebertError
from litebert.finetune import DataOptions, EvaluateConfig, FinetuneConfig, evaluate, finetune, predict
from litebert.finetune.token import entity_metrics, read_token_file, window_owner, word_windows

pytestmark = pytest.mark.usefixtures("one_thread")


# ------------------------------------------------------------------------------------------- metrics (no model)
def test_entity_metrics_hand_computed_conlleval_case():
    # gold: PER(0-1), LOC(3), ORG(5-6); pred: an I-PER that opens the entity (conlleval: I- after O starts one),
    # LOC typed as ORG, ORG cut short.
    gold = [["B-PER", "I-PER", "O", "B-LOC", "O", "B-ORG", "I-ORG"]]
    pred = [["I-PER", "I-PER", "O", "B-ORG", "O", "B-ORG", "O"]]
    m = entity_metrics(gold, pred)
    # found: PER(0-1) correct, ORG(3) wrong, ORG(5) wrong (boundary) -> 1 of 3 predicted, 1 of 3 gold
    assert m["precision"] == pytest.approx(1 / 3) and m["recall"] == pytest.approx(1 / 3)
    assert m["f1"] == pytest.approx(1 / 3)
    assert m["accuracy"] == pytest.approx(4 / 7)  # token accuracy: tags equal at positions 1, 2, 4, 5
    assert m["f1_PER"] == 1.0 and m["recall_LOC"] == 0.0 and m["precision_ORG"] == 0.0
    assert m["support_ORG"] == 1.0 and m["support_LOC"] == 1.0


def test_entity_metrics_equal_seqeval_with_ill_formed_and_bioes_tags():
    from seqeval.metrics import f1_score, precision_score, recall_score

    gold = [["O", "I-MISC", "I-MISC", "O", "B-PER", "E-PER", "S-LOC"], ["B-ORG", "I-PER", "O"]]
    pred = [["O", "I-MISC", "B-MISC", "O", "B-PER", "E-PER", "O"], ["I-ORG", "I-PER", "I-PER"]]
    m = entity_metrics(gold, pred)
    assert m["f1"] == pytest.approx(f1_score(gold, pred))
    assert m["precision"] == pytest.approx(precision_score(gold, pred))
    assert m["recall"] == pytest.approx(recall_score(gold, pred))
    # by hand (conlleval chunking): gold MISC(1-2) PER(4-5) LOC(6) ORG(0) PER(1);
    # pred MISC(1) MISC(2) PER(4-5) ORG(0) PER(1-2): correct PER(4-5), ORG(0) -> P 2/5, R 2/5
    assert m["precision"] == pytest.approx(2 / 5) and m["recall"] == pytest.approx(2 / 5)


def test_windows_cover_every_word_once_with_most_context():
    lengths = [1, 3, 2, 1, 1, 4, 1, 2, 2, 1, 1, 3]
    windows = word_windows(lengths, body=8)
    assert windows[0][0] == 0 and windows[-1][1] == len(lengths)
    for s, e in windows:
        assert sum(lengths[s:e]) <= 8 and e > s
    assert all(b[0] > a[0] for a, b in itertools.pairwise(windows))
    owner = window_owner(windows, len(lengths))
    for w, k in enumerate(owner):
        s, e = windows[k]
        assert s <= w < e
        best = max(min(w - s2, e2 - 1 - w) for s2, e2 in windows if s2 <= w < e2)
        assert min(w - s, e - 1 - w) == best
    assert word_windows([20, 1], body=8) == [(0, 1), (1, 2)]  # an over-long word gets its own window


# ------------------------------------------------------------------------------------------------ readers
def test_conll2003_reader_sizes(shared_data):
    dev = read_token_file(shared_data / "conll2003/dev.txt")
    assert len(dev.examples) == 3250 and sum(len(ex.words) for ex in dev.examples) == 51362  # published sizes
    assert dev.format == "conll-space" and dev.examples[0].words[:2] == ["CRICKET", "-"]
    assert all(len(ex.words) == len(ex.tags) for ex in dev.examples)


def test_weibo_and_msra_readers(shared_data):
    from seqeval.metrics.sequence_labeling import get_entities

    from litebert.finetune.tasks import get_task

    weibo = read_token_file(
        shared_data / "weibo_ner/weiboNER_2nd_conll.train",
        strip_segment_digits=get_task("weibo_ner").option("strip_segment_digits"),
    )
    assert len(weibo.examples) == 1350 and sum(len(ex.words) for ex in weibo.examples) == 73778
    assert weibo.examples[0].words[:3] == ["科", "技", "全"]
    assert all(not w[-1].isdigit() or len(w) == 1 for ex in weibo.examples for w in ex.words)
    msra = read_token_file(shared_data / "msra_ner_sighan2006/msra_test_bio.txt")
    assert len(msra.examples) == 3442 and sum(len(ex.words) for ex in msra.examples) == 172601
    types = [t for t, _, _ in get_entities([ex.tags for ex in msra.examples])]
    assert (types.count("LOC"), types.count("ORG"), types.count("PER")) == (2886, 1331, 1973)  # SOURCE.md


def test_gzip_compressed_files_read_as_their_text(shared_data, tmp_path):
    """Defect: a gzip-compressed data file was refused as "not valid UTF-8". Now it reads as the file it
    decompresses to, its format told by the suffix before .gz (train.jsonl.gz is JSON lines)."""
    import gzip

    conll = shared_data / "conll2003/dev.txt"
    packed = tmp_path / "dev.txt.gz"
    packed.write_bytes(gzip.compress(conll.read_bytes()))
    read, want = read_token_file(packed), read_token_file(conll)
    assert read.format == want.format == "conll-space"
    assert [(ex.words, ex.tags) for ex in read.examples] == [(ex.words, ex.tags) for ex in want.examples]
    jl = tmp_path / "ner.jsonl.gz"
    jl.write_bytes(gzip.compress(b'{"tokens": ["John", "lives"], "tags": ["B-PER", "O"]}\n'))
    read = read_token_file(jl)
    assert read.format == "jsonl" and [ex.tags for ex in read.examples] == [["B-PER", "O"]]


def test_jsonl_and_bad_column_files(tmp_path):
    jl = tmp_path / "ner.jsonl"
    jl.write_text('{"tokens": ["John", "lives"], "tags": ["B-PER", "O"]}\n{"tokens": ["Paris"], "tags": ["S-LOC"]}\n')
    read = read_token_file(jl)
    assert [ex.words for ex in read.examples] == [["John", "lives"], ["Paris"]] and read.format == "jsonl"
    bad = tmp_path / "bad.txt"
    bad.write_text("EU NNP B-NP B-ORG\nrejects VBZ B-VP O\n\nGerman\n")
    with pytest.raises(LitebertError, match=r"bad\.txt:4: 1 column\(s\), expected at least 2"):
        read_token_file(bad)
    with pytest.raises(LitebertError, match=r"bad\.txt:1: 4 column\(s\), expected at least 6"):
        read_token_file(bad, tag_column=5)
    mismatch = tmp_path / "m.jsonl"
    mismatch.write_text('{"tokens": ["a", "b"], "tags": ["O"]}\n')
    with pytest.raises(LitebertError, match=r"m\.jsonl:1: 'tags' must be a list as long as 'tokens'"):
        read_token_file(mismatch)


# ------------------------------------------------------------------------------------------------ end to end
@pytest.fixture(scope="module")
def conll_run(tiny, shared_data, tmp_path_factory):
    root = tmp_path_factory.mktemp("conll")
    words = [
        ln.split(" ")[0] for ln in (shared_data / "conll2003/train.txt").read_text().splitlines()[:6000] if ln.strip()
    ]
    corpus = root / "corpus.txt"
    corpus.write_text("\n".join(" ".join(words[i : i + 30]) for i in range(0, len(words), 30)) + "\n")
    model = tiny.model_dir(root / "model", [corpus], "wordpiece")
    out = root / "run"
    test = root / "test.txt"  # the first 1,000 lines of the test file (with its -DOCSTART- lines)
    test.write_text("\n".join((shared_data / "conll2003/test.txt").read_text().splitlines()[:1000]) + "\n")
    cfg = FinetuneConfig(
        model=str(model),
        train_file=str(shared_data / "conll2003/train.txt"),
        dev_file=str(shared_data / "conll2003/dev.txt"),
        output_dir=str(out),
        test_file=str(test),
        data=DataOptions(task="conll2003"),
        max_train_examples=160,
        max_eval_examples=80,
        batch_size=16,
        max_steps=10,
        learning_rate=2e-3,
        max_seq_length=24,
        eval_steps=5,
        progress_bar=False,
    )
    return finetune(cfg), out, model, test


def test_conll2003_outputs_and_metrics_of_the_written_predictions(conll_run):
    from seqeval.metrics import f1_score

    result, out, _, test = conll_run
    assert result.metric == "f1" and result.labels[0] == "O" and len(result.labels) == 9
    assert result.num_train > 160  # max_seq_length 24: long sentences became several windows
    ev = json.loads((out / "eval_results.json").read_text())
    assert ev["num_examples"] == 80 and {"f1", "precision", "recall", "accuracy", "eval_loss"} <= set(ev)
    # predictions.txt: word gold predicted, a blank line between sentences; its tags give eval_results' F1
    blocks = (out / "predictions.txt").read_text().strip("\n").split("\n\n")
    assert len(blocks) == 80
    rows = [[ln.split(" ") for ln in b.splitlines()] for b in blocks]
    assert all(len(r) == 3 for b in rows for r in b)
    gold, pred = [[r[1] for r in b] for b in rows], [[r[2] for r in b] for b in rows]
    assert ev["f1"] == pytest.approx(f1_score(gold, pred)) and ev["accuracy"] == pytest.approx(
        sum(g == p for gs, ps in zip(gold, pred) for g, p in zip(gs, ps)) / sum(map(len, gold))
    )
    n_test = len(read_token_file(test).examples)
    assert len((out / "test_predictions.txt").read_text().strip("\n").split("\n\n")) == n_test > 30
    cfg = json.loads((out / "best/config.json").read_text())
    assert cfg["architectures"] == ["AlbertForTokenClassification"] and cfg["id2label"]["0"] == "O"
    assert cfg["label2id"] == {v: int(k) for k, v in cfg["id2label"].items()}


def test_transformers_token_classification_pipeline_gives_the_same_tags(conll_run, shared_data, tmp_path):
    """The pipeline tags every sub-token and drops "O"; litebert predicts one tag per word at its first sub-token.
    Compared at the first sub-token of each word (aggregation_strategy="none"), on sentences that fit one window.
    A few fine-tuning steps leave a tiny model predicting "O" everywhere, so the classifier of best/ is redrawn
    (std 1) first: entity tags occur, and the comparison can fail."""
    transformers = pytest.importorskip("transformers")

    test = conll_run[3]
    _, best = _redrawn_tagger(conll_run, tmp_path / "model")
    pr = predict(
        EvaluateConfig(
            model=str(best), data_file=str(test), output_dir=str(tmp_path / "pr"), max_seq_length=24, precision="fp32"
        )
    )  # the pipeline's precision: argmax ties
    pipe = transformers.pipeline(
        "token-classification", model=str(best), tokenizer=str(best), device="cpu", aggregation_strategy="none"
    )
    tok = transformers.AutoTokenizer.from_pretrained(str(best))
    blocks = (tmp_path / "pr/predictions.txt").read_text().strip("\n").split("\n\n")
    compared, tags = 0, set()
    for block, pred in zip(blocks, pr.predictions, strict=True):
        rows = [ln.split(" ") for ln in block.splitlines()]
        assert [r[2] for r in rows] == pred
        words = [r[0] for r in rows]
        pieces = [tok.tokenize(w) for w in words]
        if sum(map(len, pieces)) > 22 or any(not p for p in pieces):
            continue  # windows, or a word the HF tokenizer drops: not one-to-one
        assert tok.tokenize(" ".join(words)) == [p for ps in pieces for p in ps]
        by_index = {e["index"]: e["entity"] for e in pipe(" ".join(words))}
        first = [1 + sum(map(len, pieces[:i])) for i in range(len(words))]
        assert [by_index.get(i, "O") for i in first] == pred
        compared += 1
        tags.update(pred)
    assert compared >= 10 and len(tags - {"O"}) >= 2


def test_transformers_loads_token_model_with_labels(conll_run):
    transformers = pytest.importorskip("transformers")
    _, out, _, _ = conll_run
    hf = transformers.AutoModelForTokenClassification.from_pretrained(out / "best")
    assert type(hf).__name__ == "AlbertForTokenClassification" and hf.config.id2label[0] == "O"


def test_evaluate_and_predict_reproduce_finetune(conll_run, shared_data, tmp_path):
    _, out, _, test = conll_run
    ev = evaluate(
        EvaluateConfig(model=str(out / "best"), data_file=str(test), output_dir=str(tmp_path / "ev"), max_seq_length=24)
    )
    written = json.loads((out / "test_results.json").read_text())
    assert ev.metrics == pytest.approx({k: v for k, v in written.items() if k != "num_examples"})
    assert ev.num_examples == written["num_examples"]
    unl = tmp_path / "words.txt"
    unl.write_text("EU\nrejects\nGerman\n\nPeter\nBlackburn\n")
    pr = predict(
        EvaluateConfig(model=str(out / "best"), data_file=str(unl), output_dir=str(tmp_path / "pr"), max_seq_length=24)
    )
    assert pr.labels is None and [len(p) for p in pr.predictions] == [3, 2]
    lines = (tmp_path / "pr/predictions.txt").read_text().splitlines()
    assert lines[0].split(" ")[0] == "EU" and len(lines[0].split(" ")) == 2 and lines[3] == ""


def test_finetuning_a_token_classifier_of_another_tag_order_keeps_its_tags(conll_run, tmp_path, caplog):
    """A CoNLL-2003 tagger whose id2label lists the nine tags in another order (transformers' CoNLL models put
    B-MISC/I-MISC first), fine-tuned with --task conll2003 for one step at lr 1e-12: it tags the words as it did
    before (the oracle: the same function with the preset's ids, predicted by `predict`). Before, its rows were
    renamed in the preset's order."""
    from litebert.tokenization import load_tokenizer

    out, test = conll_run[1], conll_run[3]
    model, same = _redrawn_tagger(conll_run, tmp_path / "same")
    oracle = predict(
        EvaluateConfig(
            model=str(same), data_file=str(test), output_dir=str(tmp_path / "pr"), max_seq_length=24, precision="fp32"
        )
    ).predictions
    assert len({t for sentence in oracle for t in sentence} - {"O"}) >= 2
    tags = [model.config.id2label[i] for i in range(9)]
    order = [tags.index(t) for t in ("O", "B-MISC", "I-MISC", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC")]
    assert order != list(range(9))
    with torch.no_grad():  # the same function under other ids
        model.classifier.weight.copy_(model.classifier.weight[order])
        model.classifier.bias.copy_(model.classifier.bias[order])
    model.config.id2label = {i: tags[j] for i, j in enumerate(order)}
    model.config.label2id = {t: i for i, t in model.config.id2label.items()}
    other = tmp_path / "other"
    model.save_pretrained(other)
    load_tokenizer(out / "best").save(other)
    cfg = FinetuneConfig(
        model=str(other),
        train_file=str(test),
        dev_file=str(test),
        output_dir=str(tmp_path / "run"),
        data=DataOptions(task="conll2003"),
        max_steps=1,
        learning_rate=1e-12,
        max_seq_length=24,
        precision="fp32",
        progress_bar=False,
    )
    with caplog.at_level(logging.INFO, logger="litebert.finetune"):
        result = finetune(cfg)
    blocks = (tmp_path / "run/predictions.txt").read_text().strip("\n").split("\n\n")
    assert [[ln.split(" ")[2] for ln in b.splitlines()] for b in blocks] == oracle
    assert result.labels == [tags[j] for j in order]
    assert "keeps its label ids" in caplog.text and "newly initialised: (none)" in caplog.text


def test_weibo_ner_foreign_dev_tag_is_refused_and_a_tag_set_of_ones_own_counts_it(tiny, shared_data, tmp_path, caplog):
    """A dev tag outside the weibo_ner preset's fixed 17 is an error naming the line and the tag (before: a counted
    warning and a dev score on it); with --task-type token (tags from train) it is still a counted warning."""
    root = tmp_path
    train = shared_data / "weibo_ner/weiboNER_2nd_conll.train"
    corpus = root / "corpus.txt"
    chars = [ln.split("\t")[0][:-1] for ln in train.read_text(encoding="utf-8").splitlines() if ln.strip()]
    corpus.write_text("\n".join("".join(chars[i : i + 50]) for i in range(0, len(chars), 50)) + "\n")
    model = tiny.model_dir(root / "model", [corpus], "chinese")
    dev = root / "dev.txt"  # a dev file with a tag that train never had
    dev.write_text("张0\tB-PER.NAM\n三1\tI-PER.NAM\n去0\tO\n火0\tB-XYZ.NAM\n星1\tI-XYZ.NAM\n\n", encoding="utf-8")
    cfg = FinetuneConfig(
        model=str(model),
        train_file=str(train),
        dev_file=str(dev),
        output_dir=str(root / "run"),
        data=DataOptions(task="weibo_ner"),
        max_train_examples=64,
        batch_size=16,
        max_steps=4,
        learning_rate=2e-3,
        max_seq_length=64,
        progress_bar=False,
    )
    with pytest.raises(LitebertError) as err:
        finetune(cfg)
    assert str(err.value).startswith(f"{dev}:4: tag 'B-XYZ.NAM' is not one of the weibo_ner tags ['O', 'B-PER.NAM'")
    assert str(err.value).endswith(
        "'I-ORG.NOM']: is the file unlabelled (CoNLL-2003 without NER tags ends in the chunk column), or are its NER "
        "tags in another column than the last (--tag-column)? `litebert predict` predicts such a file without "
        "scoring it"
    )
    own = root / "own_dev.txt"  # --task-type token: no segment digits to strip
    own.write_text("张\tB-PER.NAM\n三\tI-PER.NAM\n去\tO\n火\tB-XYZ.NAM\n星\tI-XYZ.NAM\n\n", encoding="utf-8")
    cfg = dataclasses.replace(
        cfg, dev_file=str(own), output_dir=str(root / "run2"), data=DataOptions(task_type="token")
    )
    with caplog.at_level(logging.WARNING, logger="litebert"):
        result = finetune(cfg)
    assert "2 word(s)" in caplog.text and "B-XYZ.NAM" in caplog.text
    assert result.eval_results["support_XYZ.NAM"] == 1.0 and result.eval_results["recall_XYZ.NAM"] == 0.0
    assert len(result.labels) == 17  # Weibo's 17 tags, here from train
    preds = (root / "run2/predictions.txt").read_text(encoding="utf-8").splitlines()
    assert [ln.split("\t")[:2] for ln in preds] == [
        ["张", "B-PER.NAM"],
        ["三", "I-PER.NAM"],
        ["去", "O"],
        ["火", "B-XYZ.NAM"],
        ["星", "I-XYZ.NAM"],
    ]


def test_cli_token_task_type_with_columns(conll_run, tmp_path, capsys):
    from litebert.cli import main

    _, _, model, _ = conll_run
    train = tmp_path / "train.tsv"  # tag in column 1 of 3, tab-separated
    train.write_text("EU\tB-ORG\tx\nrejects\tO\tx\nGerman\tB-MISC\tx\n\nPeter\tB-PER\tx\nBlackburn\tI-PER\tx\n")
    rc = main(
        [
            "finetune",
            "--model",
            str(model),
            "--task-type",
            "token",
            "--tag-column",
            "1",
            "--train",
            str(train),
            "--dev",
            str(train),
            "--output",
            str(tmp_path / "run"),
            "--max-steps",
            "2",
            "--batch-size",
            "2",
            "--max-seq-length",
            "16",
            "--no-progress",
            "--metric",
            "accuracy",
        ]
    )
    assert rc == 0
    printed = capsys.readouterr().out  # the loop's log lines, then the result as JSON
    summary = json.loads(printed[printed.index("{\n") :])
    assert summary["metric"] == "accuracy" and 0 <= summary["eval_results"]["accuracy"] <= 1
    cfg = json.loads((tmp_path / "run/best/config.json").read_text())
    assert cfg["litebert_data_options"] == {"tag_column": 1} and cfg["litebert_task_type"] == "token"
    assert (
        main(["evaluate", "--model", str(tmp_path / "run/best"), "--data", str(train), "--max-seq-length", "16"]) == 0
    )
    assert (
        main(
            [
                "finetune",
                "--model",
                str(model),
                "--task-type",
                "token",
                "--tag-column",
                "1",
                "--train",
                str(train),
                "--dev",
                str(train),
                "--output",
                str(tmp_path / "run2"),
                "--metric",
                "mcc",
            ]
        )
        == 2
    )
    assert "metric 'mcc' does not apply to token classification" in capsys.readouterr().err
    assert main(["evaluate", "--model", str(tmp_path / "run/best"), "--data", str(train), "--task", "sst2"]) == 2
    assert (
        "holds an AlbertForTokenClassification but the data options ask for a classification task"
        in capsys.readouterr().err
    )


# ------------------------------------------------------------------------------- tag scheme and label sets
def test_tags_must_fit_the_scheme(shared_data, tmp_path):
    from litebert.finetune.token import is_tag

    assert all(is_tag(t) for t in ("O", "B-PER", "I-PER.NAM", "E-LOC", "S-MISC", "B-X-Y"))
    assert not any(is_tag(t) for t in ("0", "1", "label", "B", "B-", "b-per", "o", "L-PER", "PER", "OUT"))
    # SST-2 dev is two tab-separated columns: its header's "label" would be the first tag
    with pytest.raises(LitebertError, match=r"SST-2/dev\.tsv:1: tag 'label' \(column 1\) is not an entity tag"):
        read_token_file(shared_data / "glue/SST-2/dev.tsv")
    nohdr = tmp_path / "nohdr.tsv"  # a labelled sentence per line, no header: "1" is not a tag
    nohdr.write_text("EU\tB-ORG\na charming and often affecting journey\t1\n")
    with pytest.raises(LitebertError, match=r"nohdr\.tsv:2: tag '1' \(column 1\)"):
        read_token_file(nohdr)
    with pytest.raises(LitebertError, match=r"nohdr\.tsv:2: tag '1'"):  # unlabelled reads check a tag column too
        read_token_file(nohdr, require_labels=False)
    jl = tmp_path / "t.jsonl"
    jl.write_text('{"tokens": ["a"], "tags": ["O"]}\n{"tokens": ["John", "x"], "tags": ["B-PER", "person"]}\n')
    with pytest.raises(LitebertError, match=r"t\.jsonl:2: tag 'person' \('tags'\)"):
        read_token_file(jl)
    ok = tmp_path / "bioes.txt"  # IOB1 (an I- opening an entity) and BIOES read as they are
    ok.write_text("John I-PER\nSmith I-PER\n\nin O\nNew B-LOC\nYork E-LOC\nParis S-LOC\n")
    assert [ex.tags for ex in read_token_file(ok).examples] == [["I-PER", "I-PER"], ["O", "B-LOC", "E-LOC", "S-LOC"]]


def test_entity_metrics_leak_no_seqeval_warning(caplog):
    import warnings

    from litebert.config import AlbertConfig
    from litebert.finetune.token import TokenKind

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        m = entity_metrics([["B-PER", "I-PER", "O"]], [["LABEL_1", "LABEL_2", "O"]])  # a model's odd id2label
    assert not seen, [str(w.message) for w in seen]
    assert m["f1"] == 0.0 and m["recall"] == 0.0 and m["accuracy"] == pytest.approx(1 / 3)
    kind = TokenKind(DataOptions(task_type="token"))
    with caplog.at_level(logging.WARNING, logger="litebert"):
        kind.from_config(AlbertConfig.from_preset("albert-debug").replace(num_labels=3))
    assert kind.labels == ["LABEL_0", "LABEL_1", "LABEL_2"]
    assert "3 name(s) that are not entity tags" in caplog.text and caplog.text.count("\n") == 1


def test_conll2003_preset_uses_its_nine_tags(conll_run, shared_data, tmp_path, caplog):
    """The first 400 lines of CoNLL-2003 train have no I-LOC; the preset's head still has CoNLL's 9 IOB2 tags, in
    the order of the Hugging Face conll2003 data set, and dev's I-LOC is no unknown tag."""
    from litebert.finetune.kinds import make_kind
    from litebert.tokenization import load_tokenizer

    head = tmp_path / "head400.txt"
    head.write_text("\n".join((shared_data / "conll2003/train.txt").read_text().splitlines()[:400]) + "\n")
    kind = make_kind(DataOptions(task="conll2003"))
    train = kind.read(head, require_labels=True)
    seen = {t for ex in train.examples for t in ex.tags}
    assert "I-LOC" not in seen and len(seen) == 8
    kind.fit(train)
    assert kind.labels == ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]
    assert kind.config_overrides()["num_labels"] == 9
    dev = tmp_path / "dev.txt"
    dev.write_text("\n".join((shared_data / "conll2003/dev.txt").read_text().splitlines()[:300]) + "\n")
    dev_read = kind.read(dev, require_labels=True)
    assert "I-LOC" in {t for ex in dev_read.examples for t in ex.tags}
    with caplog.at_level(logging.WARNING, logger="litebert"):
        feats = kind.featurize(dev_read, load_tokenizer(conll_run[2]), 24, "dev")
    assert feats.extra["unknown_tags"] == {} and "tags the model does not know" not in caplog.text
    bad = tmp_path / "bad.txt"  # a tag outside the preset's set: the line that has it
    bad.write_text("-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nMonday NNP I-NP B-DATE\n")
    with pytest.raises(LitebertError, match=r"bad\.txt:4: tag 'B-DATE' is not one of the conll2003 tags"):
        kind.fit(kind.read(bad, require_labels=True))


def test_weibo_and_msra_presets_equal_the_data_sets_tags(shared_data):
    from litebert.finetune.tasks import get_task

    weibo = read_token_file(shared_data / "weibo_ner/weiboNER_2nd_conll.train", strip_segment_digits=True)
    assert set(get_task("weibo_ner").labels) == {t for ex in weibo.examples for t in ex.tags}
    assert len(get_task("weibo_ner").labels) == 17 and get_task("weibo_ner").labels[0] == "O"
    msra = read_token_file(shared_data / "msra_ner_sighan2006/msra_test_bio.txt")
    assert get_task("msra_ner").labels == ("O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG")
    assert set(get_task("msra_ner").labels) == {t for ex in msra.examples for t in ex.tags}


def test_custom_tags_are_closed_under_their_scheme(tmp_path):
    from litebert.finetune.token import label_list

    bio = tmp_path / "bio.txt"  # LOC only as one-word entities: I-LOC never written
    bio.write_text("Paris B-LOC\nis O\n\nJohn B-PER\nSmith I-PER\n")
    assert label_list(read_token_file(bio)) == ("O", "B-LOC", "I-LOC", "B-PER", "I-PER")
    bioes = tmp_path / "bioes.txt"
    bioes.write_text("Paris S-LOC\nJohn B-PER\nSmith E-PER\n")
    assert label_list(read_token_file(bioes)) == (
        "O",
        *("B-LOC", "I-LOC", "E-LOC", "S-LOC"),
        *("B-PER", "I-PER", "E-PER", "S-PER"),
    )
    only_o = tmp_path / "o.txt"
    only_o.write_text("a O\nb O\n")
    with pytest.raises(LitebertError, match=r"o\.txt: no entity tags in the training file \(only \['O'\]\)"):
        label_list(read_token_file(only_o))


def test_cli_ner_refuses_a_classification_file(conll_run, shared_data, tmp_path, capsys):
    """`finetune --task conll2003 --train SST-2/train.tsv` and `evaluate` of a NER model on SST-2 dev: one error
    line naming the file, the line and the tag; no seqeval warning."""
    import warnings

    from litebert.cli import main

    _, out, model, _ = conll_run
    sst = shared_data / "glue/SST-2/dev.tsv"
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        argv = ["finetune", "--model", str(model), "--task", "conll2003", "--train", str(sst)]
        assert main([*argv, "--dev", str(shared_data / "conll2003/dev.txt"), "--output", str(tmp_path / "r")]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"{sst}:1: tag 'label' (column 1) is not an entity tag" in err, err
        assert not (tmp_path / "r").exists()
        assert main(["evaluate", "--model", str(out / "best"), "--data", str(sst), "--max-seq-length", "24"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"{sst}:1: tag 'label'" in err, err
    assert not [w for w in seen if "NE tag" in str(w.message)]


# ------------------------------------------------------------------- JSON lines: empty sentences, ner_tags, ids
CONLL_TAGS = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]


def test_jsonl_empty_sentence_keeps_its_line(conll_run, tmp_path, capsys):
    """`"tokens": []` was dropped silently: predict wrote 2 predictions for 3 lines and numbered the third line 1.
    Now an unlabelled read keeps it (an empty prediction: outputs line up with the input lines) and a labelled read
    (train, dev, evaluate) drops it and counts it in `dropped`."""
    from litebert.cli import main

    _, out, model, _ = conll_run
    unl = tmp_path / "unl.jsonl"
    unl.write_text('{"tokens": ["EU"]}\n{"tokens": []}\n{"tokens": ["Peter", "Blackburn"]}\n')
    read = read_token_file(unl, require_labels=False)
    assert [(ex.index, ex.words, ex.tags, ex.line) for ex in read.examples] == [
        (0, ["EU"], None, 1),
        (1, [], None, 2),
        (2, ["Peter", "Blackburn"], None, 3),
    ]
    assert read.skipped == 0 and not read.has_labels
    lab = tmp_path / "lab.jsonl"
    lab.write_text(
        '{"tokens": ["EU"], "tags": ["B-ORG"]}\n{"tokens": [], "tags": []}\n{"tokens": []}\n'
        '{"tokens": ["Peter", "Blackburn"], "tags": ["B-PER", "I-PER"]}\n'
    )
    read = read_token_file(lab)
    assert [(ex.index, ex.words, ex.tags, ex.line) for ex in read.examples] == [
        (0, ["EU"], ["B-ORG"], 1),
        (3, ["Peter", "Blackburn"], ["B-PER", "I-PER"], 4),
    ]
    assert (read.skipped, read.skip_reason) == (2, "empty sentences, 'tokens': []")
    assert [ex.words for ex in read_token_file(lab, require_labels=False).examples] == [
        ["EU"],
        [],
        [],
        ["Peter", "Blackburn"],
    ]
    empty = tmp_path / "empty.jsonl"
    empty.write_text('{"tokens": []}\n{"tokens": []}\n')
    with pytest.raises(LitebertError, match=r"^.*empty\.jsonl: no sentences \(only 2 empty 'tokens' lists\)$"):
        read_token_file(empty, require_labels=False)

    # predict: the two sentences with words get the tags they get alone, the empty one an empty prediction
    alone = tmp_path / "alone.jsonl"
    alone.write_text('{"tokens": ["EU"]}\n{"tokens": ["Peter", "Blackburn"]}\n')
    best = out / "best"
    oracle = predict(EvaluateConfig(model=str(best), data_file=str(alone), max_seq_length=24)).predictions
    pr = predict(EvaluateConfig(model=str(best), data_file=str(unl), max_seq_length=24))
    assert pr.predictions == [oracle[0], [], oracle[1]] and pr.indices == [0, 1, 2] and pr.num_examples == 3
    argv = ["predict", "--model", str(best), "--data", str(unl), "--max-seq-length", "24"]
    assert main(argv) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"0\t{oracle[0][0]}",
        "1\t",
        f"2\t{' '.join(oracle[1])}",
    ]
    assert main([*argv, "--output", str(tmp_path / "pr")]) == 0
    assert f"wrote 3 predictions to {tmp_path / 'pr/predictions.jsonl'}" in capsys.readouterr().err
    lines = [json.loads(ln) for ln in (tmp_path / "pr/predictions.jsonl").read_text().splitlines()]
    assert lines == [
        {"tokens": ["EU"], "predicted_tags": oracle[0]},
        {"tokens": [], "predicted_tags": []},
        {"tokens": ["Peter", "Blackburn"], "predicted_tags": oracle[1]},
    ]
    # evaluate (a labelled read): the empty lines are dropped and counted; the rows keep their line numbers
    ev = evaluate(EvaluateConfig(model=str(best), data_file=str(lab), max_seq_length=24))
    assert (ev.num_examples, ev.dropped, ev.indices) == (2, 2, [0, 3])
    assert ev.predictions == oracle and ev.labels == [["B-ORG"], ["B-PER", "I-PER"]]
    # finetune: dropped per split in finetune_config.json
    cfg = FinetuneConfig(
        model=str(model),
        train_file=str(lab),
        dev_file=str(lab),
        output_dir=str(tmp_path / "run"),
        data=DataOptions(task_type="token"),
        max_steps=1,
        max_seq_length=24,
        progress_bar=False,
    )
    result = finetune(cfg)
    assert result.dropped == {"train": 2, "dev": 2} and result.num_dev == 2
    assert json.loads((tmp_path / "run/finetune_config.json").read_text())["dropped"] == {"train": 2, "dev": 2}


def test_preset_refuses_tags_outside_its_set_and_predict_does_not_score_them(conll_run, tmp_path, caplog):
    """An unlabelled CoNLL-2003 file (`word POS chunk`) under --task conll2003: its chunk tags were taken as gold
    NER tags (test_results.json with f1_NP ..., a warning only). Now evaluate and finetune --dev/--test refuse it
    (file:line and the tag); predict predicts it without scoring, as classification does with unknown labels."""
    _, out, model, test = conll_run
    best = out / "best"
    chunks = tmp_path / "test_chunks.txt"
    chunks.write_text("-DOCSTART- -X- -X-\n\nEU NNP B-NP\nrejects VBZ B-VP\n\nPeter NNP B-NP\nBlackburn NNP I-NP\n")
    want = (
        f"{chunks}:3: tag 'B-NP' is not one of the conll2003 tags {CONLL_TAGS}: is the file unlabelled (CoNLL-2003 "
        "without NER tags ends in the chunk column), or are its NER tags in another column than the last "
        "(--tag-column)? `litebert predict` predicts such a file without scoring it"
    )
    with pytest.raises(LitebertError) as err:
        evaluate(EvaluateConfig(model=str(best), data_file=str(chunks), max_seq_length=24))
    assert str(err.value) == want
    base = dict(model=str(model), train_file=str(test), data=DataOptions(task="conll2003"), max_seq_length=24)
    for split in ("dev_file", "test_file"):
        files = {"dev_file": str(test), split: str(chunks)}
        cfg = FinetuneConfig(**base, **files, output_dir=str(tmp_path / split), max_steps=1, progress_bar=False)
        with pytest.raises(LitebertError) as err:
            finetune(cfg)
        assert str(err.value) == want, split
    chunks_col = tmp_path / "chunks_col1.txt"  # the message names a --tag-column given
    chunks_col.write_text("EU B-NP NNP\n")
    opts = DataOptions(task="conll2003", tag_column=1)
    with pytest.raises(LitebertError, match=r"chunks_col1\.txt:1: tag 'B-NP' .* in another column than column 1 "):
        evaluate(EvaluateConfig(model=str(best), data_file=str(chunks_col), data=opts, max_seq_length=24))
    jl = tmp_path / "chunks.jsonl"
    jl.write_text('{"tokens": ["EU"], "tags": ["O"]}\n{"tokens": ["Peter"], "tags": ["B-NP"]}\n')
    with pytest.raises(LitebertError, match=r"chunks\.jsonl:2: tag 'B-NP' .* or are its NER tags in another field\? "):
        evaluate(EvaluateConfig(model=str(best), data_file=str(jl), max_seq_length=24))

    words = tmp_path / "words.txt"  # the same sentences without tags: predict's oracle
    words.write_text("EU\nrejects\n\nPeter\nBlackburn\n")
    oracle = predict(EvaluateConfig(model=str(best), data_file=str(words), max_seq_length=24)).predictions
    with caplog.at_level(logging.WARNING, logger="litebert"):
        pr = predict(
            EvaluateConfig(model=str(best), data_file=str(chunks), output_dir=str(tmp_path / "pr"), max_seq_length=24)
        )
    assert f"predict: {chunks}:3: tag 'B-NP' is not one of the conll2003 tags" in caplog.text
    assert "its rows are predicted, not scored (no metrics)" in caplog.text
    assert "tags the model does not know" not in caplog.text
    assert pr.metrics == {} and pr.predictions == oracle
    assert (tmp_path / "pr/predictions.txt").read_text().splitlines() == [
        f"EU B-NP {oracle[0][0]}",
        f"rejects B-VP {oracle[0][1]}",
        "",
        f"Peter B-NP {oracle[1][0]}",
        f"Blackburn I-NP {oracle[1][1]}",
    ]


def test_jsonl_ner_tags_field_and_integer_tag_ids(conll_run, tmp_path):
    """`datasets`' to_json() of conll2003 writes `ner_tags` (ClassLabel ids): it was refused ("'tags' missing").
    Now `ner_tags` is read as `tags`; integer ids are named by the task preset's tags (conll2003: the Hub data
    set's order), and without a preset they are an error naming the line."""
    from litebert.finetune.kinds import make_kind

    _, out, _, _ = conll_run
    names = tmp_path / "names.jsonl"
    names.write_text(
        '{"tokens": ["EU", "rejects", "German"], "ner_tags": ["B-ORG", "O", "B-MISC"]}\n'
        '{"tokens": ["Peter", "Blackburn"], "ner_tags": ["B-PER", "I-PER"]}\n'
    )
    assert [ex.tags for ex in read_token_file(names).examples] == [["B-ORG", "O", "B-MISC"], ["B-PER", "I-PER"]]
    hf = tmp_path / "hf.jsonl"  # as datasets writes it
    hf.write_text(
        '{"id": "0", "tokens": ["EU", "rejects", "German"], "pos_tags": [22, 42, 16], "ner_tags": [3, 0, 7]}\n'
        '{"id": "1", "tokens": ["Peter", "Blackburn"], "pos_tags": [22, 22], "ner_tags": [1, 2]}\n'
    )
    with pytest.raises(LitebertError) as err:
        read_token_file(hf)
    assert str(err.value) == (
        f"{hf}:1: 'ner_tags' holds integer tag ids (3) and nothing names them: write the tags as strings (B-PER ...), "
        "or give the --task whose tags they number in order (conll2003: the Hugging Face data set's ner_tags)"
    )
    kind = make_kind(DataOptions(task="conll2003"))
    read = kind.read(hf, require_labels=True)
    assert [ex.tags for ex in read.examples] == [["B-ORG", "O", "B-MISC"], ["B-PER", "I-PER"]]
    past = tmp_path / "past.jsonl"
    past.write_text('{"tokens": ["a"], "ner_tags": [0]}\n{"tokens": ["b"], "ner_tags": [9]}\n')
    with pytest.raises(LitebertError) as err:
        kind.read(past, require_labels=True)
    assert str(err.value) == (
        f"{past}:2: tag id 9 in 'ner_tags' is not one of the 9 ids of the task's tags (0..8: {CONLL_TAGS})"
    )
    other = tmp_path / "other.jsonl"
    other.write_text('{"tokens": ["a"], "labels": ["O"]}\n')
    with pytest.raises(LitebertError) as err:
        read_token_file(other)
    assert str(err.value) == (
        f"{other}:1: 'tags' (or 'ner_tags') missing (keys: ['tokens', 'labels']); training and dev files need tags"
    )
    # evaluate with the conll2003 model (its preset from config.json): ids score as their names
    best = out / "best"
    by_id = evaluate(EvaluateConfig(model=str(best), data_file=str(hf), max_seq_length=24))
    by_name = evaluate(EvaluateConfig(model=str(best), data_file=str(names), max_seq_length=24))
    assert by_id.labels == by_name.labels == [["B-ORG", "O", "B-MISC"], ["B-PER", "I-PER"]]
    assert by_id.metrics == by_name.metrics and by_id.predictions == by_name.predictions


def _redrawn_tagger(conll_run, directory):
    """conll_run's tagger with its classifier redrawn (its few steps predict "O" everywhere), saved with its
    tokenizer to ``directory``: a model whose predictions hold several tags. Returns (model, directory)."""
    from litebert.modeling import AlbertForTokenClassification
    from litebert.tokenization import load_tokenizer

    out = conll_run[1]
    model = AlbertForTokenClassification.from_pretrained(out / "best")
    torch.manual_seed(0)
    with torch.no_grad():
        model.classifier.weight.normal_(0.0, 1.0)
    model.save_pretrained(directory)
    load_tokenizer(out / "best").save(directory)
    return model, directory
