"""Extractive question answering: SQuAD v1.1/v2.0, CMRC 2018, DRCD and JSON lines; windows, n-best decoding.

Pipeline (the field's standard, as google-research/albert ``run_squad_v1/v2`` and transformers' ``run_qa.py``):

1. **Read** (:func:`read_qa_file`): SQuAD-layout JSON (``data[].paragraphs[].qas[]``; v2's ``is_impossible``;
   CMRC 2018 and DRCD use the same layout) or JSON lines with ``id, question, context, answers`` (``answers`` as
   SQuAD's ``{"text": [...], "answer_start": [...]}`` or a list of ``{"text", "answer_start"}``). An answer whose
   offset does not point at its text is looked up in the context (:func:`locate_answer`: the occurrence nearest
   to the offset; CMRC's offsets are UTF-16 offsets near astral characters and some are -1); one whose text is not
   in the context is counted and warned about, kept as a reference for the metric, and not trained on.
2. **Features** (:func:`build_features`): ``[CLS] question [SEP] context-window [SEP]`` with the question cut to
   ``max_query_length`` tokens and the context in windows of ``max_seq_length - len(question) - 3`` tokens that
   overlap by ``doc_stride`` tokens — transformers' meaning of ``doc_stride`` (the tokenizer's ``stride``, the
   ``question-answering`` pipeline's ``doc_stride``), so that litebert and the pipeline see the same windows.
   The answer's character span becomes a token span through the tokenizer's character offsets
   (:meth:`litebert.tokenization.Tokenizer.encode_with_offsets`); a window that does not hold the whole answer,
   and an unanswerable question, are labelled at ``[CLS]`` (index 0).
3. **Decode** (:func:`decode_predictions`): over all windows of a question, every span with start ≤ end inside the
   context and at most ``max_answer_length`` tokens, scored ``start_logit + end_logit``; the ``n_best_size`` best
   distinct character spans form the n-best list, whose text is ``context[char_start:char_end]``. SQuAD v2: the null
   score is the smallest ``[CLS]`` score (start + end) over the windows, and a question is answered "" when
   ``null − best`` exceeds the threshold that the official evaluation's ``find_best_thresh`` picks on dev
   (:func:`litebert.finetune.qa_metrics.squad_v2_metrics`, saved in ``best/config.json`` for predict).
4. **Metrics** (:mod:`litebert.finetune.qa_metrics`): SQuAD v1.1/v2.0 EM/F1, CMRC 2018 EM/F1 for Chinese.

Outputs of :func:`finetune_qa` (``litebert finetune --task squad|squad_v2|cmrc2018|drcd`` or ``--task-type qa``)::

    OUTPUT/best/                  AlbertForQuestionAnswering + tokenizer (loads in AutoModelForQuestionAnswering)
    OUTPUT/eval_results.json      dev metrics of best/ (+ best_step, num_examples, num_features)
    OUTPUT/predictions.json       {question_id: answer_text} on dev
    OUTPUT/nbest_predictions.json {question_id: [{text, probability, start_logit, end_logit}, ...]}
    OUTPUT/null_odds.json         SQuAD v2: {question_id: null score − best span score}
    OUTPUT/finetune_config.json, metrics.jsonl, tb/, train.log, checkpoints/   as for classification
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import random
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from litebert.errors import LitebertError
from litebert.finetune.qa_metrics import (
    cmrc_metrics,
    squad_v1_metrics,
    squad_v2_metrics,
)

log = logging.getLogger("litebert.finetune")

#: how far (characters) an answer may sit from its given offset and still count as the same answer whose offset
#: drifted (CMRC's UTF-16 offsets drift by 1-2); farther occurrences are used but counted as ``far``.
MAX_OFFSET_DRIFT = 20


# ---------------------------------------------------------------------------------------------------------- tasks
@dataclass(frozen=True)
class QATask:
    """A known extractive-QA task.

    Attributes:
        name: the ``--task`` name.
        metric: ``squad`` (v1.1 EM/F1), ``squad_v2`` (v2.0, unanswerable questions and the null threshold) or
            ``cmrc`` (the CMRC 2018 character-level scorer, for Chinese).
        description: one line for ``--help``.
    """

    name: str
    metric: str
    description: str = ""

    @property
    def version_2(self) -> bool:
        return self.metric == "squad_v2"


QA_TASKS: dict[str, QATask] = {t.name: t for t in (
    QATask("squad", "squad", "SQuAD v1.1 JSON (data[].paragraphs[].qas[]); official v1.1 EM/F1"),
    QATask("squad_v2", "squad_v2", "SQuAD v2.0 JSON with is_impossible; v2.0 EM/F1 and the dev-chosen null threshold"),
    QATask("cmrc2018", "cmrc", "CMRC 2018 (Simplified Chinese, SQuAD layout); CMRC 2018 character EM/F1"),
    QATask("drcd", "cmrc", "DRCD (Traditional Chinese, SQuAD layout); CMRC 2018 character EM/F1"),
)}
QA_METRIC_NAMES = ("squad", "squad_v2", "cmrc")


def get_qa_task(name: str | None) -> QATask | None:
    """The QA preset of ``name`` (``squad-v2``/``squadv2`` spellings accepted), or None if it is not a QA task."""
    if not name:
        return None
    key = name.lower().replace("-", "_")
    key = {"squadv2": "squad_v2", "squad2": "squad_v2", "cmrc": "cmrc2018", "squad_v1": "squad"}.get(key, key)
    return QA_TASKS.get(key)


def is_qa_task(name: str | None) -> bool:
    return get_qa_task(name) is not None


# --------------------------------------------------------------------------------------------------------- reading
@dataclass(frozen=True)
class QAExample:
    """One question.

    Attributes:
        qid: the question id (the key of ``predictions.json``).
        question, context: the texts.
        answers: every reference answer text (the metric's references; ``()`` for an unanswerable question).
        start_char, end_char: the located character span ``[start, end)`` of the first locatable answer in
            ``context`` (the training target), or None (unanswerable, or no answer found in the context).
        is_impossible: SQuAD v2's flag (also set when ``answers`` is empty).
        where: ``file:line`` or ``file:data[i].paragraphs[j].qas[k]``, for messages.
    """

    qid: str
    question: str
    context: str
    answers: tuple[str, ...]
    start_char: int | None
    end_char: int | None
    is_impossible: bool
    where: str


@dataclass
class QAReadResult:
    """The questions of one file and what happened to their answers' offsets.

    Attributes:
        path: the file. layout: ``"squad"`` (JSON) or ``"jsonl"``. examples: in file order.
        offsets: counts of the first answers' offsets: ``exact`` (pointed at the text), ``drifted`` (the text was
            within :data:`MAX_OFFSET_DRIFT` characters), ``far`` (only farther away), ``no_offset`` (-1 or none
            given; the first occurrence used), ``unlocated`` (the text is not in the context: not trained on).
        problems: up to 10 ``where: what`` lines about offsets that were not exact.
    """

    path: Path
    layout: str
    examples: list[QAExample]
    offsets: dict[str, int] = field(default_factory=lambda: dict.fromkeys(
        ("exact", "drifted", "far", "no_offset", "unlocated"), 0))
    problems: list[str] = field(default_factory=list)

    @property
    def has_answers(self) -> bool:
        """True when any question carries a reference answer or an unanswerable flag (a labelled file)."""
        return any(ex.answers or ex.is_impossible for ex in self.examples)

    @property
    def references(self) -> dict[str, list[str]]:
        """``{qid: [answer texts]}`` for the metrics (``[]`` = unanswerable)."""
        return {ex.qid: list(ex.answers) for ex in self.examples}


def locate_answer(context: str, text: str, start: int | None) -> tuple[int | None, str]:
    """Where ``text`` starts in ``context``, trusting ``start`` only if it points at ``text``.

    Returns ``(char_start, status)``: ``exact`` (the offset was right), ``drifted`` (the occurrence nearest to the
    offset is within :data:`MAX_OFFSET_DRIFT` characters), ``far`` (it is farther), ``no_offset`` (``start`` is
    None or negative: the first occurrence), ``unlocated`` (``text`` is not in ``context``: ``char_start`` None).
    Ties between two occurrences at the same distance go to the earlier one.
    """
    if not text:
        return None, "unlocated"
    if start is not None and start >= 0 and context.startswith(text, start):
        return start, "exact"
    hits, i = [], context.find(text)
    while i >= 0:
        hits.append(i)
        i = context.find(text, i + 1)
    if not hits:
        return None, "unlocated"
    if start is None or start < 0:
        return hits[0], "no_offset"
    best = min(hits, key=lambda h: (abs(h - start), h))
    return best, ("drifted" if abs(best - start) <= MAX_OFFSET_DRIFT else "far")


def _answers_of(raw, where: str) -> list[tuple[str, int | None]]:
    """``[(text, answer_start)]`` from a SQuAD list of dicts or a ``{"text": [...], "answer_start": [...]}`` dict."""
    if raw is None:
        return []
    if isinstance(raw, dict):
        texts = raw.get("text", [])
        starts = raw.get("answer_start", [None] * len(texts))
        if isinstance(texts, str):
            texts, starts = [texts], [starts] if not isinstance(starts, list) else starts
        if not isinstance(texts, list) or not isinstance(starts, list) or len(texts) != len(starts):
            raise LitebertError(f"{where}: 'answers' must hold lists 'text' and 'answer_start' of equal length")
        raw = [{"text": t, "answer_start": s} for t, s in zip(texts, starts)]
    if not isinstance(raw, list):
        raise LitebertError(f"{where}: 'answers' must be a list of {{text, answer_start}} or a dict of lists, "
                            f"got {type(raw).__name__}")
    out = []
    for k, a in enumerate(raw):
        if isinstance(a, str):
            out.append((a, None))
            continue
        if not isinstance(a, dict) or not isinstance(a.get("text"), str):
            raise LitebertError(f"{where}: answers[{k}] has no 'text' string")
        s = a.get("answer_start")
        try:
            out.append((a["text"], None if s is None else int(s)))
        except (TypeError, ValueError):
            raise LitebertError(f"{where}: answers[{k}].answer_start {s!r} is not an integer") from None
    return out


def _make_example(res: QAReadResult, qid, question, context, raw_answers, impossible, where: str) -> QAExample:
    for name, value in (("id", qid), ("question", question), ("context", context)):
        if value is None:
            raise LitebertError(f"{where}: missing '{name}'")
    if not isinstance(context, str) or not isinstance(question, str):
        raise LitebertError(f"{where}: 'question' and 'context' must be strings")
    answers = _answers_of(raw_answers, where)
    impossible = bool(impossible) or not answers
    start = end = None
    if not impossible:
        text, offset = answers[0]
        pos, status = None, "unlocated"
        for t, o in answers:  # train on the first answer that can be located
            p, st = locate_answer(context, t, o)
            if p is not None:
                text, offset, pos, status = t, o, p, st
                break
        res.offsets[status] += 1
        if status != "exact" and len(res.problems) < 10:
            res.problems.append(f"{where}: answer {text[:40]!r} at offset {offset}: {status}"
                                + (f" (found at {pos})" if pos is not None else ""))
        if pos is not None:
            start, end = pos, pos + len(text)
    return QAExample(str(qid), question, context, tuple(t for t, _ in answers) if not impossible else (),
                     start, end, impossible, where)


def read_qa_file(path: str | Path) -> QAReadResult:
    """Read a SQuAD-layout JSON file or JSON lines of ``{id, question, context, answers[, is_impossible]}``.

    Raises:
        LitebertError: a missing/unreadable file, invalid JSON (with the line), a question without ``id``,
            ``question`` or ``context`` (with its position), malformed ``answers``, duplicate ids, no questions.
    Answers whose offsets are wrong are located in the context and counted in :attr:`QAReadResult.offsets`.
    """
    path = Path(path)
    if not path.is_file():
        raise LitebertError(f"{path}: file not found")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise LitebertError(f"{path}: not UTF-8 ({exc})") from None
    whole = None
    if text.lstrip().startswith("{"):
        try:
            whole = json.loads(text)
        except json.JSONDecodeError:
            whole = None  # JSON lines: one object per line
    if isinstance(whole, dict) and "data" in whole:
        res = QAReadResult(path, "squad", [])
        if not isinstance(whole["data"], list):
            raise LitebertError(f"{path}: 'data' must be a list of articles")
        for i, article in enumerate(whole["data"]):
            paragraphs = article.get("paragraphs") if isinstance(article, dict) else None
            if not isinstance(paragraphs, list):
                raise LitebertError(f"{path}:data[{i}]: missing 'paragraphs' list")
            for j, para in enumerate(paragraphs):
                where_p = f"{path}:data[{i}].paragraphs[{j}]"
                if not isinstance(para, dict) or "context" not in para:
                    raise LitebertError(f"{where_p}: missing 'context'")
                for k, qa in enumerate(para.get("qas", [])):
                    where = f"{where_p}.qas[{k}]"
                    if not isinstance(qa, dict):
                        raise LitebertError(f"{where}: expected an object")
                    res.examples.append(_make_example(res, qa.get("id"), qa.get("question"), para["context"],
                                                      qa.get("answers"), qa.get("is_impossible"), where))
    elif isinstance(whole, dict) and not ({"id", "question", "context", "answers"} & set(whole)):
        raise LitebertError(f"{path}: a JSON object without 'data': expected SQuAD layout "
                            "(data[].paragraphs[].qas[]) or JSON lines")
    else:
        res = QAReadResult(path, "jsonl", [])
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise LitebertError(f"{path}:{n}: not valid JSON ({exc.msg})") from None
            if not isinstance(row, dict):
                raise LitebertError(f"{path}:{n}: expected a JSON object with id, question, context, answers")
            res.examples.append(_make_example(res, row.get("id"), row.get("question"), row.get("context"),
                                              row.get("answers"), row.get("is_impossible"), f"{path}:{n}"))
    if not res.examples:
        raise LitebertError(f"{path}: no questions found")
    seen: dict[str, str] = {}
    for ex in res.examples:
        if ex.qid in seen:
            raise LitebertError(f"{ex.where}: duplicate question id {ex.qid!r} (first at {seen[ex.qid]})")
        seen[ex.qid] = ex.where
    return res


def report_offsets(name: str, res: QAReadResult) -> None:
    """Log the offset counts; a warning when answers could not be located or sat far from their offset."""
    c = res.offsets
    if c["unlocated"] or c["far"]:
        log.warning("%s: %s: %d answer(s) not found in their context (not trained on), %d found only more than %d "
                    "characters from their offset; e.g. %s", name, res.path, c["unlocated"], c["far"],
                    MAX_OFFSET_DRIFT, "; ".join(res.problems[:3]))
    if c["drifted"] or c["no_offset"]:
        log.info("%s: %s: %d answer offset(s) corrected (drifted), %d without an offset located by text", name,
                 res.path, c["drifted"], c["no_offset"])


# -------------------------------------------------------------------------------------------------------- features
@dataclass
class QAFeatures:
    """Model inputs of one file: one feature per (question, context window).

    Attributes:
        input_ids, token_type_ids: per feature, ``[CLS] q [SEP] window [SEP]`` ids (≤ ``max_seq_length``).
        example_index: ``int64 [F]`` — the example (question) each feature belongs to.
        offsets: per feature, ``int64 [S_f, 2]`` character offsets into the context; ``-1`` for question and
            special tokens.
        start_positions, end_positions: per feature, the answer's token positions, ``0`` (``[CLS]``) when the
            window does not hold the answer; None when the examples carry no answers.
        truncated_questions: questions cut to ``max_query_length``. split_examples: questions with >1 window.
    """

    input_ids: list[list[int]]
    token_type_ids: list[list[int]]
    example_index: np.ndarray
    offsets: list[np.ndarray]
    start_positions: list[int] | None
    end_positions: list[int] | None
    truncated_questions: int = 0
    split_examples: int = 0

    def __len__(self) -> int:
        return len(self.input_ids)

    @property
    def lengths(self) -> list[int]:
        return [len(x) for x in self.input_ids]


def window_starts(n_tokens: int, window: int, doc_stride: int) -> list[int]:
    """Start indices of context windows of ``window`` tokens overlapping by ``doc_stride`` tokens (the last window
    ends at the last token), as transformers' tokenizers cut overflowing tokens with ``stride=doc_stride``."""
    if n_tokens <= window:
        return [0]
    step = window - doc_stride
    starts = [0]
    while starts[-1] + window < n_tokens:
        starts.append(starts[-1] + step)
    return starts


