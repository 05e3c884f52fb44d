"""Task presets: the file layouts, label sets and metrics of GLUE and CLUE tasks.

A :class:`TaskSpec` lists one or more :class:`~litebert.finetune.readers.ColumnSpec` layouts; for each file the
first layout whose header names all appear in the file's first row is used, and a header-less layout (CoLA's
train/dev, LCQMC's original files) is the fallback. So ``--task sst2`` reads both ``train.tsv``
(``sentence  label``) and ``test.tsv`` (``index  sentence``, no label).

Sources of the layouts: the GLUE distribution (``download_glue_data.py`` files; CoLA train/dev have no header;
MNLI's label is ``gold_label``; STS-B's ``score``), Baidu ERNIE ``task_data`` as re-distributed by UER-py
(ChnSentiCorp ``label  text_a``; LCQMC ``text_a  text_b  label``), the original LCQMC (no header), XNLI 1.0
dev/test (``language  gold_label ... sentence1  sentence2``; rows of other languages skipped) and XNLI-MT train
(``premise  hypo  label`` with ``contradictory``), CLUE JSON lines (``sentence1``, ``sentence2``, ``label``).

A task may also name its data set on the Hugging Face Hub (:class:`HubSource`, ``TaskSpec.hub``): ``finetune``,
``evaluate`` and ``predict --task NAME`` without data files read it with ``datasets`` (:mod:`litebert.finetune.hub_data`).
The sources were checked against the Hub's repositories as far as a dataset card or the repository's commit list
showed them; :data:`HUB_NOTES` says which entries that could not be confirmed, and which tasks have none.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from litebert.errors import LitebertError
from litebert.finetune.readers import ColumnSpec, _decode_delimiter, detect_format, iter_rows

PROBLEM_TYPES = ("single_label", "multi_label", "regression")
"""Command-line names; they map to transformers' ``config.problem_type`` via :data:`HF_PROBLEM_TYPES`."""

HF_PROBLEM_TYPES = {
    "single_label": "single_label_classification",
    "multi_label": "multi_label_classification",
    "regression": "regression",
}


@dataclass(frozen=True)
class Layout:
    """One file shape of a task.

    Attributes:
        columns: where the fields are.
        signature: header names that identify this layout (all must be in the first row); ``()`` for a
            header-less layout.
    """

    columns: ColumnSpec
    signature: tuple[str, ...] = ()


@dataclass(frozen=True)
class HubSource:
    """Where a task's data is on the Hugging Face Hub and how its columns map onto the task kind's reader.

    Attributes:
        dataset: the dataset id (``nyu-mll/glue``).
        config: the configuration (subset) name (``sst2``), or ``None`` for a dataset with one.
        splits: ``(role, split)`` pairs: the Hub split read as ``train``, ``dev`` and ``test`` (GLUE's dev is
            ``validation``; MNLI's ``validation_matched``); any other name given by the user is a Hub split itself.
        columns: ``(field, column)`` pairs: the Hub column that fills each field of the kind's rows
            (classification: ``text``, ``text_pair``, ``label``; token: ``tokens``, ``tags``; QA: ``id``,
            ``question``, ``context``, ``answers``; multiple choice: the SWAG or C3 row keys). Every column named
            here must be in the dataset.
        label: the field that holds the label (``label``, NER ``tags``, QA ``answers``, C3 ``answer``).
        label_map: ``(class name, task label)`` pairs: a ``ClassLabel`` id is turned into its class name (the
            dataset's ``features``), then through this map into the label the task's file reader gives for the same
            row (SST-2's ``negative``/``positive`` are the files' ``0``/``1``), so that a model fine-tuned from files
            and one from the Hub have the same ``id2label``.
        revision: the revision read when none is given (``None``: ``main``).
    """

    dataset: str
    config: str | None
    columns: tuple[tuple[str, str], ...]
    splits: tuple[tuple[str, str], ...] = (("train", "train"), ("dev", "validation"), ("test", "test"))
    label: str = "label"
    label_map: tuple[tuple[str, str], ...] = ()
    revision: str | None = None

    def split_name(self, split: str) -> str:
        """The Hub split of ``split``: a role's (``train``, ``dev``, ``test``) from :attr:`splits`, else ``split``."""
        return dict(self.splits).get(split, split)

    @property
    def name(self) -> str:
        """``dataset`` with its config, for messages: ``nyu-mll/glue (sst2)``."""
        return self.dataset + (f" ({self.config})" if self.config else "")


