"""Training: the one loop (:func:`train`), training-state checkpoints, metrics, distributed setup, pretraining.

See docs/DESIGN.md, "Training loop contract".
"""

from litebert.training.loop import (BatchFactory, CountFn, EvalFn, LossOutput, Objective, TrainingArgs, TrainResult,
                                    make_batch_factory, train)

__all__ = ["BatchFactory", "CountFn", "EvalFn", "LossOutput", "Objective", "TrainingArgs", "TrainResult",
           "make_batch_factory", "train", "PretrainConfig", "PretrainResult", "pretrain"]


def __getattr__(name):  # pretrain pulls in the model and data packages: import it on first use
    if name in ("PretrainConfig", "PretrainResult", "pretrain"):
        from litebert.training import pretrain as _p

        return getattr(_p, name)
    raise AttributeError(name)
