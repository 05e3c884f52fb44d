"""Training: the one loop (:func:`train`), training-state checkpoints, metrics, distributed setup, pretraining.

See docs/DESIGN.md, "Training loop contract".
"""

from litebert.training.loop import (
    BatchFactory,
    CountFn,
    EvalFn,
    LossOutput,
    Objective,
    TrainingArgs,
    TrainResult,
    make_batch_factory,
    train,
)

# Imported eagerly: a lazy import of the submodule `pretrain` would shadow the function of the same name.
from litebert.training.pretrain import PretrainConfig, PretrainResult, pretrain

__all__ = [
    "BatchFactory",
    "CountFn",
    "EvalFn",
    "LossOutput",
    "Objective",
    "PretrainConfig",
    "PretrainResult",
    "TrainResult",
    "TrainingArgs",
    "make_batch_factory",
    "pretrain",
    "train",
]
