"""Multiple choice (``--task-type choice``): pick one of 2 or more options; the head ``AlbertForMultipleChoice``.

Layouts, recognised from the file (no column options needed):

* **C3** (CLUE): a JSON list of documents ``[[paragraph, ...], [{"question", "choice": [...], "answer"}, ...], id]``;
  2–4 options; the answer is the option's text (label = ``choice.index(answer)``). Pair:
  ``paragraphs joined by "\\n"`` / ``question + " " + option``.
* **SWAG** JSON lines or the official CSV (``sent1, sent2, ending0..3, label``): pair ``sent1`` /
  ``sent2 + " " + ending`` (transformers' ``run_swag.py``). **HellaSwag** JSON lines (``ctx_a, ctx_b, endings,
  label``): the same with ``ctx_a`` / ``ctx_b``.
* **RACE** (``article, questions, options, answers``; one JSON object per file or per line): one example per
  question; answers ``A``-``D``; pair ``article`` / the question with ``_`` replaced by the option, else
  ``question + " " + option`` (the official ALBERT ``race_utils.py``).
* **C3 rows**, one question each (``context`` = the paragraphs, ``question``, ``choice``, ``answer``; the Hub's
  ``clue/clue`` c3): the same pair as C3; ``id`` the row's.
* **COPA** JSON lines (``premise, choice1, choice2, question ("cause"|"effect"), label``): pair ``premise`` /
  ``"What was the cause? "`` or ``"What happened as a result? "`` + choice.

Labels: a missing or empty label, or ``-1`` (SWAG's and HellaSwag's test files, as ``datasets`` writes them; what
:mod:`litebert.finetune.hub_data` reads as no label), is no label: a file with such a row is read unlabelled by
``predict`` and ``--test`` (predicted, not scored) and refused as a training, dev or ``evaluate`` file (its line).

Each option is encoded as ``[CLS] first [SEP] second [SEP]`` (longest-first truncation to ``max_seq_length``). A
batch has ``C`` = the most options of its examples; missing options are ``[CLS] [SEP]`` rows whose logits are set
to ``-inf`` (``choice_mask``), so they get probability 0 and are never predicted. Metric: accuracy. Predictions:
``predictions.tsv`` (``index  id  prediction  [label]``, option indexes).
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from litebert.corpus import check_no_lone_surrogate, data_suffix, read_text_file
from litebert.errors import LitebertError
from litebert.fileio import atomic_write_text
from litebert.finetune.data import _batch_ids, _truncate_pair
from litebert.finetune.kinds import Features, TaskKind
from litebert.finetune.readers import ReadResult, json_rows

CHOICE_METRICS = ("accuracy",)


@dataclass(frozen=True)
class ChoiceExample:
    """One question with its options.

    Attributes:
        index: 0-based example number in the file; id: the example's id (``doc-id/question number`` for C3 and
            RACE); line: 1-based line (the line of the row for JSON lines / CSV; 1 for whole-file JSON).
        first: the shared first segment (context); seconds: the second segment of each option.
        options: the option texts; label: the gold option index or ``None``.
    """

    index: int
    id: str
    first: str
    seconds: list[str]
    options: list[str]
    label: int | None
    line: int


_COPA_QUESTION = {"cause": "What was the cause? ", "effect": "What happened as a result? "}


def read_choice_file(path: str | Path, *, require_labels: bool = True) -> ReadResult:
    """Read a C3, SWAG (JSON lines or CSV), HellaSwag, RACE, COPA or C3-question file (see the module docstring).

    Raises:
        LitebertError: a layout that is none of these; a label that is not one of the example's options
            (``file:line`` or the C3 document and question); fewer than 2 options; a missing label when labels
            are required.
    """
    path = Path(path)
    text = read_text_file(path)  # gzip/bzip2/xz/zstd-compressed too
    stripped = text.lstrip()
    if not stripped:
        raise LitebertError(f"{path}: the file is empty")
    if data_suffix(path) == ".csv":
        rows = [(reader_line, row) for reader_line, row in _csv_rows(path, text)]
        fmt = "csv"
    elif stripped.startswith("[") and _is_c3(path, text):
        data = json.loads(text)
        check_no_lone_surrogate(text, data, str(path))
        return _finish(path, _read_c3(path, data, require_labels), "c3", require_labels)
    elif stripped.startswith("{") and "\n{" not in stripped.rstrip() and _is_json(text):
        rows, fmt = [(1, json.loads(text))], "json"  # one RACE article per file
    else:
        rows, fmt = list(json_rows(path, text)), "jsonl"
    if fmt == "json":
        check_no_lone_surrogate(text, rows[0][1], str(path))
    return read_choice_rows(path, rows, require_labels=require_labels, fmt=fmt)


def read_choice_rows(path: Path, rows, *, require_labels: bool = True, fmt: str = "jsonl") -> ReadResult:
    """Examples from ``(line, row)`` pairs: the rows of a JSON-lines or CSV file, or a Hub split's rows
    (:mod:`litebert.finetune.hub_data`), each a SWAG, HellaSwag, RACE, COPA or C3-question row.

    Raises:
        LitebertError: as :func:`read_choice_file` (``path:line``).
    """
    examples: list[ChoiceExample] = []
    for lineno, row in rows:
        if not isinstance(row, dict):
            raise LitebertError(f"{path}:{lineno}: expected a JSON object, got {type(row).__name__}")
        examples.extend(_row_examples(path, lineno, row, len(examples), require_labels))
    return _finish(path, examples, fmt, require_labels)


def _finish(path: Path, examples: list[ChoiceExample], fmt: str, require_labels: bool) -> ReadResult:
    if not examples:
        raise LitebertError(f"{path}: no examples")
    has_labels = all(ex.label is not None for ex in examples)
    if require_labels and not has_labels:
        first = next(ex for ex in examples if ex.label is None)
        raise LitebertError(
            f"{path}:{first.line}: example {first.id} has no label (missing, empty or -1); training and dev files "
            "need one"
        )
    return ReadResult(path=path, examples=examples, header=None, has_labels=has_labels, format=fmt)


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
        return True
    except json.JSONDecodeError:
        return False


def _is_c3(path: Path, text: str) -> bool:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LitebertError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from exc
    return isinstance(data, list) and all(isinstance(d, list) and len(d) >= 2 for d in data[:5])


def _csv_rows(path: Path, text: str):
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        for row in reader:
            yield reader.line_num, row
    except csv.Error as exc:
        raise LitebertError(f"{path}:{reader.line_num}: bad CSV ({exc})") from exc


def _read_c3(path: Path, data: list, require_labels: bool) -> list[ChoiceExample]:
    examples = []
    for d_i, doc in enumerate(data):
        where = f"{path}: document {d_i} (id {doc[2] if len(doc) > 2 else '?'})"
        if not (isinstance(doc[0], list) and isinstance(doc[1], list)):
            raise LitebertError(f"{where}: expected [[paragraphs...], [questions...], id]")
        context = "\n".join(str(p) for p in doc[0])
        doc_id = str(doc[2]) if len(doc) > 2 else str(d_i)
        for q_i, q in enumerate(doc[1]):
            if not isinstance(q, dict) or "question" not in q or "choice" not in q:
                raise LitebertError(f"{where}, question {q_i}: expected an object with 'question' and 'choice'")
            options = [str(c) for c in q["choice"]]
            label = None
            if "answer" in q:
                if q["answer"] not in options:
                    raise LitebertError(
                        f"{where}, question {q_i}: the answer {q['answer']!r} is not one of its options {options}"
                    )
                label = options.index(q["answer"])
            examples.append(
                _example(
                    path,
                    len(examples),
                    f"{doc_id}/{q_i}",
                    context,
                    [f"{q['question']} {o}" for o in options],
                    options,
                    label,
                    1,
                    where,
                )
            )
    return examples


def _row_examples(path: Path, lineno: int, row: dict, start: int, require_labels: bool) -> list[ChoiceExample]:
    where = f"{path}:{lineno}"
    keys = set(row)
    if {"sent1", "sent2", "ending0", "ending1"} <= keys:  # SWAG
        options = [str(row[f"ending{i}"]) for i in range(10) if f"ending{i}" in row]
        label = _int_label(row.get("label"), len(options), where)
        row_id = str(row.get("video-id", row.get("fold-ind", start)))
        return [
            _example(
                path,
                start,
                row_id,
                str(row["sent1"]),
                [f"{row['sent2']} {o}" for o in options],
                options,
                label,
                lineno,
                where,
            )
        ]
    if {"ctx_a", "ctx_b", "endings"} <= keys:  # HellaSwag
        options = [str(o) for o in row["endings"]]
        label = _int_label(row.get("label"), len(options), where)
        return [
            _example(
                path,
                start,
                str(row.get("ind", start)),
                str(row["ctx_a"]),
                [f"{row['ctx_b']} {o}" for o in options],
                options,
                label,
                lineno,
                where,
            )
        ]
    if {"article", "questions", "options"} <= keys:  # RACE
        out = []
        answers = row.get("answers")
        for q_i, (q, opts) in enumerate(zip(row["questions"], row["options"], strict=True)):
            options = [str(o) for o in opts]
            label = None
            if answers is not None:
                ans = str(answers[q_i]).strip()
                label = ord(ans) - ord("A") if len(ans) == 1 and ans.isalpha() else -1
                if not 0 <= label < len(options):
                    raise LitebertError(
                        f"{where}: question {q_i}: the answer {ans!r} is not one of its options "
                        f"{[chr(ord('A') + i) for i in range(len(options))]}"
                    )
            seconds = [q.replace("_", o) if "_" in q else f"{q} {o}" for o in options]
            out.append(
                _example(
                    path,
                    start + q_i,
                    f"{row.get('id', lineno)}/{q_i}",
                    str(row["article"]),
                    seconds,
                    options,
                    label,
                    lineno,
                    where,
                )
            )
        return out
    if {"context", "question", "choice"} <= keys:  # C3, one question per row (the Hub's clue/clue c3)
        context = row["context"]
        options = [str(c) for c in row["choice"]]
        answer = row.get("answer")
        label = None
        if answer not in (None, ""):
            if answer not in options:
                raise LitebertError(f"{where}: the answer {answer!r} is not one of its options {options}")
            label = options.index(answer)
        first = "\n".join(str(p) for p in context) if isinstance(context, list) else str(context)
        question = row["question"]
        seconds = [f"{question} {o}" for o in options]
        return [_example(path, start, str(row.get("id", start)), first, seconds, options, label, lineno, where)]
    if {"premise", "choice1", "choice2"} <= keys:  # COPA
        options = [str(row["choice1"]), str(row["choice2"])]
        prefix = _COPA_QUESTION.get(str(row.get("question", "")).strip(), "")
        label = _int_label(row.get("label"), 2, where)
        return [
            _example(
                path,
                start,
                str(row.get("idx", start)),
                str(row["premise"]),
                [prefix + o for o in options],
                options,
                label,
                lineno,
                where,
            )
        ]
    raise LitebertError(
        f"{where}: not a multiple-choice row: expected SWAG (sent1, sent2, ending0..), HellaSwag "
        f"(ctx_a, ctx_b, endings), RACE (article, questions, options, answers), C3 (context, question, choice, answer) or COPA (premise, "
        f"choice1, choice2, question, label) keys; got {sorted(keys)}"
    )


def _int_label(value, n: int, where: str) -> int | None:
    """An option index, or ``None`` for no label (``None``, ``""``, ``-1``: see the module docstring)."""
    if value is None or value == "":
        return None
    try:
        label = int(value)
    except (TypeError, ValueError):
        raise LitebertError(f"{where}: label {value!r} is not an option index 0..{n - 1}") from None
    if label == -1:
        return None
    if not 0 <= label < n:
        raise LitebertError(f"{where}: label {label} is not one of the {n} options (0..{n - 1})")
    return label


def _example(path, index, ex_id, first, seconds, options, label, line, where) -> ChoiceExample:
    if len(options) < 2:
        raise LitebertError(f"{where}: {len(options)} option(s); multiple choice needs at least 2")
    return ChoiceExample(index, ex_id, first, seconds, options, label, line)


class ChoiceKind(TaskKind):
    """Multiple choice (see the module docstring)."""

    name = "choice"
    architecture = "AlbertForMultipleChoice"
    head_prefixes = ("classifier.", "albert.pooler.")
    predictions_name = "predictions.tsv"
    min_positions = (5, "[CLS] context [SEP] option [SEP]")

    def __init__(self, data, *, problem_type: str | None = None, metrics=None):
        super().__init__(data, problem_type=problem_type, metrics=metrics)
        if problem_type not in (None, "single_label"):
            raise LitebertError(f"--problem-type {problem_type} does not apply to multiple choice")
        self.metrics = tuple(self.metrics) or CHOICE_METRICS
        for name in self.metrics:
            if name not in CHOICE_METRICS:
                raise LitebertError(f"metric {name!r} does not apply to multiple choice; use accuracy")

    def read(self, path, *, require_labels: bool) -> ReadResult:
        return read_choice_file(path, require_labels=require_labels)

    def read_rows(self, rows, source, *, require_labels: bool) -> ReadResult:
        return read_choice_rows(Path(source), rows, require_labels=require_labels)

    def featurize(self, read: ReadResult, tokenizer, max_seq_length: int, split: str) -> Features:
        cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
        firsts = _batch_ids(tokenizer, [ex.first for ex in read.examples])
        seconds = _batch_ids(tokenizer, [s for ex in read.examples for s in ex.seconds])
        items, lengths = [], []
        truncated = longest = k = 0
        for i, ex in enumerate(read.examples):
            ids_all, types_all, cut = [], [], False
            for _ in ex.options:
                a, b = list(firsts[i]), list(seconds[k])
                k += 1
                full = len(a) + len(b) + 3
                cut |= full > max_seq_length
                longest = max(longest, full)
                _truncate_pair(a, b, max_seq_length - 3)
                ids_all.append([cls, *a, sep, *b, sep])
                types_all.append([0] * (len(a) + 2) + [1] * (len(b) + 1))
            truncated += cut
            item: dict[str, Any] = {"input_ids": ids_all, "token_type_ids": types_all}
            if read.has_labels:
                item["labels"] = ex.label
            items.append(item)
            lengths.append(max(len(x) for x in ids_all))
        return Features(items, lengths, list(range(len(items))), truncated, longest)

    def collator(self, pad_token_id: int):
        return ChoiceCollator(pad_token_id)

    def config_overrides(self) -> dict[str, Any]:
        return {}

    def objective(self, device: torch.device):
        from litebert.training import LossOutput

        def objective(model, batch):
            batch = {k: v.to(device) for k, v in batch.items()}
            logits = choice_logits(model, batch)
            loss = F.cross_entropy(logits.float(), batch["labels"], reduction="sum")
            correct = (logits.detach().argmax(-1) == batch["labels"]).sum()  # 0-d, stays on the device
            return LossOutput(sums={"loss": loss}, ratios={"accuracy": (correct, len(logits))})

        def count(batch):
            return {"loss": int(batch["labels"].numel())}

        return objective, count

    def forward(self, model, batch):
        logits = choice_logits(model, batch).float()
        loss_sum, units = 0.0, 0
        if "labels" in batch:
            loss_sum = float(F.cross_entropy(logits, batch["labels"], reduction="sum"))
            units = int(batch["labels"].numel())
        n = batch["choice_mask"].sum(-1).tolist()
        raw = logits.cpu().numpy()
        return [raw[i, :c] for i, c in enumerate(n)], loss_sum, units

    def postprocess(self, outputs, feats: Features, read: ReadResult) -> np.ndarray:
        return np.asarray([int(np.argmax(o)) for o in outputs], dtype=np.int64)

    def score(self, predictions, read: ReadResult, feats: Features) -> dict[str, float]:
        gold = np.asarray([ex.label for ex in read.examples], dtype=np.int64)
        return {"accuracy": float((np.asarray(predictions) == gold).mean())}

    def decode(self, prediction) -> int:
        return int(prediction)

    def write_predictions(self, path: Path, read: ReadResult, predictions) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = ["index\tid\tprediction" + ("\tlabel" if read.has_labels else "")]
        for ex, pred in zip(read.examples, predictions, strict=True):
            lines.append(f"{ex.index}\t{ex.id}\t{int(pred)}" + (f"\t{ex.label}" if read.has_labels else ""))
        return atomic_write_text(path, "\n".join(lines) + "\n")


def choice_logits(model, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """``(B, C)`` logits of the model with padded options (``choice_mask`` 0) set to ``-inf``."""
    out = model(
        input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], token_type_ids=batch["token_type_ids"]
    )
    logits = out.logits if hasattr(out, "logits") else out[0]
    return logits.masked_fill(~batch["choice_mask"].bool(), float("-inf"))


@dataclass
class ChoiceCollator:
    """Items (a list of C_i option sequences each) → ``input_ids``, ``token_type_ids``, ``attention_mask``
    ``int64 [B, C, S]`` (C = the most options in the batch, S = the longest sequence), ``choice_mask`` ``int64
    [B, C]`` (1 = a real option), ``labels`` ``int64 [B]``. A missing option is ``[CLS] [SEP]`` (the first two
    tokens of the example's first option) so that the encoder sees a valid sequence; its logit is masked."""

    pad_token_id: int

    def __call__(self, items: list[dict]) -> dict[str, torch.Tensor]:
        n_choices = max(len(it["input_ids"]) for it in items)
        seq = max(len(x) for it in items for x in it["input_ids"])
        batch = len(items)
        input_ids = np.full((batch, n_choices, seq), self.pad_token_id, dtype=np.int64)
        types = np.zeros((batch, n_choices, seq), dtype=np.int64)
        mask = np.zeros((batch, n_choices, seq), dtype=np.int64)
        choice_mask = np.zeros((batch, n_choices), dtype=np.int64)
        for b, it in enumerate(items):
            for c in range(n_choices):
                if c < len(it["input_ids"]):
                    ids = it["input_ids"][c]
                    input_ids[b, c, : len(ids)] = ids
                    types[b, c, : len(ids)] = it["token_type_ids"][c]
                    mask[b, c, : len(ids)] = 1
                    choice_mask[b, c] = 1
                else:
                    first = it["input_ids"][0]
                    input_ids[b, c, :2] = (first[0], first[-1])  # [CLS] [SEP]
                    mask[b, c, :2] = 1
        out = {
            "input_ids": torch.from_numpy(input_ids),
            "token_type_ids": torch.from_numpy(types),
            "attention_mask": torch.from_numpy(mask),
            "choice_mask": torch.from_numpy(choice_mask),
        }
        if "labels" in items[0]:
            out["labels"] = torch.tensor([it["labels"] for it in items], dtype=torch.long)
        return out