@dataclass(frozen=True)
class TaskSpec:
    """A known task.

    Attributes:
        name: the ``--task`` name.
        layouts: file layouts, tried in order (see the module docstring).
        labels: the label strings in id order (``label2id``; NER: the tags), or ``None`` to take them from the
            training file (regression has none).
        metrics: metric names; the first selects the best checkpoint.
        problem_type: one of :data:`PROBLEM_TYPES`.
        description: one line for ``--help``.
        kind: the task type (:data:`litebert.finetune.kinds.TASK_TYPES`) whose kind reads and trains the task;
            ``layouts`` are the classification kind's, other kinds read their own formats.
        options: kind-specific reader settings as ``(name, value)`` pairs (e.g. Weibo NER's segment digit).
        hub: the task's data set on the Hub, read when no data file is given (:class:`HubSource`); ``None``: files
            only (:data:`HUB_NOTES` says why).
    """

    name: str
    layouts: tuple[Layout, ...]
    labels: tuple[str, ...] | None
    metrics: tuple[str, ...]
    problem_type: str = "single_label"
    description: str = ""
    kind: str = "classification"
    options: tuple[tuple[str, object], ...] = ()
    hub: HubSource | None = None

    def option(self, name: str, default=None):
        """The value of a kind-specific option, or ``default``."""
        return dict(self.options).get(name, default)

    def layout_for(self, path: str | Path, delimiter: str | None = None) -> ColumnSpec:
        """Pick the layout for ``path`` from its first row.

        Raises:
            LitebertError: no layout fits (the message lists the expected headers and the row found).
        """
        path = Path(path)
        delimiter = _decode_delimiter(delimiter)
        fmt = detect_format(path, delimiter)
        first = next(iter_rows(path, fmt, delimiter), None)
        if first is None:
            raise LitebertError(f"{path}: the file is empty (no rows)")
        _, fields = first
        first_row = list(fields) if isinstance(fields, dict) else [f.strip() for f in fields]
        if isinstance(fields, dict):
            names = {str(k) for k in fields}
            for layout in self.layouts:
                if layout.signature and set(layout.signature) <= names and layout.columns.header is not False:
                    return layout.columns
        else:
            names = {f.strip() for f in fields}
            for layout in self.layouts:
                if layout.signature and set(layout.signature) <= names:
                    return ColumnSpec(**{**layout.columns.__dict__, "header": True})
            for layout in self.layouts:
                if not layout.signature:
                    return layout.columns
        expected = " | ".join(", ".join(layout.signature) for layout in self.layouts if layout.signature)
        raise LitebertError(
            f"{path}: does not look like a {self.name} file: expected a header with {expected}; "
            f"first row is {first_row[:12]}. Give --text-column/--label-column to read it anyway"
        )


def _hdr(text, pair=None, label=None, **kw) -> Layout:
    """A headed layout whose signature is its text/pair columns (the label is optional: test files lack it)."""
    names = tuple(c for c in (text, pair) if isinstance(c, str))
    return Layout(ColumnSpec(text=text, text_pair=pair, label=label, header=True, label_optional=True, **kw), names)


_NLI3 = ("contradiction", "entailment", "neutral")
_BIN = ("0", "1")
_NER = ("f1", "precision", "recall", "accuracy")
# NER tag sets that the data sets define (their SOURCE.md in the shared data): O first, then B-/I- per type.
# CoNLL-2003: IOB2, 4 types, in the order of the Hugging Face `conll2003` data set's ner_tags (models fine-tuned on
# it elsewhere use these ids). Weibo NER (2nd): BIO, 4 types x named/nominal, in the order of its SOURCE.md table.
# MSRA (SIGHAN 2006): BIO, PER/LOC/ORG.
_CONLL2003_TAGS = ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC")
_WEIBO_TAGS = ("O", *(f"{p}-{t}.{m}" for t in ("PER", "LOC", "GPE", "ORG") for m in ("NAM", "NOM") for p in "BI"))
_MSRA_TAGS = ("O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG")
_TNEWS = ("100", "101", "102", "103", "104", "106", "107", "108", "109", "110", "112", "113", "114", "115", "116")

