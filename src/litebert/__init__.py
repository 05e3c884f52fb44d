"""litebert: ALBERT (A Lite BERT) in PyTorch, in exact parity with Hugging Face transformers.

Quick use::

    from litebert import AlbertConfig, AlbertForPreTraining
    model = AlbertForPreTraining(AlbertConfig.from_preset("albert-base"))
    model.save_pretrained("out/")                      # transformers can load "out/"
    model = AlbertForPreTraining.from_pretrained("out/")
"""

import litebert.checkpoint  # noqa: F401 - installs from_pretrained/save_pretrained's file I/O
from litebert.config import PRESETS, AlbertConfig
from litebert.errors import LitebertError
from litebert.modeling import (
    AlbertForMaskedLM,
    AlbertForMultipleChoice,
    AlbertForPreTraining,
    AlbertForQuestionAnswering,
    AlbertForSequenceClassification,
    AlbertForTokenClassification,
    AlbertModel,
    AlbertPreTrainedModel,
)

__version__ = "0.1.0"

__all__ = [
    "PRESETS",
    "AlbertConfig",
    "AlbertForMaskedLM",
    "AlbertForMultipleChoice",
    "AlbertForPreTraining",
    "AlbertForQuestionAnswering",
    "AlbertForSequenceClassification",
    "AlbertForTokenClassification",
    "AlbertModel",
    "AlbertPreTrainedModel",
    "LitebertError",
    "__version__",
]
