"""Extractive QA end to end: readers and bad input, answer offsets, windows and character offsets for the three
tokenizer kinds (against transformers' tokenizers), n-best decoding, SQuAD and CMRC slices, an overfit case,
transformers parity of the answers, and the CLI.

Models are ``albert-debug`` (H 64, 2 layers, 128 positions) with tokenizers trained here on the task's contexts;
runs are a few dozen steps on a few paragraphs.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import shutil

import numpy as np
import pytest
import torch

from litebert.cli import main
from litebert.errors import LitebertError
from litebert.finetune import (
    DataOptions,
    EvaluateConfig,
    FinetuneConfig,
    evaluate,
    finetune,
    predict,
)
from litebert.finetune.qa import (
    QAFeatures,
    build_features,
    check_window_options,
    decode_predictions,
    locate_answer,
    qa_default,
    read_qa_file,
    window_starts,
)
from litebert.finetune.qa_metrics import cmrc_metrics, squad_v1_metrics
from litebert.tokenization import load_tokenizer

pytestmark = pytest.mark.usefixtures("one_thread")

SEQ, STRIDE, QLEN = 128, 32, 24


def _tiny_model(path, corpus_lines, kind, vocab=1000):
    from litebert.config import AlbertConfig
    from litebert.modeling import AlbertForPreTraining
    from litebert.tokenization import train_tokenizer

    corpus = path.parent / f"{path.name}.txt"
    corpus.write_text("\n".join(corpus_lines) + "\n", encoding="utf-8")
    tok = train_tokenizer([str(corpus)], kind, vocab, path)
    torch.manual_seed(0)
    AlbertForPreTraining(AlbertConfig.from_preset("albert-debug", vocab_size=tok.vocab_size)).save_pretrained(path)
    return path


def _squad_doc(articles):
    return {"version": "1.1", "data": articles}


@pytest.fixture(scope="module")
def squad(shared_data):
    return json.loads((shared_data / "squad/v1.1/dev-v1.1.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def cmrc(shared_data):
    return json.loads((shared_data / "cmrc2018/cmrc2018_trial.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def en_models(squad, tmp_path_factory):
    root = tmp_path_factory.mktemp("qa_en")
    lines = [p["context"] for a in squad["data"][:4] for p in a["paragraphs"]]
    lines += [q["question"] for a in squad["data"][:4] for p in a["paragraphs"] for q in p["qas"]]
    return {
        "sentencepiece": _tiny_model(root / "sp", lines, "sentencepiece"),
        "wordpiece": _tiny_model(root / "wp", lines, "wordpiece"),
    }


@pytest.fixture(scope="module")
def zh_model(cmrc, tmp_path_factory):
    root = tmp_path_factory.mktemp("qa_zh")
    lines = [p["context"] for a in cmrc["data"] for p in a["paragraphs"]]
    lines += [q["question"] for a in cmrc["data"] for p in a["paragraphs"] for q in p["qas"]]
    return _tiny_model(root / "zh", lines, "chinese", vocab=3000)


def _cfg(model, train, dev, out, task="squad", qa=None, **kw):
    """A small run: QA options ``qa`` on top of doc_stride=STRIDE, max_query_length=QLEN."""
    data = kw.pop("data", None) or DataOptions(
        task=task, **{"doc_stride": STRIDE, "max_query_length": QLEN, **(qa or {})}
    )
    base = {
        "model": str(model),
        "train_file": str(train),
        "dev_file": str(dev),
        "output_dir": str(out),
        "data": data,
        "batch_size": 16,
        "max_steps": 12,
        "learning_rate": 3e-3,
        "warmup_ratio": 0.1,
        "max_seq_length": SEQ,
        "eval_steps": 6,
        "progress_bar": False,
        "keep_checkpoints": False,
        "precision": "fp32",  # compared with transformers (fp32) and across batchings: near-tied span scores
    }
    base.update(kw)
    return FinetuneConfig(**base)


#: a context that fits one window
CTX = "Super Bowl 50 was played on February 7, 2016, at Levi's Stadium in Santa Clara, California."


def _answered(qid: str, question: str, text: str) -> dict:
    return {
        "id": qid,
        "question": question,
        "context": CTX,
        "answers": {"text": [text], "answer_start": [CTX.index(text)]},
    }


def _rows_file(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


# ------------------------------------------------------------------------------------------ reading + offsets
def test_locate_answer_hand_cases():
    ctx = "the cat sat on the mat; the cat left"
    assert locate_answer(ctx, "cat", 4) == (4, "exact")
    assert locate_answer(ctx, "cat", 5) == (4, "drifted")  # CMRC's off-by-one
    assert locate_answer(ctx, "cat", 26) == (28, "drifted")  # the nearest occurrence, not the first
    assert locate_answer(ctx, "cat", -1) == (4, "no_offset")  # CMRC dev's -1: the first occurrence
    assert locate_answer(ctx, "mat", 0) == (19, "drifted")  # 19 characters away: within MAX_OFFSET_DRIFT
    assert locate_answer("x" * 50 + "dog", "dog", 0) == (50, "far")
    assert locate_answer(ctx, "dog", 3) == (None, "unlocated")


def test_read_formats_and_v2(tmp_path):
    ctx = "Denver Broncos won Super Bowl 50 in 2016."
    squad_v2 = {
        "version": "v2.0",
        "data": [
            {
                "title": "t",
                "paragraphs": [
                    {
                        "context": ctx,
                        "qas": [
                            {
                                "id": "a",
                                "question": "Who won?",
                                "answers": [{"text": "Denver Broncos", "answer_start": 0}],
                                "is_impossible": False,
                            },
                            {
                                "id": "b",
                                "question": "Who lost?",
                                "answers": [],
                                "is_impossible": True,
                                "plausible_answers": [{"text": "Denver", "answer_start": 0}],
                            },
                        ],
                    }
                ],
            }
        ],
    }
    p = tmp_path / "v2.json"
    p.write_text(json.dumps(squad_v2))
    r = read_qa_file(p)
    assert r.layout == "squad" and [e.qid for e in r.examples] == ["a", "b"]
    a, b = r.examples
    assert ctx[a.start_char : a.end_char] == "Denver Broncos" and not a.is_impossible
    assert b.is_impossible and b.answers == () and b.start_char is None  # plausible answers are not answers
    assert r.references == {"a": ["Denver Broncos"], "b": []}

    rows = [
        {"id": "1", "question": "When?", "context": ctx, "answers": {"text": ["2016"], "answer_start": [36]}},
        {"id": "2", "question": "What?", "context": ctx, "answers": [{"text": "Super Bowl 50", "answer_start": 19}]},
        {"id": "3", "question": "Score?", "context": ctx, "answers": {"text": ["24-10"], "answer_start": [3]}},
    ]
    p = tmp_path / "q.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    r = read_qa_file(p)
    assert r.layout == "jsonl"
    assert [ctx[e.start_char : e.end_char] if e.start_char is not None else None for e in r.examples] == [
        "2016",
        "Super Bowl 50",
        None,
    ]
    # "24-10" is nowhere in the context: counted, kept as a reference, not trained on; no crash
    assert r.offsets["unlocated"] == 1 and r.offsets["exact"] == 2 and "q.jsonl:3" in r.problems[0]
    # gzip-compressed (before: "not UTF-8"): read as the text it holds
    import gzip

    (tmp_path / "q.jsonl.gz").write_bytes(gzip.compress(p.read_bytes()))
    gz = read_qa_file(tmp_path / "q.jsonl.gz")
    assert gz.layout == "jsonl" and gz.references == r.references
    assert [dataclasses.replace(e, where="") for e in gz.examples] == [
        dataclasses.replace(e, where="") for e in r.examples
    ]
    assert gz.examples[2].where == f"{tmp_path / 'q.jsonl.gz'}:3"
    assert r.examples[2].answers == ("24-10",)


def test_bad_input_names_file_and_position(tmp_path):
    def write(name, obj):
        p = tmp_path / name
        p.write_text(obj if isinstance(obj, str) else json.dumps(obj))
        return p

    doc = {
        "data": [
            {
                "paragraphs": [
                    {"context": "c", "qas": [{"id": "x", "question": "q", "answers": []}]},
                    {"qas": [{"id": "y", "question": "q", "answers": []}]},
                ]
            }
        ]
    }
    with pytest.raises(LitebertError, match=r"bad\.json:data\[0\]\.paragraphs\[1\]: missing 'context'"):
        read_qa_file(write("bad.json", doc))
    doc = {"data": [{"paragraphs": [{"context": "c", "qas": [{"question": "q", "answers": []}]}]}]}
    with pytest.raises(LitebertError, match=r"noid\.json:data\[0\]\.paragraphs\[0\]\.qas\[0\]: missing 'id'"):
        read_qa_file(write("noid.json", doc))
    with pytest.raises(LitebertError, match=r"rows\.jsonl:2: missing 'context'"):
        read_qa_file(
            write(
                "rows.jsonl",
                '{"id": "1", "question": "q", "context": "c", "answers": []}\n'
                '{"id": "2", "question": "q", "answers": []}\n',
            )
        )
    with pytest.raises(LitebertError, match=r"broken\.jsonl:1: not valid JSON"):
        read_qa_file(write("broken.jsonl", '{"id": 1,\n'))
    with pytest.raises(LitebertError, match="duplicate question id '1'"):
        read_qa_file(write("dup.jsonl", '{"id": "1", "question": "q", "context": "c", "answers": []}\n' * 2))
    with pytest.raises(LitebertError, match=r"answers\[0\]\.answer_start 'x' is not an integer"):
        read_qa_file(
            write(
                "off.jsonl",
                '{"id": "1", "question": "q", "context": "c", "answers": [{"text": "c", "answer_start": "x"}]}\n',
            )
        )


def test_cmrc_trial_offsets_drift(shared_data):
    r = read_qa_file(shared_data / "cmrc2018/cmrc2018_trial.json")
    # SOURCE.md: 997 exact; 5 (TRIAL_210_QUERY_*) one too large, UTF-16 offsets after U+2B6AD
    assert r.offsets == {"exact": 997, "drifted": 5, "far": 0, "no_offset": 0, "unlocated": 0}
    drifted = [e for e in r.examples if e.qid.startswith("TRIAL_210_QUERY_")]
    assert drifted and all(e.context[e.start_char : e.end_char] == e.answers[0] for e in drifted)


def test_drcd_and_squad_files_read_as_published(shared_data):
    """SOURCE.md counts: DRCD dev 3,524 questions with 2 answers each, SQuAD v1.1 dev 10,570 questions and 34,726
    answers; every offset exact; the drcd task scores with the CMRC 2018 scorer."""
    from litebert.finetune.qa import QAKind

    drcd = read_qa_file(shared_data / "drcd/DRCD_dev.json")
    assert len(drcd.examples) == 3524 and all(len(e.answers) == 2 for e in drcd.examples)
    assert drcd.offsets["exact"] == 3524 and drcd.layout == "squad"
    squad = read_qa_file(shared_data / "squad/v1.1/dev-v1.1.json")
    assert len(squad.examples) == 10570 and sum(len(e.answers) for e in squad.examples) == 34726
    assert squad.offsets["exact"] == 10570
    assert QAKind(DataOptions(task="drcd")).metric == "cmrc" and QAKind(DataOptions(task="squad")).metric == "squad"


# --------------------------------------------------------------------------------- windows + offsets per kind
def test_window_starts():
    assert window_starts(10, 10, 3) == [0]
    assert window_starts(11, 10, 3) == [0, 7]
    assert window_starts(30, 10, 4) == [0, 6, 12, 18, 24]  # overlap 4; the last window ends at token 30


@pytest.mark.parametrize("kind", ["sentencepiece", "wordpiece", "chinese"])
def test_windows_and_offsets_match_transformers(kind, en_models, zh_model):
    """Every window's ids equal transformers' ``tokenizer(q, ctx, truncation="only_second", stride=doc_stride,
    return_overflowing_tokens=True)``; the labelled window maps back to the answer's characters; the others are
    labelled at [CLS]."""
    from transformers import AutoTokenizer

    from litebert.finetune.qa import QAExample

    model_dir = zh_model if kind == "chinese" else en_models[kind]
    if kind == "chinese":
        ctx = (
            "北京大学创建于1898年，初名京师大学堂，是中国第一所国立综合性大学。" * 3
            + "校园位于海淀区，占地面积约274公顷，APEC会议期间对外开放。"
            + "学校有很多学院和研究所。" * 4
        )
        answer = "274公顷"
        question = "北京大学校园占地面积多少？"
    else:
        ctx = (
            "The Super Bowl is the annual championship game of the National Football League. " * 3
            + "Super Bowl 50 was played on February 7, 2016, at Levi's Stadium in Santa Clara, California. "
            + "The game was the fiftieth Super Bowl, and the league emphasised the golden anniversary. " * 3
        )
        answer = "Levi's Stadium"
        question = "Where was Super Bowl 50 played?"
    start = ctx.index(answer)
    ex = QAExample("q", question, ctx, (answer,), start, start + len(answer), False, "test")
    tok = load_tokenizer(model_dir)
    seq, stride = 64, 16
    feats = build_features([ex], tok, seq, stride, 32)  # the question is shorter: transformers does not cut it
    assert len(feats) >= 3 and feats.truncated_questions == 0  # the context needs several windows

    hf = AutoTokenizer.from_pretrained(str(model_dir))
    enc = hf(
        question,
        ctx,
        truncation="only_second",
        max_length=seq,
        stride=stride,
        return_overflowing_tokens=True,
        return_offsets_mapping=True,
        return_token_type_ids=True,
    )
    assert [list(x) for x in enc["input_ids"]] == feats.input_ids
    assert [list(x) for x in enc["token_type_ids"]] == feats.token_type_ids
    labelled = 0
    for f in range(len(feats)):
        seq_ids = enc.sequence_ids(f)
        hf_offsets = [o if s == 1 else (-1, -1) for o, s in zip(enc["offset_mapping"][f], seq_ids)]
        assert feats.offsets[f].tolist() == [list(o) for o in hf_offsets]
        s, e = feats.start_positions[f], feats.end_positions[f]
        if s == 0:
            assert e == 0
            continue
        labelled += 1
        assert ctx[feats.offsets[f][s, 0] : feats.offsets[f][e, 1]] == answer
    assert labelled >= 1


def test_decode_over_windows_hand_case():
    """Two windows of one question, logits set by hand: the best valid span over both windows wins, spans longer
    than max_answer_length, ending before they start, or touching the question are excluded, duplicates from the
    overlap are merged, and the null score is the smaller [CLS] score."""
    from litebert.finetune.qa import QAExample

    ctx = "aa bb cc dd ee"
    # window tokens: [CLS] q [SEP] <ctx tokens> [SEP]; context tokens are the words
    words = [(0, 2), (3, 5), (6, 8), (9, 11), (12, 14)]
    w1 = np.array([[-1, -1], [-1, -1], [-1, -1], *words[:3], [-1, -1]])  # aa bb cc
    w2 = np.array([[-1, -1], [-1, -1], [-1, -1], *words[2:], [-1, -1]])  # cc dd ee
    feats = QAFeatures([[0] * 7, [0] * 7], [[0] * 7, [0] * 7], np.array([0, 0]), [w1, w2], None, None)
    s1 = np.array([1.0, 9.0, 0, 2.0, 0, 0, 0])  # question token 1 has a high score but is not context
    e1 = np.array([1.0, 0, 0, 0, 0, 3.0, 0])  # best in w1: aa..cc = 2 + 3 = 5 (3 tokens)
    s2 = np.array([0.5, 0, 0, 1.0, 4.0, 0, 0])
    e2 = np.array([0.5, 0, 0, 0, 2.5, 0.0, 0])  # best in w2: dd..dd = 4 + 2.5 = 6.5
    ex = QAExample("q", "q?", ctx, ("dd",), 9, 11, False, "t")
    got = decode_predictions([ex], feats, [s1, s2], [e1, e2], n_best_size=3, max_answer_length=3)
    assert got.predictions == {"q": "dd"}
    nb = got.nbest["q"]
    assert [x["text"] for x in nb] == ["dd", "aa bb cc", "dd ee"]  # 6.5, 2 + 3 = 5, 4 + 0 = 4
    assert sum(x["probability"] for x in nb) == pytest.approx(1.0)
    assert nb[0]["probability"] == pytest.approx(1 / (1 + np.exp(-1.5) + np.exp(-2.5)))
    short = decode_predictions([ex], feats, [s1, s2], [e1, e2], n_best_size=3, max_answer_length=1)
    # one-token spans only: dd 6.5, cc 0 + 3 = 3 (window 1; window 2's cc = 1 is the same span), aa 2
    assert [x["text"] for x in short.nbest["q"]] == ["dd", "cc", "aa"]
    # SQuAD v2: null = min CLS score over windows = 0.5 + 0.5 = 1; odds 1 - 6.5
    v2 = decode_predictions([ex], feats, [s1, s2], [e1, e2], n_best_size=3, max_answer_length=3, with_null=True)
    assert v2.null_odds == {"q": pytest.approx(-5.5)} and v2.predictions == {"q": "dd"}
    v2 = decode_predictions([ex], feats, [s1, s2], [e1, e2], 3, 3, with_null=True, null_threshold=-6.0)
    assert v2.predictions == {"q": ""} and v2.best_span == {"q": "dd"}


# ---------------------------------------------------------------------------------------------- end to end
@pytest.fixture(scope="module")
def squad_run(en_models, squad, tmp_path_factory):
    """Train on the first paragraphs of article 0, evaluate on paragraphs of article 1 (split by article)."""
    root = tmp_path_factory.mktemp("squad_run")
    train, dev = root / "train.json", root / "dev.json"
    train.write_text(json.dumps(_squad_doc([{**squad["data"][0], "paragraphs": squad["data"][0]["paragraphs"][:3]}])))
    dev.write_text(json.dumps(_squad_doc([{**squad["data"][1], "paragraphs": squad["data"][1]["paragraphs"][:2]}])))
    result = finetune(_cfg(en_models["sentencepiece"], train, dev, root / "run", max_steps=10, eval_steps=10))
    return result, root / "run", dev


def test_squad_slice_outputs(squad_run):
    result, out, dev = squad_run
    for name in (
        "best/config.json",
        "best/spiece.model",
        "eval_results.json",
        "predictions.json",
        "nbest_predictions.json",
        "finetune_config.json",
        "metrics.jsonl",
    ):
        assert (out / name).is_file(), name
    config = json.loads((out / "best/config.json").read_text())
    assert config["architectures"] == ["AlbertForQuestionAnswering"] and config["finetuning_task"] == "squad"
    read = read_qa_file(dev)
    preds = json.loads((out / "predictions.json").read_text())
    assert set(preds) == {e.qid for e in read.examples}
    nbest = json.loads((out / "nbest_predictions.json").read_text())
    for e in read.examples:  # every answer is a span of its context, the first n-best entry
        assert preds[e.qid] in e.context and nbest[e.qid][0]["text"] == preds[e.qid]
    results = json.loads((out / "eval_results.json").read_text())
    # the reported metric is the official one recomputed from predictions.json
    assert results["f1"] == pytest.approx(squad_v1_metrics(read.references, preds)["f1"])
    assert results["num_examples"] == len(read.examples) and result.eval_results["f1"] == results["f1"]


def test_evaluate_and_predict_reproduce_finetune(squad_run, tmp_path, caplog):
    result, out, dev = squad_run
    kw = {"max_seq_length": SEQ, "precision": "fp32"}
    ev = evaluate(EvaluateConfig(model=str(out / "best"), data_file=str(dev), output_dir=str(tmp_path / "ev"), **kw))
    assert ev.metrics["f1"] == pytest.approx(result.eval_results["f1"])
    pr = predict(EvaluateConfig(model=str(out / "best"), data_file=str(dev), output_dir=str(tmp_path / "pr"), **kw))
    assert json.loads((tmp_path / "pr/predictions.json").read_text()) == json.loads(
        (out / "predictions.json").read_text()
    )
    assert pr.num_examples == len(read_qa_file(dev).examples)
    with caplog.at_level(logging.WARNING, logger="litebert.finetune"):  # other windows than fine-tuned with
        predict(EvaluateConfig(model=str(out / "best"), data_file=str(dev), max_seq_length=96, precision="fp32"))
    assert f"fine-tuned with --max-seq-length {SEQ}; these windows have 96 tokens" in caplog.text


def _sentence_rows(paragraphs, limit):
    """JSON-lines rows whose context is the sentence holding the first answer (short: one window each)."""
    rows = []
    for p in paragraphs:
        for q in p["qas"]:
            a, ctx = q["answers"][0], p["context"]
            cut = ctx.rfind(". ", 0, a["answer_start"])
            s = cut + 2 if cut >= 0 else 0
            e = ctx.find(". ", a["answer_start"] + len(a["text"]))
            sentence = ctx[s : e + 1 if e >= 0 else len(ctx)]
            if 60 < len(sentence) < 200 and q["question"] not in {r["question"] for r in rows}:
                rows.append(
                    {
                        "id": q["id"],
                        "question": q["question"],
                        "context": sentence,
                        "answers": {"text": [a["text"]], "answer_start": [a["answer_start"] - s]},
                    }
                )
            if len(rows) == limit:
                return rows
    return rows


def _pipeline_answers(hf_tok, hf_model, question, context):
    """transformers' question-answering pipeline, step by step: windows from the tokenizer with ``stride``, the
    model, and per window the pipeline's span selection ``select_starts_ends`` (transformers 5 dropped the
    ``question-answering`` task from ``pipeline()`` but keeps this function); ``[(score, answer text)]``."""
    from transformers.pipelines.document_question_answering import select_starts_ends

    enc = hf_tok(
        question,
        context,
        truncation="only_second",
        max_length=SEQ,
        stride=STRIDE,
        return_overflowing_tokens=True,
        return_offsets_mapping=True,
        return_token_type_ids=True,
        padding="max_length",
        return_tensors="pt",
    )
    with torch.no_grad():
        logits = hf_model(
            input_ids=enc["input_ids"], attention_mask=enc["attention_mask"], token_type_ids=enc["token_type_ids"]
        )
    answers = []
    for w in range(len(enc["input_ids"])):
        p_mask = np.array([0 if s == 1 else 1 for s in enc.sequence_ids(w)])
        p_mask[0] = 0  # the pipeline keeps [CLS] selectable, then zeroes its probability
        starts, ends, scores, _ = select_starts_ends(
            logits.start_logits[w : w + 1].numpy(),
            logits.end_logits[w : w + 1].numpy(),
            p_mask[None],
            enc["attention_mask"][w : w + 1].numpy(),
            max_answer_len=30,
        )
        offs = enc["offset_mapping"][w]
        answers.append((float(scores[0]), context[int(offs[starts[0]][0]) : int(offs[ends[0]][1])]))
    return answers


def test_transformers_parity(squad_run, squad, tmp_path):
    """The fine-tuned ``best/`` in transformers (AutoTokenizer, AutoModelForQuestionAnswering, the pipeline's span
    selection: :func:`_pipeline_answers`) gives ``litebert predict``'s answer text.

    Named differences, both in the pipeline's post-processing: (1) across windows the pipeline ranks each window's
    best span by its probability *within that window* (softmax per window), litebert by ``start + end`` logits over
    all windows (google-research / transformers ``run_qa``): for questions with several windows litebert's answer
    must be one of the pipeline's per-window answers; (2) the pipeline does not cut the question to
    ``max_query_length``: longer questions are left out. Single-window questions must agree exactly.
    """
    from transformers import AutoModelForQuestionAnswering, AutoTokenizer

    _, out, dev = squad_run
    best = out / "best"
    short = tmp_path / "short.jsonl"
    short.write_text("\n".join(json.dumps(r) for r in _sentence_rows(squad["data"][1]["paragraphs"][2:], 16)))
    pr = predict(EvaluateConfig(model=str(best), data_file=str(short), max_seq_length=SEQ, precision="fp32"))
    short_preds = dict(zip([e.qid for e in read_qa_file(short).examples], pr.predictions))
    long_preds = json.loads((out / "predictions.json").read_text())  # dev: contexts of 2-4 windows
    hf_tok = AutoTokenizer.from_pretrained(str(best))
    hf_model = AutoModelForQuestionAnswering.from_pretrained(str(best)).eval()
    counts = {"single": 0, "multi": 0}
    for path, preds in ((short, short_preds), (dev, long_preds)):
        for ex in read_qa_file(path).examples:
            if len(hf_tok(ex.question)["input_ids"]) - 2 > QLEN:
                continue  # difference (2)
            answers = _pipeline_answers(hf_tok, hf_model, ex.question, ex.context)
            if len(answers) == 1:
                counts["single"] += 1
                assert preds[ex.qid] == answers[0][1], ex.qid
            else:
                counts["multi"] += 1
                assert preds[ex.qid] in [a for _, a in answers], ex.qid  # difference (1)
    assert counts["single"] >= 10 and counts["multi"] >= 5, counts


def test_cmrc_slice(zh_model, cmrc, tmp_path):
    train, dev = tmp_path / "train.json", tmp_path / "dev.json"
    train.write_text(json.dumps({"version": "v1.0", "data": cmrc["data"][:12]}, ensure_ascii=False), encoding="utf-8")
    dev.write_text(json.dumps({"version": "v1.0", "data": cmrc["data"][200:204]}, ensure_ascii=False), encoding="utf-8")
    result = finetune(_cfg(zh_model, train, dev, tmp_path / "run", task="cmrc2018"))
    preds = json.loads((tmp_path / "run/predictions.json").read_text(encoding="utf-8"))
    read = read_qa_file(dev)
    assert set(preds) == {e.qid for e in read.examples}
    expected = cmrc_metrics(read.references, preds)
    assert result.eval_results["f1"] == pytest.approx(expected["f1"])
    assert set(result.eval_results) >= {"exact_match", "f1", "average"}


def test_overfit_recovers_training_answers(en_models, squad, tmp_path):
    """Twelve SQuAD questions cut to the sentence holding the answer (JSON lines, one window each): after training
    on them the model answers them: exact match ≥ 75 on its own training questions."""
    rows = _sentence_rows(squad["data"][0]["paragraphs"], 12)
    data = tmp_path / "train.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    result = finetune(
        _cfg(
            en_models["wordpiece"],
            data,
            data,
            tmp_path / "run",
            task=None,
            data=DataOptions(task_type="qa", doc_stride=STRIDE, max_query_length=32),
            batch_size=12,
            max_steps=60,
            eval_steps=30,
            learning_rate=5e-3,
            warmup_ratio=0.05,
        )
    )
    assert result.eval_results["exact_match"] >= 75.0, result.eval_results
    config = json.loads((tmp_path / "run/best/config.json").read_text())
    assert config["litebert_qa_metric"] == "squad" and "finetuning_task" not in config


def test_cli_finetune_predict(en_models, squad, tmp_path, capsys):
    train, dev = tmp_path / "train.json", tmp_path / "dev.json"
    train.write_text(json.dumps(_squad_doc([{**squad["data"][2], "paragraphs": squad["data"][2]["paragraphs"][:2]}])))
    dev.write_text(json.dumps(_squad_doc([{**squad["data"][3], "paragraphs": squad["data"][3]["paragraphs"][:1]}])))
    out = tmp_path / "run"
    rc = main(
        [
            "finetune",
            "--model",
            str(en_models["sentencepiece"]),
            "--train",
            str(train),
            "--dev",
            str(dev),
            "--output",
            str(out),
            "--task",
            "squad",
            "--max-steps",
            "4",
            "--batch-size",
            "16",
            "--max-seq-length",
            str(SEQ),
            "--doc-stride",
            "32",
            "--max-query-length",
            "24",
            "--n-best-size",
            "5",
            "--max-answer-length",
            "10",
            "--no-progress",
        ]
    )
    assert rc == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out[captured.out.index("{") :])
    assert set(summary["eval_results"]) >= {"exact_match", "f1"}
    nbest = json.loads((out / "nbest_predictions.json").read_text())
    assert all(1 <= len(v) <= 5 for v in nbest.values())
    rc = main(
        [
            "predict",
            "--model",
            str(out / "best"),
            "--data",
            str(dev),
            "--output",
            str(tmp_path / "pr"),
            "--max-seq-length",
            str(SEQ),
        ]
    )
    assert rc == 0
    assert json.loads((tmp_path / "pr/predictions.json").read_text()) == json.loads(
        (out / "predictions.json").read_text()
    )
    # a QA option alone on evaluate: the task and the other options as saved with the model
    rc = main(
        [
            "evaluate",
            "--model",
            str(out / "best"),
            "--data",
            str(dev),
            "--output",
            str(tmp_path / "ev"),
            "--max-seq-length",
            str(SEQ),
            "--n-best-size",
            "2",
        ]
    )
    assert rc == 0
    assert set(json.loads(capsys.readouterr().out)) >= {"exact_match", "f1"}
    assert all(len(v) <= 2 for v in json.loads((tmp_path / "ev/nbest_predictions.json").read_text()).values())
    # bad input through the CLI: one error line, no traceback
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "1", "question": "q", "answers": []}\n')
    rc = main(["predict", "--model", str(out / "best"), "--data", str(bad), "--max-seq-length", str(SEQ)])
    assert rc != 0
    err = capsys.readouterr().err
    assert "bad.jsonl:1: missing 'context'" in err and "Traceback" not in err


def test_squad_v2_threshold_chosen_on_dev_and_saved(en_models, squad, tmp_path):
    """A v2 file (each paragraph's questions plus questions borrowed from another article, unanswerable): the
    null threshold is the official best_f1_thresh, saved in best/config.json, and predict applies it."""

    def v2_doc(article, other, n_par):
        pars = []
        for k, p in enumerate(article["paragraphs"][:n_par]):
            qas = [{**q, "is_impossible": False} for q in p["qas"][:4]]
            qas += [
                {"id": f"neg{k}_{q['id']}", "question": q["question"], "answers": [], "is_impossible": True}
                for q in other["paragraphs"][k]["qas"][:2]
            ]
            pars.append({"context": p["context"], "qas": qas})
        return {"version": "v2.0", "data": [{"title": article["title"], "paragraphs": pars}]}

    train, dev = tmp_path / "train.json", tmp_path / "dev.json"
    train.write_text(json.dumps(v2_doc(squad["data"][0], squad["data"][5], 5)))
    dev.write_text(json.dumps(v2_doc(squad["data"][1], squad["data"][6], 3)))
    result = finetune(_cfg(en_models["sentencepiece"], train, dev, tmp_path / "run", task="squad_v2", max_steps=8))
    res = result.eval_results
    assert {"exact", "f1", "HasAns_f1", "NoAns_f1", "best_f1", "best_f1_thresh"} <= set(res)
    assert res["f1"] == pytest.approx(res["best_f1"])  # predictions.json applies the chosen threshold
    config = json.loads((tmp_path / "run/best/config.json").read_text())
    assert config["litebert_null_score_diff_threshold"] == pytest.approx(res["best_f1_thresh"])
    odds = json.loads((tmp_path / "run/null_odds.json").read_text())
    preds = json.loads((tmp_path / "run/predictions.json").read_text())
    assert all((preds[q] == "") == (odds[q] > res["best_f1_thresh"]) for q in preds)
    pr = predict(
        EvaluateConfig(model=str(tmp_path / "run/best"), data_file=str(dev), max_seq_length=SEQ, precision="fp32")
    )
    assert dict(zip([e.qid for e in read_qa_file(dev).examples], pr.predictions)) == preds


def _window_error(stride: str, seq: int, qlen: str, window: int) -> str:
    return (
        f"--doc-stride {stride} must be smaller than the shortest context window, --max-seq-length {seq} - "
        f"--max-query-length {qlen} - 3 = {window} tokens ([CLS] question [SEP] window [SEP], the question cut to "
        "max_query_length tokens); lower --doc-stride or --max-query-length, or raise --max-seq-length"
    )


def test_doc_stride_too_large_is_refused_before_training(en_models, squad, tmp_path):
    """``doc_stride`` must be smaller than ``max_seq_length - 3 - max_query_length``, the shortest window any question
    leaves. Before, it was checked per question and only for contexts longer than one window: training files of
    short contexts accepted it and saved it in best/config.json, and predict failed on the first long context."""
    model = en_models["sentencepiece"]
    train = tmp_path / "t.json"
    train.write_text(json.dumps(_squad_doc([{**squad["data"][0], "paragraphs": squad["data"][0]["paragraphs"][:1]}])))
    short = _rows_file(tmp_path / "short.jsonl", [_answered("a", "Where?", "Levi's Stadium")])  # one window
    for data, qa, seq, message in (
        (short, {"doc_stride": 40}, 64, _window_error("40", 64, "24", 37)),  # before: trained, 40 saved
        (short, {"doc_stride": 37}, 64, _window_error("37", 64, "24", 37)),  # the bound itself
        (train, {"doc_stride": 120}, SEQ, _window_error("120", SEQ, "24", 101)),  # before: only when windows split
        (short, {"doc_stride": 100, "max_query_length": None}, 64, _window_error("100", 64, "30 (the default)", 31)),
    ):
        with pytest.raises(LitebertError) as e:
            finetune(_cfg(model, data, data, tmp_path / "run", qa=qa, max_seq_length=seq))
        assert str(e.value) == message
        assert not (tmp_path / "run/best").exists() and not (tmp_path / "run/metrics.jsonl").exists()
    # without the options, their defaults follow the length (as transformers' pipeline's doc_stride): always valid,
    # google-research/albert's 64 and 128 at its 384; at SEQ they are what fine-tuning saves
    assert [(qa_default("max_query_length", n), qa_default("doc_stride", n)) for n in (384, 128, 64, 5)] == [
        (64, 128),
        (62, 31),
        (30, 15),
        (1, 0),
    ]
    finetune(_cfg(model, short, short, tmp_path / "ok", qa={"doc_stride": None, "max_query_length": None}))
    saved = json.loads((tmp_path / "ok/best/config.json").read_text())
    want = qa_default("max_query_length", SEQ)
    assert (saved["max_query_length"], saved["doc_stride"]) == (want, qa_default("doc_stride", SEQ, want))
    # the largest doc_stride: windows of a max_query_length question overlap by all but one token
    check_window_options(64, 36, 24)
    long_q = "Where was the game that decided the champion of the league played, and in which city, and when? " * 2
    ex = read_qa_file(short).examples[0]
    ex = dataclasses.replace(ex, question=long_q, context=" ".join([ex.context] * 4))
    tok = load_tokenizer(model)
    feats = build_features([ex], tok, 64, 36, 24)
    n_ctx = len(tok.encode_with_offsets([ex.context])[0][0])
    assert feats.truncated_questions == 1 and len(feats) == n_ctx - 37 + 1  # a window at each context token
    windows = [ids[24 + 2 : -1] for ids in feats.input_ids]  # [CLS] q(24) [SEP] window [SEP]
    assert all(len(w) == 37 for w in windows) and all(a[1:] == b[:-1] for a, b in itertools.pairwise(windows))
    with pytest.raises(LitebertError) as e:
        build_features([read_qa_file(short).examples[0]], tok, 64, 37, 24)  # a short context: refused all the same
    assert str(e.value) == _window_error("37", 64, "24", 37)


def test_evaluate_and_predict_check_doc_stride_overrides(squad_run, tmp_path, caplog):
    """evaluate/predict check the window options they use, the saved ones or ``--doc-stride`` … overrides, before
    they run; a valid override cuts the windows it says."""
    _, out, dev = squad_run  # saved: doc_stride 32, max_query_length 24, max_seq_length SEQ
    best = str(out / "best")
    kw = {"model": best, "data_file": str(dev), "precision": "fp32"}
    with pytest.raises(LitebertError) as e:
        predict(EvaluateConfig(**kw, data=DataOptions(doc_stride=101), max_seq_length=SEQ))
    assert str(e.value) == _window_error("101", SEQ, "24 (saved with the model)", 101)
    with pytest.raises(LitebertError) as e:  # a shorter --max-seq-length against the saved doc_stride
        evaluate(EvaluateConfig(**kw, max_seq_length=56))
    assert str(e.value) == _window_error("32 (saved with the model)", 56, "24 (saved with the model)", 29)
    # a model whose saved options are impossible (fine-tuned before they were checked): refused, and an override runs
    old = tmp_path / "old"
    shutil.copytree(out / "best", old)
    config = json.loads((old / "config.json").read_text())
    (old / "config.json").write_text(json.dumps({**config, "doc_stride": 120}))
    with pytest.raises(LitebertError) as e:
        evaluate(EvaluateConfig(**{**kw, "model": str(old)}, max_seq_length=SEQ))
    assert str(e.value) == _window_error("120 (saved with the model)", SEQ, "24 (saved with the model)", 101)
    read = read_qa_file(dev)
    tok = load_tokenizer(out / "best")
    n = len(build_features(read.examples, tok, SEQ, 100, 24))
    assert n > len(build_features(read.examples, tok, SEQ, 32, 24))
    with caplog.at_level(logging.INFO, logger="litebert.finetune"):
        ev = evaluate(EvaluateConfig(**{**kw, "model": str(old)}, data=DataOptions(doc_stride=100), max_seq_length=SEQ))
    assert f"data: {len(read.examples)} questions -> {n} features" in caplog.text
    assert ev.num_examples == len(read.examples) and set(ev.metrics) >= {"exact_match", "f1"}


# -------------------------------------------------------------------------------- questions without answers
def _v2_file(path):
    qas = [
        {"id": "a", "question": "Where was it played?", "answers": [{"text": "Levi's Stadium", "answer_start": 49}]},
        {"id": "n", "question": "Who sang the anthem?", "answers": [], "is_impossible": True},
    ]
    path.write_text(json.dumps(_squad_doc([{"title": "t", "paragraphs": [{"context": CTX, "qas": qas}]}])))
    return path


def _no_answers_error(path, line: int, qid: str, of: str, v2: bool = False) -> str:
    return (
        f"{path}:{line}: question {qid!r} has no 'answers' ({of} questions of this file have none): every question "
        "of a training or dev file needs them"
        + (" ([] or is_impossible: true marks an unanswerable one)" if v2 else "")
        + "; litebert predict reads questions without answers"
    )


def _unanswerable_error(path, source: str, name: str) -> str:
    return (
        f"{path}:data[0].paragraphs[0].qas[1]: question 'n' is unanswerable (is_impossible: true or an empty "
        f"'answers'; 1 of 2 questions of this file), but {source} scores {name}, where every question has an answer; "
        "for unanswerable questions (SQuAD v2.0 layout) use --task squad_v2"
    )


def test_training_and_dev_questions_need_answers_the_metric_scores(en_models, tmp_path):
    """A question without ``answers`` was dropped from training (num_train 1 of 2, no message) and scored 0 on dev
    (f1 16.67 for one right of two); under --task squad a SQuAD v2 file's unanswerable question was trained at [CLS]
    and scored 0, where the official v1.1 script fails. Now both are errors that name the file, the position and
    the id, before any training; unanswerable questions point at --task squad_v2, which keeps training on them."""
    model = en_models["sentencepiece"]
    good = _rows_file(
        tmp_path / "good.jsonl",
        [_answered("a", "Where was it played?", "Levi's Stadium"), _answered("c", "City?", "Santa Clara")],
    )
    noans = _rows_file(
        tmp_path / "noans.jsonl",
        [_answered("a", "Where?", "Levi's Stadium"), {"id": "b", "question": "When?", "context": CTX}],
    )
    v2 = _v2_file(tmp_path / "v2.json")
    run = tmp_path / "run"
    cases = [
        ("squad", noans, good, _no_answers_error(noans, 2, "b", "1 of 2")),  # training: was dropped silently
        ("squad", good, noans, _no_answers_error(noans, 2, "b", "1 of 2")),  # dev: was scored 0
        ("squad_v2", good, noans, _no_answers_error(noans, 2, "b", "1 of 2", v2=True)),  # was scored unanswerable
        ("squad", v2, good, _unanswerable_error(v2, "--task squad", "SQuAD v1.1")),
        ("squad", good, v2, _unanswerable_error(v2, "--task squad", "SQuAD v1.1")),
        ("cmrc2018", good, v2, _unanswerable_error(v2, "--task cmrc2018", "CMRC 2018")),
        # --task-type qa: the metric, chosen from train after both files are read, checks dev at featurize
        (None, good, v2, _unanswerable_error(v2, f"--task-type qa (metric 'squad', chosen from {good})", "SQuAD v1.1")),
    ]
    for task, train, dev, message in cases:
        data = DataOptions(task=task, task_type=None if task else "qa", doc_stride=STRIDE, max_query_length=QLEN)
        with pytest.raises(LitebertError) as e:
            finetune(_cfg(model, train, dev, run, data=data))
        assert str(e.value) == message
        assert not (run / "best").exists() and not (run / "metrics.jsonl").exists()
    # SQuAD v2 trains on and scores its unanswerable questions (as does --task-type qa, which infers it)
    for i, data in enumerate((None, DataOptions(task_type="qa", doc_stride=STRIDE, max_query_length=QLEN))):
        result = finetune(
            _cfg(
                model,
                v2,
                v2,
                tmp_path / f"v2run{i}",
                task="squad_v2",
                max_steps=2,
                eval_steps=2,
                **({"data": data} if data else {}),
            )
        )
        res = result.eval_results
        assert (res["total"], res["HasAns_total"], res["NoAns_total"]) == (2.0, 1.0, 1.0)
        assert json.loads((tmp_path / f"v2run{i}/best/config.json").read_text())["litebert_qa_metric"] == "squad_v2"
        assert json.loads((tmp_path / f"v2run{i}/run_settings.json").read_text())["num_train"] == 2


def test_predict_reads_questions_without_answers_and_evaluate_refuses_them(squad_run, tmp_path, caplog):
    """predict reads unlabelled questions (no metrics) and predicts a file with some unanswered ones without scoring
    it (before: an unanswered question scored 0); evaluate, which scores, refuses such a file."""
    _, out, _ = squad_run
    kw = {"model": str(out / "best"), "max_seq_length": SEQ, "precision": "fp32"}
    unlabelled = _rows_file(
        tmp_path / "u.jsonl",
        [{"id": "u1", "question": "Where?", "context": CTX}, {"id": "u2", "question": "When?", "context": CTX}],
    )
    pr = predict(EvaluateConfig(**kw, data_file=str(unlabelled)))
    assert pr.metrics == {} and pr.labels is None and pr.num_examples == 2 and all(p in CTX for p in pr.predictions)
    noans = _rows_file(
        tmp_path / "noans.jsonl",
        [_answered("a", "Where?", "Levi's Stadium"), {"id": "b", "question": "When?", "context": CTX}],
    )
    v2 = _v2_file(tmp_path / "v2.json")
    for path, problem in (
        (noans, _no_answers_error(noans, 2, "b", "1 of 2")),
        (v2, _unanswerable_error(v2, "--task squad", "SQuAD v1.1")),  # the task saved with the model
    ):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="litebert.finetune"):
            pr = predict(EvaluateConfig(**kw, data_file=str(path), output_dir=str(tmp_path / f"pr_{path.stem}")))
        assert f"{problem}; its questions are predicted, not scored (no metrics)" in caplog.text
        assert pr.metrics == {} and pr.labels is None and pr.num_examples == 2
        assert set(json.loads((tmp_path / f"pr_{path.stem}/predictions.json").read_text())) == {
            e.qid for e in read_qa_file(path).examples
        }
        with pytest.raises(LitebertError) as e:
            evaluate(EvaluateConfig(**kw, data_file=str(path)))
        assert str(e.value) == problem


def test_a_json_list_is_read_as_rows_or_refused_as_not_qa(tmp_path):
    """A JSON document holding a list (pretty-printed, CRLF) is rows {id, question, context, answers} when its items
    are; any other list (C3's [paragraphs, questions, id] items) is refused as not QA data, where before the reader
    fell back to JSON lines and called the valid JSON file 'not valid JSON (Expecting value)'."""
    ctx = "Denver Broncos won Super Bowl 50."
    rows = [
        {
            "id": "q1",
            "question": "Who won?",
            "context": ctx,
            "answers": {"text": ["Denver Broncos"], "answer_start": [0]},
        },
        {
            "id": "q2",
            "question": "Which Bowl?",
            "context": ctx,
            "answers": {"text": ["Super Bowl 50"], "answer_start": [19]},
        },
    ]
    listed = tmp_path / "rows.json"
    listed.write_bytes(json.dumps(rows, indent=2).replace("\n", "\r\n").encode())
    r = read_qa_file(listed)
    assert [e.qid for e in r.examples] == ["q1", "q2"]
    assert r.layout == "jsonl" and r.examples[1].context == ctx
    c3 = tmp_path / "c3.json"
    c3.write_bytes(
        json.dumps([[["段落"], [{"question": "问", "choice": ["a", "b"], "answer": "a"}], "m1-1"]], indent=1)
        .replace("\n", "\r\n")
        .encode()
    )
    with pytest.raises(LitebertError, match=r"c3\.json: a JSON list whose item \[0\] is list: expected SQuAD layout"):
        read_qa_file(c3)


def test_a_broken_pretty_printed_json_file_is_reported_where_it_breaks(tmp_path):
    """A SQuAD-layout file spread over lines with an error on line 5 (a missing comma) was reported at line 1
    ("Expecting property name"), where the JSON-lines fallback failed; now at the line json reports."""
    broken = tmp_path / "dev.json"
    broken.write_text('{\n  "version": "1.1",\n  "data": [\n    {"title": "t"\n     "paragraphs": []}\n  ]\n}\n')
    with pytest.raises(LitebertError) as e:
        read_qa_file(broken)
    try:
        json.loads(broken.read_text())
    except json.JSONDecodeError as exc:  # the oracle: json's own position
        assert str(e.value) == f"{broken}:{exc.lineno}: not valid JSON ({exc.msg}, column {exc.colno})"
        assert exc.lineno == 5
    lines = tmp_path / "rows.jsonl"  # JSON lines broken on line 2: still that line
    lines.write_text('{"id": "a", "question": "q", "context": "c", "answers": []}\n{"id": "b",\n')
    with pytest.raises(LitebertError, match=r"rows\.jsonl:2: not valid JSON"):
        read_qa_file(lines)
    lines.write_text('{"id": "b",\n{"id": "a", "question": "q", "context": "c", "answers": []}\n')  # line 1 broken
    with pytest.raises(LitebertError, match=r"rows\.jsonl:1: not valid JSON"):
        read_qa_file(lines)


def test_a_v1_model_scored_as_squad_v2_is_warned_that_it_has_no_threshold(squad_run, tmp_path, caplog):
    """`evaluate --task squad_v2` on a model fine-tuned for SQuAD v1.1 used the null threshold 0.0 without a word."""
    _, out, dev = squad_run
    kw = {"model": str(out / "best"), "data_file": str(dev), "precision": "fp32", "max_seq_length": SEQ}
    with caplog.at_level("WARNING", logger="litebert"):
        ev = evaluate(EvaluateConfig(**kw, output_dir=str(tmp_path / "v2"), data=DataOptions(task="squad_v2")))
    assert "the model has no SQuAD v2 null-score threshold (it was not fine-tuned with --task squad_v2)" in caplog.text
    assert ev.metrics["null_score_diff_threshold"] == 0.0
    caplog.clear()
    with caplog.at_level("WARNING", logger="litebert"):
        evaluate(EvaluateConfig(**kw, output_dir=str(tmp_path / "v1")))
    assert "null-score threshold" not in caplog.text
