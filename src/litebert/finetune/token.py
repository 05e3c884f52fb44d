"""Token classification (NER, ``--task-type token``): one tag per word, BIO / IOB2 / BIOES.

Files:

* CoNLL-style column files: one word per line, the tag in a chosen column (``--tag-column``, default the last;
  the word in ``--word-column``, default 0), a blank line between sentences, ``-DOCSTART-`` lines skipped.
  Columns are split on tabs when the line has one (Chinese one-character-per-line files: a character may be a
  space-like symbol), else on runs of spaces (CoNLL-2003: ``word POS chunk tag``). Weibo NER's first column is
  ``<char><segment position>`` (``她0``, ``p10``): the task option ``strip_segment_digits`` drops the trailing
  number (the shortest non-empty prefix before the final digits is the character).
* JSON lines with ``tokens`` (list of words) and ``tags`` or ``ner_tags`` (:data:`TAG_FIELDS`, the first present;
  ``ner_tags`` is the field ``datasets``' ``to_json()`` writes), a list as long as ``tokens``. A tag is a string, or
  an integer id when a task preset names the ids (its tags in id order: ``conll2003``'s are the Hugging Face data
  set's ``ClassLabel`` names), else an error. Every line is a sentence, ``"tokens": []`` included: an unlabelled
  read (``predict``, ``--test``) keeps it as a sentence without words (an empty prediction, so the outputs line up
  with the input lines); a labelled read (train, dev, ``evaluate``) drops it and counts it in ``skipped`` (the run's
  ``dropped``). In a column file a blank line only separates sentences.

Tags: every tag read must fit the schemes seqeval scores (BIO, IOB1, IOB2, BIOES): ``O``, or ``B-``/``I-``/``E-``/
``S-`` plus an entity type (``B-PER``, ``I-PER.NAM``); anything else — a two-column TSV's header or its ``0``/``1``
labels — is an error naming the file, line and tag (:func:`check_tag`). Label set: a preset that the data set defines
(``conll2003``, ``weibo_ner``, ``msra_ner``: :data:`litebert.finetune.tasks.TASKS`) has its fixed tags in a fixed
order; a file of one's own gets the training tags closed under their scheme (:func:`label_list`: every entity type
seen gets ``B-`` and ``I-``, plus ``E-``/``S-`` when the file is BIOES), so a tag that a short training file happens
to lack (``I-LOC`` in the first sentences of CoNLL-2003) is still a class.

Features: each word is tokenized on its own; its first sub-token carries the word's label id and the other
sub-tokens ``-100`` (ignored by the loss), as in transformers' ``run_ner.py`` (``label_all_tokens=False``). A word
that tokenizes to nothing (U+FFFD, control characters) gets the ``[UNK]`` id so that every word has a position.
A sentence longer than ``max_seq_length - 2`` sub-tokens is split into windows of whole words that overlap by
about half a window; each word is labelled (in training) and predicted (at evaluation) in exactly one window, the
one where it has the most context on both sides (the "max context" rule of google-research/bert's
``run_squad.py``, on words), and the windows' predictions are rejoined into one tag sequence per sentence.

Metrics: entity-level precision, recall and F1 (micro over entities, overall and per type) and token accuracy,
computed by ``seqeval`` in its default mode, which reproduces conlleval (an ``I-`` tag that follows ``O`` or
another type starts an entity; ``E-``/``S-`` close one). With tags of one's own, a dev/test tag that the training
file never had is a counted warning, not an error: the gold entity stays in the scored sequences (so it counts as
missed), its positions are left out of ``eval_loss``. A preset's tag set is fixed: a dev/test/``evaluate`` tag
outside it is an error naming the file, line and tag (mostly an unlabelled file whose last column is not the NER
tags: CoNLL-2003's ``word POS chunk``), and ``predict`` predicts such a file without scoring it
(:meth:`TokenKind.unscorable`).

Predictions: ``predictions.txt`` in the input's column format, ``word  gold  predicted`` (``word  predicted``
without gold), a blank line between sentences; ``predictions.jsonl`` (``tokens``, ``tags``, ``predicted_tags``)
for JSON-lines input.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from litebert.corpus import data_suffix, read_text_file
from litebert.errors import LitebertError
from litebert.fileio import atomic_write_text
from litebert.finetune.data import _batch_ids, align_with_head, pad_inputs
from litebert.finetune.kinds import Features, TaskKind
from litebert.finetune.readers import ReadResult, data_lines, json_rows

log = logging.getLogger("litebert.finetune")

TOKEN_METRICS = ("f1", "precision", "recall", "accuracy")
"""Metric names of the token kind: entity-level micro F1 / precision / recall, token accuracy."""

_SEGMENT_DIGITS = re.compile(r"^(.+?)(\d+)$", re.S)
_TAG = re.compile(r"^(?:O|[BIES]-.+)$", re.S)
TAG_FIELDS = ("tags", "ner_tags")
"""The JSON-lines fields read as a sentence's tags, the first present (``ner_tags``: Hugging Face's name)."""
SCHEME_PREFIXES = ("B", "I", "E", "S")
"""Entity tag prefixes, in the order :func:`label_list` gives them (BIO / IOB1 / IOB2 use B and I; BIOES all four)."""


@dataclass(frozen=True)
class TokenExample:
    """One sentence.

    Attributes:
        index: 0-based sentence number in the file (JSON lines: the data line, so a dropped empty sentence leaves
            a gap, as a dropped row does in classification). line: the 1-based line of its first word.
        words: the words (characters for Chinese files; none for a JSON line's ``"tokens": []`` read unlabelled).
        tags: one tag per word, or ``None`` (unlabelled).
    """

    index: int
    words: list[str]
    tags: list[str] | None
    line: int

    @property
    def label(self):  # EvalResult.labels
        return self.tags


def is_tag(tag: str) -> bool:
    """Whether ``tag`` fits the BIO / IOB1 / IOB2 / BIOES schemes: ``O``, or ``B-``/``I-``/``E-``/``S-`` and a
    non-empty entity type (the tags seqeval chunks without its "seems not to be NE tag" warning, minus bare
    ``B``/``I``/``E``/``S``, which carry no type)."""
    return bool(_TAG.match(tag))


def check_tag(tag: str, path: Path, lineno: int, where: str) -> str:
    """Return ``tag`` when :func:`is_tag`; else raise LitebertError naming ``path:lineno``, the tag and ``where``
    it was read (``"column 3"``, ``"'tags'"``)."""
    if not _TAG.match(tag):
        raise LitebertError(
            f"{path}:{lineno}: tag {tag!r} ({where}) is not an entity tag: expected O or B-/I-/E-/S- plus a type, "
            "e.g. B-PER (BIO, IOB1, IOB2, BIOES); is this a token-classification file (--tag-column)?"
        )
    return tag


def read_token_file(
    path: str | Path,
    *,
    word_column: int | None = None,
    tag_column: int | None = None,
    strip_segment_digits: bool = False,
    require_labels: bool = True,
    tag_names: tuple[str, ...] | None = None,
) -> ReadResult:
    """Read a CoNLL-style column file or a ``tokens``/``tags`` JSON-lines file (see the module docstring).

    Args:
        tag_names: a task preset's tags in id order: the names of integer tag ids in JSON lines (``None``: ids
            are an error).

    Returns:
        a ``ReadResult`` whose examples are :class:`TokenExample`; ``format`` is ``"conll-tab"``,
        ``"conll-space"`` or ``"jsonl"``.

    Raises:
        LitebertError: a missing file, a line with too few columns (``file:line``), a JSON line without
            ``tokens``/``tags`` or with lists of different lengths, a tag that is not ``O`` or ``B-``/``I-``/``E-``/
            ``S-`` plus a type (:func:`check_tag`; ``file:line``), integer tag ids without ``tag_names`` or past
            them, no sentences, tags required but absent.
    """
    path = Path(path)
    text = read_text_file(path)  # gzip/bzip2/xz/zstd-compressed too (train.txt.gz)
    if data_suffix(path) in (".jsonl", ".json", ".ndjson"):
        return read_token_rows(path, list(json_rows(path, text)), require_labels, tag_names)
    word_col = 0 if word_column is None else word_column
    lines = data_lines(text)
    first = next((ln for ln in lines if ln.strip() and not ln.startswith("-DOCSTART-")), None)
    if first is None:
        raise LitebertError(f"{path}: no sentences (the file is empty or holds only -DOCSTART- lines)")
    tab = "\t" in first
    fmt = "conll-tab" if tab else "conll-space"
    ncols_first = len(first.split("\t") if tab else first.split())
    has_labels = require_labels or ncols_first > max(word_col, 0) + 1 or tag_column is not None
    needed = max(word_col, tag_column if tag_column is not None else 1) + 1 if has_labels else word_col + 1

    examples: list[TokenExample] = []
    words: list[str] = []
    tags: list[str] = []
    start = 0

    def flush():
        if words:
            examples.append(TokenExample(len(examples), list(words), list(tags) if has_labels else None, start))
            words.clear()
            tags.clear()

    for lineno, line in enumerate(lines, start=1):
        if not line.strip() or line.startswith("-DOCSTART-"):
            flush()
            continue
        fields = line.split("\t") if tab else line.split()
        if len(fields) < needed:
            raise LitebertError(
                f"{path}:{lineno}: {len(fields)} column(s), expected at least {needed} (word in column {word_col}"
                + (f", tag in column {'last' if tag_column is None else tag_column}" if has_labels else "")
                + f"; columns split on {'tabs' if tab else 'spaces'}): {line[:80]!r}"
            )
        word = fields[word_col].strip() if not tab else fields[word_col]
        if strip_segment_digits:
            m = _SEGMENT_DIGITS.match(word)
            if m is None:
                raise LitebertError(
                    f"{path}:{lineno}: expected <character><segment position> in column {word_col} "
                    f"(Weibo NER layout), got {word!r}"
                )
            word = m.group(1)
        if not words:
            start = lineno
        words.append(word)
        if has_labels:
            tag_i = len(fields) - 1 if tag_column is None else tag_column
            tags.append(check_tag(fields[tag_i].strip(), path, lineno, f"column {tag_i}"))
    flush()
    if not examples:
        raise LitebertError(f"{path}: no sentences")
    return ReadResult(path=path, examples=examples, header=None, has_labels=has_labels, format=fmt)


def read_token_rows(path: Path, rows, require_labels: bool, tag_names: tuple[str, ...] | None = None) -> ReadResult:
    """Sentences from ``(line, {"tokens": [...], "tags": [...]})`` rows: the lines of a JSON-lines file, or a Hub
    split's rows (:mod:`litebert.finetune.hub_data`); ``format`` ``"jsonl"``. The tag field is the first of
    :data:`TAG_FIELDS` in the first row with words (``None``: unlabelled); integer tags are ids into ``tag_names``.
    An empty ``tokens`` list is a sentence without words when unlabelled (``require_labels`` false), else dropped
    and counted in ``skipped`` (see the module docstring).

    Raises:
        LitebertError: a row that is not an object with a list ``tokens``, tags missing where required or not as
            long as ``tokens``, a tag that is not an entity tag (:func:`check_tag`), an integer tag without
            ``tag_names`` or past them, no sentence with words (``path:line``).
    """
    rows = list(rows)
    for lineno, obj in rows:
        if not isinstance(obj, dict) or not isinstance(obj.get("tokens"), list):
            raise LitebertError(f"{path}:{lineno}: expected an object with a list 'tokens' (and 'tags')")
    first = next(((n, obj) for n, obj in rows if obj["tokens"]), None)
    if first is None:
        raise LitebertError(f"{path}: no sentences" + (f" (only {len(rows)} empty 'tokens' lists)" if rows else ""))
    field = next((f for f in TAG_FIELDS if f in first[1]), None)
    if require_labels and field is None:
        raise LitebertError(
            f"{path}:{first[0]}: 'tags' (or 'ner_tags') missing (keys: {list(first[1])}); training and dev files "
            "need tags"
        )
    examples: list[TokenExample] = []
    skipped = 0
    for row_i, (lineno, obj) in enumerate(rows):
        words = [str(w) for w in obj["tokens"]]
        if not words and require_labels:
            skipped += 1  # nothing to train or score; the later rows keep their numbers (index)
            continue
        tags = None
        if field is not None:
            tags = obj.get(field, [] if not words else None)
            if not isinstance(tags, list) or len(tags) != len(words):
                raise LitebertError(
                    f"{path}:{lineno}: {field!r} must be a list as long as 'tokens' ({len(words)}), got {tags!r:.80}"
                )
            tags = [check_tag(_tag_name(t, tag_names, path, lineno, field), path, lineno, repr(field)) for t in tags]
        examples.append(TokenExample(row_i, words, tags, lineno))
    return ReadResult(
        path=path,
        examples=examples,
        header=None,
        has_labels=field is not None,
        format="jsonl",
        skipped=skipped,
        skip_reason="empty sentences, 'tokens': []" if skipped else "",
    )


def _tag_name(tag, tag_names: tuple[str, ...] | None, path: Path, lineno: int, field: str) -> str:
    """A JSON tag as a string: an integer is an id into ``tag_names`` (a preset's tags in id order).

    Raises:
        LitebertError: an integer without ``tag_names``, or not one of their ids (``path:line``).
    """
    if not isinstance(tag, int) or isinstance(tag, bool):
        return str(tag)
    if not tag_names:
        raise LitebertError(
            f"{path}:{lineno}: {field!r} holds integer tag ids ({tag}) and nothing names them: write the tags as "
            "strings (B-PER ...), or give the --task whose tags they number in order (conll2003: the Hugging Face "
            "data set's ner_tags)"
        )
    if not 0 <= tag < len(tag_names):
        raise LitebertError(
            f"{path}:{lineno}: tag id {tag} in {field!r} is not one of the {len(tag_names)} ids of the task's tags "
            f"(0..{len(tag_names) - 1}: {list(tag_names)})"
        )
    return tag_names[tag]


def label_list(train: ReadResult) -> tuple[str, ...]:
    """Tag names in id order for a task of one's own: the training tags closed under their scheme.

    Every entity type T seen (in any tag) gets ``B-T`` and ``I-T``, and also ``E-T`` and ``S-T`` when the file uses
    BIOES (any ``E-``/``S-`` tag); ``O`` comes first, then the types sorted, prefixes in :data:`SCHEME_PREFIXES`
    order. So a tag the training file happens to lack (an entity type seen only as single words: no ``I-``) is
    still a class, and dev/test files using it are scored without the unknown-tag warning.

    Raises:
        LitebertError: the training file has no entity tag (only ``O``).
    """
    seen = {t for ex in train.examples for t in ex.tags}
    types = sorted({t[2:] for t in seen if t != "O"})
    if not types:
        raise LitebertError(
            f"{train.path}: no entity tags in the training file (only {sorted(seen)}): nothing to learn"
        )
    bioes = any(t[:2] in ("E-", "S-") for t in seen)
    prefixes = SCHEME_PREFIXES if bioes else SCHEME_PREFIXES[:2]
    return ("O", *(f"{p}-{t}" for t in types for p in prefixes))


def preset_tags(train: ReadResult, task) -> tuple[str, ...]:
    """The fixed tags of a task preset (``task.labels``), checked against the training file.

    Raises:
        LitebertError: a training tag outside the preset's set (``file:line``, the tag, the set).
    """
    outside = foreign_tag(train, task.labels, task.name)
    if outside:
        raise LitebertError(f"{outside}; give --task-type token instead of --task for a tag set of one's own")
    return tuple(task.labels)


def foreign_tag(read: ReadResult, tags, task: str) -> str | None:
    """``file:line: tag 'X' is not one of the <task> tags [...]`` for the first tag of ``read`` outside ``tags`` (the
    fixed set of the preset ``task``), else ``None``."""
    known = set(tags)
    for ex in read.examples:
        for i, tag in enumerate(ex.tags or ()):
            if tag not in known:
                line = ex.line if read.format == "jsonl" else ex.line + i  # column files: one word per line
                return f"{read.path}:{line}: tag {tag!r} is not one of the {task} tags {list(tags)}"
    return None


def word_windows(lengths: list[int], body: int) -> list[tuple[int, int]]:
    """Windows ``[start, end)`` of whole words whose sub-token counts ``lengths`` fit ``body`` tokens; consecutive
    windows overlap by about ``body // 2`` tokens and each starts at least one word after the previous one."""
    n = len(lengths)
    windows, start = [], 0
    while True:
        end, total = start, 0
        while end < n and (total + lengths[end] <= body or end == start):
            total += lengths[end]
            end += 1
        windows.append((start, end))
        if end >= n:
            return windows
        nxt, overlap = end, 0
        while nxt - 1 > start and overlap + lengths[nxt - 1] <= body // 2:
            nxt -= 1
            overlap += lengths[nxt]
        start = max(nxt, start + 1)


def window_owner(windows: list[tuple[int, int]], n: int) -> list[int]:
    """For each of ``n`` words the window where it has the most context: max over windows of
    ``min(words before it, words after it)`` inside the window (ties: the earlier window)."""
    owner, best = [0] * n, [-1] * n
    for k, (s, e) in enumerate(windows):
        for w in range(s, e):
            score = min(w - s, e - 1 - w)
            if score > best[w]:
                best[w], owner[w] = score, k
    return owner


class TokenKind(TaskKind):
    """Token classification (see the module docstring)."""

    name = "token"
    architecture = "AlbertForTokenClassification"
    head_prefixes = ("classifier.",)
    predictions_name = "predictions.txt"
    min_positions = (3, "[CLS] words [SEP]")

    def __init__(self, data, *, problem_type: str | None = None, metrics=None):
        super().__init__(data, problem_type=problem_type, metrics=metrics)
        if problem_type not in (None, "single_label"):
            raise LitebertError(f"--problem-type {problem_type} does not apply to token classification")
        self.tag_names: tuple[str, ...] = ()

    # ---- data
    def read(self, path, *, require_labels: bool) -> ReadResult:
        task = self.task
        return read_token_file(
            path,
            word_column=self.data.word_column,
            tag_column=self.data.tag_column,
            strip_segment_digits=bool(task and task.option("strip_segment_digits")),
            require_labels=require_labels,
            tag_names=self._preset_tags(),
        )

    def read_rows(self, rows, source, *, require_labels: bool) -> ReadResult:
        return read_token_rows(Path(source), rows, require_labels, self._preset_tags())

    def _preset_tags(self) -> tuple[str, ...] | None:
        """The fixed tags of the task preset in id order (the names of integer tag ids), ``None`` without one."""
        return tuple(self.task.labels) if self.task and self.task.labels else None

    def _foreign_tag(self, read: ReadResult) -> str | None:
        """The first tag of a labelled ``read`` outside the model's tags when they are a preset's fixed set
        (:func:`foreign_tag`), else ``None``: a file of one's own may hold tags train lacked (counted instead)."""
        if not read.has_labels or self._preset_tags() is None:
            return None
        return foreign_tag(read, self.tag_names, self.task.name)

    def unscorable(self, read: ReadResult) -> str | None:
        """``predict``: the first tag outside a preset's fixed set (an unlabelled CoNLL file's chunk column): the
        file is predicted, not scored."""
        return self._foreign_tag(read)

    def fit(self, train: ReadResult) -> None:
        self.tag_names = preset_tags(train, self.task) if self.task and self.task.labels else label_list(train)
        self._choose_metrics()

    def align_head(self, config) -> tuple[str, ...]:
        """Fine-tuning from a token classifier whose ``id2label`` names the same tags (in another order: a
        transformers CoNLL-2003 model): the tags take the model's ids, so its kept head scores each tag as before;
        as many tags under other names: the head is newly initialised
        (:func:`~litebert.finetune.data.align_with_head`)."""
        order = align_with_head(self.tag_names, config, self.architecture)
        if order is None:
            return self.head_prefixes
        self.tag_names = order
        return ()

    def from_config(self, config) -> None:
        self.tag_names = tuple(config.id2label[i] for i in range(config.num_labels))
        odd = [t for t in self.tag_names if not is_tag(t)]
        if odd:  # e.g. transformers' default LABEL_0 ...: predictions of these tags form no entity
            log.warning(
                "the model's id2label has %d name(s) that are not entity tags (O or B-/I-/E-/S- plus a type): %s; "
                "entity metrics count no entity for them",
                len(odd),
                odd[:5],
            )
        self._choose_metrics()

    def _choose_metrics(self) -> None:
        self.metrics = tuple(self.metrics) or (self.task.metrics if self.task else TOKEN_METRICS)
        for name in self.metrics:
            if name not in TOKEN_METRICS:
                raise LitebertError(
                    f"metric {name!r} does not apply to token classification; use {', '.join(TOKEN_METRICS)}"
                )

    @property
    def labels(self) -> list[str]:
        return list(self.tag_names)

    def featurize(self, read: ReadResult, tokenizer, max_seq_length: int, split: str) -> Features:
        """Windows of ``[CLS] sub-tokens [SEP]`` (see the module docstring); ``extra["positions"][f]`` lists
        ``(word index, token position)`` of the words feature ``f`` predicts; a sentence without words has none.

        Raises:
            LitebertError: a labelled file with a tag outside a preset's fixed set (:meth:`_foreign_tag`).
        """
        outside = self._foreign_tag(read)
        if outside:
            col = self.data.tag_column
            where = (
                "another field"
                if read.format == "jsonl"
                else f"another column than {'the last' if col is None else f'column {col}'} (--tag-column)"
            )
            raise LitebertError(
                f"{outside}: is the file unlabelled (CoNLL-2003 without NER tags ends in the chunk column), or are "
                f"its NER tags in {where}? `litebert predict` predicts such a file without scoring it"
            )
        label2id = {t: i for i, t in enumerate(self.tag_names)}
        cls, sep, unk = tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.unk_token_id
        body = max_seq_length - 2
        all_words = [w for ex in read.examples for w in ex.words]
        word_ids = _batch_ids(tokenizer, all_words)
        items, lengths, owners, positions = [], [], [], []
        truncated = longest = split_sentences = 0
        unknown: dict[str, int] = {}
        first_unknown: tuple[str, int] | None = None
        k = 0
        for ex_i, ex in enumerate(read.examples):
            pieces = []
            cut = False
            for _ in ex.words:
                ids = word_ids[k] or [unk]
                k += 1
                if len(ids) > body:
                    ids, cut = ids[:body], True
                pieces.append(ids)
            if not pieces:
                continue  # a JSON line's "tokens": [] (unlabelled reads): an empty prediction, no feature
            truncated += cut
            longest = max(longest, sum(len(p) for p in pieces) + 2)
            targets = None
            if read.has_labels:
                targets = []
                for tag in ex.tags:
                    if tag not in label2id:
                        unknown[tag] = unknown.get(tag, 0) + 1
                        first_unknown = first_unknown or (tag, ex.line)
                    targets.append(label2id.get(tag, -100))
            windows = word_windows([len(p) for p in pieces], body)
            split_sentences += len(windows) > 1
            owner = window_owner(windows, len(pieces))
            for w_k, (s, e) in enumerate(windows):
                ids, labels, pos = [cls], [-100], []
                for w in range(s, e):
                    if owner[w] == w_k:
                        pos.append((w, len(ids)))
                        labels.append(targets[w] if targets is not None else -100)
                        labels.extend([-100] * (len(pieces[w]) - 1))
                    else:
                        labels.extend([-100] * len(pieces[w]))
                    ids.extend(pieces[w])
                ids.append(sep)
                labels.append(-100)
                item = {"input_ids": ids}
                if targets is not None:
                    item["labels"] = labels
                items.append(item)
                lengths.append(len(ids))
                owners.append(ex_i)
                positions.append(pos)
        if unknown:
            tag, line = first_unknown
            log.warning(
                "%s: %d word(s) of %s carry tags the model does not know %s (first %r at line %d): they "
                "stay in the gold sequences (entities missed) and are left out of eval_loss",
                split,
                sum(unknown.values()),
                read.path,
                sorted(unknown),
                tag,
                line,
            )
        if split_sentences:
            log.info(
                "%s: %d of %d sentences of %s are longer than %d sub-tokens and were split into overlapping windows",
                split,
                split_sentences,
                len(read.examples),
                read.path,
                body,
            )
        return Features(
            items, lengths, owners, truncated, longest, extra={"positions": positions, "unknown_tags": dict(unknown)}
        )

    def collator(self, pad_token_id: int):
        return TokenCollator(pad_token_id)

    # ---- model
    def config_overrides(self) -> dict[str, Any]:
        id2label = dict(enumerate(self.tag_names))
        return dict(num_labels=len(self.tag_names), id2label=id2label, label2id={v: k for k, v in id2label.items()})

    def config_extra(self) -> dict[str, Any]:
        extra = super().config_extra()
        columns = {k: getattr(self.data, k) for k in ("word_column", "tag_column") if getattr(self.data, k) is not None}
        if columns:
            extra["litebert_data_options"] = columns
        return extra

    # ---- training
    def objective(self, device: torch.device):
        from litebert.training import LossOutput

        def objective(model, batch):
            batch = {k: v.to(device) for k, v in batch.items()}
            logits = _logits(model, batch)
            labels = batch["labels"]
            loss = F.cross_entropy(logits.float().flatten(0, 1), labels.flatten(), ignore_index=-100, reduction="sum")
            on = labels != -100  # (B, S): tagged positions (first sub-tokens); no boolean index, no device sync
            correct = ((logits.detach().argmax(-1) == labels) & on).sum()
            return LossOutput(sums={"loss": loss}, ratios={"accuracy": (correct, on.sum())})  # 0-d, on the device

        def count(batch):
            return {"loss": (batch["labels"] != -100).sum()}  # 0-d on the batch's device, never read by the host

        return objective, count

    # ---- inference
    def forward(self, model, batch):
        logits = _logits(model, batch).float()
        loss_sum, units = 0.0, 0
        if "labels" in batch:
            labels = batch["labels"]
            loss_sum = float(
                F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=-100, reduction="sum")
            )
            units = int((labels != -100).sum())
        lengths = batch["attention_mask"].sum(-1).tolist()
        best = logits.argmax(-1).cpu().numpy()
        return [best[i, :n] for i, n in enumerate(lengths)], loss_sum, units

    def postprocess(self, outputs, feats: Features, read: ReadResult) -> list[list[str]]:
        preds: list[list[str | None]] = [[None] * len(ex.words) for ex in read.examples]
        for f, out in enumerate(outputs):
            sentence = preds[feats.example_index[f]]
            for w, pos in feats.extra["positions"][f]:
                sentence[w] = self.tag_names[int(out[pos])]
        return preds  # every word of a read example gets a tag: no None is left

    def score(self, predictions, read: ReadResult, feats: Features) -> dict[str, float]:
        return entity_metrics([ex.tags for ex in read.examples], predictions, self.metrics)

    def write_predictions(self, path: Path, read: ReadResult, predictions) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        if read.format == "jsonl":
            path = path.with_suffix(".jsonl")
            lines = [
                json.dumps(
                    {"tokens": ex.words, **({"tags": ex.tags} if ex.tags is not None else {}), "predicted_tags": pred},
                    ensure_ascii=False,
                )
                for ex, pred in zip(read.examples, predictions, strict=True)
            ]
            body = "\n".join(lines) + "\n"
        else:
            sep = "\t" if read.format == "conll-tab" else " "
            blocks = []
            for ex, pred in zip(read.examples, predictions, strict=True):
                rows = [
                    sep.join([w, *([ex.tags[i]] if ex.tags is not None else []), pred[i]])
                    for i, w in enumerate(ex.words)
                ]
                blocks.append("\n".join(rows))
            body = "\n\n".join(blocks) + "\n"
        return atomic_write_text(path, body)

    def settings(self) -> dict[str, Any]:
        return {"task_type": self.name, "labels": list(self.tag_names), "metrics": list(self.metrics)}


