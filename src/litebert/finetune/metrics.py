"""Evaluation metrics (scikit-learn / scipy): accuracy, F1, Matthews correlation, Pearson and Spearman.

All functions take 1-D numpy arrays: ``predictions`` and ``labels`` of integer class ids (``int64``, shape ``[N]``)
for classification, floats for regression; multi-label uses 0/1 matrices of shape ``[N, L]``. Values are plain
Python floats so they go straight into JSON.

Definitions follow GLUE: ``f1`` is binary F1 of class id 1 for two-class tasks (MRPC, QQP) and macro F1 otherwise;
``mcc`` is Matthews correlation (CoLA); ``pearson``/``spearman`` are correlations of regression outputs (STS-B).
Multi-label: ``accuracy`` is exact-match (subset) accuracy and ``f1`` is micro F1.
"""

from __future__ import annotations

import warnings

import numpy as np

from litebert.errors import LitebertError

METRICS = ("accuracy", "f1", "mcc", "pearson", "spearman", "f1_macro", "f1_micro")
"""Known metric names (``--metric``)."""

CLASSIFICATION_METRICS = ("accuracy", "f1", "mcc", "f1_macro", "f1_micro")
REGRESSION_METRICS = ("pearson", "spearman")


def accuracy(predictions: np.ndarray, labels: np.ndarray) -> float:
    """Fraction of rows whose prediction equals the label (all of a row's labels for 2-D multi-label input): the
    value of sklearn's ``accuracy_score``, without importing sklearn (seconds) for a mean."""
    same = np.asarray(predictions) == np.asarray(labels)
    return float(np.mean(same.all(axis=1) if same.ndim == 2 else same))


def f1(predictions: np.ndarray, labels: np.ndarray, num_labels: int = 2, average: str | None = None) -> float:
    """F1 score: binary (positive class id 1) when ``num_labels == 2`` and ``average`` is ``None``; else ``average``
    (default ``"macro"``; multi-label input defaults to ``"micro"``). Undefined cases (no positives) give 0.0."""
    from sklearn.metrics import f1_score

    if average is None:
        if labels.ndim == 2:
            average = "micro"
        else:
            average = "binary" if num_labels == 2 else "macro"
    kwargs = (
        {"pos_label": 1} if average == "binary" else {"labels": list(range(num_labels))} if labels.ndim == 1 else {}
    )
    return float(f1_score(labels, predictions, average=average, zero_division=0, **kwargs))


def mcc(predictions: np.ndarray, labels: np.ndarray) -> float:
    """Matthews correlation coefficient in [-1, 1]; 0.0 when undefined (a constant prediction)."""
    from sklearn.metrics import matthews_corrcoef

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(matthews_corrcoef(labels, predictions))


def pearson(predictions: np.ndarray, labels: np.ndarray) -> float:
    """Pearson correlation; 0.0 when either side is constant (undefined)."""
    from scipy.stats import pearsonr

    if len(labels) < 2 or np.all(predictions == predictions[0]) or np.all(labels == labels[0]):
        return 0.0
    return float(pearsonr(predictions, labels)[0])


def spearman(predictions: np.ndarray, labels: np.ndarray) -> float:
    """Spearman rank correlation; 0.0 when either side is constant (undefined)."""
    from scipy.stats import spearmanr

    if len(labels) < 2 or np.all(predictions == predictions[0]) or np.all(labels == labels[0]):
        return 0.0
    return float(spearmanr(predictions, labels)[0])


def default_metrics(problem_type: str, num_labels: int) -> tuple[str, ...]:
    """Metrics used when neither ``--task`` nor ``--metric`` names any."""
    if problem_type == "regression":
        return ("pearson", "spearman")
    if problem_type == "multi_label":
        return ("accuracy", "f1")
    return ("accuracy", "f1", "mcc") if num_labels == 2 else ("accuracy", "f1")


def check_metrics(names, problem_type: str) -> tuple[str, ...]:
    """Validate metric names for a problem type.

    Raises:
        LitebertError: unknown name, or a classification metric for regression and vice versa.
    """
    names = tuple(names)
    for name in names:
        if name not in METRICS:
            raise LitebertError(f"unknown metric {name!r}; known: {', '.join(METRICS)}")
        if problem_type == "regression" and name not in REGRESSION_METRICS:
            raise LitebertError(f"metric {name!r} needs classes; for regression use {', '.join(REGRESSION_METRICS)}")
        if problem_type != "regression" and name not in CLASSIFICATION_METRICS:
            raise LitebertError(f"metric {name!r} is for regression; problem type is {problem_type}")
    if not names:
        raise LitebertError("at least one metric is needed")
    return names


def compute_metrics(names, predictions: np.ndarray, labels: np.ndarray, num_labels: int) -> dict[str, float]:
    """Compute each metric in ``names`` (see :data:`METRICS`) → ``{name: value}`` in the order given.

    Args:
        predictions: ``int64 [N]`` class ids, ``float [N]`` regression values, or ``{0,1} [N, L]`` multi-label.
        labels: same shape and kind as ``predictions``.
        num_labels: number of classes (F1 averaging, label list).
    """
    predictions = np.asarray(predictions)
    labels = np.asarray(labels)
    if predictions.shape != labels.shape:
        raise ValueError(f"predictions {predictions.shape} and labels {labels.shape} differ in shape")
    out: dict[str, float] = {}
    for name in names:
        if name == "accuracy":
            out[name] = accuracy(predictions, labels)
        elif name == "f1":
            out[name] = f1(predictions, labels, num_labels)
        elif name == "f1_macro":
            out[name] = f1(predictions, labels, num_labels, average="macro")
        elif name == "f1_micro":
            out[name] = f1(predictions, labels, num_labels, average="micro")
        elif name == "mcc":
            out[name] = mcc(
                predictions.reshape(len(predictions), -1).argmax(-1) if predictions.ndim == 2 else predictions,
                labels.reshape(len(labels), -1).argmax(-1) if labels.ndim == 2 else labels,
            )
        elif name == "pearson":
            out[name] = pearson(predictions.astype(np.float64), labels.astype(np.float64))
        elif name == "spearman":
            out[name] = spearman(predictions.astype(np.float64), labels.astype(np.float64))
        else:
            raise LitebertError(f"unknown metric {name!r}; known: {', '.join(METRICS)}")
    return out
