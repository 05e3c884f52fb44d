"""Extractive-QA metrics, exactly as the official scorers define them.

* SQuAD v1.1 (``evaluate-v1.1.py``) and v2.0 (``evaluate-v2.0.py``): answers normalised by lower case → remove
  ASCII punctuation (``string.punctuation``) → remove the articles ``a|an|the`` (``\\b(a|an|the)\\b``) → collapse
  whitespace; exact match = equal normalised strings; F1 = token F1 over the whitespace tokens of the normalised
  strings with a multiset overlap; both take the maximum over a question's reference answers and are averaged ×100.
  v2 differences: references that normalise to empty are dropped and an unanswerable question's references are
  ``[""]``; F1 of an empty prediction or reference is 1 if both are empty else 0 (v1 scores an empty overlap 0);
  ``find_best_thresh`` chooses the no-answer threshold on the scores (``best_exact``/``best_f1`` and their
  ``_thresh``; here always a threshold that gives that score, see there).
* CMRC 2018 (``cmrc2018_evaluate.py`` of ymcui/cmrc2018, also used for DRCD): "mixed segmentation" — the text is
  lower-cased and stripped, every CJK character (U+4E00–U+9FA5) and every character of the scorer's punctuation list
  is a segment of its own, and the runs in between are split by NLTK's word tokenizer; F1 is the precision/recall
  of the **longest common substring** (contiguous) of the segment lists with punctuation removed; exact match
  compares the strings after removing the punctuation characters (no other normalisation). Max over references,
  ×100, ``average = (em + f1) / 2``.

  The official script calls ``nltk.word_tokenize``, which first splits sentences with the Punkt model (a data
  download). Here the runs go through ``NLTKWordTokenizer`` directly (``word_tokenize(..., preserve_line=True)``):
  the two differ only when a non-CJK run holds a sentence boundary (".  Next"), which answer spans almost never do.

A question without a prediction scores 0 (v1.1 and CMRC count it in the total; the v2.0 script skips it, but
litebert always predicts every question). A question without a reference answer is an error for v1.1 and CMRC, whose
scripts take the maximum over the references and fail on none (only v2.0 has unanswerable questions; the readers
refuse them before, :meth:`litebert.finetune.qa.QAKind.unanswered`).
"""

from __future__ import annotations

import collections
import itertools
import math
import re
import string

from litebert.errors import LitebertError

_PUNCT = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)


# ----------------------------------------------------------------------------------------------------- SQuAD
def normalize_answer(s: str) -> str:
    """Lower case, drop ASCII punctuation, drop the articles a/an/the, collapse whitespace (the official order)."""
    s = s.lower()
    s = "".join(ch for ch in s if ch not in _PUNCT)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def squad_exact(prediction: str, reference: str) -> float:
    """1.0 if the normalised strings are equal, else 0.0."""
    return float(normalize_answer(prediction) == normalize_answer(reference))