def _logits(model, batch) -> torch.Tensor:
    out = model(
        input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], token_type_ids=batch["token_type_ids"]
    )
    return out.logits if hasattr(out, "logits") else out[0]


@dataclass
class TokenCollator:
    """Pads items to the longest: ``input_ids`` (pad id), ``token_type_ids`` (0), ``attention_mask`` (0) and
    ``labels`` (-100), all ``int64 [B, S]``."""

    pad_token_id: int

    def __call__(self, items: list[dict]) -> dict[str, torch.Tensor]:
        out = pad_inputs(items, self.pad_token_id)
        if "labels" in items[0]:
            labels = np.full(out["input_ids"].shape, -100, dtype=np.int64)  # (B, S)
            for row, it in enumerate(items):
                labels[row, : len(it["labels"])] = it["labels"]
            out["labels"] = torch.from_numpy(labels)
        return out


def entity_metrics(gold: list[list[str]], pred: list[list[str]], names=TOKEN_METRICS) -> dict[str, float]:
    """Entity-level precision / recall / F1 (micro over all entities) and token accuracy, with seqeval's default
    (conlleval-compatible) chunking; ``names`` first (their order), then per entity type ``f1_T``,
    ``precision_T``, ``recall_T`` and ``support_T`` (gold entities of type T).

    Tags that are not ``O`` or ``B-``/``I-``/``E-``/``S-`` plus a type (only a model's own odd ``id2label`` names can
    reach here: the readers refuse them, :func:`check_tag`) form no entity; seqeval's per-tag "seems not to be NE
    tag" warning is silenced, :meth:`TokenKind.from_config` logs one line instead.

    Source: seqeval (``seqeval.metrics``; Nakayama 2018), which reproduces the CoNLL-2000 ``conlleval`` script.
    """
    import warnings

    from seqeval.metrics import accuracy_score, classification_report, f1_score, precision_score, recall_score

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*seems not to be NE tag", category=UserWarning)
        overall = {
            "f1": f1_score(gold, pred, zero_division=0),
            "precision": precision_score(gold, pred, zero_division=0),
            "recall": recall_score(gold, pred, zero_division=0),
            "accuracy": accuracy_score(gold, pred),
        }
        report = classification_report(gold, pred, output_dict=True, zero_division=0)
    out = {name: float(overall[name]) for name in names}
    for name in TOKEN_METRICS:
        out.setdefault(name, float(overall[name]))
    for type_, row in report.items():
        if type_.endswith(" avg"):
            continue
        out[f"f1_{type_}"] = float(row["f1-score"])
        out[f"precision_{type_}"] = float(row["precision"])
        out[f"recall_{type_}"] = float(row["recall"])
        out[f"support_{type_}"] = float(row["support"])
    return out