TASKS: dict[str, TaskSpec] = {
    t.name: t
    for t in (
        TaskSpec(
            "sst2",
            (_hdr("sentence", label="label"),),
            _BIN,
            ("accuracy",),
            description="GLUE SST-2 sentiment: sentence, label",
        ),
        TaskSpec(
            "mrpc",
            (_hdr("#1 String", "#2 String", "Quality"),),
            _BIN,
            ("accuracy", "f1"),
            description="GLUE MRPC paraphrase: Quality, #1 ID, #2 ID, #1 String, #2 String",
        ),
        TaskSpec(
            "cola",
            (
                _hdr("sentence"),  # test.tsv: index, sentence
                Layout(ColumnSpec(text=3, label=1, header=False)),
            ),
            _BIN,
            ("mcc", "accuracy"),
            description="GLUE CoLA acceptability: train/dev have no header (source, label, mark, sentence)",
        ),
        TaskSpec(
            "stsb",
            (_hdr("sentence1", "sentence2", "score"),),
            None,
            ("pearson", "spearman"),
            "regression",
            description="GLUE STS-B similarity (regression): sentence1, sentence2, score",
        ),
        TaskSpec(
            "qnli",
            (_hdr("question", "sentence", "label"),),
            ("entailment", "not_entailment"),
            ("accuracy",),
            description="GLUE QNLI: question, sentence, label",
        ),
        TaskSpec(
            "rte",
            (_hdr("sentence1", "sentence2", "label"),),
            ("entailment", "not_entailment"),
            ("accuracy",),
            description="GLUE RTE: sentence1, sentence2, label",
        ),
        TaskSpec(
            "qqp",
            (_hdr("question1", "question2", "is_duplicate"),),
            _BIN,
            ("accuracy", "f1"),
            description="GLUE QQP: question1, question2, is_duplicate",
        ),
        TaskSpec(
            "mnli",
            (_hdr("sentence1", "sentence2", "gold_label"),),
            _NLI3,
            ("accuracy",),
            description="GLUE MNLI: sentence1, sentence2, gold_label (dev_matched.tsv / dev_mismatched.tsv)",
        ),
        TaskSpec(
            "chnsenticorp",
            (_hdr("text_a", label="label"), Layout(ColumnSpec(text=1, label=0, header=False))),
            _BIN,
            ("accuracy",),
            description="ChnSentiCorp sentiment (ERNIE/UER split): label, text_a",
        ),
        TaskSpec(
            "lcqmc",
            (_hdr("text_a", "text_b", "label"), Layout(ColumnSpec(text=0, text_pair=1, label=2, header=False))),
            _BIN,
            ("accuracy", "f1"),
            description="LCQMC question matching: text_a, text_b, label (ERNIE) or 3 columns without header",
        ),
        TaskSpec(
            "xnli",
            (
                _hdr("sentence1", "sentence2", "gold_label", filter_column="language", filter_value="zh"),  # XNLI 1.0
                _hdr("premise", "hypo", "label", label_map=(("contradictory", "contradiction"),)),  # XNLI-MT train
                _hdr("sentence1", "sentence2", "label"),  # CLUE-style JSON lines / TSV
                _hdr("text_a", "text_b", "label"),  # Baidu ERNIE task_data (xnli_zh/dev.tsv)
            ),
            _NLI3,
            ("accuracy",),
            description="XNLI (Chinese rows of XNLI 1.0 dev/test; XNLI-MT train: premise, hypo, label)",
        ),
        # CLUE classification tasks, JSON lines as the CLUE repository distributes them (string labels)
        TaskSpec(
            "tnews",
            (_hdr("sentence", label="label"),),
            _TNEWS,
            ("accuracy",),
            description='CLUE TNEWS\' news titles, 15 classes: sentence, label ("100".."116"), keywords unused',
        ),
        TaskSpec(
            "iflytek",
            (_hdr("sentence", label="label"),),
            None,
            ("accuracy",),
            description='CLUE IFLYTEK app descriptions, 119 classes: sentence, label ("0".."118")',
        ),
        TaskSpec(
            "afqmc",
            (_hdr("sentence1", "sentence2", "label"),),
            _BIN,
            ("accuracy",),
            description="CLUE AFQMC question matching: sentence1, sentence2, label",
        ),
        TaskSpec(
            "ocnli",
            (_hdr("sentence1", "sentence2", "label", skip_labels=("-",)),),
            _NLI3,
            ("accuracy",),
            description="CLUE OCNLI: sentence1, sentence2, label (rows labelled '-' dropped)",
        ),
        TaskSpec(
            "cmnli",
            (_hdr("sentence1", "sentence2", "label", skip_labels=("-",)),),
            _NLI3,
            ("accuracy",),
            description="CLUE CMNLI: sentence1, sentence2, label (rows labelled '-' dropped)",
        ),
        TaskSpec(
            "csl",
            (_hdr("keyword", "abst", "label"),),
            _BIN,
            ("accuracy",),
            description="CLUE CSL keyword-abstract match: keyword (list, joined by ','), abst, label",
        ),
        # token classification (litebert/finetune/token.py): CoNLL-style column files or tokens/tags JSON lines
        TaskSpec(
            "conll2003",
            (),
            _CONLL2003_TAGS,
            _NER,
            kind="token",
            description="CoNLL-2003 English NER: 'word POS chunk tag' columns, IOB2, -DOCSTART- lines",
        ),
        TaskSpec(
            "weibo_ner",
            (),
            _WEIBO_TAGS,
            _NER,
            kind="token",
            options=(("strip_segment_digits", True),),
            description="Weibo NER (2nd revision): '<char><segment position>\\t<tag>', BIO, 8 types X.NAM/X.NOM",
        ),
        TaskSpec(
            "msra_ner",
            (),
            _MSRA_TAGS,
            _NER,
            kind="token",
            description="MSRA NER (SIGHAN 2006): '<char>\\t<tag>', BIO, PER/LOC/ORG",
        ),
        # multiple choice (litebert/finetune/choice.py): the layout is recognised from the file
        TaskSpec(
            "c3",
            (),
            None,
            ("accuracy",),
            kind="choice",
            description="CLUE C3: [[paragraphs], [{question, choice, answer}], id] documents, 2-4 options",
        ),
        TaskSpec(
            "swag",
            (),
            None,
            ("accuracy",),
            kind="choice",
            description="SWAG: sent1, sent2, ending0..3, label (JSON lines or the official CSV); HellaSwag JSON lines",
        ),
        TaskSpec(
            "race",
            (),
            None,
            ("accuracy",),
            kind="choice",
            description="RACE: article, questions, options, answers (A-D); one JSON object per file or per line",
        ),
    )
}