def build_features(examples: list[QAExample], tokenizer, max_seq_length: int, doc_stride: int,
                   max_query_length: int, labelled: bool = True) -> QAFeatures:
    """Tokenize questions and contexts and cut the contexts into windows (see the module docstring).

    ``tokenizer`` is a :class:`litebert.tokenization.Tokenizer` (``encode_with_offsets``, ``cls_token_id``,
    ``sep_token_id``). Each distinct context is tokenized once.

    Raises:
        LitebertError: ``max_seq_length`` leaves no room for the context after ``max_query_length`` tokens, or
            ``doc_stride`` is not smaller than the window (the message names the options).
    """
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    contexts = list(dict.fromkeys(ex.context for ex in examples))
    ctx_enc = dict(zip(contexts, tokenizer.encode_with_offsets(contexts)))
    q_ids = [ids for ids, _ in tokenizer.encode_with_offsets([ex.question for ex in examples])]
    if max_seq_length - min(max_query_length, max((len(q) for q in q_ids), default=0)) - 3 <= 0:
        raise LitebertError(f"max_seq_length {max_seq_length} leaves no room for the context after a question of "
                            f"max_query_length {max_query_length} tokens")
    feats = QAFeatures([], [], np.zeros(0, np.int64), [], [] if labelled else None, [] if labelled else None)
    ex_index: list[int] = []
    for e, ex in enumerate(examples):
        q = q_ids[e]
        if len(q) > max_query_length:
            q = q[:max_query_length]
            feats.truncated_questions += 1
        ids, offs = ctx_enc[ex.context]
        window = max_seq_length - len(q) - 3
        if doc_stride >= window and len(ids) > window:
            raise LitebertError(f"doc_stride {doc_stride} must be smaller than the context window "
                                f"({window} tokens = max_seq_length {max_seq_length} - question {len(q)} - 3); "
                                f"lower --doc-stride or --max-query-length, or raise --max-seq-length")
        tok_s = tok_e = None
        if labelled and ex.start_char is not None:
            # first token whose span ends after start_char / last token that starts before end_char
            tok_s = int(np.searchsorted(offs[:, 1], ex.start_char, side="right"))
            tok_e = int(np.searchsorted(offs[:, 0], ex.end_char, side="left")) - 1
            if tok_s > tok_e or tok_s >= len(ids):
                tok_s = tok_e = None  # the answer is only whitespace the tokenizer dropped
        starts = window_starts(len(ids), window, doc_stride)
        feats.split_examples += len(starts) > 1
        prefix = len(q) + 2
        for ws in starts:
            we = min(ws + window, len(ids))
            feats.input_ids.append([cls, *q, sep, *ids[ws:we], sep])
            feats.token_type_ids.append([0] * prefix + [1] * (we - ws + 1))
            o = np.full((prefix + we - ws + 1, 2), -1, dtype=np.int64)
            o[prefix: prefix + we - ws] = offs[ws:we]
            feats.offsets.append(o)
            ex_index.append(e)
            if labelled:
                inside = tok_s is not None and ws <= tok_s and tok_e < we
                feats.start_positions.append(tok_s - ws + prefix if inside else 0)
                feats.end_positions.append(tok_e - ws + prefix if inside else 0)
    feats.example_index = np.asarray(ex_index, dtype=np.int64)
    return feats


