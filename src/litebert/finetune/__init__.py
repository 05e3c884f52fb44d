"""Fine-tuning on GLUE/CLUE-style labelled files: readers, task presets, metrics, finetune/evaluate/predict.

Public names::

    finetune(FinetuneConfig) -> FinetuneResult      # the training loop of pretraining, a classification objective
    evaluate(EvaluateConfig) -> EvalResult           # metrics + predictions of a fine-tuned directory
    predict(EvaluateConfig) -> EvalResult            # predictions (labels optional)
    TASKS, get_task(name)                            # sst2, mrpc, cola, stsb, qnli, rte, qqp, mnli, chnsenticorp, ...
    read_examples(path, ColumnSpec(...))             # TSV / CSV / JSON lines
    compute_metrics(names, predictions, labels, num_labels)

The heavy parts (model, training loop) are imported lazily so that readers and metrics work on their own.
"""

from litebert.finetune.metrics import METRICS, compute_metrics
from litebert.finetune.readers import ColumnSpec, Example, ReadResult, read_examples
from litebert.finetune.tasks import TASKS, TaskSpec, get_task
from litebert.lazy import lazy_exports

__all__ = [
    "METRICS",
    "TASKS",
    "ColumnSpec",
    "DataOptions",
    "EvalResult",
    "EvaluateConfig",
    "Example",
    "FinetuneConfig",
    "FinetuneResult",
    "ReadResult",
    "TaskSpec",
    "compute_metrics",
    "evaluate",
    "finetune",
    "get_task",
    "predict",
    "read_examples",
]


# run.py imports torch-heavy modules: its names are imported when first read (litebert/lazy.py)
__getattr__, __dir__ = lazy_exports(
    __name__,
    dict.fromkeys(
        (
            "DataOptions",
            "EvalResult",
            "EvaluateConfig",
            "FinetuneConfig",
            "FinetuneResult",
            "evaluate",
            "finetune",
            "predict",
        ),
        "litebert.finetune.run",
    ),
)
