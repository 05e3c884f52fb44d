"""TensorFlow ALBERT checkpoints, without TensorFlow: the tensor-bundle reader and the converter.

- :mod:`litebert.tf.bundle` reads (and, for tests, writes) TF "V2" checkpoints: ``PREFIX.index`` + data shards.
- :mod:`litebert.tf.convert` maps google-research/albert and brightmart/albert_zh variables onto litebert's
  (transformers') parameter names and writes a model directory.

Only the converter, ``litebert convert-tf`` and ``litebert info`` use this package (an import-linter contract in
``pyproject.toml`` keeps it that way).
"""

from litebert.tf.bundle import BundleReader, open_checkpoint, read_bundle, write_bundle
from litebert.tf.convert import (
    ConversionReport,
    ConvertResult,
    convert_tf_checkpoint,
    detect_layout,
    load_tf_weights,
    read_tf_checkpoint,
    read_tf_config,
    summarize_tf_checkpoint,
    tf_config_to_hf,
)

__all__ = [
    "BundleReader",
    "ConversionReport",
    "ConvertResult",
    "convert_tf_checkpoint",
    "detect_layout",
    "load_tf_weights",
    "open_checkpoint",
    "read_bundle",
    "read_tf_checkpoint",
    "read_tf_config",
    "summarize_tf_checkpoint",
    "tf_config_to_hf",
    "write_bundle",
]