class QADataset(torch.utils.data.Dataset):
    """Items ``{"input_ids", "token_type_ids"[, "start_positions", "end_positions"]}`` of :class:`QAFeatures`."""

    def __init__(self, feats: QAFeatures):
        self.feats = feats

    def __len__(self) -> int:
        return len(self.feats)

    def __getitem__(self, i: int) -> dict:
        f = self.feats
        item = {"input_ids": f.input_ids[i], "token_type_ids": f.token_type_ids[i]}
        if f.start_positions is not None:
            item["start_positions"] = f.start_positions[i]
            item["end_positions"] = f.end_positions[i]
        return item


@dataclass
class QACollator:
    """Pads items to the longest in the batch: ``input_ids``, ``token_type_ids``, ``attention_mask`` ``int64
    [B, S]``; ``start_positions``, ``end_positions`` ``int64 [B]`` when present."""

    pad_token_id: int

    def __call__(self, items: list[dict]) -> dict[str, torch.Tensor]:
        lengths = np.fromiter((len(it["input_ids"]) for it in items), dtype=np.int64, count=len(items))
        batch, seq = len(items), int(lengths.max())
        input_ids = np.full((batch, seq), self.pad_token_id, dtype=np.int64)
        token_type_ids = np.zeros((batch, seq), dtype=np.int64)
        for row, it in enumerate(items):
            input_ids[row, : lengths[row]] = it["input_ids"]
            token_type_ids[row, : lengths[row]] = it["token_type_ids"]
        attention_mask = (np.arange(seq)[None, :] < lengths[:, None]).astype(np.int64)  # (B, S)
        out = {"input_ids": torch.from_numpy(input_ids), "token_type_ids": torch.from_numpy(token_type_ids),
               "attention_mask": torch.from_numpy(attention_mask)}
        if "start_positions" in items[0]:
            out["start_positions"] = torch.tensor([it["start_positions"] for it in items], dtype=torch.long)
            out["end_positions"] = torch.tensor([it["end_positions"] for it in items], dtype=torch.long)
        return out