def get_task(name: str) -> TaskSpec:
    """Return the preset ``name`` (case-insensitive; ``sst-2``/``sts-b`` spellings accepted).

    Raises:
        LitebertError: unknown name (the message lists the known ones).
    """

    def norm(n: str) -> str:
        return n.lower().replace("-", "").replace("_", "")

    found = {norm(k): v for k, v in TASKS.items()}.get(norm(name))
    if found is None:
        raise LitebertError(f"unknown task {name!r}; known tasks: {', '.join(TASKS)}")
    return found


# extractive QA (litebert.finetune.qa): SQuAD-layout JSON or JSON lines; the option names the metric family
TASKS.update(
    {
        t.name: t
        for t in (
            TaskSpec(
                "squad",
                (),
                None,
                ("f1", "exact_match"),
                kind="qa",
                options=(("qa_metric", "squad"),),
                description="SQuAD v1.1 JSON (data[].paragraphs[].qas[]); official v1.1 EM/F1",
            ),
            TaskSpec(
                "squad_v2",
                (),
                None,
                ("f1", "exact"),
                kind="qa",
                options=(("qa_metric", "squad_v2"),),
                description="SQuAD v2.0 JSON with is_impossible; v2.0 EM/F1, null threshold chosen on dev",
            ),
            TaskSpec(
                "cmrc2018",
                (),
                None,
                ("f1", "exact_match"),
                kind="qa",
                options=(("qa_metric", "cmrc"),),
                description="CMRC 2018 (Simplified Chinese, SQuAD layout); CMRC 2018 character EM/F1",
            ),
            TaskSpec(
                "drcd",
                (),
                None,
                ("f1", "exact_match"),
                kind="qa",
                options=(("qa_metric", "cmrc"),),
                description="DRCD (Traditional Chinese, SQuAD layout); CMRC 2018 character EM/F1",
            ),
        )
    }
)


# ------------------------------------------------------------------------------------------ data sets on the Hub
def _pairs(*fields: str) -> tuple[tuple[str, str], ...]:
    """Columns read under their own names (``("sent1", "sent1")`` …)."""
    return tuple((f, f) for f in fields)


def _cls(dataset: str, config: str, text: str, pair: str | None = None, **kw) -> HubSource:
    """A classification source: ``text`` (and ``pair``) columns and a ``label`` column."""
    columns = (("text", text), *((("text_pair", pair),) if pair else ()), ("label", "label"))
    return HubSource(dataset, config, columns, **kw)


_GLUE, _CLUE = "nyu-mll/glue", "clue/clue"


def _binary(no: str, yes: str) -> tuple[tuple[str, str], ...]:
    """GLUE's class names of a binary task → the GLUE files' labels ``0``/``1``."""
    return ((no, "0"), (yes, "1"))


_QA_COLUMNS = _pairs("id", "question", "context", "answers")

