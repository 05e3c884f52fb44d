"""Pretraining data (docs/algorithms.md §2, §3): corpus readers → documents → SOP instances → n-gram masking → shards;
the dataset and collator that training reads them with.

Public names: :func:`prepare` / :class:`PrepareConfig` / :class:`PrepareResult`, :class:`PretrainingDataset`,
:class:`PretrainingCollator`, :func:`read_manifest`, :func:`check_data_matches_model`, :func:`read_documents`,
:func:`split_sentences`, :func:`mask_batch`.
"""

from litebert.corpus import CorpusStats, detect_format, read_documents, resolve_corpus_files, split_sentences
from litebert.data.instances import META_FIELDS
from litebert.data.masking import IGNORE_INDEX, mask_batch, mask_keys
from litebert.data.prepare import PrepareConfig, PrepareResult, prepare
from litebert.data.shards import FORMAT_NAME, FORMAT_VERSION, read_manifest, verify_checksums
from litebert.lazy import lazy_exports

# the dataset and collator import torch: read on first use, so that `litebert prepare` starts without it
__getattr__, __dir__ = lazy_exports(
    __name__,
    dict.fromkeys(
        (
            "PretrainingCollator",
            "PretrainingDataset",
            "check_data_matches_model",
            "check_same_vocabulary",
            "tokenizer_vocabulary",
        ),
        "litebert.data.dataset",
    ),
)

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "IGNORE_INDEX",
    "META_FIELDS",
    "CorpusStats",
    "PrepareConfig",
    "PrepareResult",
    "PretrainingCollator",
    "PretrainingDataset",
    "check_data_matches_model",
    "check_same_vocabulary",
    "detect_format",
    "mask_batch",
    "mask_keys",
    "prepare",
    "read_documents",
    "read_manifest",
    "resolve_corpus_files",
    "split_sentences",
    "tokenizer_vocabulary",
    "verify_checksums",
]
