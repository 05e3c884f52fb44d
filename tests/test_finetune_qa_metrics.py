"""Extractive-QA metrics against the official scorers' definitions, on cases computed by hand.

SQuAD: ``evaluate-v1.1.py`` / ``evaluate-v2.0.py`` (normalisation lower → punctuation → articles → whitespace;
token F1 with multiset overlap; max over references; v2's empty references and ``find_best_thresh``).
CMRC 2018: ``cmrc2018_evaluate.py`` (mixed segmentation, longest common *substring* F1, punctuation-only EM).
"""

from __future__ import annotations

import pytest

from litebert.finetune.qa_metrics import (
    cmrc_exact,
    cmrc_f1,
    cmrc_metrics,
    find_best_thresh,
    mixed_segmentation,
    normalize_answer,
    squad_exact,
    squad_f1,
    squad_v1_metrics,
    squad_v2_metrics,
)


def test_normalize_answer():
    assert normalize_answer("  The Denver  Broncos! ") == "denver broncos"
    assert normalize_answer("U.S.") == "us"  # punctuation is removed, not replaced by a space
    assert normalize_answer("an apple, a pear") == "apple pear"
    assert normalize_answer("another theory") == "another theory"  # \b(a|an|the)\b: whole words only
    assert normalize_answer("the") == ""


@pytest.mark.parametrize(
    "pred, ref, em, f1",
    [
        ("The Denver Broncos!", "Denver Broncos", 1.0, 1.0),
        ("in the year 1990", "1990", 0.0, 0.5),  # "in year 1990" vs "1990": P 1/3, R 1 -> 2·(1/3)/(4/3)
        ("another apple", "apple", 0.0, 2 / 3),  # P 1/2, R 1
        ("b b c", "b c c", 0.0, 2 / 3),  # multiset overlap {b:1, c:1} = 2: P 2/3, R 2/3
        ("US", "U.S.", 1.0, 1.0),
        ("Broncos", "Panthers", 0.0, 0.0),
    ],
)
def test_squad_em_f1_single_reference(pred, ref, em, f1):
    assert squad_exact(pred, ref) == em
    assert squad_f1(pred, ref) == pytest.approx(f1)


def test_squad_v1_max_over_references_and_missing_predictions():
    refs = {"q1": ["Denver Broncos", "the Broncos"], "q2": ["1990"], "q3": ["Santa Clara"]}
    preds = {"q1": "Broncos of Denver", "q2": "in the year 1990"}  # q3 unanswered: scores 0, still counted
    # q1: vs "denver broncos" overlap 2, P 2/3 R 1 -> 0.8; vs "broncos" P 1/3 R 1 -> 0.5; max 0.8
    got = squad_v1_metrics(refs, preds)
    assert got["exact_match"] == pytest.approx(0.0)
    assert got["f1"] == pytest.approx(100 * (0.8 + 0.5 + 0.0) / 3)
    assert squad_v1_metrics({"q": ["x", "Denver"]}, {"q": "denver."}) == {"exact_match": 100.0, "f1": 100.0}


def test_squad_empty_answers_v1_vs_v2():
    # both normalise to "": v1 counts no overlap as F1 0, v2 scores two empty sides 1
    assert squad_f1("the", "a", version="1.1") == 0.0
    assert squad_f1("the", "a", version="2.0") == 1.0
    assert squad_f1("", "Denver", version="2.0") == 0.0


def test_squad_v2_unanswerable_and_best_threshold():
    refs = {"q1": ["Denver"], "q2": [], "q3": ["Carolina Panthers"]}
    preds = {"q1": "Denver", "q2": "", "q3": "Panthers"}
    got = squad_v2_metrics(refs, preds)
    # q1 EM 1 F1 1; q2 unanswerable, empty prediction: 1, 1; q3 EM 0, F1 P 1 R 1/2 -> 2/3
    assert got["exact"] == pytest.approx(100 * 2 / 3)
    assert got["f1"] == pytest.approx(100 * (1 + 1 + 2 / 3) / 3)
    assert got["HasAns_total"] == 2 and got["NoAns_total"] == 1
    assert got["NoAns_exact"] == 100.0 and got["HasAns_exact"] == 50.0

    # threshold search on non-null predictions (every question answered) with na_probs
    best_span = {"q1": "Denver", "q2": "Denver", "q3": "Panthers"}
    na = {"q1": -1.0, "q2": 2.0, "q3": 0.5}
    # start: all answered "" -> 1 (q2 right); in na order: q1 +1 -> 2 (thresh -1), q3 +2/3 -> 2.67 (thresh 0.5),
    # q2 answered "Denver" -> -1 -> 1.67; best F1 2.67/3 at 0.5; EM: q3 +0 -> best 2/3 at -1
    f1, thresh = find_best_thresh(
        best_span, {"q1": 1.0, "q2": 0.0, "q3": 2 / 3}, na, {"q1": True, "q2": False, "q3": True}
    )
    assert f1 == pytest.approx(100 * (2 + 2 / 3) / 3) and thresh == 0.5
    full = squad_v2_metrics(refs, best_span, na_probs=na, na_prob_thresh=0.5)
    assert full["best_f1"] == pytest.approx(f1) and full["best_f1_thresh"] == 0.5
    assert full["best_exact"] == pytest.approx(100 * 2 / 3) and full["best_exact_thresh"] == -1.0
    assert full["f1"] == pytest.approx(f1)  # applying the chosen threshold gives the best score


def test_cmrc_mixed_segmentation():
    assert mixed_segmentation("Hello世界 2018年，OK") == ["hello", "世", "界", "2018", "年", "，", "ok"]
    assert mixed_segmentation("Hello世界 2018年，OK", remove_punctuation=True) == [
        "hello",
        "世",
        "界",
        "2018",
        "年",
        "ok",
    ]
    assert mixed_segmentation("iPhone 7 Plus") == ["iphone", "7", "plus"]


@pytest.mark.parametrize(
    "pred, refs, em, f1",
    [
        ("北京大学", ["北京"], 0.0, 2 / 3),  # lcs 2: P 2/4, R 2/2
        ("北大京", ["北京"], 0.0, 0.4),  # longest common SUBSTRING is 1 (a subsequence would give 2): P 1/3, R 1/2
        ("《红楼梦》", ["红楼梦"], 1.0, 1.0),  # the scorer's punctuation is removed
        ("红楼 梦", ["红楼梦"], 0.0, 1.0),  # EM keeps spaces; segmentation drops them
        ("iPhone 7 Plus", ["iphone 7", "苹果"], 0.0, 0.8),  # max over references: P 2/3, R 1
        ("好……", ["好"], 0.0, None),  # "……" is two characters: the two-character list entry never matches
        ("", ["北京"], 0.0, 0.0),
    ],
)
def test_cmrc_em_f1(pred, refs, em, f1):
    assert cmrc_exact(pred, refs) == em
    if f1 is not None:
        assert cmrc_f1(pred, refs) == pytest.approx(f1)


def test_cmrc_metrics_average_and_missing():
    refs = {"a": ["北京"], "b": ["红楼梦"], "c": ["上海"]}
    got = cmrc_metrics(refs, {"a": "北京大学", "b": "《红楼梦》"})  # c missing: 0
    assert got["exact_match"] == pytest.approx(100 / 3)
    assert got["f1"] == pytest.approx(100 * (2 / 3 + 1) / 3)
    assert got["average"] == pytest.approx((got["exact_match"] + got["f1"]) / 2)
