"""Training: the one loop (:func:`train`), training-state checkpoints, metrics, distributed setup, pretraining.

See docs/DESIGN.md, "Training loop contract".
"""

from litebert.lazy import lazy_exports

_LOOP = (
    "BatchFactory",
    "CountFn",
    "EvalFn",
    "LossOutput",
    "Objective",
    "TrainingArgs",
    "TrainResult",
    "make_batch_factory",
    "train",
)
# Imported on first use (the loop imports torch; `litebert plot` reads metrics.jsonl only). The function `pretrain`
# is not exported here: it has its submodule's name, and `litebert.training.pretrain` is the module.
__getattr__, __dir__ = lazy_exports(
    __name__,
    dict.fromkeys(_LOOP, "litebert.training.loop")
    | dict.fromkeys(("PretrainConfig", "PretrainResult"), "litebert.training.pretrain"),
)

__all__ = [*_LOOP, "PretrainConfig", "PretrainResult"]
