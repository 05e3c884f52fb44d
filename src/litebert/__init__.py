"""litebert: ALBERT (A Lite BERT) in PyTorch, in exact parity with Hugging Face transformers.

Quick use::

    from litebert import AlbertConfig, AlbertForPreTraining
    model = AlbertForPreTraining(AlbertConfig.from_preset("albert-base"))
    model.save_pretrained("out/")                      # transformers can load "out/"
    model = AlbertForPreTraining.from_pretrained("out/")

The names below are imported when first read (:mod:`litebert.lazy`): ``import litebert`` and the commands that run
no model (``prepare``, ``train-tokenizer``, ``plot``) do not import torch.
"""

from litebert.errors import LitebertError
from litebert.lazy import lazy_exports

__version__ = "0.1.0"

_MODELS = (
    "AlbertForMaskedLM",
    "AlbertForMultipleChoice",
    "AlbertForPreTraining",
    "AlbertForQuestionAnswering",
    "AlbertForSequenceClassification",
    "AlbertForTokenClassification",
    "AlbertModel",
    "AlbertPreTrainedModel",
)
_LAZY = {"PRESETS": "litebert.config", "AlbertConfig": "litebert.config"} | dict.fromkeys(_MODELS, "litebert.modeling")
__getattr__, __dir__ = lazy_exports(__name__, _LAZY)

__all__ = ["LitebertError", "__version__", *_LAZY]
