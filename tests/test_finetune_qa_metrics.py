"""Extractive-QA metrics against the official scorers' definitions, on cases computed by hand.

SQuAD: ``evaluate-v1.1.py`` / ``evaluate-v2.0.py`` (normalisation lower → punctuation → articles → whitespace;
token F1 with multiset overlap; max over references; v2's empty references and ``find_best_thresh``).
CMRC 2018: ``cmrc2018_evaluate.py`` (mixed segmentation, longest common *substring* F1, punctuation-only EM).
"""

from __future__ import annotations

import pytest

from litebert.errors import LitebertError
from litebert.finetune.qa_metrics import (
    cmrc_exact,
    cmrc_f1,
    cmrc_metrics,
    find_best_thresh,
    mixed_segmentation,
    normalize_answer,
    squad_exact,
    squad_f1,
    squad_scores,
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


def test_v1_and_cmrc_refuse_a_question_without_reference_answers():
    """evaluate-v1.1.py and cmrc2018_evaluate.py take max() over the references and fail on none; litebert scored
    such a question 0 (f1 50 here). Only v2.0 has unanswerable questions: there the same references score 100."""
    refs, preds = {"a": ["Paris"], "b": []}, {"a": "Paris", "b": ""}
    for metric, name in ((squad_v1_metrics, "SQuAD v1.1"), (cmrc_metrics, "CMRC 2018")):
        with pytest.raises(LitebertError) as e:
            metric(refs, preds)
        assert str(e.value) == (
            f"question 'b' has no reference answer (1 of 2 questions): the {name} metric scores answered questions "
            "only (unanswerable ones: SQuAD v2.0)"
        )
    with pytest.raises(LitebertError, match="question 'b' has no reference answer"):
        squad_scores(refs, preds, "1.1")
    got = squad_v2_metrics(refs, preds)
    assert (got["exact"], got["f1"], got["HasAns_total"], got["NoAns_total"]) == (100.0, 100.0, 1.0, 1.0)


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
    f1, thresh = find_best_thresh({"q1": 1.0, "q2": 0.0, "q3": 2 / 3}, na, {"q1": True, "q2": False, "q3": True})
    assert f1 == pytest.approx(100 * (2 + 2 / 3) / 3) and thresh == 0.5
    full = squad_v2_metrics(refs, best_span, na_probs=na, na_prob_thresh=0.5)
    assert full["best_f1"] == pytest.approx(f1) and full["best_f1_thresh"] == 0.5
    assert full["best_exact"] == pytest.approx(100 * 2 / 3) and full["best_exact_thresh"] == -1.0
    assert full["f1"] == pytest.approx(f1)  # applying the chosen threshold gives the best score


def _official_find_best_thresh(preds, scores, na_probs, qid_to_has_ans):
    """``find_best_thresh`` of the official ``evaluate-v2.0.py``, step for step (the oracle of the tie-free cases)."""
    cur_score = best_score = sum(1 for k in qid_to_has_ans if not qid_to_has_ans[k])
    best_thresh = 0.0
    for qid in sorted(na_probs, key=lambda k: na_probs[k]):
        if qid not in scores:
            continue
        if qid_to_has_ans[qid]:
            diff = scores[qid]
        else:
            diff = -1 if preds[qid] else 0
        cur_score += diff
        if cur_score > best_score:
            best_score, best_thresh = cur_score, na_probs[qid]
    return 100.0 * best_score / len(scores), best_thresh


def _exhaustive_best(refs, preds, na):
    """The best (score, threshold) pair by trying every cut (below all, then at each distinct na value) and scoring
    the answers it gives with ``squad_v2_metrics``: the lowest threshold of the best f1 and of the best exact."""
    cuts = [min(na.values()) - 1.0, *sorted(set(na.values()))]
    scored = [(squad_v2_metrics(refs, preds, na_probs=na, na_prob_thresh=t), t) for t in cuts]
    out = {}
    for name in ("exact", "f1"):
        best = max(m[name] for m, _ in scored)
        out[name] = (best, next(t for m, t in scored if m[name] == best))
    return out


def _check_realised(refs, preds, na):
    """best_f1/best_exact are the best any cut gives, and their thresholds give them."""
    got = squad_v2_metrics(refs, preds, na_probs=na)
    want = _exhaustive_best(refs, preds, na)
    for name in ("exact", "f1"):
        assert got[f"best_{name}"] == pytest.approx(want[name][0])
        assert got[f"best_{name}_thresh"] == want[name][1]
        applied = squad_v2_metrics(refs, preds, na_probs=na, na_prob_thresh=got[f"best_{name}_thresh"])
        assert applied[name] == pytest.approx(got[f"best_{name}"])
    return got


def test_squad_v2_threshold_when_answering_nothing_is_best():
    """Defect: every null − best difference negative and "answer nothing" best: the search returned the official
    script's placeholder threshold 0.0, which answered every question (f1 0 where best_f1 was 66.7)."""
    refs = {"q1": ["Denver"], "q2": [], "q3": []}
    preds = {"q1": "Broncos", "q2": "Denver", "q3": "Carolina"}  # every answer wrong
    na = {"q1": -0.02, "q2": -0.03, "q3": -0.015}
    got = _check_realised(refs, preds, na)
    # all null: q2, q3 right -> 2/3; answering q2 first (-1) only loses; the threshold lies under every na value
    assert got["best_f1"] == pytest.approx(100 * 2 / 3) and got["best_exact"] == pytest.approx(100 * 2 / 3)
    assert got["best_f1_thresh"] == got["best_exact_thresh"] == pytest.approx(-1.03)
    assert squad_v2_metrics(refs, preds, na_probs=na, na_prob_thresh=-1.03)["f1"] == pytest.approx(100 * 2 / 3)
    # the official placeholder: the same best score, but its threshold answers everything
    assert _official_find_best_thresh(
        preds, {"q1": 0.0, "q2": 0.0, "q3": 0.0}, na, {"q1": True, "q2": False, "q3": False}
    ) == (
        pytest.approx(100 * 2 / 3),
        0.0,
    )
    assert squad_v2_metrics(refs, preds, na_probs=na, na_prob_thresh=0.0)["f1"] == 0.0
    # probabilities (the script's own input, all > 0): answering nothing is under the smallest one too
    probs = {"q1": 0.4, "q2": 0.3, "q3": 0.9}
    assert find_best_thresh({"q1": 0.0, "q2": 0.0, "q3": 0.0}, probs, {"q1": True, "q2": False, "q3": False}) == (
        pytest.approx(100 * 2 / 3),
        pytest.approx(-0.7),
    )


def test_squad_v2_threshold_when_answering_everything_is_best():
    refs = {"q1": ["Denver"], "q2": ["Carolina Panthers"], "q3": []}
    preds = {"q1": "Denver", "q2": "Panthers", "q3": ""}  # q3's best span is empty: answering it costs nothing
    na = {"q1": 1.5, "q2": -2.0, "q3": 0.25}
    got = _check_realised(refs, preds, na)
    # start 1 (q3); q2 +2/3, q3 +0, q1 +1 -> 8/3 at q1's 1.5 (F1); EM: q2 +0, q3 +0, q1 +1 -> 2 at 1.5
    assert got["best_f1"] == pytest.approx(100 * (8 / 3) / 3) and got["best_f1_thresh"] == 1.5
    assert got["best_exact"] == pytest.approx(100 * 2 / 3) and got["best_exact_thresh"] == 1.5
    official = _official_find_best_thresh(
        preds, {"q1": 1.0, "q2": 2 / 3, "q3": 1.0}, na, {"q1": True, "q2": True, "q3": False}
    )
    assert official == (pytest.approx(got["best_f1"]), 1.5)


def test_squad_v2_threshold_with_tied_scores_answers_the_tie_together():
    """No threshold separates equal na values: the official script can stop in the middle of a tie (q1 answered, q2
    not, both at 0.5) and report a score that its threshold does not give; here a tie is answered as a whole."""
    refs = {"q1": ["Denver"], "q2": [], "q3": ["Santa Clara"]}
    preds = {"q1": "Denver", "q2": "Denver", "q3": "Santa Clara"}
    has = {"q1": True, "q2": False, "q3": True}
    na = {"q1": 0.5, "q2": 0.5, "q3": 2.0}
    official = _official_find_best_thresh(preds, {"q1": 1.0, "q2": 0.0, "q3": 1.0}, na, has)
    # the script: start 1 (q2 null); q1 +1 -> 2, best, at 0.5; q2 -1 -> 1; q3 +1 -> 2, not better: 2/3 at 0.5
    assert official == (pytest.approx(100 * 2 / 3), 0.5)
    got = _check_realised(refs, preds, na)
    # all null: 1 (q2); the tie {q1 +1, q2 -1}: 1; q3 +1: 2 -> best 2/3 at 2.0 (everything answered)
    assert got["best_f1"] == pytest.approx(100 * 2 / 3) and got["best_f1_thresh"] == 2.0
    # ... but 0.5 answers q1 and q2 and leaves q3 out: 1/3
    assert squad_v2_metrics(refs, preds, na_probs=na, na_prob_thresh=0.5)["f1"] == pytest.approx(100 * 1 / 3)
    # a tie at the bottom whose sum loses: nothing answered, under the tie
    na = {"q1": 0.5, "q2": 0.5, "q3": 0.5}
    preds = {"q1": "Denver", "q2": "Denver", "q3": "Broncos"}
    got = _check_realised(refs, preds, na)
    assert got["best_f1"] == pytest.approx(100 / 3) and got["best_f1_thresh"] == pytest.approx(-0.5)


def test_squad_v2_threshold_search_against_the_official_and_every_cut():
    """Random cases: best score and threshold equal trying every cut; without ties and with an answer among the
    best they equal the official script's."""
    import random

    rng = random.Random(0)
    words = ["denver", "broncos", "carolina", "panthers", "santa", "clara", "1990"]
    compared = 0
    for case in range(300):
        n = rng.randint(1, 8)
        refs, preds, na = {}, {}, {}
        for i in range(n):
            q = f"q{i}"
            refs[q] = [" ".join(rng.sample(words, rng.randint(1, 2)))] if rng.random() < 0.6 else []
            preds[q] = " ".join(rng.sample(words, rng.randint(1, 2))) if rng.random() < 0.9 else ""
            na[q] = round(rng.uniform(-3, 3), 1 if case % 3 == 0 else 6)  # every third case on a coarse grid: ties
        got = _check_realised(refs, preds, na)
        has = {q: bool(r) for q, r in refs.items()}
        _, f1_raw = squad_scores(refs, preds, "2.0")
        official = _official_find_best_thresh(preds, f1_raw, na, has)
        tied = len(set(na.values())) < len(na)
        nothing = got["best_f1_thresh"] < min(na.values())
        if not tied and not nothing:
            assert official == (pytest.approx(got["best_f1"]), got["best_f1_thresh"])
            compared += 1
        assert official[0] >= got["best_f1"] - 1e-9  # the official total is never below a realisable one
    assert compared > 50


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
