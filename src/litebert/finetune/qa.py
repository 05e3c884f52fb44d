"""Extractive question answering: SQuAD v1.1/v2.0, CMRC 2018, DRCD and JSON lines; windows, n-best decoding.

Pipeline (the field's standard, as google-research/albert ``run_squad_v1/v2`` and transformers' ``run_qa.py``):

1. **Read** (:func:`read_qa_file`): SQuAD-layout JSON (``data[].paragraphs[].qas[]``; v2's ``is_impossible``;
   CMRC 2018 and DRCD use the same layout) or JSON lines with ``id, question, context, answers`` (``answers`` as
   SQuAD's ``{"text": [...], "answer_start": [...]}`` or a list of ``{"text", "answer_start"}``). An answer whose
   offset does not point at its text is looked up in the context (:func:`locate_answer`: the occurrence nearest
   to the offset; CMRC's offsets are UTF-16 offsets near astral characters and some are -1); one whose text is not
   in the context is counted and warned about, kept as a reference for the metric, and not trained on. Every
   question of a training or dev file needs ``answers``; SQuAD v1.1 and CMRC 2018 (whose official scorers fail on
   a question without a reference) also refuse unanswerable ones, which only SQuAD v2.0 scores
   (:meth:`QAKind.unanswered`; ``predict`` predicts such a file and does not score it).
2. **Features** (:func:`build_features`): ``[CLS] question [SEP] context-window [SEP]`` with the question cut to
   ``max_query_length`` tokens and the context in windows of ``max_seq_length - len(question) - 3`` tokens that
   overlap by ``doc_stride`` tokens — transformers' meaning of ``doc_stride`` (the tokenizer's ``stride``, the
   ``question-answering`` pipeline's ``doc_stride``), so that litebert and the pipeline see the same windows.
   Windows overlap by ``doc_stride`` only if they are longer, whatever the question: :func:`check_window_options`
   requires ``doc_stride < max_seq_length - 3 - max_query_length`` before any text is tokenized.
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

Outputs of ``litebert finetune --task squad|squad_v2|cmrc2018|drcd`` (or ``--task-type qa``) through the run
layer (:class:`QAKind`)::

    OUTPUT/best/                  AlbertForQuestionAnswering + tokenizer (loads in AutoModelForQuestionAnswering)
    OUTPUT/eval_results.json      dev metrics of best/ (+ eval_loss, best_step, num_examples)
    OUTPUT/predictions.json       {question_id: answer_text} on dev
    OUTPUT/nbest_predictions.json {question_id: [{text, probability, start_logit, end_logit}, ...]}
    OUTPUT/null_odds.json         SQuAD v2: {question_id: null score − best span score}
    OUTPUT/finetune_config.json (qa_metric, qa_options, answer_offsets), run_settings.json, metrics.jsonl, ...
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from litebert.corpus import check_no_lone_surrogate, read_text_file
from litebert.errors import LitebertError
from litebert.fileio import atomic_write_json
from litebert.finetune.data import pad_inputs
from litebert.finetune.kinds import Features, TaskKind
from litebert.finetune.qa_metrics import cmrc_metrics, squad_v1_metrics, squad_v2_metrics
from litebert.finetune.readers import data_lines

log = logging.getLogger("litebert.finetune")

#: how far (characters) an answer may sit from its given offset and still count as the same answer whose offset
#: drifted (CMRC's UTF-16 offsets drift by 1-2); farther occurrences are used but counted as ``far``.
MAX_OFFSET_DRIFT = 20


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

    @property
    def label(self) -> str:
        """The reference answers joined by `` | `` (the ``labels`` of ``EvalResult``); "" when unanswerable."""
        return " | ".join(self.answers)


@dataclass
class QAReadResult:
    """The questions of one file and what happened to their answers' offsets.

    Attributes:
        path: the file. layout: ``"squad"`` (JSON) or ``"jsonl"``. examples: in file order.
        offsets: counts of the first answers' offsets: ``exact`` (pointed at the text), ``drifted`` (the text was
            within :data:`MAX_OFFSET_DRIFT` characters), ``far`` (only farther away), ``no_offset`` (-1 or none
            given; the first occurrence used), ``unlocated`` (the text is not in the context: not trained on).
        problems: up to 10 ``where: what`` lines about offsets that were not exact.
        unscored: why the file's answers are not scored although it has some (a predict or test file with
            questions the metric cannot score, :meth:`QAKind.unanswered`), or None.
    """

    path: Path
    layout: str
    examples: list[QAExample]
    offsets: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(("exact", "drifted", "far", "no_offset", "unlocated"), 0)
    )
    problems: list[str] = field(default_factory=list)
    unscored: str | None = None

    @property
    def has_labels(self) -> bool:
        """True when any question carries a reference answer or an unanswerable flag (a labelled file), unless
        its answers are :attr:`unscored`."""
        return self.unscored is None and any(ex.answers or ex.is_impossible for ex in self.examples)

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
        raise LitebertError(
            f"{where}: 'answers' must be a list of {{text, answer_start}} or a dict of lists, got {type(raw).__name__}"
        )
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
    # an empty answer list marks an unanswerable question; no "answers" field at all: an unlabelled row (predict)
    impossible = bool(impossible) or (raw_answers is not None and not answers)
    start = end = None
    if answers and not impossible:
        text, offset = answers[0]
        pos, status = None, "unlocated"
        for t, o in answers:  # train on the first answer that can be located
            p, st = locate_answer(context, t, o)
            if p is not None:
                text, offset, pos, status = t, o, p, st
                break
        res.offsets[status] += 1
        if status != "exact" and len(res.problems) < 10:
            res.problems.append(
                f"{where}: answer {text[:40]!r} at offset {offset}: {status}"
                + (f" (found at {pos})" if pos is not None else "")
            )
        if pos is not None:
            start, end = pos, pos + len(text)
    return QAExample(
        str(qid),
        question,
        context,
        tuple(t for t, _ in answers) if not impossible else (),
        start,
        end,
        impossible,
        where,
    )


def _spread_over_lines(text: str) -> bool:
    """Whether ``text`` looks like one JSON document over several lines rather than JSON lines: its second
    non-blank line is not a JSON value of its own."""
    lines = [line for line in data_lines(text) if line.strip()]
    if len(lines) < 2:
        return False
    try:
        json.loads(lines[1])
    except json.JSONDecodeError:
        return True
    return False


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
    text = read_text_file(path)  # gzip/bzip2/xz/zstd-compressed too
    whole = None
    whole_error: json.JSONDecodeError | None = None  # the file is not one JSON document: JSON lines, or broken
    if text.lstrip().startswith(("{", "[")):
        try:
            whole = json.loads(text)
        except json.JSONDecodeError as exc:
            whole, whole_error = None, exc  # JSON lines: one object per line
        else:
            check_no_lone_surrogate(text, whole, str(path))
    rows: list[tuple[str, Any]] | None = None  # (where, row) of JSON lines or of a JSON list of rows
    if isinstance(whole, list):  # one JSON document holding a list: rows {id, question, context, answers}
        if not all(isinstance(r, dict) and {"question", "context"} <= set(r) for r in whole):
            bad = next(
                i for i, r in enumerate(whole) if not (isinstance(r, dict) and {"question", "context"} <= set(r))
            )
            got = (
                f"an object with keys {sorted(whole[bad])[:6]}"
                if isinstance(whole[bad], dict)
                else type(whole[bad]).__name__
            )
            raise LitebertError(
                f"{path}: a JSON list whose item [{bad}] is {got}: expected SQuAD layout (data[].paragraphs[].qas[]) "
                "or rows {id, question, context, answers} (JSON lines, or a JSON list of them)"
            )
        rows = [(f"{path}:[{i}]", r) for i, r in enumerate(whole)]
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
                    res.examples.append(
                        _make_example(
                            res,
                            qa.get("id"),
                            qa.get("question"),
                            para["context"],
                            qa.get("answers"),
                            qa.get("is_impossible"),
                            where,
                        )
                    )
    elif isinstance(whole, dict) and not ({"id", "question", "context", "answers"} & set(whole)):
        raise LitebertError(
            f"{path}: a JSON object without 'data': expected SQuAD layout (data[].paragraphs[].qas[]) or JSON lines"
        )
    else:
        res = QAReadResult(path, "jsonl", [])
        if rows is None:
            rows = []
            for n, line in enumerate(data_lines(text), 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    if not rows and whole_error is not None and _spread_over_lines(text):
                        # the first line is no JSON object of its own and neither is the second: one (pretty-printed)
                        # JSON document, broken somewhere; the document's own error says where
                        doc = whole_error
                        raise LitebertError(
                            f"{path}:{doc.lineno}: not valid JSON ({doc.msg}, column {doc.colno})"
                        ) from None
                    raise LitebertError(f"{path}:{n}: not valid JSON ({exc.msg})") from None
                if not isinstance(row, dict):
                    raise LitebertError(f"{path}:{n}: expected a JSON object with id, question, context, answers")
                check_no_lone_surrogate(line, row, f"{path}:{n}")
                rows.append((f"{path}:{n}", row))
        _add_rows(res, rows)
    return _checked(res)


def read_qa_rows(path: Path, rows) -> QAReadResult:
    """Questions from ``(line, {id, question, context, answers[, is_impossible]})`` rows: a Hub split's
    (:mod:`litebert.finetune.hub_data`), read as the lines of a JSON-lines file are (``layout`` ``"jsonl"``).

    Raises:
        LitebertError: as :func:`read_qa_file` (``path:line``).
    """
    res = QAReadResult(Path(path), "jsonl", [])
    _add_rows(res, [(f"{path}:{n}", row) for n, row in rows])
    return _checked(res)


def _add_rows(res: QAReadResult, rows) -> None:
    for where, row in rows:
        res.examples.append(
            _make_example(
                res,
                row.get("id"),
                row.get("question"),
                row.get("context"),
                row.get("answers"),
                row.get("is_impossible"),
                where,
            )
        )


def _checked(res: QAReadResult) -> QAReadResult:
    """``res`` when it has questions with distinct ids. Raises LitebertError: none, or a duplicate id."""
    if not res.examples:
        raise LitebertError(f"{res.path}: no questions found")
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
        log.warning(
            "%s: %s: %d answer(s) not found in their context (not trained on), %d found only more than %d "
            "characters from their offset; e.g. %s",
            name,
            res.path,
            c["unlocated"],
            c["far"],
            MAX_OFFSET_DRIFT,
            "; ".join(res.problems[:3]),
        )
    if c["drifted"] or c["no_offset"]:
        log.info(
            "%s: %s: %d answer offset(s) corrected (drifted), %d without an offset located by text",
            name,
            res.path,
            c["drifted"],
            c["no_offset"],
        )


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


def check_window_options(
    max_seq_length: int, doc_stride: int, max_query_length: int, origin: dict[str, str] | None = None
) -> None:
    """Refuse window options under which some question's windows could not overlap by ``doc_stride`` tokens.

    A question keeps at most ``max_query_length`` tokens, so its context windows hold
    ``max_seq_length - 3 - len(question) >= max_seq_length - 3 - max_query_length`` tokens; consecutive windows
    overlap by ``doc_stride`` tokens only if that is more (each window then starts ``window - doc_stride >= 1``
    tokens after the previous one). The bound is the shortest window, not the file's questions: options accepted
    for the training file hold for any file predicted later with them. ``origin`` says where a value came from in
    the message (``{"doc_stride": "the default"}``).

    Raises:
        LitebertError: ``doc_stride >= max_seq_length - 3 - max_query_length`` (or negative), naming the three
            options.
    """
    window = max_seq_length - 3 - max_query_length
    if 0 <= doc_stride < window:
        return
    origin = origin or {}

    def opt(name: str, value: int) -> str:
        return f"--{name.replace('_', '-')} {value}" + (f" ({origin[name]})" if name in origin else "")

    raise LitebertError(
        f"{opt('doc_stride', doc_stride)} must be smaller than the shortest context window, "
        f"{opt('max_seq_length', max_seq_length)} - {opt('max_query_length', max_query_length)} - 3 = {window} "
        "tokens ([CLS] question [SEP] window [SEP], the question cut to max_query_length tokens); lower "
        "--doc-stride or --max-query-length, or raise --max-seq-length"
    )


def build_features(
    examples: list[QAExample],
    tokenizer,
    max_seq_length: int,
    doc_stride: int,
    max_query_length: int,
    labelled: bool = True,
) -> QAFeatures:
    """Tokenize questions and contexts and cut the contexts into windows (see the module docstring).

    ``tokenizer`` is a :class:`litebert.tokenization.Tokenizer` (``encode_with_offsets``, ``cls_token_id``,
    ``sep_token_id``). Each distinct context is tokenized once.

    Raises:
        LitebertError: the options leave some question's windows no room to overlap by ``doc_stride`` tokens
            (:func:`check_window_options`), before anything is tokenized.
    """
    check_window_options(max_seq_length, doc_stride, max_query_length)
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    contexts = list(dict.fromkeys(ex.context for ex in examples))
    ctx_enc = dict(zip(contexts, tokenizer.encode_with_offsets(contexts)))
    q_ids = [ids for ids, _ in tokenizer.encode_with_offsets([ex.question for ex in examples])]
    feats = QAFeatures([], [], np.zeros(0, np.int64), [], [] if labelled else None, [] if labelled else None)
    ex_index: list[int] = []
    for e, ex in enumerate(examples):
        q = q_ids[e]
        if len(q) > max_query_length:
            q = q[:max_query_length]
            feats.truncated_questions += 1
        ids, offs = ctx_enc[ex.context]
        window = max_seq_length - len(q) - 3  # > doc_stride: check_window_options
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
            o[prefix : prefix + we - ws] = offs[ws:we]
            feats.offsets.append(o)
            ex_index.append(e)
            if labelled:
                inside = tok_s is not None and ws <= tok_s and tok_e < we
                feats.start_positions.append(tok_s - ws + prefix if inside else 0)
                feats.end_positions.append(tok_e - ws + prefix if inside else 0)
    feats.example_index = np.asarray(ex_index, dtype=np.int64)
    return feats


@dataclass
class QACollator:
    """Pads items to the longest in the batch: ``input_ids``, ``token_type_ids``, ``attention_mask`` ``int64
    [B, S]``; ``start_positions``, ``end_positions`` ``int64 [B]`` when present."""

    pad_token_id: int

    def __call__(self, items: list[dict]) -> dict[str, torch.Tensor]:
        out = pad_inputs(items, self.pad_token_id)
        if "start_positions" in items[0]:
            out["start_positions"] = torch.tensor([it["start_positions"] for it in items], dtype=torch.long)
            out["end_positions"] = torch.tensor([it["end_positions"] for it in items], dtype=torch.long)
        return out


# -------------------------------------------------------------------------------------------- objective, inference
def make_qa_objective(device: torch.device):
    """Objective for :func:`litebert.training.train`: ``loss`` = (start CE + end CE) / 2 summed over the features
    of the batch (transformers' ``AlbertForQuestionAnswering`` loss × B; units = features) and the ratio
    ``span_accuracy`` (start and end both right), a 0-d tensor on the device (read at logging steps only)."""
    from litebert.training import LossOutput

    def objective(model, batch):
        batch = {k: v.to(device) for k, v in batch.items()}
        out = model(
            input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], token_type_ids=batch["token_type_ids"]
        )
        s, e = out.start_logits.float(), out.end_logits.float()  # (B, S)
        ys, ye = batch["start_positions"], batch["end_positions"]
        loss = (F.cross_entropy(s, ys, reduction="sum") + F.cross_entropy(e, ye, reduction="sum")) / 2
        right = ((s.detach().argmax(-1) == ys) & (e.detach().argmax(-1) == ye)).sum()  # 0-d, stays on the device
        return LossOutput(sums={"loss": loss}, ratios={"span_accuracy": (right, len(ys))})

    def count(batch):
        return {"loss": int(batch["start_positions"].numel())}

    return objective, count


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


def _feature_candidates(
    start: np.ndarray, end: np.ndarray, offsets: np.ndarray, n_best_size: int, max_answer_length: int
) -> list[tuple[float, float, float, int, int]]:
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
        out.append((float(scores[i, j]), float(s[i]), float(e[j]), int(offsets[ctx[i], 0]), int(offsets[ctx[j], 1])))
    return out


def decode_predictions(
    examples: list[QAExample],
    feats: QAFeatures,
    start_logits: list[np.ndarray],
    end_logits: list[np.ndarray],
    n_best_size: int = 20,
    max_answer_length: int = 30,
    with_null: bool = False,
    null_threshold: float = 0.0,
) -> QAPredictions:
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
        nbest[ex.qid] = [
            {"text": x["text"], "probability": float(p), "start_logit": x["start_logit"], "end_logit": x["end_logit"]}
            for x, p in zip(entries, probs)
        ]
        best_span[ex.qid] = best["text"] if best else ""
        if with_null:
            diff = null_score - (best["score"] if best else -1e9)
            odds[ex.qid] = float(min(diff, 1e9))
            preds[ex.qid] = "" if odds[ex.qid] > null_threshold else best_span[ex.qid]
        else:
            preds[ex.qid] = best_span[ex.qid]
    return QAPredictions(preds, best_span, nbest, odds if with_null else None)


QA_METRICS = ("squad", "squad_v2", "cmrc")
"""Metric families: SQuAD v1.1, SQuAD v2.0 (with the null threshold), the CMRC 2018 scorer (Chinese)."""

QA_DEFAULTS = {"doc_stride": 128, "max_query_length": 64, "n_best_size": 20, "max_answer_length": 30}
"""The QA options and their defaults (google-research/albert ``run_squad`` and transformers ``run_qa``); the window
options' defaults follow ``max_seq_length`` (:func:`qa_default`)."""


def qa_default(name: str, max_seq_length: int | None = None, max_query_length: int | None = None) -> int:
    """The default of a QA option. The window options follow the length the features are cut to, as transformers'
    ``question-answering`` pipeline takes ``doc_stride = min(max_seq_len // 2, 128)``: ``max_query_length = min(64,
    (max_seq_length - 3) // 2)`` and ``doc_stride = min(128, (max_seq_length - 3 - max_query_length) // 2)``, so the
    defaults always pass :func:`check_window_options` and are google-research/albert's 64 and 128 from
    ``max_seq_length`` 323 (its 384 included); at 128 they are 62 and 31. Without a length: :data:`QA_DEFAULTS`."""
    if max_seq_length is None or name not in ("doc_stride", "max_query_length"):
        return QA_DEFAULTS[name]
    if name == "max_query_length":
        return max(1, min(QA_DEFAULTS[name], (max_seq_length - 3) // 2))
    query = max_query_length if max_query_length is not None else qa_default("max_query_length", max_seq_length)
    return max(0, min(QA_DEFAULTS[name], (max_seq_length - 3 - query) // 2))


_METRIC_NAMES = {"squad": "SQuAD v1.1", "squad_v2": "SQuAD v2.0", "cmrc": "CMRC 2018"}


def infer_metric(read: QAReadResult) -> str:
    """Metric family for ``--task-type qa`` files without a task: ``cmrc`` when most letters of the contexts are
    CJK, else ``squad_v2`` when any question is unanswerable, else ``squad``."""
    from litebert.tokenization import is_cjk_char

    sample = "".join(ex.context for ex in read.examples[:200])
    letters = [c for c in sample if c.isalpha()]
    if letters and sum(map(is_cjk_char, letters)) > len(letters) / 2:
        return "cmrc"
    return "squad_v2" if any(ex.is_impossible for ex in read.examples) else "squad"


class QAKind(TaskKind):
    """Extractive QA as a task kind of :mod:`litebert.finetune.kinds` (``--task squad|squad_v2|cmrc2018|drcd`` or
    ``--task-type qa``).

    Predictions are dicts ``{"id", "text", "best_span", "null_odds", "nbest"}``, one per question;
    ``predictions.json`` / ``nbest_predictions.json`` (/ ``null_odds.json``) are written from them. The metric
    family comes from the task (``qa_metric`` option), else from ``config.json`` (``litebert_qa_metric``), else
    :func:`infer_metric`. SQuAD v2: while fine-tuning, every dev evaluation sets the null threshold to the official
    ``best_f1_thresh`` and answers "" above it; ``best/config.json`` keeps it
    (``litebert_null_score_diff_threshold``) and evaluate/predict apply it (their metrics also report
    ``best_f1`` / ``best_f1_thresh`` for the file scored).
    """

    name = "qa"
    architecture = "AlbertForQuestionAnswering"
    head_prefixes = ("qa_outputs.",)
    predictions_name = "predictions.json"
    min_positions = (5, "[CLS] question [SEP] context [SEP]")

    def __init__(self, data, *, problem_type: str | None = None, metrics=None):
        super().__init__(data, problem_type=problem_type, metrics=None)
        if metrics:
            raise LitebertError(
                "--metric does not apply to QA tasks: their metrics are the official scorers' "
                "(squad: exact_match/f1, squad_v2: exact/f1, cmrc2018/drcd: exact_match/f1)"
            )
        self.metric: str | None = self.task.option("qa_metric") if self.task else None
        #: where the metric came from, for messages: the task, the model's config.json, or the training file
        self.metric_from = f"--task {self.task.name}" if self.metric else None
        self.given = {name: getattr(data, name, None) for name in QA_DEFAULTS}
        self.saved: dict[str, Any] = {}
        self.null_threshold = 0.0
        self.choose_threshold = True  # fine-tuning: on dev; evaluate/predict: the saved one
        self.offsets: dict[str, dict[str, int]] = {}
        self.max_seq_length: int | None = None  # of the training features, saved for evaluate/predict's warning
        self.window_length: int | None = None  # of the features being made: the window options' defaults follow it
        self._set_metrics()

    def _set_metrics(self) -> None:
        self.metrics = ("f1", "exact" if self.metric == "squad_v2" else "exact_match")

    def option(self, name: str) -> int:
        """A QA option: the user's, else the one saved with the model, else its default (:func:`qa_default`, from
        the length of the features being made)."""
        for source in (self.given, self.saved):
            if source.get(name) is not None:
                return int(source[name])
        query = self.option("max_query_length") if name == "doc_stride" else None
        return qa_default(name, self.window_length, query)

    # ---- data
    def read(self, path: str | Path, *, require_labels: bool) -> QAReadResult:
        return self._checked_read(read_qa_file(path), require_labels)

    def read_rows(self, rows, source, *, require_labels: bool) -> QAReadResult:
        return self._checked_read(read_qa_rows(Path(source), rows), require_labels)

    def _checked_read(self, res: QAReadResult, require_labels: bool) -> QAReadResult:
        report_offsets("read", res)
        self.offsets[str(res.path)] = dict(res.offsets)
        if require_labels and not res.has_labels:
            raise LitebertError(
                f"{res.path}: no question has answers to score (use litebert predict for unlabelled files)"
            )
        problem = self.unanswered(res)
        if problem and require_labels:
            raise LitebertError(problem)
        if problem:  # predict, finetune's --test: an unanswered question would score 0 (v1) or as unanswerable (v2)
            log.warning("%s; its questions are predicted, not scored (no metrics)", problem)
            res.unscored = problem
        return res

    def unanswered(self, read: QAReadResult) -> str | None:
        """Why the questions of ``read`` (a file with answers) cannot all be trained on or scored, or None.

        A question without ``answers`` in a file that has them is unlabelled, not unanswerable (``[]`` or
        ``is_impossible: true`` marks an unanswerable one): every question of a training or dev file needs them. The
        SQuAD v1.1 and CMRC 2018 metrics also refuse an unanswerable question: their official scorers take the
        maximum over the reference answers and fail on none, and a dropped or zero-scored question would change
        the counts silently. The message names the first such question (``file:line`` or
        ``file:data[i].paragraphs[j].qas[k]`` and its id), counts them, and for unanswerable questions names
        ``--task squad_v2``. Until the metric is known (``--task-type qa`` before :meth:`fit`) only the first
        rule is checked; :meth:`featurize` checks both on the training and dev files.
        """
        questions = read.examples
        if not any(ex.answers or ex.is_impossible for ex in questions):
            return None  # an unlabelled file: predicted, or refused by _checked_read where answers are needed
        missing = [ex for ex in questions if not ex.answers and not ex.is_impossible]
        if missing:
            ex = missing[0]
            return (
                f"{ex.where}: question {ex.qid!r} has no 'answers' ({len(missing)} of {len(questions)} questions of "
                "this file have none): every question of a training or dev file needs them"
                + (" ([] or is_impossible: true marks an unanswerable one)" if self.metric == "squad_v2" else "")
                + "; litebert predict reads questions without answers"
            )
        impossible = [ex for ex in questions if ex.is_impossible]
        if not impossible or self.metric in (None, "squad_v2"):
            return None
        ex = impossible[0]
        name = _METRIC_NAMES.get(self.metric, self.metric)
        return (
            f"{ex.where}: question {ex.qid!r} is unanswerable (is_impossible: true or an empty 'answers'; "
            f"{len(impossible)} of {len(questions)} questions of this file), but {self.metric_from} scores "
            f"{name}, where every question has an answer; for unanswerable questions (SQuAD v2.0 layout) use "
            "--task squad_v2"
        )

    def fit(self, train: QAReadResult) -> None:
        if self.metric is None:
            self.metric = infer_metric(train)
            self.metric_from = f"--task-type qa (metric {self.metric!r}, chosen from {train.path})"
            self._set_metrics()
        if not any(ex.is_impossible or ex.start_char is not None for ex in train.examples):
            raise LitebertError(f"{train.path}: no question has an answer located in its context")

    def from_config(self, config) -> None:
        extra = config.extra or {}
        self.saved = {k: extra.get(k) for k in QA_DEFAULTS}
        self.saved["max_seq_length"] = extra.get("litebert_max_seq_length")
        if self.metric is None and extra.get("litebert_qa_metric"):
            self.metric = extra["litebert_qa_metric"]
            self.metric_from = f"the model's metric {self.metric!r} (litebert_qa_metric in config.json)"
        self.null_threshold = float(extra.get("litebert_null_score_diff_threshold", 0.0))
        if self.metric == "squad_v2" and "litebert_null_score_diff_threshold" not in extra:
            log.warning(
                "the model has no SQuAD v2 null-score threshold (it was not fine-tuned with --task squad_v2): "
                '0.0 is used, so unanswerable questions are answered "" only where the null score beats the best '
                "span's; best_f1_thresh in the metrics is the threshold this file would want"
            )
        self.choose_threshold = False
        self._set_metrics()

    def featurize(self, read: QAReadResult, tokenizer, max_seq_length: int, split: str) -> Features:
        """Features of ``read`` (:func:`build_features`).

        Raises:
            LitebertError: window options that leave a question's windows no room to overlap by ``doc_stride``
                (:func:`check_window_options`, before any text is tokenized: fine-tuning refuses them before it
                trains, evaluate/predict before they run); a training or dev question without an answer the
                metric can score (:meth:`unanswered`).
        """
        self.window_length = max_seq_length
        check_window_options(
            max_seq_length,
            self.option("doc_stride"),
            self.option("max_query_length"),
            {
                n: "saved with the model" if self.saved.get(n) is not None else "the default"
                for n in ("doc_stride", "max_query_length")
                if self.given.get(n) is None
            },
        )
        if self.metric is None:
            self.metric = infer_metric(read)
            self.metric_from = f"the metric {self.metric!r} chosen from {read.path}"
            self._set_metrics()
        problem = self.unanswered(read) if split in ("train", "dev") else None
        if problem:  # --task-type qa: the metric was not known when the file was read
            raise LitebertError(problem)
        if split == "train":
            self.max_seq_length = max_seq_length
        elif self.saved.get("max_seq_length") not in (None, max_seq_length):
            log.warning(
                "%s: the model was fine-tuned with --max-seq-length %s; these windows have %d tokens",
                read.path,
                self.saved["max_seq_length"],
                max_seq_length,
            )
        index = list(range(len(read.examples)))
        if split == "train":  # answers not found in their context are not trained on (counted when read)
            index = [i for i in index if read.examples[i].is_impossible or read.examples[i].start_char is not None]
        qf = build_features(
            [read.examples[i] for i in index],
            tokenizer,
            max_seq_length,
            self.option("doc_stride"),
            self.option("max_query_length"),
            labelled=read.has_labels,
        )
        qf.example_index = np.asarray(index, dtype=np.int64)[qf.example_index]
        items = []
        for f in range(len(qf)):
            item = {"input_ids": qf.input_ids[f], "token_type_ids": qf.token_type_ids[f]}
            if qf.start_positions is not None:
                item["start_positions"], item["end_positions"] = qf.start_positions[f], qf.end_positions[f]
            items.append(item)
        if qf.truncated_questions:
            log.warning(
                "%s: %d of %d questions of %s are longer than max_query_length=%d tokens and were cut",
                split,
                qf.truncated_questions,
                len(index),
                read.path,
                self.option("max_query_length"),
            )
        log.info(
            "%s: %d questions -> %d features (%d in several windows)", split, len(index), len(qf), qf.split_examples
        )
        lengths = qf.lengths
        return Features(
            items,
            lengths,
            qf.example_index.tolist(),
            truncated=0,
            longest=max(lengths, default=0),
            extra={"qa": qf, "truncated_questions": qf.truncated_questions},
        )

    def collator(self, pad_token_id: int) -> QACollator:
        return QACollator(pad_token_id)

    # ---- model
    def config_overrides(self) -> dict[str, Any]:
        return {
            "num_labels": 2,
            "id2label": {0: "LABEL_0", 1: "LABEL_1"},
            "label2id": {"LABEL_0": 0, "LABEL_1": 1},
            "problem_type": None,
        }

    def config_extra(self) -> dict[str, Any]:
        return {
            **super().config_extra(),
            "litebert_qa_metric": self.metric,
            "litebert_max_seq_length": self.max_seq_length,
            **{name: self.option(name) for name in QA_DEFAULTS},
        }

    def update_config(self, config) -> None:
        if self.metric == "squad_v2":
            config.extra = {**(config.extra or {}), "litebert_null_score_diff_threshold": self.null_threshold}

    def objective(self, device: torch.device):
        return make_qa_objective(device)

    # ---- inference
    def forward(self, model, batch: dict[str, torch.Tensor]) -> tuple[list[np.ndarray], float, int]:
        """→ per feature ``float32 [2, S]`` (start and end logits, padded to the batch), summed loss, features."""
        out = model(
            input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], token_type_ids=batch["token_type_ids"]
        )
        s, e = out.start_logits.float(), out.end_logits.float()  # (B, S)
        rows = list(torch.stack([s, e], dim=1).cpu().numpy())  # B x (2, S)
        if "start_positions" not in batch:
            return rows, 0.0, 0
        loss = (
            F.cross_entropy(s, batch["start_positions"], reduction="sum")
            + F.cross_entropy(e, batch["end_positions"], reduction="sum")
        ) / 2
        return rows, float(loss), len(rows)

    def postprocess(self, outputs: list[np.ndarray], feats: Features, read: QAReadResult) -> list[dict]:
        decoded = decode_predictions(
            read.examples,
            feats.extra["qa"],
            [o[0] for o in outputs],
            [o[1] for o in outputs],
            self.option("n_best_size"),
            self.option("max_answer_length"),
            with_null=self.metric == "squad_v2",
            null_threshold=self.null_threshold,
        )
        return [
            {
                "id": ex.qid,
                "text": decoded.predictions[ex.qid],
                "best_span": decoded.best_span[ex.qid],
                "null_odds": None if decoded.null_odds is None else decoded.null_odds[ex.qid],
                "nbest": decoded.nbest[ex.qid],
            }
            for ex in read.examples
        ]

    def score(self, predictions: list[dict], read: QAReadResult, feats: Features) -> dict[str, float]:
        refs = read.references
        if self.metric == "squad":
            out = squad_v1_metrics(refs, {p["id"]: p["text"] for p in predictions})
        elif self.metric == "cmrc":
            out = cmrc_metrics(refs, {p["id"]: p["text"] for p in predictions})
        elif self.metric == "squad_v2":
            search = squad_v2_metrics(
                refs, {p["id"]: p["best_span"] for p in predictions}, {p["id"]: p["null_odds"] for p in predictions}
            )
            if self.choose_threshold:  # fine-tuning's dev evaluation: the official best_f1_thresh
                self.null_threshold = search["best_f1_thresh"]
                for p in predictions:
                    p["text"] = "" if p["null_odds"] > self.null_threshold else p["best_span"]
            out = squad_v2_metrics(refs, {p["id"]: p["text"] for p in predictions})
            out.update({k: search[k] for k in ("best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh")})
            out["null_score_diff_threshold"] = self.null_threshold
        else:
            raise LitebertError(f"unknown QA metric {self.metric!r}; expected one of {', '.join(QA_METRICS)}")
        return {"f1": out.pop("f1"), **out}

    def write_predictions(self, path: Path, read: QAReadResult, predictions: list[dict]) -> Path:
        """``path`` = ``predictions.json`` (``{id: text}``) and beside it ``nbest_predictions.json`` (and, SQuAD
        v2, ``null_odds.json``), each written atomically."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(path, {p["id"]: p["text"] for p in predictions}, sort_keys=False)
        atomic_write_json(
            path.with_name(path.name.replace("predictions", "nbest_predictions")),
            {p["id"]: p["nbest"] for p in predictions},
            sort_keys=False,
        )
        if self.metric == "squad_v2":
            atomic_write_json(
                path.with_name(path.name.replace("predictions", "null_odds")),
                {p["id"]: p["null_odds"] for p in predictions},
                sort_keys=False,
            )
        return path

    def decode(self, prediction: dict) -> str:
        return prediction["text"]

    def settings(self) -> dict[str, Any]:
        return {
            **super().settings(),
            "qa_metric": self.metric,
            "qa_options": {name: self.option(name) for name in QA_DEFAULTS},
            "answer_offsets": self.offsets,
        }