HUB_SOURCES: dict[str, HubSource] = {
    # GLUE (parquet, one directory per config; test splits carry label -1)
    "sst2": _cls(_GLUE, "sst2", "sentence", label_map=_binary("negative", "positive")),
    "mrpc": _cls(_GLUE, "mrpc", "sentence1", "sentence2", label_map=_binary("not_equivalent", "equivalent")),
    "cola": _cls(_GLUE, "cola", "sentence", label_map=_binary("unacceptable", "acceptable")),
    "stsb": _cls(_GLUE, "stsb", "sentence1", "sentence2"),
    "qnli": _cls(_GLUE, "qnli", "question", "sentence"),
    "rte": _cls(_GLUE, "rte", "sentence1", "sentence2"),
    "qqp": _cls(_GLUE, "qqp", "question1", "question2", label_map=_binary("not_duplicate", "duplicate")),
    "mnli": _cls(
        _GLUE,
        "mnli",
        "premise",
        "hypothesis",
        splits=(("train", "train"), ("dev", "validation_matched"), ("test", "test_matched")),
    ),
    "xnli": _cls("facebook/xnli", "zh", "premise", "hypothesis"),
    # CLUE (parquet, {config}/{split}-00000-of-00001.parquet; class names are the CLUE files' label strings)
    "tnews": _cls(_CLUE, "tnews", "sentence"),
    "iflytek": _cls(_CLUE, "iflytek", "sentence"),
    "afqmc": _cls(_CLUE, "afqmc", "sentence1", "sentence2"),
    "ocnli": _cls(_CLUE, "ocnli", "sentence1", "sentence2"),
    "cmnli": _cls(_CLUE, "cmnli", "sentence1", "sentence2"),
    "csl": _cls(_CLUE, "csl", "keyword", "abst"),
    # extractive QA: SQuAD's columns (answers = {text: [...], answer_start: [...]}); SQuAD has no test split
    "squad": HubSource(
        "rajpurkar/squad", "plain_text", _QA_COLUMNS, (("train", "train"), ("dev", "validation")), "answers"
    ),
    "squad_v2": HubSource(
        "rajpurkar/squad_v2", "squad_v2", _QA_COLUMNS, (("train", "train"), ("dev", "validation")), "answers"
    ),
    "cmrc2018": HubSource(_CLUE, "cmrc2018", _QA_COLUMNS, label="answers"),
    "drcd": HubSource(_CLUE, "drcd", _QA_COLUMNS, label="answers"),
    # NER: tokens + ner_tags (ClassLabel ids); the repository is a loading script, read from its parquet conversion
    "conll2003": HubSource(
        "eriktks/conll2003",
        None,
        (("tokens", "tokens"), ("tags", "ner_tags")),
        label="tags",
        revision="refs/convert/parquet",
    ),
    # multiple choice: SWAG rows as its CSV has them; C3 one row per question (context = the paragraphs)
    "swag": HubSource(
        "allenai/swag",
        "regular",
        _pairs("video-id", "sent1", "sent2", "ending0", "ending1", "ending2", "ending3", "label"),
    ),
    "c3": HubSource(_CLUE, "c3", _pairs("id", "context", "question", "choice", "answer"), label="answer"),
}
"""The Hub data set of each task that has one (see :class:`HubSource`)."""

HUB_NOTES: dict[str, str] = {
    "conll2003": "eriktks/conll2003 is a loading-script repository, which datasets 4+ does not run; the table reads "
    "the Hub's automatic parquet conversion (revision refs/convert/parquet), whose layout was not checked here",
    "swag": "allenai/swag (config regular) was not checked against the repository's current files",
    "cmrc2018": "read from CLUE's copy (clue/clue, config cmrc2018; test = CLUE's unlabelled test); hfl/cmrc2018 "
    "was a loading-script repository when last checked",
    "chnsenticorp": "no Hub repository of the ERNIE split could be confirmed: give --train/--dev files",
    "lcqmc": "its license restricts redistribution and no Hub copy could be confirmed: give --train/--dev files",
    "weibo_ner": "no parquet repository could be confirmed (hltcoe/weibo_ner was a loading script): give files",
    "msra_ner": "no parquet repository could be confirmed (levow/msra_ner was a loading script): give files",
    "race": "ehovy/race has one row per question, not the per-article layout the reader takes: give files",
}
"""What is doubtful about a task's Hub source, or why a task has none (docs/finetune.md repeats it)."""

for _name, _source in HUB_SOURCES.items():
    TASKS[_name] = replace(TASKS[_name], hub=_source)
