"""Metric functions against values computed by hand (the arithmetic is in the comments)."""

import math

import numpy as np
import pytest

from litebert.errors import LitebertError
from litebert.finetune import metrics

# preds/labels: TP = 3 (rows 0, 3, 5), FP = 1 (row 2), FN = 1 (row 4), TN = 1 (row 1)
PRED = np.array([1, 0, 1, 1, 0, 1])
GOLD = np.array([1, 0, 0, 1, 1, 1])


def test_binary_classification_metrics_by_hand():
    out = metrics.compute_metrics(("accuracy", "f1", "mcc"), PRED, GOLD, num_labels=2)
    assert out["accuracy"] == pytest.approx(4 / 6)
    # precision 3/4, recall 3/4 -> F1 3/4
    assert out["f1"] == pytest.approx(0.75)
    # (TP*TN - FP*FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN)) = (3 - 1) / sqrt(4*4*2*2) = 2/8
    assert out["mcc"] == pytest.approx(0.25)
    assert list(out) == ["accuracy", "f1", "mcc"]


def test_macro_f1_three_classes_by_hand():
    pred = np.array([0, 1, 2, 2, 1, 0])
    gold = np.array([0, 1, 2, 1, 1, 2])
    # class 0: P 1/2 R 1 -> 2/3; class 1: P 1 R 2/3 -> 4/5; class 2: P 1/2 R 1/2 -> 1/2
    expected = (2 / 3 + 4 / 5 + 1 / 2) / 3
    assert metrics.f1(pred, gold, num_labels=3) == pytest.approx(expected)
    assert metrics.compute_metrics(["f1_macro"], pred, gold, 3)["f1_macro"] == pytest.approx(expected)


def test_correlations_by_hand():
    x = np.array([1.0, 2.0, 3.0, 4.0])
    y = np.array([2.0, 4.0, 5.0, 4.0])
    # deviations: x (-1.5,-.5,.5,1.5), y (-1.75,.25,1.25,.25): cov 3.5, var 5 and 4.75
    assert metrics.pearson(x, y) == pytest.approx(3.5 / math.sqrt(5 * 4.75))
    # ranks of y: (1, 2.5, 4, 2.5) -> deviations (-1.5, 0, 1.5, 0): cov 3, var 5 and 4.5
    assert metrics.spearman(x, y) == pytest.approx(3 / math.sqrt(5 * 4.5))


def test_degenerate_cases_are_zero_not_nan():
    const = np.zeros(5, dtype=int)
    gold = np.array([0, 1, 0, 1, 1])
    assert metrics.mcc(const, gold) == 0.0
    assert metrics.f1(const, gold) == 0.0
    assert metrics.pearson(np.ones(4), np.arange(4.0)) == 0.0


def test_multilabel_subset_accuracy_and_micro_f1():
    pred = np.array([[1, 0, 1], [0, 1, 0]])
    gold = np.array([[1, 0, 1], [0, 1, 1]])
    out = metrics.compute_metrics(("accuracy", "f1"), pred, gold, 3)
    assert out["accuracy"] == pytest.approx(0.5)
    # micro: TP 3, FP 0, FN 1 -> P 1, R 3/4 -> 6/7
    assert out["f1"] == pytest.approx(6 / 7)


def test_check_metrics_rejects_unknown_and_mismatched():
    assert metrics.check_metrics(["accuracy"], "single_label") == ("accuracy",)
    with pytest.raises(LitebertError, match="unknown metric"):
        metrics.check_metrics(["bleu"], "single_label")
    with pytest.raises(LitebertError, match="regression"):
        metrics.check_metrics(["accuracy"], "regression")
    with pytest.raises(LitebertError, match="regression"):
        metrics.check_metrics(["pearson"], "single_label")


def test_accuracy_is_sklearns():
    from sklearn.metrics import accuracy_score

    from litebert.finetune.metrics import accuracy

    rng = np.random.default_rng(0)
    p, y = rng.integers(0, 3, 200), rng.integers(0, 3, 200)
    assert accuracy(p, y) == float(accuracy_score(y, p))
    P, Y = rng.integers(0, 2, (50, 3)), rng.integers(0, 2, (50, 3))  # multi-label: whole rows must match
    assert accuracy(P, Y) == float(accuracy_score(Y, P))