# -------------------------------------------------------------------------------------------- objective, inference
def make_qa_objective(device: torch.device):
    """Objective for :func:`litebert.training.train`: ``loss`` = (start CE + end CE) / 2 summed over the features
    of the batch (transformers' ``AlbertForQuestionAnswering`` loss × B; units = features) and the ratio
    ``span_accuracy`` (start and end both right)."""
    from litebert.training import LossOutput

    def objective(model, batch):
        batch = {k: v.to(device) for k, v in batch.items()}
        out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                    token_type_ids=batch["token_type_ids"])
        s, e = out.start_logits.float(), out.end_logits.float()  # (B, S)
        ys, ye = batch["start_positions"], batch["end_positions"]
        loss = (F.cross_entropy(s, ys, reduction="sum") + F.cross_entropy(e, ye, reduction="sum")) / 2
        right = ((s.detach().argmax(-1) == ys) & (e.detach().argmax(-1) == ye)).sum().item()
        return LossOutput(sums={"loss": loss}, ratios={"span_accuracy": (float(right), float(len(ys)))})

    def count(batch):
        return {"loss": int(batch["start_positions"].numel())}

    return objective, count


@torch.no_grad()
def qa_logits(model, feats: QAFeatures, batch_size: int, pad_token_id: int, device: torch.device
              ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Start and end logits of every feature, ``float32 [S_f]`` each, in feature order (batched by length)."""
    was_training = model.training
    model.eval()
    dataset, collate = QADataset(feats), QACollator(pad_token_id)
    order = np.argsort(np.asarray(feats.lengths), kind="stable")
    starts: list[np.ndarray] = [None] * len(feats)  # type: ignore[list-item]
    ends: list[np.ndarray] = [None] * len(feats)  # type: ignore[list-item]
    for b in range(0, len(order), batch_size):
        idx = order[b: b + batch_size]
        batch = collate([dataset[int(i)] for i in idx])
        out = model(input_ids=batch["input_ids"].to(device), attention_mask=batch["attention_mask"].to(device),
                    token_type_ids=batch["token_type_ids"].to(device))
        s, e = out.start_logits.float().cpu().numpy(), out.end_logits.float().cpu().numpy()
        for row, i in enumerate(idx):
            n = len(feats.input_ids[int(i)])
            starts[int(i)], ends[int(i)] = s[row, :n], e[row, :n]
    model.train(was_training)
    return starts, ends


# ------------------------------------------------------------------------------------------------------- decoding
@dataclass
class QAPredictions:
    """Decoded answers.

    Attributes:
        predictions: ``{qid: answer text}`` (SQuAD v2: "" when the null score wins with ``threshold``).
        best_span: ``{qid: best non-null answer text}``.
        nbest: ``{qid: [{"text", "probability", "start_logit", "end_logit"}, ...]}`` best first.
        null_odds: ``{qid: null score − best span score}`` (SQuAD v2's ``na_prob`` input), only with ``with_null``.
    """

    predictions: dict[str, str]
    best_span: dict[str, str]
    nbest: dict[str, list[dict]]
    null_odds: dict[str, float] | None = None


def _feature_candidates(start: np.ndarray, end: np.ndarray, offsets: np.ndarray, n_best_size: int,
                        max_answer_length: int) -> list[tuple[float, float, float, int, int]]:
    """The ``n_best_size`` best valid spans of one window: ``(score, start_logit, end_logit, char_s, char_e)``.
    Valid: both ends in the context, start ≤ end, at most ``max_answer_length`` tokens; all pairs are scored."""
    ctx = np.flatnonzero(offsets[:, 0] >= 0)  # context tokens are contiguous in a window
    if len(ctx) == 0:
        return []
    s, e = start[ctx], end[ctx]
    scores = s[:, None] + e[None, :]  # (C, C): rows start, columns end
    n = len(ctx)
    rows, cols = np.indices((n, n))
    valid = (cols >= rows) & (cols - rows < max_answer_length)
    scores = np.where(valid, scores, -np.inf)
    k = min(n_best_size, int(valid.sum()))
    flat = np.argpartition(-scores.ravel(), k - 1)[:k] if k < scores.size else np.arange(scores.size)
    out = []
    for f in flat:
        i, j = divmod(int(f), n)
        if not valid[i, j]:
            continue
        out.append((float(scores[i, j]), float(s[i]), float(e[j]), int(offsets[ctx[i], 0]),
                    int(offsets[ctx[j], 1])))
    return out


def decode_predictions(examples: list[QAExample], feats: QAFeatures, start_logits: list[np.ndarray],
                       end_logits: list[np.ndarray], n_best_size: int = 20, max_answer_length: int = 30,
                       with_null: bool = False, null_threshold: float = 0.0) -> QAPredictions:
    """n-best decoding over the windows of each question (see the module docstring).

    The n-best probabilities are a softmax over the listed scores (the null entry included with ``with_null``), as
    google-research's ``write_predictions``. With ``with_null`` a question is answered "" when
    ``null_odds > null_threshold``.
    """
    by_example: dict[int, list[int]] = {}
    for f, e in enumerate(feats.example_index.tolist()):
        by_example.setdefault(e, []).append(f)
    preds, best_span, nbest, odds = {}, {}, {}, {}
    for e, ex in enumerate(examples):
        cands: list[tuple[float, float, float, int, int]] = []
        null_score, null_pair = math.inf, (0.0, 0.0)
        for f in by_example.get(e, []):
            s, en = start_logits[f], end_logits[f]
            cands.extend(_feature_candidates(s, en, feats.offsets[f], n_best_size, max_answer_length))
            if s[0] + en[0] < null_score:
                null_score, null_pair = float(s[0] + en[0]), (float(s[0]), float(en[0]))
        cands.sort(key=lambda c: -c[0])
        seen, entries = set(), []
        for score, sl, el, cs, ce in cands:
            if (cs, ce) in seen:
                continue  # the same span from two overlapping windows
            seen.add((cs, ce))
            entries.append({"text": ex.context[cs:ce], "score": score, "start_logit": sl, "end_logit": el})
            if len(entries) == n_best_size:
                break
        best = entries[0] if entries else None
        if with_null:
            entries.append({"text": "", "score": null_score, "start_logit": null_pair[0], "end_logit": null_pair[1]})
            entries.sort(key=lambda x: -x["score"])
            entries = entries[: max(n_best_size, 1)]
        if not entries:
            entries = [{"text": "", "score": 0.0, "start_logit": 0.0, "end_logit": 0.0}]
        scores = np.asarray([x["score"] for x in entries], dtype=np.float64)
        probs = np.exp(scores - scores.max())
        probs /= probs.sum()
        nbest[ex.qid] = [{"text": x["text"], "probability": float(p), "start_logit": x["start_logit"],
                          "end_logit": x["end_logit"]} for x, p in zip(entries, probs)]
        best_span[ex.qid] = best["text"] if best else ""
        if with_null:
            diff = null_score - (best["score"] if best else -1e9)
            odds[ex.qid] = float(min(diff, 1e9))
            preds[ex.qid] = "" if odds[ex.qid] > null_threshold else best_span[ex.qid]
        else:
            preds[ex.qid] = best_span[ex.qid]
    return QAPredictions(preds, best_span, nbest, odds if with_null else None)


def qa_metrics(metric: str, read: QAReadResult, decoded: QAPredictions) -> tuple[dict[str, float], float | None]:
    """Metrics of ``decoded`` on ``read``'s references; for ``squad_v2`` the threshold is chosen here
    (``best_f1_thresh``) and ``decoded.predictions`` re-made with it. Returns ``(metrics, threshold or None)``."""
    refs = read.references
    if metric == "squad":
        return squad_v1_metrics(refs, decoded.predictions), None
    if metric == "cmrc":
        return cmrc_metrics(refs, decoded.predictions), None
    if metric != "squad_v2":
        raise LitebertError(f"unknown QA metric {metric!r}; expected one of {', '.join(QA_METRIC_NAMES)}")
    search = squad_v2_metrics(refs, decoded.best_span, decoded.null_odds)
    thresh = search["best_f1_thresh"]
    decoded.predictions = {q: ("" if decoded.null_odds[q] > thresh else decoded.best_span[q])
                           for q in decoded.best_span}
    out = squad_v2_metrics(refs, decoded.predictions)
    for k in ("best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh"):
        out[k] = search[k]
    return out, thresh


# ------------------------------------------------------------------------------------------------------ run parts
def _qa_setup(data) -> tuple[QATask | None, str | None]:
    """The QA task of the data options (``--task`` preset), or ``(None, None)`` for ``--task-type qa``."""
    task = get_qa_task(getattr(data, "task", None))
    return task, (task.metric if task else None)


def infer_metric(read: QAReadResult) -> str:
    """Metric for ``--task-type qa`` files without a preset: ``cmrc`` when most context characters are CJK,
    else ``squad_v2`` when any question is unanswerable, else ``squad``."""
    from litebert.tokenization import is_cjk_char

    sample = "".join(ex.context for ex in read.examples[:200])
    letters = [c for c in sample if c.isalpha()]
    if letters and sum(map(is_cjk_char, letters)) > len(letters) / 2:
        return "cmrc"
    return "squad_v2" if any(ex.is_impossible for ex in read.examples) else "squad"


def build_qa_model(model_dir: str, *, init: str = "pretrained", seed: int = 0, hidden_dropout: float | None = None,
                   extra: dict | None = None):
    """An ``AlbertForQuestionAnswering`` with the encoder of ``model_dir`` (pretraining ``final/``, masked-LM,
    classifier or QA directory); ``qa_outputs`` is new unless the directory has one. ``init="random"``: the
    architecture only.

    Raises:
        LitebertError: no ``config.json``; encoder weights missing; tensors whose shape differs from the config.
    """
    from litebert.checkpoint import load_config, load_state_dict_file, load_weights
    from litebert.modeling import AlbertForQuestionAnswering

    directory = Path(model_dir)
    config = load_config(directory)
    overrides: dict[str, Any] = dict(num_labels=2, id2label={0: "LABEL_0", 1: "LABEL_1"},
                                     label2id={"LABEL_0": 0, "LABEL_1": 1}, problem_type=None,
                                     architectures=["AlbertForQuestionAnswering"])
    if hidden_dropout is not None:
        overrides["hidden_dropout_prob"] = hidden_dropout
        overrides["attention_probs_dropout_prob"] = hidden_dropout
    config = dataclasses.replace(config, **overrides)
    config.extra = {**(config.extra or {}), **(extra or {})}
    torch.manual_seed(seed)
    model = AlbertForQuestionAnswering(config)
    if init == "random":
        return model, {"missing": sorted(model.state_dict()), "unexpected": [], "mismatched": []}
    state, source = load_state_dict_file(directory)
    report = load_weights(model, state, source, ignore_mismatched_sizes=True)
    missing = [k for k in report["missing"] if k.startswith("albert.")]
    if missing:
        raise LitebertError(f"{source}: the weights lack {len(missing)} encoder tensors (e.g. {missing[:3]}); is "
                            "this an ALBERT model directory matching its config.json?")
    bad = [k for k in report["mismatched"] if not k.startswith("qa_outputs.")]
    if bad:
        raise LitebertError(f"{source}: tensors whose shape differs from config.json: {bad[:3]}")
    return model, report


def _load_qa_model(model_dir: str | Path, device: torch.device):
    from litebert.checkpoint import load_config
    from litebert.modeling import AlbertForQuestionAnswering

    config = load_config(model_dir)
    archs = config.architectures or []
    if archs and "AlbertForQuestionAnswering" not in archs:
        raise LitebertError(f"{model_dir}/config.json names {archs}, not AlbertForQuestionAnswering: "
                            "fine-tune a QA model first (litebert finetune --task squad ...)")
    return AlbertForQuestionAnswering.from_pretrained(Path(model_dir)).to(device).eval()


def _subsample_questions(read: QAReadResult, n: int | None, seed: int) -> QAReadResult:
    if n is None or n >= len(read.examples):
        return read
    keep = sorted(random.Random(seed).sample(range(len(read.examples)), n))
    return dataclasses.replace(read, examples=[read.examples[i] for i in keep])


def write_qa_outputs(out: Path, decoded: QAPredictions, prefix: str = "") -> dict[str, Path]:
    """``{prefix}predictions.json``, ``{prefix}nbest_predictions.json`` (and ``{prefix}null_odds.json``), each
    written to a temporary name and renamed."""
    from litebert.finetune.run import _write_json

    files = {"predictions": _write_json(out / f"{prefix}predictions.json", decoded.predictions),
             "nbest": _write_json(out / f"{prefix}nbest_predictions.json", decoded.nbest)}
    if decoded.null_odds is not None:
        files["null_odds"] = _write_json(out / f"{prefix}null_odds.json", decoded.null_odds)
    return files


@dataclass
class QAOptions:
    """The QA settings (fields of the fine-tune / evaluate configs, field-standard names).

    Attributes:
        doc_stride: overlapping tokens between consecutive context windows (transformers' meaning).
        max_query_length: question tokens kept (the rest is cut and counted).
        n_best_size: spans kept per question in ``nbest_predictions.json`` (and candidates per window).
        max_answer_length: longest answer, in tokens.
    """

    doc_stride: int = 128
    max_query_length: int = 64
    n_best_size: int = 20
    max_answer_length: int = 30

    @classmethod
    def of(cls, cfg) -> QAOptions:
        return cls(**{f.name: getattr(cfg, f.name) for f in dataclasses.fields(cls)})


def check_qa_options(opts: QAOptions, where: str) -> None:
    """Raises LitebertError naming the field when a QA option is out of range."""
    if opts.doc_stride < 0:
        raise LitebertError(f"{where}: doc_stride must be >= 0, got {opts.doc_stride}")
    for name in ("max_query_length", "n_best_size", "max_answer_length"):
        if getattr(opts, name) < 1:
            raise LitebertError(f"{where}: {name} must be >= 1, got {getattr(opts, name)}")


def finetune_qa(cfg):
    """Fine-tune ``cfg.model`` for extractive QA (``cfg`` is a :class:`litebert.finetune.run.FinetuneConfig`
    whose data names a QA task or ``task_type="qa"``); keeps the best dev checkpoint (by F1) in ``OUTPUT/best``.

    The loop, optimizer, schedule, checkpoints and logs are classification's (:func:`litebert.training.train`);
    the batch → loss is :func:`make_qa_objective`, the dev evaluation decodes and scores every question.

    Returns:
        :class:`litebert.finetune.run.FinetuneResult` (``labels`` empty; ``truncated`` counts questions cut to
        ``max_query_length``).
    Raises:
        LitebertError: bad files (:func:`read_qa_file`), bad options, a model directory without weights or
            tokenizer, a training file where no answer could be located.
    """
    from litebert.finetune.run import (
        FinetuneResult,
        _check_seq_length,
        _jsonable,
        _load_tokenizer,
        _write_json,
        untrained_positions_warning,
    )
    from litebert.optim import build_optimizer, build_scheduler
    from litebert.training import TrainingArgs, make_batch_factory, train
    from litebert.training import distributed as D
    from litebert.training.distributed import unwrap_model, wrap_model

    t0 = time.time()
    out = Path(cfg.output_dir)
    opts = QAOptions.of(cfg)
    check_qa_options(opts, "finetune")
    task, metric = _qa_setup(cfg.data)

    train_read = read_qa_file(cfg.train_file)
    dev_read = read_qa_file(cfg.dev_file)
    report_offsets("train", train_read)
    report_offsets("dev", dev_read)
    if not dev_read.has_answers:
        raise LitebertError(f"{dev_read.path}: the dev file has no answers to score")
    metric = metric or infer_metric(train_read)
    train_read = _subsample_questions(train_read, cfg.max_train_examples, cfg.data_seed)
    dev_read = _subsample_questions(dev_read, cfg.max_eval_examples, cfg.data_seed)
    trainable = [ex for ex in train_read.examples if ex.is_impossible or ex.start_char is not None]
    if not trainable:
        raise LitebertError(f"{train_read.path}: no question has an answer located in its context")
    skipped = len(train_read.examples) - len(trainable)

    tokenizer = _load_tokenizer(cfg.model, cfg.tokenizer)
    train_feats = build_features(trainable, tokenizer, cfg.max_seq_length, opts.doc_stride, opts.max_query_length)
    dev_feats = build_features(dev_read.examples, tokenizer, cfg.max_seq_length, opts.doc_stride,
                               opts.max_query_length, labelled=False)
    log.info("finetune qa (%s): %d train questions -> %d features (%d split into windows, %d not trained on: answer "
             "not found); %d dev questions -> %d features", metric, len(trainable), len(train_feats),
             train_feats.split_examples, skipped, len(dev_read.examples), len(dev_feats), )

    dist = D.init_distributed(cfg.device)
    extra: dict[str, Any] = {"finetuning_task": task.name if task else None, "litebert_task_type": "qa",
                             "litebert_qa_metric": metric, **dataclasses.asdict(opts),
                             "max_seq_length": cfg.max_seq_length}
    extra = {k: v for k, v in extra.items() if v is not None}
    model, load_info = build_qa_model(cfg.model, init=cfg.init, seed=cfg.seed, hidden_dropout=cfg.hidden_dropout,
                                      extra=extra)
    _check_seq_length(model.config, cfg.max_seq_length, cfg.model)

    class _Lengths:  # untrained_positions_warning reads .lengths
        def __init__(self, feats):
            self.lengths = feats.lengths

    warning = (untrained_positions_warning(model.config, cfg.max_seq_length,
                                           {"train": _Lengths(train_feats), "dev": _Lengths(dev_feats)}, cfg.model)
               if cfg.init == "pretrained" else None)
    if warning:
        log.warning("finetune: %s", warning)
    if tokenizer.vocab_size > model.config.vocab_size:
        raise LitebertError(f"the tokenizer has {tokenizer.vocab_size} tokens but the model's vocab_size is "
                            f"{model.config.vocab_size}: tokenizer and model do not belong together")
    log.info("finetune: %s init; newly initialised: %s", cfg.init,
             ", ".join(load_info["missing"]) if cfg.init == "pretrained" else "all weights")
    model.to(dist.device)
    model = wrap_model(model, dist)

    steps_per_epoch = math.ceil(len(train_feats) / (cfg.batch_size * dist.world_size))
    max_steps = cfg.max_steps or max(1, math.ceil(steps_per_epoch * cfg.epochs))
    eval_steps = cfg.eval_steps or steps_per_epoch
    optimizer = build_optimizer(unwrap_model(model), cfg.optimizer, lr=cfg.learning_rate,
                                weight_decay=cfg.weight_decay)
    scheduler = build_scheduler(optimizer, warmup_steps=int(round(cfg.warmup_ratio * max_steps)),
                                max_steps=max_steps)
    batches = make_batch_factory(QADataset(train_feats), cfg.batch_size, QACollator(tokenizer.pad_token_id),
                                 seed=cfg.seed, shuffle=True, drop_last=False, rank=dist.rank,
                                 world_size=dist.world_size)
    objective, count = make_qa_objective(dist.device)
    out.mkdir(parents=True, exist_ok=True)
    best_dir = out / "best"
    primary = "f1"
    last_eval: dict[str, Any] = {}
    best_eval: dict[str, Any] = {}

    def evaluate_dev(m) -> tuple[dict[str, float], QAPredictions, float | None]:
        s, e = qa_logits(m, dev_feats, cfg.eval_batch_size, tokenizer.pad_token_id, dist.device)
        decoded = decode_predictions(dev_read.examples, dev_feats, s, e, opts.n_best_size, opts.max_answer_length,
                                     with_null=metric == "squad_v2")
        result, thresh = qa_metrics(metric, dev_read, decoded)
        return result, decoded, thresh

    def eval_fn(m) -> dict[str, float]:
        result, decoded, thresh = evaluate_dev(unwrap_model(m))
        last_eval.update(metrics=dict(result), decoded=decoded, thresh=thresh)
        return result

    def on_best(raw_model, eval_metrics: dict[str, float], step: int) -> None:
        tmp = out / ".best.tmp"
        if tmp.exists():
            shutil.rmtree(tmp)
        if last_eval.get("thresh") is not None:  # predict uses the dev-chosen null threshold
            raw_model.config.extra = {**raw_model.config.extra,
                                      "litebert_null_score_diff_threshold": last_eval["thresh"]}
        raw_model.save_pretrained(tmp)
        tokenizer.save(tmp)
        _write_json(tmp / "best_eval.json", {**eval_metrics, "step": step})
        if best_dir.exists():
            shutil.rmtree(best_dir)
        tmp.rename(best_dir)
        best_eval.clear()
        best_eval.update(last_eval)
        log.info("finetune: new best %s=%.4f at step %d -> %s", primary, eval_metrics[primary], step, best_dir)

    run_settings = {
        "finetune_config": _jsonable(dataclasses.asdict(cfg)), "task_type": "qa", "qa_metric": metric,
        "num_train_questions": len(trainable), "num_train_features": len(train_feats),
        "num_dev_questions": len(dev_read.examples), "num_dev_features": len(dev_feats),
        "not_trained_on": skipped, "offsets": {"train": train_read.offsets, "dev": dev_read.offsets},
        "truncated_questions": {"train": train_feats.truncated_questions, "dev": dev_feats.truncated_questions},
        "max_steps": max_steps, "steps_per_epoch": steps_per_epoch, "eval_steps": eval_steps,
        "untrained_positions_warning": warning,
    }
    if dist.is_main:
        _write_json(out / "finetune_config.json", run_settings)
    args = TrainingArgs(
        output_dir=out, max_steps=max_steps, max_grad_norm=cfg.max_grad_norm or None,
        logging_steps=min(cfg.logging_steps, max_steps), eval_steps=eval_steps, save_steps=0,
        save_total_limit=1, precision=cfg.precision, metric_for_best=primary, greater_is_better=True,
        early_stopping_patience=cfg.early_stopping_patience, progress_bar=cfg.progress_bar, resume=cfg.resume,
        log_prefix=f"finetune {task.name if task else Path(cfg.train_file).name}")
    result = train(model, optimizer, scheduler, batches, objective, count, args, eval_fn=eval_fn,
                   on_best=on_best, extra_state={"finetune": run_settings["finetune_config"]}, dist=dist)
    final = None
    if dist.is_main:
        if not cfg.keep_checkpoints and (out / "checkpoints").exists():
            shutil.rmtree(out / "checkpoints")
        if not best_dir.exists():
            last_eval.clear()
            on_best(unwrap_model(model), result.last_eval or {primary: float("nan")}, result.step)
        if "decoded" in best_eval:
            eval_results, decoded = best_eval["metrics"], best_eval["decoded"]
        else:  # best/ from an earlier process (resume): evaluate it now
            eval_results, decoded, _ = evaluate_dev(_load_qa_model(best_dir, dist.device))
        best_info = json.loads((best_dir / "best_eval.json").read_text())
        _write_json(out / "eval_results.json", {**eval_results, "num_examples": len(dev_read.examples),
                                                "num_features": len(dev_feats), "best_step": best_info.get("step"),
                                                "metric": metric})
        write_qa_outputs(out, decoded)
        seconds = time.time() - t0
        log.info("finetune: done in %.0fs; best %s=%.4f at step %s; dev %s", seconds, primary,
                 eval_results[primary], best_info.get("step"), json.dumps(eval_results))
        final = FinetuneResult(
            output_dir=out, best_dir=best_dir, metric=primary, best_metric=result.best_metric,
            best_step=best_info.get("step"), eval_results=eval_results, test_results=None, steps=result.step,
            stopped_early=result.stopped_early, num_train=len(trainable), num_dev=len(dev_read.examples),
            truncated={"train": train_feats.truncated_questions, "dev": dev_feats.truncated_questions}, labels=[],
            seconds=seconds)
    if dist.distributed:
        final = D.broadcast_object(final)
        D.destroy_distributed()
    return final


def run_qa_eval(cfg, need_answers: bool):
    """``litebert evaluate`` / ``predict`` for a QA model directory (``cfg``: an
    :class:`litebert.finetune.run.EvaluateConfig`). Writes ``predictions.json``, ``nbest_predictions.json`` (and
    ``eval_results.json`` when the file has answers) to ``cfg.output_dir``. SQuAD v2: the null threshold saved
    at fine-tuning (``litebert_null_score_diff_threshold``) unless evaluating, where it is chosen on the file.

    Returns:
        :class:`litebert.finetune.run.EvalResult` with ``predictions`` in file order.
    """
    from litebert.checkpoint import load_config
    from litebert.finetune.run import (
        EvalResult,
        _check_seq_length,
        _device,
        _load_tokenizer,
        _write_json,
    )

    directory = Path(cfg.model)
    config = load_config(directory)
    saved = config.extra or {}
    task, metric = _qa_setup(cfg.data) if cfg.data is not None else (None, None)
    if task is None:
        task = get_qa_task(saved.get("finetuning_task"))
    metric = metric or saved.get("litebert_qa_metric") or (task.metric if task else None)
    opts = QAOptions(**{f.name: (getattr(cfg, f.name) if getattr(cfg, f.name, None) is not None
                                 else saved.get(f.name, f.default)) for f in dataclasses.fields(QAOptions)})
    check_qa_options(opts, "evaluate")
    max_seq_length = cfg.max_seq_length
    _check_seq_length(config, max_seq_length, directory)
    read = read_qa_file(cfg.data_file)
    report_offsets("data", read)
    if cfg.max_examples is not None:
        read = dataclasses.replace(read, examples=read.examples[: cfg.max_examples])
    if need_answers and not read.has_answers:
        raise LitebertError(f"{read.path}: no answers to score (use litebert predict for unlabelled files)")
    metric = metric or infer_metric(read)
    tokenizer = _load_tokenizer(cfg.model, cfg.tokenizer)
    feats = build_features(read.examples, tokenizer, max_seq_length, opts.doc_stride, opts.max_query_length,
                           labelled=False)
    device = _device(cfg.device)
    model = _load_qa_model(directory, device)
    s, e = qa_logits(model, feats, cfg.batch_size, tokenizer.pad_token_id, device)
    v2 = metric == "squad_v2"
    decoded = decode_predictions(read.examples, feats, s, e, opts.n_best_size, opts.max_answer_length, with_null=v2,
                                 null_threshold=float(saved.get("litebert_null_score_diff_threshold", 0.0)))
    result: dict[str, float] = {}
    if read.has_answers:
        if v2 and not need_answers:  # predict: keep the saved threshold, score with it
            result = squad_v2_metrics(read.references, decoded.predictions)
        else:
            result, _ = qa_metrics(metric, read, decoded)
    res = EvalResult(metrics=result, predictions=[decoded.predictions[ex.qid] for ex in read.examples],
                     labels=[" | ".join(ex.answers) for ex in read.examples] if read.has_answers else None,
                     num_examples=len(read.examples), truncated=feats.truncated_questions)
    if cfg.output_dir:
        out = Path(cfg.output_dir)
        files = write_qa_outputs(out, decoded)
        res.predictions_file = files["predictions"]
        if result:
            res.results_file = _write_json(out / "eval_results.json", {**result, "num_examples": len(read.examples),
                                                                       "num_features": len(feats), "metric": metric})
    log.info("%s: %s on %d questions of %s", "evaluate" if need_answers else "predict", json.dumps(result),
             len(read.examples), read.path)
    return res


def is_qa_model_dir(model_dir: str | Path) -> bool:
    """True when ``config.json`` names ``AlbertForQuestionAnswering`` (litebert's or transformers')."""
    path = Path(model_dir) / "config.json"
    try:
        cfg = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return False
    return "AlbertForQuestionAnswering" in (cfg.get("architectures") or [])