def squad_f1(prediction: str, reference: str, version: str = "1.1") -> float:
    """Token F1 of the normalised strings (multiset overlap); ``version="2.0"`` scores empty sides as v2 does."""
    pred = normalize_answer(prediction).split()
    gold = normalize_answer(reference).split()
    if version == "2.0" and (not pred or not gold):
        return float(pred == gold)
    same = sum((collections.Counter(pred) & collections.Counter(gold)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(gold)
    return 2 * precision * recall / (precision + recall)


def _v2_references(references: list[str]) -> list[str]:
    golds = [a for a in references if normalize_answer(a)]
    return golds or [""]


def _require_references(references: dict[str, list[str]], metric: str) -> None:
    """Raise LitebertError naming the first question without a reference answer (``metric`` names the scorer)."""
    empty = [qid for qid, refs in references.items() if not refs]
    if empty:
        raise LitebertError(
            f"question {empty[0]!r} has no reference answer ({len(empty)} of {len(references)} questions): the "
            f"{metric} metric scores answered questions only (unanswerable ones: SQuAD v2.0)"
        )


def squad_scores(
    references: dict[str, list[str]], predictions: dict[str, str], version: str = "1.1"
) -> tuple[dict[str, float], dict[str, float]]:
    """Per-question ``(exact, f1)`` in [0, 1], max over the references; missing predictions score 0.

    Raises:
        LitebertError: an unknown ``version``; v1.1 and a question without a reference answer.
    """
    if version not in ("1.1", "2.0"):
        raise LitebertError(f"SQuAD metric version must be '1.1' or '2.0', got {version!r}")
    if version == "1.1":
        _require_references(references, "SQuAD v1.1")
    exact, f1 = {}, {}
    for qid, refs in references.items():
        golds = _v2_references(refs) if version == "2.0" else list(refs)
        if qid not in predictions:
            exact[qid] = f1[qid] = 0.0
            continue
        pred = predictions[qid]
        exact[qid] = max(squad_exact(pred, g) for g in golds)
        f1[qid] = max(squad_f1(pred, g, version) for g in golds)
    return exact, f1


def squad_v1_metrics(references: dict[str, list[str]], predictions: dict[str, str]) -> dict[str, float]:
    """``{"exact_match", "f1"}`` ×100 over all questions, as ``evaluate-v1.1.py`` prints them.

    Raises:
        LitebertError: a question without a reference answer (the script fails on it).
    """
    exact, f1 = squad_scores(references, predictions, "1.1")
    n = max(len(references), 1)
    return {"exact_match": 100.0 * sum(exact.values()) / n, "f1": 100.0 * sum(f1.values()) / n}


def find_best_thresh(
    scores: dict[str, float], na_probs: dict[str, float], has_answer: dict[str, bool]
) -> tuple[float, float]:
    """The official v2 threshold search, with a threshold that realises the score it returns.

    As ``evaluate-v2.0.py``'s ``find_best_thresh``: start from "every question unanswered" (each unanswerable one
    right) and walk the questions in increasing ``na_probs`` order, adding the gain of answering each one (its
    score if answerable; if unanswerable, its score answered minus the point it had: -1 for a non-empty
    prediction); the best running total is the best score, and the threshold is the ``na_prob`` of the last
    question answered, since a question counts as unanswered when ``na_prob > threshold``. Two differences make
    ``na_prob > threshold`` reproduce the returned score (:func:`squad_v2_metrics` with ``na_prob_thresh`` set to
    it), for any sign of the ``na_probs`` (litebert's are logit differences ``null − best span``):

    * when the best is to answer nothing, the threshold is below every ``na_prob`` (the script returns its
      starting placeholder 0.0, which means "answer nothing" only for probabilities; for negative differences it
      answers every question);
    * questions with equal ``na_probs`` are answered together, since no threshold separates them (the script may
      return a total reached in the middle of such a group, which its threshold does not give).

    The gains come from ``scores`` (the raw per-question scores of the predictions that answering gives) alone:
    the script's ``preds`` argument only tells whether an unanswerable question's prediction is non-empty, and a
    prediction that normalises to "" (``"the"``) scores 1 there, gaining 0 where the script counts -1. Without
    ties, with an answer among the best and no such prediction, score and threshold are the script's.

    Returns ``(best score ×100, threshold)``.
    """
    cur = best = float(sum(1 for q in has_answer if not has_answer[q]))
    order = sorted((q for q in na_probs if q in scores), key=lambda q: na_probs[q])
    thresh = _below(na_probs[order[0]]) if order else 0.0
    for value, group in itertools.groupby(order, key=lambda q: na_probs[q]):
        # answering a question gains its score; an unanswerable one loses the point it had unanswered
        cur += sum(scores[q] - (0.0 if has_answer[q] else 1.0) for q in group)
        if cur > best:
            best, thresh = cur, value
    return 100.0 * best / max(len(scores), 1), thresh


def _below(x: float) -> float:
    """A threshold under which ``x`` lies: one unit lower (``x`` is a logit difference), or the next float down
    where one unit is lost to rounding."""
    return min(x - 1.0, math.nextafter(x, -math.inf))


def squad_v2_metrics(
    references: dict[str, list[str]],
    predictions: dict[str, str],
    na_probs: dict[str, float] | None = None,
    na_prob_thresh: float = 1.0,
) -> dict[str, float]:
    """``evaluate-v2.0.py``: ``exact``, ``f1``, ``total``, ``HasAns_*``, ``NoAns_*``; with ``na_probs``, the scores
    after ``na_prob > na_prob_thresh`` turns a prediction into "no answer", and ``best_exact``, ``best_exact_thresh``,
    ``best_f1``, ``best_f1_thresh``. ``references[qid] == []`` marks an unanswerable question."""
    has_answer = {q: bool(r) for q, r in references.items()}  # the script: bool(qa["answers"])
    exact_raw, f1_raw = squad_scores(references, predictions, "2.0")

    def apply(scores):
        if na_probs is None:
            return dict(scores)
        return {q: (float(not has_answer[q]) if na_probs[q] > na_prob_thresh else s) for q, s in scores.items()}

    exact, f1 = apply(exact_raw), apply(f1_raw)
    out: dict[str, float] = {
        "exact": 100.0 * sum(exact.values()) / max(len(exact), 1),
        "f1": 100.0 * sum(f1.values()) / max(len(f1), 1),
        "total": float(len(exact)),
    }
    for name, flag in (("HasAns", True), ("NoAns", False)):
        ids = [q for q in exact if has_answer[q] == flag]
        if ids:
            out[f"{name}_exact"] = 100.0 * sum(exact[q] for q in ids) / len(ids)
            out[f"{name}_f1"] = 100.0 * sum(f1[q] for q in ids) / len(ids)
            out[f"{name}_total"] = float(len(ids))
    if na_probs is not None:
        out["best_exact"], out["best_exact_thresh"] = find_best_thresh(exact_raw, na_probs, has_answer)
        out["best_f1"], out["best_f1_thresh"] = find_best_thresh(f1_raw, na_probs, has_answer)
    return out


# ------------------------------------------------------------------------------------------------------ CMRC
# the scorer's list, in its order; "……" (two characters) can never equal one character and so never applies
CMRC_PUNCTUATION = frozenset(
    [
        "-",
        ":",
        "_",
        "*",
        "^",
        "/",
        "\\",
        "~",
        "`",
        "+",
        "=",
        "，",
        "。",
        "：",
        "？",
        "！",
        "“",
        "”",
        "；",
        "’",
        "《",
        "》",
        "……",
        "·",
        "、",
        "「",
        "」",
        "（",
        "）",
        "－",
        "～",
        "『",
        "』",
    ]
)


def _word_tokenize(text: str) -> list[str]:
    try:
        from nltk.tokenize import NLTKWordTokenizer
    except ImportError:  # pragma: no cover - nltk is a dependency of the qa extra
        raise LitebertError("the CMRC 2018 metric needs nltk (pip install nltk)") from None
    return NLTKWordTokenizer().tokenize(text)


def mixed_segmentation(text: str, remove_punctuation: bool = False) -> list[str]:
    """CMRC 2018 segments: CJK characters (U+4E00–U+9FA5) and punctuation one by one, NLTK words in between."""
    out: list[str] = []
    run = ""
    for ch in text.lower().strip():
        if remove_punctuation and ch in CMRC_PUNCTUATION:
            continue
        if "\u4e00" <= ch <= "\u9fa5" or ch in CMRC_PUNCTUATION:
            if run:
                out.extend(_word_tokenize(run))
                run = ""
            out.append(ch)
        else:
            run += ch
    if run:
        out.extend(_word_tokenize(run))
    return out


def cmrc_remove_punctuation(text: str) -> str:
    """Lower case, strip, drop the scorer's punctuation characters."""
    return "".join(ch for ch in text.lower().strip() if ch not in CMRC_PUNCTUATION)


def longest_common_substring(a: list[str], b: list[str]) -> int:
    """Length of the longest contiguous run shared by ``a`` and ``b`` (dynamic programming, O(len a · len b))."""
    best = 0
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0] * (len(b) + 1)
        for j, y in enumerate(b):
            if x == y:
                cur[j + 1] = prev[j] + 1
                best = max(best, cur[j + 1])
        prev = cur
    return best


def cmrc_f1(prediction: str, references: list[str]) -> float:
    """Max over the references of the longest-common-substring F1 of the punctuation-free segments."""
    pred = mixed_segmentation(prediction, remove_punctuation=True)
    scores = [0.0]
    for ref in references:
        gold = mixed_segmentation(ref, remove_punctuation=True)
        lcs = longest_common_substring(gold, pred)
        if lcs == 0:
            scores.append(0.0)
            continue
        precision, recall = lcs / len(pred), lcs / len(gold)
        scores.append(2 * precision * recall / (precision + recall))
    return max(scores)


def cmrc_exact(prediction: str, references: list[str]) -> float:
    """1.0 if the punctuation-free prediction equals a punctuation-free reference."""
    pred = cmrc_remove_punctuation(prediction)
    return float(any(cmrc_remove_punctuation(ref) == pred for ref in references))


def cmrc_metrics(references: dict[str, list[str]], predictions: dict[str, str]) -> dict[str, float]:
    """``{"exact_match", "f1", "average"}`` ×100 over all questions (missing predictions score 0).

    Raises:
        LitebertError: a question without a reference answer (the script fails on it).
    """
    _require_references(references, "CMRC 2018")
    em = f1 = 0.0
    for qid, refs in references.items():
        if qid in predictions:
            em += cmrc_exact(predictions[qid], refs)
            f1 += cmrc_f1(predictions[qid], refs)
    n = max(len(references), 1)
    em, f1 = 100.0 * em / n, 100.0 * f1 / n
    return {"exact_match": em, "f1": f1, "average": (em + f1) / 2}
